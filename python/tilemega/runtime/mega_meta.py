"""The `mega` dictionary of a persistent kernel (docs/mega.md): checks and names.

`validate` checks the *structure* (types, lengths, indices in range) so that
the runtime, the simulator and the timeline renderer can index the tables
without guarding every access; it raises ValueError naming the field, like
metadata.py does for the rest of the artifact. Whether the schedule is sound
(triggers, coverage, deadlock freedom) is mega_sim's job. `validate_tables`
checks that the int32 `tables` the kernel reads hold exactly those lists.

The helpers turn indices into the names a user sees in an error message.
"""

from __future__ import annotations

from typing import Any, Dict, List

# The persistent kernel's params, in this order (the graph's tensors are
# reached through mega_args).
RUNTIME_PARAMS = ("mega_args", "mega_tables", "mega_events", "mega_state", "mega_timeline")
# A `signals` word with this bit names a peer event's first counter word: the
# entry signals its own rank's word of that event on every rank.
PEER_SIGNAL_BIT = 1 << 30
MAX_RANKS = 8


def signal_word(value: int) -> int:
    """The counter word a `signals` value names (its peer bit cleared)."""
    return value & ~PEER_SIGNAL_BIT


def is_peer_signal(value: int) -> bool:
    return bool(value & PEER_SIGNAL_BIT)


def ranks(mega) -> int:
    """The GPUs the graph runs on together (1 without `ranks`)."""
    return int(mega.get("ranks", 1))
# Number of mega_state words (docs/mega.md); a graph with workers placed by
# SM has one more a CTA (its worker-index claim words), one whose tasks claim
# units one more a task after those (unit counters): field 'state_words'.
STATE_WORDS = 16


def state_words(mega) -> int:
    """Words of the kernel's mega_state buffer."""
    return int(mega.get("state_words", STATE_WORDS))
# Words of a repeating graph (PersistentKernel.h): the host's step limit for
# the next launches, and the steps the last launch completed.
STEP_LIMIT_WORD, STEPS_DONE_WORD = 11, 12
MAX_STEPS = 1 << 24
# The sections of `tables`, in the order the compiler packs them (TaskTables.cpp).
TABLE_SECTIONS = ("records", "aot_records", "entry_case", "entry_task", "entry_instance",
                  "wait_offsets", "waits", "signal_offsets", "signals", "triggers",
                  "aot_offsets", "aot", "jit")
