"""CPU simulator and deadlock check of a mega-kernel schedule (no GPU).

Input is the `mega` dictionary alone (docs/mega.md). The simulation follows
the persistent kernel's rules:

  * worker `w` walks `aot[w]` in order; an entry starts once every event in
    `waits[e]` has fired (counter == trigger) and, when it ends, increments
    every event in `signals[e]`;
  * the scheduler walks `jit` in order, waits until the entry's events fired,
    then publishes it to the ring (FIFO);
  * a worker whose next AOT entry is not ready (or whose list is done) claims
    the next published ring slot; AOT goes first when both are possible at
    the same instant (the worker loop checks its own list first);
  * workers exit once their list is done and every JIT entry is claimed.

Publishing and claiming take no time; an entry lasts its task's `cost_ns`
times a random factor.

    simulate(meta, seed=None, jitter=0.0, workers=None) -> SimResult
    check_deadlock_free(meta, runs=200, seed=0) -> ScheduleReport  (or ScheduleError)
    format_report(report) -> str
    python -m tilemega.runtime.mega_sim ART.json [--runs N] [--workers W]
"""

from .check import (JITTER, ScheduleError, ScheduleReport, check_deadlock_free, format_path,
                    format_report, static_problems)
from .cli import load_meta, main
from .simulate import Blocked, Deadlock, SimResult, format_ns, simulate

__all__ = ["simulate", "SimResult", "Deadlock", "Blocked", "check_deadlock_free",
           "static_problems", "ScheduleError", "ScheduleReport", "format_report", "format_path",
           "format_ns", "load_meta", "main", "JITTER"]
