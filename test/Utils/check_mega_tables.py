"""Checks the task tables of every persistent kernel in a lowered module and
prints what they mean, by name, for FileCheck.

Usage: check_mega_tables.py INPUT.mlir

Reads the `mega` dictionaries of the `tilemega.kernels` module attribute
(docs/mega.md: `tables`, `table_sections`, `tasks`, `events`, ...), decodes
the int32 tables and fails (exit 1, naming the broken invariant) unless:
  - the sections lie in the documented order and fill the tables exactly;
  - every (task, instance) is one entry, and each entry's record (`records`)
    agrees with entry_case / entry_task / entry_instance / waits / signals;
  - every entry sits in exactly one list (a worker's AOT list or the JIT
    list); `aot_records` are the records in AOT order;
  - every event is signalled, its trigger count (metadata and
    `triggers` section) equals its number of signalling entries (a peer
    event's word of sender s: the entries that signal the event, on rank s);
  - within each list, an entry comes after every entry of that list whose
    signal it waits for (lists are in one topological order);
  - the kernel's `mega_tables` parameter holds exactly the tables.
Then prints, per kernel: the entries per task, each event's signallers and
waiters, each worker's AOT list and the JIT list, as `task#instance`. The
lit tests check that summary, so they name what a lowering must do instead of
copying integers. Needs no MLIR.
"""

import re
import sys

SECTION_ORDER = ["records", "aot_records", "entry_case", "entry_task",
                 "entry_instance", "wait_offsets", "waits", "signal_offsets",
                 "signals", "triggers", "aot_offsets", "aot", "jit"]
RECORD_WORDS = 8
PEER_SIGNAL_BIT = 1 << 30


def fail(message):
    print(f"check_mega_tables: {message}", file=sys.stderr)
    sys.exit(1)


def field(text, name, pattern=r"-?\d+"):
    match = re.search(rf"\b{name} = ({pattern})", text)
    if not match:
        fail(f"no '{name}' in the mega metadata")
    return match.group(1)


def dicts(text):
    """The flat {...} dictionaries of an MLIR array attribute's text."""
    return [dict((k, v.strip('"')) for k, v in
                 re.findall(r'(\w+) = ("[^"]*"|[-\d.e+]+)', body))
            for body in re.findall(r"\{([^{}]*)\}", text)]


def mega_blocks(text):
    """(start, end) of the body of each `mega = {...}` (artifact metadata) or
    `tilemega.mega = {...}` (convert-mega-to-gpu) dictionary."""
    for match in re.finditer(r"\bmega = \{", text):
        depth, i = 1, match.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        yield match.end(), i - 1