# Words of one entry record: case | task << 16, instance, #waits, first wait,
# its trigger, #signals, first signal, the entry.
RECORD_WORDS = 8
INT32_MAX = 2**31 - 1


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
    # Tasks that claim units: one counter word a task after the rest.
    claims = any(t.get("claims_units") for t in tasks)
    counters = _int(mega.get("unit_counters", 0), where, f"{field}.unit_counters", 0)
    if counters != (len(tasks) if claims else 0):
        _fail(where, f"{field}.unit_counters", f"{counters}: a graph whose tasks claim units "
              f"has one counter a task ({len(tasks)}), any other none")
    if "state_words" in mega:
        words = _int(mega["state_words"], where, f"{field}.state_words", STATE_WORDS)
        ctas = workers + (1 if _list(mega["jit"], where, f"{field}.jit") else 0)
        if words - counters not in (STATE_WORDS, STATE_WORDS + ctas) or words == STATE_WORDS:
            _fail(where, f"{field}.state_words", f"{words}: {STATE_WORDS} words, + one claim "
                  f"word a CTA in a graph whose workers are placed by SM ({ctas} CTAs), "
                  f"+ {counters} unit counters")
    elif counters:
        _fail(where, f"{field}.state_words", f"missing: the graph has {counters} unit counters")
    R = _int(mega.get("ranks", 1), where, f"{field}.ranks", 1)
    if R > MAX_RANKS:
        _fail(where, f"{field}.ranks", f"{R} is over {MAX_RANKS} (the GPUs of one node)")
    events = _list(mega["events"], where, f"{field}.events")
    for i, ev in enumerate(events):
        f = f"{field}.events[{i}]"
        if not isinstance(ev, dict) or not isinstance(ev.get("name"), str):
            _fail(where, f, f"expected an object with a string 'name', got {ev!r}")
        if _int(ev.get("trigger"), where, f"{f}.trigger") > INT32_MAX:
            _fail(where, f"{f}.trigger", f"{ev['trigger']} does not fit the kernel's int32")
        # A peer event is R consecutive words, senders 0 .. R-1.
        if "sender" in ev:
            sender = _int(ev["sender"], where, f"{f}.sender", 0)
            first = i - sender
            if R < 2 or sender >= R or first < 0 or events[first].get("sender") != 0 or \
                    events[first]["name"] != ev["name"]:
                _fail(where, f"{f}.sender", f"{sender}: a peer event's words are senders 0 to "
                      f"{R - 1} of one event, in order, in a graph of {R} ranks")
    entries = mega["entries"]
    if not isinstance(entries, dict):
        _fail(where, f"{field}.entries", f"expected an object, got {type(entries).__name__}")
    for key in ("task", "instance"):
        if key not in entries:
            _fail(where, f"{field}.entries.{key}", "missing")
    n = len(_list(entries["task"], where, f"{field}.entries.task"))
    _indices(entries["task"], where, f"{field}.entries.task", len(tasks), "task")
    _list(entries["instance"], where, f"{field}.entries.instance", n)
    for e, evs in enumerate(_list(mega["waits"], where, f"{field}.waits", n)):
        _indices(evs, where, f"{field}.waits[{e}]", len(events), "event")
    for e, evs in enumerate(_list(mega["signals"], where, f"{field}.signals", n)):
        f = f"{field}.signals[{e}]"
        _list(evs, where, f)
        for i, v in enumerate(evs):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                _fail(where, f"{f}[{i}]", f"expected an event word, got {v!r}")
            word = signal_word(v)
            if word >= len(events):
                _fail(where, f"{f}[{i}]", f"event {word} out of range [0, {len(events)})")
            if is_peer_signal(v) != (events[word].get("sender") is not None) or \
                    (is_peer_signal(v) and events[word]["sender"] != 0):
                _fail(where, f"{f}[{i}]", f"{v}: a peer event is signalled through its first "
                      "word with the peer bit, a local event by its word without it")
    for w, lst in enumerate(_list(mega["aot"], where, f"{field}.aot", workers)):
        _indices(lst, where, f"{field}.aot[{w}]", n, "entry")
    _indices(mega["jit"], where, f"{field}.jit", n, "entry")
    _check_pairs(mega, where, field)
    for key, actual in (("num_entries", n), ("num_events", len(events)),
                        ("num_jit", len(mega["jit"]))):
        if key in mega and mega[key] != actual:
            _fail(where, f"{field}.{key}", f"is {mega[key]!r} but the tables hold {actual}")
    if "tables" in mega:
        for i, v in enumerate(_list(mega["tables"], where, f"{field}.tables")):
            if isinstance(v, bool) or not isinstance(v, int) or not -2**31 <= v < 2**31:
                _fail(where, f"{field}.tables[{i}]", f"expected an int32, got {v!r}")
    for key, minimum in (("watchdog_ns", 0), ("threads", 1), ("schedulers", 0)):
        if key in mega and _int(mega[key], where, f"{field}.{key}", minimum) >= 2**63:
            _fail(where, f"{field}.{key}", f"{mega[key]} does not fit an int64")
    if "loop" in mega:
        loop = mega["loop"]
        if not isinstance(loop, dict):
            _fail(where, f"{field}.loop", f"expected an object, got {type(loop).__name__}")
        for key in ("stop_argument", "stop_element", "max_steps"):
            if key not in loop:
                _fail(where, f"{field}.loop.{key}", "missing")
            _int(loop[key], where, f"{field}.loop.{key}", 1 if key == "max_steps" else 0)
        if loop["max_steps"] > MAX_STEPS:
            _fail(where, f"{field}.loop.max_steps", f"{loop['max_steps']} is over {MAX_STEPS}")
    if "timeline" in mega and not isinstance(mega["timeline"], bool):
        _fail(where, f"{field}.timeline", f"expected true or false, got {mega['timeline']!r}")
    return mega


