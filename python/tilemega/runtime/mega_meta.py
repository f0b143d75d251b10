"""The `mega` dictionary of a persistent kernel (docs/mega.md): checks and names.

`validate` checks the *structure* (types, lengths, indices in range) so that
the runtime, the simulator and the timeline renderer can index the tables
without guarding every access; it raises ValueError naming the field, like
metadata.py does for the rest of the artifact. Whether the schedule is sound
(triggers, coverage, deadlock freedom) is mega_sim's job.

The helpers turn indices into the names a user sees in an error message.
"""

from __future__ import annotations

from typing import Any, Dict, List

# The four buffers that follow the graph's own params, in this order.
RUNTIME_PARAMS = ("mega_tables", "mega_events", "mega_state", "mega_timeline")
# Number of mega_state words (docs/mega.md).
STATE_WORDS = 16


def _fail(where: str, field: str, message: str):
    raise ValueError(f"{where}field '{field}': {message}")


def _int(value, where, field, minimum=0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(where, field, f"expected an integer, got {value!r}")
    if value < minimum:
        _fail(where, field, f"expected an integer >= {minimum}, got {value}")
    return value


def _list(value, where, field, length=None) -> list:
    if not isinstance(value, list):
        _fail(where, field, f"expected a list, got {type(value).__name__}")
    if length is not None and len(value) != length:
        _fail(where, field, f"expected {length} items, got {len(value)}")
    return value


def _indices(value, where, field, limit, what) -> None:
    for i, v in enumerate(_list(value, where, field)):
        _int(v, where, f"{field}[{i}]")
        if v >= limit:
            _fail(where, f"{field}[{i}]", f"{what} {v} out of range [0, {limit})")


def validate(mega: Any, field: str = "mega", source: str = "") -> Dict[str, Any]:
    """Check the structure of `mega`; return it unchanged. `source` prefixes errors."""
    where = f"{source}: " if source else ""
    if not isinstance(mega, dict):
        _fail(where, field, f"expected an object, got {type(mega).__name__}")
    for key in ("workers", "tasks", "events", "entries", "waits", "signals", "aot", "jit"):
        if key not in mega:
            _fail(where, f"{field}.{key}", "missing")
    workers = _int(mega["workers"], where, f"{field}.workers", 1)
    tasks = _list(mega["tasks"], where, f"{field}.tasks")
    for i, t in enumerate(tasks):
        f = f"{field}.tasks[{i}]"
        if not isinstance(t, dict) or not isinstance(t.get("name"), str):
            _fail(where, f, f"expected an object with a string 'name', got {t!r}")
        cost = t.get("cost_ns", 0)
        if isinstance(cost, bool) or not isinstance(cost, (int, float)) or cost < 0:
            _fail(where, f"{f}.cost_ns", f"expected a number >= 0, got {cost!r}")
    events = _list(mega["events"], where, f"{field}.events")
    for i, ev in enumerate(events):
        f = f"{field}.events[{i}]"
        if not isinstance(ev, dict) or not isinstance(ev.get("name"), str):
            _fail(where, f, f"expected an object with a string 'name', got {ev!r}")
        _int(ev.get("trigger"), where, f"{f}.trigger")
    entries = mega["entries"]
    if not isinstance(entries, dict):
        _fail(where, f"{field}.entries", f"expected an object, got {type(entries).__name__}")
    for key in ("task", "instance"):
        if key not in entries:
            _fail(where, f"{field}.entries.{key}", "missing")
    n = len(_list(entries["task"], where, f"{field}.entries.task"))
    _indices(entries["task"], where, f"{field}.entries.task", len(tasks), "task")
    _list(entries["instance"], where, f"{field}.entries.instance", n)
    for key in ("waits", "signals"):
        for e, evs in enumerate(_list(mega[key], where, f"{field}.{key}", n)):
            _indices(evs, where, f"{field}.{key}[{e}]", len(events), "event")
    for w, lst in enumerate(_list(mega["aot"], where, f"{field}.aot", workers)):
        _indices(lst, where, f"{field}.aot[{w}]", n, "entry")
    _indices(mega["jit"], where, f"{field}.jit", n, "entry")
    for key, actual in (("num_entries", n), ("num_events", len(events)),
                        ("num_jit", len(mega["jit"]))):
        if key in mega and mega[key] != actual:
            _fail(where, f"{field}.{key}", f"is {mega[key]!r} but the tables hold {actual}")
    if "tables" in mega:
        for i, v in enumerate(_list(mega["tables"], where, f"{field}.tables")):
            if isinstance(v, bool) or not isinstance(v, int) or not -2**31 <= v < 2**31:
                _fail(where, f"{field}.tables[{i}]", f"expected an int32, got {v!r}")
    if "watchdog_ns" in mega:
        _int(mega["watchdog_ns"], where, f"{field}.watchdog_ns")
    if "timeline" in mega and not isinstance(mega["timeline"], bool):
        _fail(where, f"{field}.timeline", f"expected true or false, got {mega['timeline']!r}")
    return mega


def graph_name(mega) -> str:
    return str(mega.get("graph", "?"))


def task_name(mega, entry: int) -> str:
    return mega["tasks"][mega["entries"]["task"][entry]]["name"]


def entry_label(mega, entry: int) -> str:
    """e.g. "task 'l3_o_proj' instance 5" (or "entry 7" for an index out of range)."""
    if not 0 <= entry < len(mega["entries"]["task"]):
        return f"entry {entry}"
    return f"task '{task_name(mega, entry)}' instance {mega['entries']['instance'][entry]}"


def short_label(mega, entry: int) -> str:
    """e.g. "l3_o_proj#5", for long lists such as a critical path."""
    return f"{task_name(mega, entry)}#{mega['entries']['instance'][entry]}"


def event_name(mega, event: int) -> str:
    if not 0 <= event < len(mega["events"]):
        return f"#{event}"
    return mega["events"][event]["name"]


def task_kind(mega, entry: int) -> str:
    """The task body (one colour per body in a timeline); the task name without one."""
    task = mega["tasks"][mega["entries"]["task"][entry]]
    return str(task.get("body") or task["name"])


def signallers(mega) -> List[List[int]]:
    """For each event, the entries that signal it (in entry order)."""
    out: List[List[int]] = [[] for _ in mega["events"]]
    for e, evs in enumerate(mega["signals"]):
        for v in evs:
            out[v].append(e)
    return out


def placement(mega) -> Dict[int, str]:
    """entry -> where the schedule puts it, e.g. "worker 3 position 2" or "JIT position 0"."""
    where: Dict[int, str] = {}
    for w, lst in enumerate(mega["aot"]):
        for i, e in enumerate(lst):
            where.setdefault(e, f"worker {w} position {i}")
    for i, e in enumerate(mega["jit"]):
        where.setdefault(e, f"JIT position {i}")
    return where