def check(mega):
    data = [int(v) for v in field(mega, "tables", r"array<i32:[^>]*>")
            [len("array<i32:"):-1].split(",")]
    sections = {k: int(v) for k, v in re.findall(
        r"(\w+) = (\d+) : i64", field(mega, "table_sections", r"\{[^}]*\}"))}
    tasks = dicts(field(mega, "tasks", r"\[[^\]]*\]"))
    events = dicts(field(mega, "events", r"\[[^\]]*\]"))
    n = int(field(mega, "num_entries"))
    workers = int(field(mega, "workers"))
    num_jit = int(field(mega, "num_jit"))
    if int(field(mega, "num_events")) != len(events):
        fail(f"num_events {field(mega, 'num_events')} but {len(events)} events")

    if sorted(sections) != sorted(SECTION_ORDER):
        fail(f"sections {sorted(sections)}, expected {sorted(SECTION_ORDER)}")
    starts = [sections[s] for s in SECTION_ORDER]
    if starts != sorted(starts) or starts[0] != 0:
        fail(f"sections out of order: {sections}")

    def section(name, count, start=0):
        begin = sections[name] + start
        if count < 0 or begin + count > len(data):
            fail(f"section {name} [{begin}, {begin + count}) is outside the "
                 f"{len(data)} words")
        return data[begin:begin + count]

    def ranges(offsets_name, values_name, rows):
        offsets = section(offsets_name, rows + 1)
        if offsets[0] != 0 or offsets != sorted(offsets):
            fail(f"{offsets_name} is not ascending from 0: {offsets}")
        return [section(values_name, b - a, a) for a, b in zip(offsets, offsets[1:])]

    entry_case = section("entry_case", n)
    entry_task = section("entry_task", n)
    entry_instance = section("entry_instance", n)
    waits = ranges("wait_offsets", "waits", n)
    signals = ranges("signal_offsets", "signals", n)
    triggers = section("triggers", len(events))
    aot = ranges("aot_offsets", "aot", workers)
    jit = section("jit", num_jit)
    sizes = {"records": RECORD_WORDS * n, "aot_records": RECORD_WORDS * sum(map(len, aot)),
             "entry_case": n, "entry_task": n, "entry_instance": n,
             "wait_offsets": n + 1, "waits": sum(map(len, waits)),
             "signal_offsets": n + 1, "signals": sum(map(len, signals)),
             "triggers": len(events), "aot_offsets": workers + 1,
             "aot": sum(map(len, aot)), "jit": num_jit}
    for name, next_name in zip(SECTION_ORDER, SECTION_ORDER[1:] + [None]):
        end = sections[next_name] if next_name else len(data)
        if end - sections[name] != sizes[name]:
            fail(f"section {name} holds {end - sections[name]} words, "
                 f"expected {sizes[name]}")

    def label(e):
        return f"{tasks[entry_task[e]]['name']}#{entry_instance[e]}"

    def event_label(v):
        event = events[v]
        return event["name"] + (f" from rank {event['sender']}" if "sender" in event else "")

    # Entries: each (task, instance) once.
    seen = set()
    for e in range(n):
        t, i = entry_task[e], entry_instance[e]
        if not 0 <= t < len(tasks) or not 0 <= i < int(tasks[t]["count"]):
            fail(f"entry {e}: task {t} instance {i} does not exist")
        if (t, i) in seen:
            fail(f"entry {e}: {label(e)} appears twice")
        seen.add((t, i))
    if len(seen) != sum(int(t["count"]) for t in tasks):
        fail(f"{n} entries for {sum(int(t['count']) for t in tasks)} task instances")

    # Records agree with the sections they summarise.
    def record(e):
        wait, signal = waits[e], signals[e]
        first_wait = wait[0] if wait else -1
        trigger = triggers[first_wait] if wait else 0
        return [entry_case[e] | (entry_task[e] << 16), entry_instance[e],
                len(wait), first_wait, trigger, len(signal),
                signal[0] if signal else -1, e]
    for e in range(n):
        if section("records", RECORD_WORDS, RECORD_WORDS * e) != record(e):
            fail(f"the record of entry {e} ({label(e)}) disagrees with the sections")
    order = [e for lst in aot for e in lst]
    for k, e in enumerate(order):
        if section("aot_records", RECORD_WORDS, RECORD_WORDS * k) != record(e):
            fail(f"aot record {k} is not the record of entry {e} ({label(e)})")

    # Lists: every entry once (a queue's instances may go to AOT lists or the
    # JIT list, as mega-schedule placed them).
    placed = sorted(order + list(jit))
    if placed != list(range(n)):
        fail(f"the AOT and JIT lists hold {placed}, not each of the {n} entries once")

    # Events: signalled as often as they trigger, and waited on. In a graph
    # of several ranks a peer signal (bit 30 on a peer event's first word)
    # counts, on rank q, for word first + q: each rank's instances are the
    # signallers of their own sender's word.
    ranks = re.search(r"\branks = (\d+) : i64", mega)
    ranks = int(ranks.group(1)) if ranks else 1

    def words(value):
        if value & PEER_SIGNAL_BIT:
            first = value & ~PEER_SIGNAL_BIT
            return list(range(first, first + ranks))
        return [value]

    signalled = [[w for s in signals[e] for w in words(s)] for e in range(n)]
    signallers = [[e for e in range(n) if v in signalled[e]] for v in range(len(events))]
    waiters = [[e for e in range(n) if v in waits[e]] for v in range(len(events))]
    for v, event in enumerate(events):
        if "sender" in event and events[v - int(event["sender"])].get("sender") != "0":
            fail(f"event {event['name']}: word {v} of sender {event['sender']} does not "
                 "follow its event's first word")
        for e in range(n):
            if not all(0 <= x < len(events) for x in waits[e] + signalled[e]):
                fail(f"{label(e)} names an event outside [0, {len(events)})")
        if not signallers[v]:
            fail(f"event {event['name']} is never signalled")
        if not int(event["trigger"]) == triggers[v] == len(signallers[v]):
            fail(f"event {event['name']}: trigger {event['trigger']} (metadata), "
                 f"{triggers[v]} (tables), {len(signallers[v])} signallers")

    # Each list in topological order.
    for name, lst in [(f"aot w{w}", l) for w, l in enumerate(aot)] + [("jit", list(jit))]:
        position = {e: k for k, e in enumerate(lst)}
        for e in lst:
            for v in waits[e]:
                for s in signallers[v]:
                    if s in position and position[s] > position[e]:
                        fail(f"{name}: {label(e)} waits for {event_label(v)} of "
                             f"{label(s)}, which comes later in the same list")

    print(f"graph {field(mega, 'graph', '[^,]*').strip(chr(34))}: {n} entries, "
          f"{len(events)} events, {workers} workers"
          + (f", {ranks} ranks" if ranks > 1 else ""))
    for t, task in enumerate(tasks):
        print(f"task {task['name']} ({task['queue']}): "
              + " ".join(label(e) for e in range(n) if entry_task[e] == t))
    for v, event in enumerate(events):
        print(f"event {event_label(v)}: trigger {triggers[v]} by "
              + " ".join(map(label, signallers[v])) + " for "
              + (" ".join(map(label, waiters[v])) or "(none)"))
    for w, lst in enumerate(aot):
        print(f"aot w{w}: " + (" ".join(map(label, lst)) or "(none)"))
    print("jit: " + (" ".join(map(label, jit)) or "(none)"))


def main():
    if len(sys.argv) != 2:
        fail("usage: check_mega_tables.py INPUT.mlir (- for stdin)")
    text = sys.stdin.read() if sys.argv[1] == "-" else open(sys.argv[1]).read()
    blocks = list(mega_blocks(text))
    if not blocks:
        fail(f"{sys.argv[1]} holds no persistent kernel metadata")
    previous_end = 0
    for k, (start, end) in enumerate(blocks):
        mega = text[start:end]
        check(mega)
        # The runtime allocates mega_tables from the kernel's parameter (after
        # the block in artifact metadata) or function argument (before it).
        next_start = blocks[k + 1][0] if k + 1 < len(blocks) else len(text)
        param = re.search(r'name = "mega_tables", role = "runtime", '
                          r"shape = array<i64: (\d+)>", text[end:next_start])
        args = re.findall(r"memref<(\d+)xi32> \{mega.role = \"runtime\", "
                          r'tile.name = "mega_tables"\}', text[previous_end:start])
        shape = int(param.group(1)) if param else int(args[-1]) if args else None
        words = len(field(mega, "tables", r"array<i32:[^>]*>").split(","))
        if shape != words:
            fail(f"the mega_tables parameter ({shape}) does not hold the {words} "
                 "table words")
        previous_end = end
    print("tables ok")


if __name__ == "__main__":
    main()