def next_aot_entries(mega) -> Dict[int, int]:
    """Each AOT entry -> the entry after it in its worker's list."""
    return {a: b for lst in mega["aot"] for a, b in zip(lst, lst[1:])}


def _check_pairs(mega, where: str, field: str) -> None:
    """`paired_entries` (mega-pair-entries): entries that run together with
    the next entry of their worker's AOT list, each in one pair (the kernel
    skips the second one's position); `pair_cases`: the [first, second]
    body cases of each pair case. Both or neither."""
    if ("paired_entries" in mega) != ("pair_cases" in mega):
        _fail(where, f"{field}.pair_cases", "paired_entries and pair_cases come together")
    if "paired_entries" not in mega:
        return
    paired = _list(mega["paired_entries"], where, f"{field}.paired_entries")
    _indices(paired, where, f"{field}.paired_entries", len(mega["entries"]["task"]), "entry")
    after = next_aot_entries(mega)
    seen = set()
    for i, e in enumerate(paired):
        f = f"{field}.paired_entries[{i}]"
        if e not in after:
            _fail(where, f, f"entry {e} is not followed by another entry of its worker's AOT "
                            "list, so it has no entry to run with")
        if e in seen or after[e] in seen:
            _fail(where, f, f"entry {e} or the entry after it ({after[e]}) is in another pair")
        seen.update((e, after[e]))
    for i, pair in enumerate(_list(mega["pair_cases"], where, f"{field}.pair_cases")):
        f = f"{field}.pair_cases[{i}]"
        _list(pair, where, f, 2)
        for j, case in enumerate(pair):
            _int(case, where, f"{f}[{j}]")


def validate_tables(mega: Dict[str, Any], field: str = "mega", source: str = "") -> None:
    """Check that `tables` (when `table_sections` is there) holds exactly the
    lists of a `mega` that `validate` accepted; ValueError naming the field.

    Separate from `validate`: the simulator and its tests edit the lists alone
    (e.g. to build a deadlock), while an artifact's loader checks both."""
    where = f"{source}: " if source else ""
    if "table_sections" not in mega:
        return
    if "tables" not in mega:
        _fail(where, f"{field}.tables", "missing (table_sections names its sections)")
    _check_tables(mega, where, field)


