"""Simulate one run of a mega-kernel schedule on the CPU (see the package doc).

The loop advances from completion to completion: at each instant it finishes
the entries that end then (firing events), lets the scheduler advance the JIT
tail over the ready prefix of the JIT list, and lets every worker that may
decide differently now (it became free, its next AOT entry became ready, or
its ticket was published) run the kernel's pickEntry: its published ticket,
else its ready AOT entry, else, holding no ticket, draw the next one. When
nothing is running it stops, so a deadlock is reported (`SimResult.deadlock`),
never waited for.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from .. import mega_meta as mm


@dataclass
class Blocked:
    """A worker (or the scheduler) that can never proceed.

    entry: the AOT entry it waits to start (None: its AOT list is done, or
    for the scheduler, the JIT entry it cannot publish); ticket: the JIT-list
    position it holds but that is never published (None: it holds none);
    waits: (event, counter, trigger) of each unfired event `entry` needs.
    """
    entry: Optional[int]
    waits: List[Tuple[int, int, int]] = field(default_factory=list)
    ticket: Optional[int] = None


@dataclass
class Deadlock:
    time_ns: float
    workers: Dict[int, Blocked]
    scheduler: Optional[Blocked]
    jit_published: int                   # the JIT tail: positions below it are published
    jit_drawn: int                       # the JIT head: tickets drawn so far
    jit_total: int

    def describe(self, meta) -> str:
        """Who waits on what, and which unfinished entries would signal it."""
        senders, where = mm.signallers(meta), mm.placement(meta)

        def waiting(b: Blocked) -> str:
            parts = []
            for v, seen, trigger in b.waits:
                who = ", ".join(f"{mm.entry_label(meta, s)} ({where.get(s, 'never scheduled')})"
                                for s in senders[v][:3]) or "no entry"
                more = f" and {len(senders[v]) - 3} more" if len(senders[v]) > 3 else ""
                parts.append(f"event '{mm.event_name(meta, v)}' (counter {seen} of {trigger}; "
                             f"signalled by {who}{more})")
            return " and ".join(parts)

        queue = (f"{self.jit_published} of {self.jit_total} published, "
                 f"{self.jit_drawn} tickets drawn")
        lines = [f"deadlock at {format_ns(self.time_ns)}:"]
        for w, b in sorted(self.workers.items()):
            held = ""
            if b.ticket is not None:
                held = (f"JIT ticket {b.ticket} ({mm.entry_label(meta, meta['jit'][b.ticket])}), "
                        f"which is not published ({queue})")
            if b.entry is None:
                lines.append(f"  worker {w} holds {held}")
            else:
                lines.append(f"  worker {w} waits on {waiting(b)} before "
                             f"{mm.entry_label(meta, b.entry)}"
                             + (f", holding {held}" if held else ""))
        if self.scheduler is not None:
            lines.append(f"  the scheduler waits on {waiting(self.scheduler)} before publishing "
                         f"{mm.entry_label(meta, self.scheduler.entry)}")
        return "\n".join(lines)


@dataclass
class SimResult:
    makespan_ns: float
    busy_ns: List[float]                 # per worker
    start_ns: List[Optional[float]]      # per entry; None if it never ran
    end_ns: List[Optional[float]]
    worker: List[int]                    # per entry; -1 if it never ran
    critical_path: List[int]             # entries, first to last
    critical_path_ns: float
    deadlock: Optional[Deadlock]
    # Per entry, the units it ran: units_per_task (fewer for a short last
    # instance), or, for a task that claims its units, its own one plus
    # those it claimed; 0 if it never ran.
    units: List[int] = field(default_factory=list)

    @property
    def utilisation(self) -> List[float]:
        span = self.makespan_ns
        return [b / span if span > 0 else 0.0 for b in self.busy_ns]

    def rows(self) -> List[Tuple[float, float, int, int]]:
        """Per-entry (start, end, worker, worker): the timeline renderer's input
        (the simulator has no SM ids; entries that never ran are (0, 0, -1, -1))."""
        return [(s, e, w, w) if s is not None else (0.0, 0.0, -1, -1)
                for s, e, w in zip(self.start_ns, self.end_ns, self.worker)]


def format_ns(ns: float) -> str:
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def _worker_lists(meta, workers: Optional[int]) -> List[List[int]]:
    aot = [list(lst) for lst in meta["aot"]]
    if workers is None or workers == len(aot):
        return aot
    if workers < 1 or any(aot[workers:]):
        raise ValueError(f"workers={workers}: the schedule has AOT lists for "
                         f"{sum(1 for lst in aot if lst)} workers (up to worker "
                         f"{max(w for w, lst in enumerate(aot) if lst)}); fewer cannot run it")
    return aot[:workers] + [[] for _ in range(workers - len(aot))]


def simulate(meta, seed=None, jitter: float = 0.0, workers: Optional[int] = None, *,
             costs: Optional[Sequence[float]] = None,
             worker_speed: Optional[Dict[int, float]] = None) -> SimResult:
    """Run the schedule once on the CPU.

    seed: None takes simultaneous decisions (who draws which JIT ticket) in
    worker order (and draws the jitter from a fresh random source); an int
    takes them in a random order and makes the run reproducible. jitter:
    each entry's duration is multiplied by a factor log-uniform in
    [e^-jitter, e^jitter]. workers: run with this many workers (extra ones
    get empty AOT lists and only run JIT entries). costs: per-entry base
    durations instead of the tasks' cost_ns. worker_speed: {worker: factor}
    slows (>1) or speeds up entries run by that worker.

    A task that claims its units (`claims_units`, docs/mega.md "Claimed
    units") runs as the kernel does: each entry its own unit (its duration
    over units_per_task), then, while the task's units beyond its
    instances' own remain, one more each, claimed as the entry finishes a
    unit; it signals once it finds none left.
    """
    from .ranks import unroll_ranks

    meta = unroll_ranks(meta)          # several ranks: side by side (ranks.py)
    aot = _worker_lists(meta, workers)
    W = len(aot)
    jit = list(meta["jit"])
    J = len(jit)
    task_of = meta["entries"]["task"]
    n = len(task_of)
    waits, signals = meta["waits"], meta["signals"]
    trigger = [ev["trigger"] for ev in meta["events"]]
    if costs is None:
        costs = [float(meta["tasks"][t].get("cost_ns", 0)) for t in task_of]
    elif len(costs) != n:
        raise ValueError(f"costs: expected {n} durations (one per entry), got {len(costs)}")
    rng = random.Random(seed)
    factor = [math.exp(jitter * rng.uniform(-1.0, 1.0)) for _ in range(n)] if jitter else None
    speed = [1.0] * W
    for w, f in (worker_speed or {}).items():
        speed[w] = float(f)
    random_ties = seed is not None
    # Claimed units: per task, the units beyond its instances' own still
    # unclaimed; per entry, the units it ran.
    tasks = meta["tasks"]
    pool = {t: tasks[t]["units"] - tasks[t]["count"]
            for t in range(len(tasks)) if tasks[t].get("claims_units")}
    ran_units = [0] * n

    def own_units(e: int) -> int:
        """Units entry e runs before any claim: a claiming entry its own one."""
        units = mm.entry_units(meta, e) if "units" in tasks[task_of[e]] else None
        return 1 if units is None else units

    def unit_ns(e: int) -> float:
        """One unit's duration of entry e (its cost spread over its units)."""
        return costs[e] / max(1, tasks[task_of[e]].get("units_per_task", 1))

    counter = [0] * len(trigger)
    pending = [0] * n                      # unfired distinct events each entry waits on
    waiters: List[List[int]] = [[] for _ in trigger]
    for e in range(n):
        for v in set(waits[e]):
            if trigger[v] > 0:
                pending[e] += 1
                waiters[v].append(e)
    owners: Dict[int, List[int]] = {}      # entry -> AOT workers holding it
    for w, lst in enumerate(aot):
        for e in lst:
            owners.setdefault(e, []).append(w)

    pos = [0] * W
    free = [True] * W
    # A worker's ticket: NONE, a JIT-list position k < J it runs once k < tail,
    # or J: the list is used up for it (the kernel's min(atomicAdd, numJit)).
    NONE = -1
    ticket = [NONE] * W
    holder: Dict[int, int] = {}            # JIT position -> worker holding its ticket
    head = tail = 0                        # tickets drawn; positions published
    start: List[Optional[float]] = [None] * n
    end: List[Optional[float]] = [None] * n
    who = [-1] * n
    busy = [0.0] * W
    order: List[int] = []                  # start order: a topological order of what ran
    heap: List[Tuple[float, int, int, int]] = []
    t = 0.0

    def run(w: int, e: int):
        base = unit_ns(e) if task_of[e] in pool else costs[e]
        d = base * speed[w] * (factor[e] if factor else 1.0)
        start[e], end[e], who[e] = t, t + d, w
        ran_units[e] = own_units(e)
        busy[w] += d
        free[w] = False
        order.append(e)
        heapq.heappush(heap, (t + d, len(order), w, e))

    def claim(w: int, e: int) -> bool:
        """Entry e of a claiming task finished a unit: it runs one more
        if any is left (and signals later), else it is done."""
        if pool.get(task_of[e], 0) <= 0:
            return False
        pool[task_of[e]] -= 1
        d = unit_ns(e) * speed[w] * (factor[e] if factor else 1.0)
        end[e] = t + d
        ran_units[e] += 1
        busy[w] += d
        heapq.heappush(heap, (t + d, len(order), w, e))
        return True

    def run_ticket(w: int):
        k = ticket[w]
        ticket[w] = NONE
        del holder[k]
        run(w, jit[k])

    def pick(w: int):
        """The worker loop's pickEntry for a free worker, at instant t."""
        nonlocal head
        k = ticket[w]
        if 0 <= k < tail:                  # 1. a held, published ticket
            run_ticket(w)
        elif pos[w] < len(aot[w]) and pending[aot[w][pos[w]]] == 0:
            pos[w] += 1                    # 2. the next AOT entry, if ready
            run(w, aot[w][pos[w] - 1])
        elif k == NONE and J > 0:          # 3. no ticket: draw one (never blocks on it)
            ticket[w] = min(head, J)
            if head < J:
                holder[head] = w
                head += 1
                if ticket[w] < tail:
                    run_ticket(w)

    candidates = list(range(W))            # workers whose pick may change now
    while True:
        # The scheduler publishes the ready prefix of the JIT list (one tail advance).
        old_tail = tail
        while tail < J and pending[jit[tail]] == 0:
            tail += 1
        candidates.extend(holder[k] for k in range(old_tail, tail) if k in holder)
        drawers = sorted(set(candidates))
        if random_ties:
            rng.shuffle(drawers)           # who draws which ticket is a race
        for w in drawers:
            if free[w]:
                pick(w)
        if not heap:
            break
        t = heap[0][0]
        candidates = []
        while heap and heap[0][0] == t:
            _, _, w, e = heapq.heappop(heap)
            if claim(w, e):
                continue
            free[w] = True
            candidates.append(w)
            for v in signals[e]:
                counter[v] += 1
                if counter[v] == trigger[v]:
                    for x in waiters[v]:
                        pending[x] -= 1
                        if pending[x] == 0:
                            candidates.extend(owners.get(x, ()))

    deadlock = None
    held = lambda w: ticket[w] if 0 <= ticket[w] < J else None
    # Done: AOT list finished and no JIT entry to come (ticket J, or no JIT list).
    stuck = {w: Blocked(aot[w][pos[w]] if pos[w] < len(aot[w]) else None, ticket=held(w))
             for w in range(W) if pos[w] < len(aot[w]) or held(w) is not None}
    if stuck or tail < J:
        unfired = lambda e: [(v, counter[v], trigger[v]) for v in sorted(set(waits[e]))
                             if counter[v] < trigger[v]]
        for b in stuck.values():
            if b.entry is not None:
                b.waits = unfired(b.entry)
        blocked_sched = Blocked(jit[tail], unfired(jit[tail])) if tail < J else None
        deadlock = Deadlock(t, stuck, blocked_sched, tail, head, J)
    path, length = _critical_path(order, start, end, who, waits, signals)
    return SimResult(t, busy, start, end, who, path, length, deadlock, ran_units)


def _critical_path(order, start, end, who, waits, signals):
    """Longest duration-weighted chain through event edges and each worker's sequence.

    `order` (start order) is topological for both kinds of edge; a signaller
    that started after the waiter did (a mis-counted trigger) is no edge.
    """
    longest: Dict[int, float] = {}
    prev: Dict[int, Optional[int]] = {}
    last_on: Dict[int, int] = {}           # worker -> its latest entry so far
    best_signaller: Dict[int, int] = {}    # event -> its signaller with the longest chain
    for e in order:
        cands = [best_signaller[v] for v in waits[e] if v in best_signaller]
        if who[e] in last_on:
            cands.append(last_on[who[e]])
        p = max(cands, key=lambda c: (longest[c], -c), default=None)
        longest[e] = (end[e] - start[e]) + (longest[p] if p is not None else 0.0)
        prev[e] = p
        last_on[who[e]] = e
        for v in signals[e]:
            b = best_signaller.get(v)
            if b is None or longest[e] > longest[b]:
                best_signaller[v] = e
    if not longest:
        return [], 0.0
    tail = max(longest, key=lambda e: (longest[e], -e))
    path, e = [], tail
    while e is not None:
        path.append(e)
        e = prev[e]
    return path[::-1], longest[tail]
