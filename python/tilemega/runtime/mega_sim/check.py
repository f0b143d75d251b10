"""Deadlock freedom of a mega-kernel schedule: a static proof plus randomised runs.

The proof: every entry is scheduled exactly once, every event's trigger equals
the number of entries that signal it, and the relation "A before B" (B waits
on an event A signals; A precedes B in one AOT list; A precedes B in the JIT
list) has a topological order. Under the kernel's rules that is equivalent to
deadlock freedom: the earliest unfinished entry in that order always has its
events fired and will run. An AOT entry's worker is done with its list up to
it and runs nothing but entries that are ready (they finish), so it gets
there; a JIT entry gets published (the entries before it in the JIT list
are done) and its ticket is drawn by a worker that holds none and whose next
AOT entry is not ready (tickets go out in list order and those before it
were run and given back), which runs it before any AOT entry. Conversely a
cycle is a chain of entries each unable to start before the previous one,
so some worker or the scheduler waits forever.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from .. import mega_meta as mm
from .ranks import unroll_ranks
from .simulate import SimResult, _worker_lists, format_ns, simulate

# Duration spread of check_deadlock_free's randomised runs: factors in [e^-1.5, e^1.5].
JITTER = 1.5


class ScheduleError(ValueError):
    """The schedule can deadlock or its tables are inconsistent (names the tasks/events)."""


# -- static check -------------------------------------------------------------------


def static_problems(meta) -> List[str]:
    """Every reason the tables cannot run deadlock-free (empty list: proven sound).
    A graph of several ranks is proven as its ranks side by side (ranks.py)."""
    meta = unroll_ranks(meta)
    n = len(meta["entries"]["task"])
    label = lambda e: mm.entry_label(meta, e)
    problems = []
    seen: Dict[int, List[str]] = {}
    for w, lst in enumerate(meta["aot"]):
        for i, e in enumerate(lst):
            seen.setdefault(e, []).append(f"worker {w} position {i}")
    for i, e in enumerate(meta["jit"]):
        seen.setdefault(e, []).append(f"JIT position {i}")
    for e in range(n):
        if e not in seen:
            problems.append(f"{label(e)} (entry {e}) is in no worker list and not in the JIT "
                            "list: it never runs")
        elif len(seen[e]) > 1:
            problems.append(f"{label(e)} (entry {e}) is scheduled {len(seen[e])} times "
                            f"({', '.join(seen[e])})")
    senders = mm.signallers(meta)
    waited: Dict[int, List[int]] = {}
    for e, evs in enumerate(meta["waits"]):
        for v in evs:
            waited.setdefault(v, []).append(e)
    for v, ev in enumerate(meta["events"]):
        names = ", ".join(label(s) for s in senders[v][:4])
        names += " ..." if len(senders[v]) > 4 else ""
        if v in waited and not senders[v]:
            problems.append(f"event '{ev['name']}' is waited on by {label(waited[v][0])} "
                            "but no entry signals it")
        elif ev["trigger"] != len(senders[v]):
            problems.append(f"event '{ev['name']}' has trigger {ev['trigger']} but "
                            f"{len(senders[v])} entries signal it ({names or 'none'})")
    cycle = _find_cycle(meta)
    if cycle:
        steps = []
        for a, how, b in cycle:
            if isinstance(how, tuple):
                steps.append(f"{label(a)} runs before {label(b)} on worker {how[1]}")
            elif how == "jit":
                steps.append(f"{label(a)} is published before {label(b)} (JIT order)")
            else:
                steps.append(f"{label(a)} signals event '{mm.event_name(meta, how)}', "
                             f"which {label(b)} waits on")
        problems.append("dependency cycle (the kernel would hang):\n    " + ";\n    ".join(steps))
    return problems


def _find_cycle(meta) -> List[Tuple[int, object, int]]:
    """A cycle of (from entry, edge, to entry), or []; edge: ("aot", worker), "jit" or an event.

    Events are nodes of their own (entry -> event it signals -> entry waiting
    on it), so a fan-in/fan-out costs signallers + waiters edges, not their product.
    """
    n = len(meta["entries"]["task"])
    succ: List[List[Tuple[object, int]]] = [[] for _ in range(n + len(meta["events"]))]
    for e in range(n):
        succ[e] += [("signal", n + v) for v in meta["signals"][e]]
        for v in meta["waits"][e]:
            succ[n + v].append(("wait", e))
    for w, lst in enumerate(meta["aot"]):
        for a, b in zip(lst, lst[1:]):
            succ[a].append((("aot", w), b))
    jit = meta["jit"]
    for a, b in zip(jit, jit[1:]):
        succ[a].append(("jit", b))
    cycle = _dfs_cycle(succ)
    if not cycle:
        return []
    # Start at an entry, then fold entry -> event -> entry into one step.
    first = next(i for i, (a, _, _) in enumerate(cycle) if a < n)
    cycle = cycle[first:] + cycle[:first]
    steps, i = [], 0
    while i < len(cycle):
        a, how, b = cycle[i]
        if how == "signal":
            steps.append((a, b - n, cycle[i + 1][2]))
            i += 2
        else:
            steps.append((a, how, b))
            i += 1
    return steps


def _dfs_cycle(succ) -> List[Tuple[int, object, int]]:
    """The edges (node, label, next) of one cycle of the graph `succ`, or [].

    Iterative (graphs have thousands of nodes); grey nodes are on the stack and
    `via[i]` is the edge from stack[i] to stack[i + 1].
    """
    colour = [0] * len(succ)
    for root in range(len(succ)):
        if colour[root]:
            continue
        stack = [(root, iter(succ[root]))]
        via: List[Tuple[int, object, int]] = []
        colour[root] = 1
        while stack:
            node, it = stack[-1]
            step = next(it, None)
            if step is None:
                colour[node] = 2
                stack.pop()
                if via:
                    via.pop()
                continue
            how, nxt = step
            if colour[nxt] == 1:
                start = next(i for i, (a, _) in enumerate(stack) if a == nxt)
                return via[start:] + [(node, how, nxt)]
            if colour[nxt] == 0:
                colour[nxt] = 1
                via.append((node, how, nxt))
                stack.append((nxt, iter(succ[nxt])))
    return []


# -- the check and its report ---------------------------------------------------------


@dataclass
class ScheduleReport:
    meta: dict = field(repr=False)
    nominal: SimResult = field(repr=False)  # jitter 0, ties by worker index
    runs: int                               # simulated runs, all terminated
    makespans_ns: List[float]               # of the randomised runs
    proven: bool = True                     # the static proof ran (and passed)

    @property
    def workers(self) -> int:
        return len(self.nominal.busy_ns)


def check_deadlock_free(meta, runs: int = 200, seed: int = 0, workers: Optional[int] = None,
                        static: bool = True) -> ScheduleReport:
    """Prove the schedule deadlock-free and cross-check it with simulated runs.

    Raises ScheduleError naming the tasks/events involved. static=False skips
    the proof (to exercise the simulated runs on their own).
    """
    R = mm.ranks(meta)
    if R > 1 and workers is not None:
        raise ValueError("workers: a graph of several ranks is checked with its own workers")
    meta = unroll_ranks(meta)
    if static:
        problems = static_problems(meta)
        if problems:
            raise ScheduleError(f"mega-kernel '{mm.graph_name(meta)}' schedule is unsound:\n  "
                                + "\n  ".join(problems))
    n = len(meta["entries"]["task"])
    W = len(_worker_lists(meta, workers))
    cases = [("nominal", dict())]
    cases.append(("equal costs", dict(costs=[1.0] * n)))
    cases.append(("equal costs, random ties", dict(costs=[1.0] * n, seed=seed)))
    pick = random.Random(seed)
    slow = sorted({0, W - 1} | set(pick.sample(range(W), min(W, 2))))
    cases += [(f"worker {w} 1000x slower", dict(worker_speed={w: 1000.0}, seed=seed + w))
              for w in slow]
    # Several ranks: each rank in turn 1000x slower than the others (a GPU
    # that lags behind its peers).
    per_rank = W // R
    cases += [(f"rank {r} 1000x slower",
               dict(worker_speed={w: 1000.0 for w in range(r * per_rank, (r + 1) * per_rank)},
                    seed=seed + r)) for r in range(R) if R > 1]
    cases += [(f"random run {i} (seed {seed + i})", dict(seed=seed + i, jitter=JITTER))
              for i in range(runs)]
    nominal, makespans = None, []
    for name, kwargs in cases:
        result = simulate(meta, workers=workers, **kwargs)
        if result.deadlock is not None:
            raise ScheduleError(f"mega-kernel '{mm.graph_name(meta)}' deadlocked in the "
                                f"simulated {name}: {result.deadlock.describe(meta)}")
        if nominal is None:
            nominal = result
        if kwargs.get("jitter"):
            makespans.append(result.makespan_ns)
    return ScheduleReport(meta, nominal, len(cases), makespans, static)


def format_path(meta, path: Sequence[int], limit: int = 24) -> str:
    names = [mm.short_label(meta, e) for e in path]
    if len(names) > limit:
        names = names[:limit // 2] + [f"... ({len(names) - limit} more) ..."] + names[-limit // 2:]
    return " -> ".join(names)


def format_report(report: ScheduleReport) -> str:
    meta, sim = report.meta, report.nominal
    n_jit = len(meta["jit"])
    n = len(meta["entries"]["task"])
    util = sim.utilisation
    lines = [
        f"mega-kernel '{mm.graph_name(meta)}': {n} entries ({n - n_jit} AOT, {n_jit} JIT) "
        f"of {len(meta['tasks'])} tasks on {report.workers} workers, "
        f"{len(meta['events'])} events",
        ("deadlock-free: static proof and " if report.proven else "not proven (static check "
         "skipped); ") + f"{report.runs} simulated runs terminated",
        f"makespan: {format_ns(sim.makespan_ns)} with the cost model",
    ]
    if report.makespans_ns:
        m = report.makespans_ns
        spread = f"x{math.exp(-JITTER):.2f}-{math.exp(JITTER):.1f}"
        lines.append(f"  randomised runs (durations {spread}): min {format_ns(min(m))} / mean "
                     f"{format_ns(sum(m) / len(m))} / max {format_ns(max(m))}")
    lines.append(f"critical path: {format_ns(sim.critical_path_ns)}, {len(sim.critical_path)} "
                 f"entries: {format_path(meta, sim.critical_path)}")
    if util:
        lines.append(f"utilisation: min {min(util):.1%} / mean {sum(util) / len(util):.1%} / "
                     f"max {max(util):.1%}")
    return "\n".join(lines)