def _check_tables(mega, where: str, field: str) -> None:
    """`tables` is what the kernel reads (its indices are not range-checked on
    the GPU), so it must hold exactly the lists checked above: every section
    where `table_sections` says, of the length the lists give, with the same
    contents, and nothing after the last one."""
    tables, at = mega["tables"], mega["table_sections"]
    sections_field = f"{field}.table_sections"
    if not isinstance(at, dict):
        _fail(where, sections_field, f"expected an object, got {type(at).__name__}")
    unknown = sorted(set(at) - set(TABLE_SECTIONS))
    if unknown:
        _fail(where, sections_field, f"unknown sections {unknown}; expected {list(TABLE_SECTIONS)}")
    entries = mega["entries"]
    n, aot = len(entries["task"]), mega["aot"]
    waits, signals = mega["waits"], mega["signals"]
    aot_order = [e for lst in aot for e in lst]
    wait_offsets, signal_offsets, aot_offsets = [0], [0], [0]
    for lst, offsets in ((waits, wait_offsets), (signals, signal_offsets), (aot, aot_offsets)):
        for item in lst:
            offsets.append(offsets[-1] + len(item))
    lengths = {"records": RECORD_WORDS * n, "aot_records": RECORD_WORDS * len(aot_order),
               "entry_case": n, "entry_task": n, "entry_instance": n,
               "wait_offsets": n + 1, "waits": wait_offsets[-1],
               "signal_offsets": n + 1, "signals": signal_offsets[-1],
               "triggers": len(mega["events"]), "aot_offsets": len(aot) + 1,
               "aot": len(aot_order), "jit": len(mega["jit"])}
    start = 0
    for name in TABLE_SECTIONS:
        f = f"{sections_field}.{name}"
        if name not in at:
            _fail(where, f, "missing")
        if _int(at[name], where, f) != start:
            _fail(where, f, f"section starts at {at[name]}, but the sections before it end "
                            f"at {start}")
        start += lengths[name]
        if start > len(tables):
            _fail(where, f, f"section [{at[name]}, {start}) ends past the end of "
                            f"{field}.tables ({len(tables)} words)")
    # An artifact without entries still uploads one word (a zero-size buffer).
    if len(tables) != max(start, 1):
        _fail(where, f"{field}.tables", f"holds {len(tables)} words but its sections end at "
                                        f"{start}")

    def section(name):
        return tables[at[name]: at[name] + lengths[name]]

    triggers = [ev["trigger"] for ev in mega["events"]]
    expected = {"entry_task": entries["task"], "entry_instance": entries["instance"],
                "wait_offsets": wait_offsets, "waits": [v for w in waits for v in w],
                "signal_offsets": signal_offsets, "signals": [v for s in signals for v in s],
                "triggers": triggers, "aot_offsets": aot_offsets, "aot": aot_order,
                "jit": mega["jit"]}
    for name, want in expected.items():
        got = section(name)
        if got != list(want):
            i = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), len(got))
            _fail(where, f"{field}.tables", f"section '{name}' word {i} is "
                  f"{got[i] if i < len(got) else 'missing'}, but the lists say "
                  f"{want[i] if i < len(want) else 'nothing'}")
    cases = section("entry_case")
    for e, case in enumerate(cases):
        if not 0 <= case <= 0xFFFF or entries["task"][e] > 0x7FFF:
            _fail(where, f"{field}.tables", f"section 'entry_case' word {e}: case {case} of "
                  f"task {entries['task'][e]} does not fit a record (case < 65536, "
                  "task < 32768)")

    # A paired entry's record names its pair case, numbered after the body
    # cases: the pair of its case and the next AOT entry's.
    record_case = list(cases)
    if mega.get("paired_entries"):
        bodies = max(cases) + 1
        pair_index = {tuple(p): bodies + k for k, p in enumerate(mega["pair_cases"])}
        after = next_aot_entries(mega)
        for e in mega["paired_entries"]:
            key = (cases[e], cases[after[e]])
            if key not in pair_index:
                _fail(where, f"{field}.pair_cases", f"has no pair of cases {list(key)} for "
                      f"entry {e} and the entry after it ({after[e]})")
            record_case[e] = pair_index[key]
        if len(pair_index) + bodies > 0x10000:
            _fail(where, f"{field}.pair_cases", f"{len(pair_index)} pairs after {bodies} "
                  "bodies do not fit a record's case field (< 65536)")

    def record(e):
        w = waits[e][0] if waits[e] else -1
        return [record_case[e] | (entries["task"][e] << 16), entries["instance"][e], len(waits[e]), w,
                triggers[w] if w >= 0 else 0, len(signals[e]),
                signals[e][0] if signals[e] else -1, e]

    for name, order in (("records", range(n)), ("aot_records", aot_order)):
        words = section(name)
        for r, e in enumerate(order):
            got = words[RECORD_WORDS * r: RECORD_WORDS * (r + 1)]
            if got != record(e):
                _fail(where, f"{field}.tables", f"section '{name}' record {r} (entry {e}) is "
                      f"{got}, but the lists say {record(e)}")


