"""A graph of several ranks (one persistent kernel a GPU, synchronised by
peer events) as the single schedule the simulator and the static proof
take: every rank's entries, workers and counter words side by side.

Entry e of rank r becomes entry e + r*n (its task renamed "r<r>:<task>"),
worker w of rank r worker w + r*W, counter word v of rank r word v + r*V. A
local signal stays on its rank; a peer signal of entry e on rank r advances
word (first word + r) on every rank (docs/mega.md). Every rank runs the
same tables, so a deadlock found here names the rank of each waiting worker
("r1:reduce") and the sender of each unfired peer word ("from rank 0").

Each rank's JIT queue is served by its own scheduler; the unrolled schedule
has one JIT list, so graphs with JIT entries are refused rather than
modelled as one queue shared by the ranks.
"""

from __future__ import annotations

from typing import Any, Dict

from .. import mega_meta as mm


def unroll_ranks(meta: Dict[str, Any]) -> Dict[str, Any]:
    """The single-schedule form of a graph of `ranks` > 1 (meta itself for
    one rank)."""
    mm.validate(meta)
    R = mm.ranks(meta)
    if R == 1:
        return meta
    if meta["jit"]:
        raise ValueError(f"graph {mm.graph_name(meta)!r}: {len(meta['jit'])} JIT entries; the "
                         "multi-rank check models each rank's AOT queues only (schedule a "
                         "graph of several ranks with `schedulers 0`)")
    n, V, T = len(meta["entries"]["task"]), len(meta["events"]), len(meta["tasks"])
    out = {k: v for k, v in meta.items() if k not in ("tables", "table_sections", "ranks")}
    out["graph"] = f"{mm.graph_name(meta)} x {R} ranks"
    out["workers"] = meta["workers"] * R
    out["tasks"] = [dict(t, name=f"r{r}:{t['name']}") for r in range(R) for t in meta["tasks"]]
    out["events"] = [dict({k: v for k, v in ev.items() if k != "sender"},
                          name=f"r{r}:{mm.event_name(meta, v)}")
                     for r in range(R) for v, ev in enumerate(meta["events"])]
    out["entries"] = {"task": [t + r * T for r in range(R) for t in meta["entries"]["task"]],
                      "instance": [i for _ in range(R) for i in meta["entries"]["instance"]]}
    out["waits"] = [[w + r * V for w in ws] for r in range(R) for ws in meta["waits"]]
    signals = []
    for r in range(R):
        for ss in meta["signals"]:
            words = []
            for s in ss:
                word = mm.signal_word(s)
                if mm.is_peer_signal(s):
                    words += [word + r + q * V for q in range(R)]
                else:
                    words.append(word + r * V)
            signals.append(words)
    out["signals"] = signals
    out["aot"] = [[e + r * n for e in lst] for r in range(R) for lst in meta["aot"]]
    out["jit"] = []
    for key, value in (("num_entries", n * R), ("num_events", V * R), ("num_jit", 0)):
        if key in meta:
            out[key] = value
    return out
