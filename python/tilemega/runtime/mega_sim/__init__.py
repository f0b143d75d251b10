"""CPU simulator and deadlock check of a mega-kernel schedule (no GPU).

Input is the `mega` dictionary alone (docs/mega.md). The simulation follows
the persistent kernel's rules:

  * worker `w` walks `aot[w]` in order; an entry starts once every event in
    `waits[e]` has fired (counter == trigger) and, when it ends, increments
    every event in `signals[e]`;
  * the scheduler walks `jit` in order and publishes the entries whose events
    fired by advancing the JIT tail (positions below the tail are published);
  * a free worker picks, in this order: the entry of the JIT ticket it holds
    once that position is published; else its next AOT entry if ready; else,
    holding no ticket, it draws one (the next JIT-list position, the kernel's
    atomic add on the head; past the end of the list: none left for it) and
    runs it at once if already published. A worker never blocks on its
    ticket: until it is published, the worker keeps running AOT entries as
    they become ready. Which of several workers deciding at the same instant
    draws which ticket is a race (random with a seed);
  * a worker exits once its AOT list is done and its draw found the JIT list
    used up.

Publishing, drawing and picking take no time; an entry lasts its task's `cost_ns`
times a random factor.

    simulate(meta, seed=None, jitter=0.0, workers=None) -> SimResult
    check_deadlock_free(meta, runs=200, seed=0) -> ScheduleReport  (or ScheduleError)
    unroll_ranks(meta)   a graph of several ranks as one schedule (ranks.py)
    format_report(report) -> str
    python -m tilemega.runtime.mega_sim ART.json [--runs N] [--workers W]
"""

from .check import (JITTER, ScheduleError, ScheduleReport, check_deadlock_free, format_path,
                    format_report, static_problems)
from .cli import load_meta, main
from .ranks import unroll_ranks
from .simulate import Blocked, Deadlock, SimResult, format_ns, simulate

__all__ = ["simulate", "SimResult", "Deadlock", "Blocked", "check_deadlock_free",
           "static_problems", "ScheduleError", "ScheduleReport", "format_report", "format_path",
           "format_ns", "load_meta", "main", "JITTER", "unroll_ranks"]