def graph_name(mega) -> str:
    return str(mega.get("graph", "?"))


def task_name(mega, entry: int) -> str:
    return mega["tasks"][mega["entries"]["task"][entry]]["name"]


def entry_units(mega, entry: int):
    """The units entry `entry` runs: its task's units_per_task, fewer for
    the task's last instance when they do not divide its units; None for a
    task that claims its units (how many an entry runs is known only at
    run time: its own one and those it claims)."""
    task = mega["tasks"][mega["entries"]["task"][entry]]
    if task.get("claims_units"):
        return None
    per = task.get("units_per_task", 1)
    return min(per, task["units"] - mega["entries"]["instance"][entry] * per)


def entry_label(mega, entry: int) -> str:
    """e.g. "task 'l3_o_proj' instance 5" (or "entry 7" for an index out of range)."""
    if not 0 <= entry < len(mega["entries"]["task"]):
        return f"entry {entry}"
    return f"task '{task_name(mega, entry)}' instance {mega['entries']['instance'][entry]}"


def short_label(mega, entry: int) -> str:
    """e.g. "l3_o_proj#5", for long lists such as a critical path."""
    return f"{task_name(mega, entry)}#{mega['entries']['instance'][entry]}"


def event_name(mega, event: int) -> str:
    """The event of a counter word: its name, and the sender rank of a peer
    event's word (e.g. "pushed (from rank 1)")."""
    if not 0 <= event < len(mega["events"]):
        return f"#{event}"
    ev = mega["events"][event]
    return ev["name"] + (f" (from rank {ev['sender']})" if "sender" in ev else "")


def task_kind(mega, entry: int) -> str:
    """The task body (one colour per body in a timeline); the task name without one."""
    task = mega["tasks"][mega["entries"]["task"][entry]]
    return str(task.get("body") or task["name"])


def signallers(mega) -> List[List[int]]:
    """For each event, the entries that signal it (in entry order)."""
    out: List[List[int]] = [[] for _ in mega["events"]]
    for e, evs in enumerate(mega["signals"]):
        for v in evs:
            word = signal_word(v)
            # A peer signal advances its own rank's word: on rank s, word + s.
            for s in range(ranks(mega) if is_peer_signal(v) else 1):
                out[word + s].append(e)
    return out


def blocking_chain(mega, counters, event: int, expected: int, rank=None) -> List[int]:
    """Why a wait on `event` never ended: the event, then, as long as one is
    found, an unfired event that a producer of the previous one still waits
    for (counters: the kernel's event words after it stopped; `expected`:
    the target the stopped wait read, trigger x rounds, so every event's
    target is its trigger x the same rounds). It ends at an event whose
    producers wait for nothing unfired, or at another rank's word of a peer
    event (rank: this kernel's; None: unknown, any peer word ends it),
    which only that rank signals."""
    events, waits = mega["events"], mega["waits"]
    if not 0 <= event < len(events) or len(counters) < len(events):
        return [event]
    rounds = max(1, expected // max(1, int(events[event].get("trigger", 1))))

    def fired(w):
        return int(counters[w]) >= int(events[w].get("trigger", 1)) * rounds

    producers = signallers(mega)
    chain = [event]
    while True:
        sender = events[chain[-1]].get("sender")
        if sender is not None and sender != rank:
            return chain
        upstream = next((w for e in producers[chain[-1]] for w in waits[e]
                         if not fired(w) and w not in chain), None)
        if upstream is None:
            return chain
        chain.append(upstream)


def placement(mega) -> Dict[int, str]:
    """entry -> where the schedule puts it, e.g. "worker 3 position 2" or "JIT position 0"."""
    where: Dict[int, str] = {}
    for w, lst in enumerate(mega["aot"]):
        for i, e in enumerate(lst):
            where.setdefault(e, f"worker {w} position {i}")
    for i, e in enumerate(mega["jit"]):
        where.setdefault(e, f"JIT position {i}")
    return where
