"""Mega-kernel runtime without a GPU: the schedule simulator, the deadlock check,
the timeline summary, MegaKernel's binding checks and the watchdog record.

Schedules are written by hand as `mega` dicts (docs/mega.md)."""

import json
import os
import random
import subprocess
import sys
import types

import pytest

from conftest import _PYTHON_DIR, write_artifact

from tilemega.runtime import (ArgumentError, LaunchError, MegaKernel, MegaKernelError,
                              load_artifact, load_mega)
from tilemega.runtime import mega_sim as ms
from tilemega.runtime import mega_timeline as mt
from tilemega.runtime.mega import decode_error, residency_error


def mega(tasks, triggers, entries, waits, signals, aot, jit=(), graph="g"):
    """tasks: (name, cost_ns); entries: (task index, instance)."""
    return {
        "graph": graph, "workers": len(aot), "schedulers": 1 if jit else 0,
        "tasks": [{"name": n, "body": "body_" + n, "cost_ns": c} for n, c in tasks],
        "events": [{"name": f"ev{i}", "trigger": t} for i, t in enumerate(triggers)],
        "entries": {"task": [t for t, _ in entries], "instance": [i for _, i in entries]},
        "waits": [list(w) for w in waits], "signals": [list(s) for s in signals],
        "aot": [list(a) for a in aot], "jit": list(jit),
    }


def chain(aot=([0, 1, 2],)):
    # A -> ev0 -> B -> ev1 -> C
    return mega([("A", 100), ("B", 200), ("C", 300)], [1, 1], [(0, 0), (1, 0), (2, 0)],
                [[], [0], [1]], [[0], [1], []], aot)


def diamond():
    # A -> ev0 -> {B, C} -> ev1 (trigger 2) -> D; worker 0: A B D, worker 1: C
    return mega([("A", 100), ("B", 200), ("C", 500), ("D", 50)], [1, 2],
                [(0, 0), (1, 0), (2, 0), (3, 0)],
                [[], [0], [0], [1]], [[0], [1], [1], []], [[0, 1, 3], [2]])


def fan_in(k=4):
    # k instances of P each signal ev0 (trigger k); Q waits on ev0
    return mega([("P", 100), ("Q", 10)], [k], [(0, i) for i in range(k)] + [(1, 0)],
                [[]] * k + [[0]], [[0]] * k + [[]], [[i] for i in range(k - 1)] + [[k - 1, k]])


def aot_jit():
    # worker 0: A (slow) then C; worker 1: B (fast); JIT: J0 (after A), J1 (after B);
    # C waits on J0. J1 is ready long before J0, but the JIT list is published in order.
    return mega([("A", 1000), ("B", 10), ("C", 5), ("J", 100)], [1, 1, 1, 1],
                [(0, 0), (1, 0), (2, 0), (3, 0), (3, 1)],
                [[], [], [2], [0], [1]], [[0], [1], [], [2], [3]],
                [[0, 2], [1]], jit=[3, 4])


def random_schedule(rng, n=40, workers=4, jit_share=0.2):
    """A random DAG of single-instance tasks, scheduled in one topological order."""
    tasks = [(f"t{i}", rng.randint(1, 500)) for i in range(n)]
    deps = [sorted(rng.sample(range(i), min(i, rng.randint(0, 3)))) for i in range(n)]
    # one event per producer, triggered once; consumers wait on their producers' events
    waits = [list(d) for d in deps]
    signals = [[i] for i in range(n)]
    aot, jit = [[] for _ in range(workers)], []
    for e in range(n):          # entry order is already topological
        (jit if rng.random() < jit_share else aot[rng.randrange(workers)]).append(e)
    return mega(tasks, [1] * n, [(i, 0) for i in range(n)], waits, signals, aot, jit)


# ---------------------------------------------------------------- simulate


def test_chain_runs_in_order_and_is_the_critical_path():
    for aot in (([0, 1, 2],), ([0, 2], [1]), ([0], [1], [2])):
        r = ms.simulate(chain(aot))
        assert r.deadlock is None
        assert (r.start_ns, r.end_ns) == ([0, 100, 300], [100, 300, 600])
        assert r.makespan_ns == 600
        assert r.critical_path == [0, 1, 2] and r.critical_path_ns == 600
        assert sum(r.busy_ns) == 600


def test_diamond_waits_for_both_signals():
    r = ms.simulate(diamond())
    assert r.start_ns[3] == 600                # D waits for C (100 + 500), not just B
    assert r.makespan_ns == 650
    assert r.critical_path == [0, 2, 3] and r.critical_path_ns == 650
    assert r.worker == [0, 0, 1, 0]
    assert r.utilisation == pytest.approx([350 / 650, 500 / 650])


def test_fan_in_fires_on_the_last_of_its_trigger_count():
    meta = fan_in(4)
    for seed in range(20):
        r = ms.simulate(meta, seed=seed, jitter=1.0)
        assert r.deadlock is None
        assert r.start_ns[4] == max(r.end_ns[:4])
        assert r.critical_path[-1] == 4 and r.critical_path_ns == pytest.approx(r.makespan_ns)


def test_jit_list_is_published_in_order_and_run_by_ticket_holders():
    meta = aot_jit()
    r = ms.simulate(meta)
    assert r.deadlock is None
    assert r.start_ns[3] == 1000               # J0 once A is done
    assert r.start_ns[4] == 1000               # J1 ready at 10, but published after J0
    assert r.start_ns[2] == 1100               # C after J0
    # worker 1 (AOT list done at 10) drew ticket 0; worker 0, whose C is not
    # ready after A, drew ticket 1 at 1000
    assert r.worker[3:] == [1, 0]
    # an extra worker (empty AOT list) draws ticket 0 at once, worker 1 ticket 1
    # at 10; worker 0 finds the list used up and only runs C
    r3 = ms.simulate(meta, workers=3)
    assert len(r3.busy_ns) == 3 and r3.deadlock is None
    assert r3.worker == [0, 1, 0, 2, 1] and r3.start_ns[2:] == [1100, 1000, 1000]
    with pytest.raises(ValueError, match="fewer cannot run it"):
        ms.simulate(meta, workers=1)


def test_a_worker_without_a_ticket_runs_its_ready_aot_entry_before_drawing():
    # worker 0: A then B; B and the JIT entry J both wait on A's event: J is
    # published when B becomes ready, but worker 0 holds no ticket then.
    meta = mega([("A", 10), ("B", 10), ("J", 10)], [1], [(0, 0), (1, 0), (2, 0)],
                [[], [0], [0]], [[0], [], []], [[0, 1]], jit=[2])
    r = ms.simulate(meta)
    assert r.worker == [0, 0, 0] and r.start_ns == [0, 10, 20]


def test_a_published_ticket_goes_before_a_ready_aot_entry():
    # worker 0: B; worker 1: X. B and the JIT entry J both wait on X's event.
    # At 0 worker 0 cannot start B and draws the ticket of J; at 10 both are
    # ready and the ticket goes first.
    meta = mega([("X", 10), ("B", 10), ("J", 10)], [1], [(0, 0), (1, 0), (2, 0)],
                [[], [0], [0]], [[0], [], []], [[1], [0]], jit=[2])
    r = ms.simulate(meta)
    assert r.deadlock is None
    assert r.worker == [1, 0, 0] and r.start_ns == [0, 20, 10]


def test_a_ticket_holder_keeps_running_aot_entries_and_runs_its_ticket():
    # worker 0: F (10) then S (1000); worker 1: C, which waits on F. J (JIT)
    # waits on S. At 0 worker 1 cannot start C and draws J's ticket; it still
    # runs C at 10 (it never blocks on the ticket), and J at 1010, though
    # worker 0 (lower index) is free at that instant too: the ticket is
    # worker 1's, worker 0's draw finds the list used up.
    meta = mega([("F", 10), ("S", 1000), ("C", 5), ("J", 7)], [1, 1], [(0, 0), (1, 0), (2, 0),
                (3, 0)], [[], [], [0], [1]], [[0], [1], [], []], [[0, 1], [2]], jit=[3])
    for seed in (None, 1, 2, 3):
        r = ms.simulate(meta, seed=seed)
        assert r.deadlock is None
        assert r.worker == [0, 0, 1, 1] and r.start_ns == [0, 10, 10, 1010]
        assert r.makespan_ns == 1017


def test_random_schedules_respect_every_ordering_rule():
    rng = random.Random(1)
    for trial in range(30):
        meta = random_schedule(rng, workers=rng.randint(1, 5))
        r = ms.simulate(meta, seed=trial, jitter=1.0)
        assert r.deadlock is None
        n = len(meta["waits"])
        assert all(s is not None for s in r.start_ns)
        for e in range(n):
            for v in meta["waits"][e]:
                assert r.start_ns[e] >= r.end_ns[v]          # event v is signalled by entry v
        for lst in meta["aot"]:
            for a, b in zip(lst, lst[1:]):
                assert r.start_ns[b] >= r.end_ns[a]
        # a JIT entry starts once it and every entry before it in the JIT
        # list are ready (the scheduler publishes in order)
        published = 0.0
        for e in meta["jit"]:
            published = max([published] + [r.end_ns[v] for v in meta["waits"][e]])
            assert r.start_ns[e] >= published
        by_worker = {}
        for e in range(n):
            by_worker.setdefault(r.worker[e], []).append((r.start_ns[e], r.end_ns[e]))
        for spans in by_worker.values():
            spans.sort()
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))   # one entry at a time
        assert sum(r.busy_ns) == pytest.approx(sum(r.end_ns[e] - r.start_ns[e] for e in range(n)))
        # the critical path is a chain of real edges and no longer than the makespan
        assert r.critical_path_ns <= r.makespan_ns * (1 + 1e-9)
        for a, b in zip(r.critical_path, r.critical_path[1:]):
            assert a in meta["waits"][b] or r.worker[a] == r.worker[b]
        ms.check_deadlock_free(meta, runs=3, seed=trial)


def test_deadlocking_aot_order_is_reported_not_waited_for():
    # worker 0 runs B before A, but B waits on A's event
    meta = mega([("A", 10), ("B", 10)], [1], [(0, 0), (1, 0)], [[], [0]], [[0], []], [[1, 0]])
    r = ms.simulate(meta)
    d = r.deadlock
    assert d is not None and list(d.workers) == [0]
    assert d.workers[0].entry == 1 and d.workers[0].waits == [(0, 0, 1)]
    text = d.describe(meta)
    assert "worker 0 waits on event 'ev0' (counter 0 of 1; signalled by task 'A' instance 0 " \
           "(worker 0 position 1)) before task 'B' instance 0" in text
    with pytest.raises(ms.ScheduleError) as exc:
        ms.check_deadlock_free(meta)
    msg = str(exc.value)
    assert "dependency cycle" in msg
    assert "task 'A' instance 0 signals event 'ev0', which task 'B' instance 0 waits on" in msg
    assert "task 'B' instance 0 runs before task 'A' instance 0 on worker 0" in msg
    with pytest.raises(ms.ScheduleError, match=r"(?s)deadlocked in the simulated nominal.*'ev0'"):
        ms.check_deadlock_free(meta, static=False)


def test_event_cycles_are_named_step_by_step():
    # A waits on C, C on B, B on A (each through its own event), on three workers
    meta = mega([("A", 1), ("B", 1), ("C", 1)], [1, 1, 1], [(0, 0), (1, 0), (2, 0)],
                [[2], [0], [1]], [[0], [1], [2]], [[0], [1], [2]])
    steps = ms.static_problems(meta)[0].split("\n")[1:]
    assert [line.strip(" ;") for line in steps] == [
        "task 'A' instance 0 signals event 'ev0', which task 'B' instance 0 waits on",
        "task 'B' instance 0 signals event 'ev1', which task 'C' instance 0 waits on",
        "task 'C' instance 0 signals event 'ev2', which task 'A' instance 0 waits on"]
    assert set(ms.simulate(meta).deadlock.workers) == {0, 1, 2}
    itself = mega([("A", 1)], [1], [(0, 0)], [[0]], [[0]], [[0]])
    assert "task 'A' instance 0 signals event 'ev0', which task 'A' instance 0 waits on" in \
        ms.static_problems(itself)[0]


def test_blocked_scheduler_and_waiting_workers():
    # JIT order J0, J1 but J0 waits on J1's event: the scheduler never publishes J0
    meta = mega([("J", 10)], [1], [(0, 0), (0, 1)], [[0], []], [[], [0]], [[], []], jit=[0, 1])
    d = ms.simulate(meta).deadlock
    assert d.scheduler.entry == 0 and d.scheduler.waits == [(0, 0, 1)]
    assert {w: (b.entry, b.ticket) for w, b in d.workers.items()} == {0: (None, 0),
                                                                      1: (None, 1)}
    assert (d.jit_published, d.jit_drawn, d.jit_total) == (0, 2, 2)
    text = d.describe(meta)
    assert ("worker 1 holds JIT ticket 1 (task 'J' instance 1), which is not published "
            "(0 of 2 published, 2 tickets drawn)") in text
    assert "the scheduler waits on event 'ev0'" in text
    assert "before publishing task 'J' instance 0" in text
    with pytest.raises(ms.ScheduleError,
                       match=r"is published before task 'J' instance 1 \(JIT order\)"):
        ms.check_deadlock_free(meta)


def test_miscounted_triggers_and_unscheduled_entries():
    too_high = fan_in(2)
    too_high["events"][0]["trigger"] = 3
    assert ms.simulate(too_high).deadlock.workers[1].waits == [(0, 2, 3)]
    # J1 (JIT position 1) never becomes ready: worker 0 drew its ticket at 1000
    # (C not ready yet), still ran C at 1100 and now holds the ticket alone.
    held = aot_jit()
    held["events"][1]["trigger"] = 2
    d = ms.simulate(held).deadlock
    assert {w: (b.entry, b.ticket) for w, b in d.workers.items()} == {0: (None, 1)}
    assert d.scheduler.entry == 4 and d.scheduler.waits == [(1, 1, 2)]
    # and C waits forever on J0's event: worker 0 waits on both
    held["events"][2]["trigger"] = 2
    d = ms.simulate(held).deadlock
    assert {w: (b.entry, b.ticket) for w, b in d.workers.items()} == {0: (2, 1)}
    assert ("worker 0 waits on event 'ev2' (counter 1 of 2; signalled by task 'J' instance 0 "
            "(JIT position 0)) before task 'C' instance 0, holding JIT ticket 1 (task 'J' "
            "instance 1), which is not published (1 of 2 published, 2 tickets drawn)"
            ) in d.describe(held)
    with pytest.raises(ms.ScheduleError, match=r"event 'ev0' has trigger 3 but 2 entries signal it "
                                               r"\(task 'P' instance 0, task 'P' instance 1\)"):
        ms.check_deadlock_free(too_high)
    # Too low runs once (the consumer starts early: a race) but breaks the next epoch:
    # only the static check sees it.
    too_low = fan_in(2)
    too_low["events"][0]["trigger"] = 1
    assert ms.simulate(too_low).deadlock is None
    with pytest.raises(ms.ScheduleError, match="has trigger 1 but 2 entries signal it"):
        ms.check_deadlock_free(too_low)
    unsignalled = chain()
    unsignalled["signals"][0] = []
    with pytest.raises(ms.ScheduleError, match=r"event 'ev0' is waited on by task 'B' instance 0 "
                                               "but no entry signals it"):
        ms.check_deadlock_free(unsignalled)
    lost = chain()
    lost["aot"] = [[0, 1]]
    twice = chain()
    twice["jit"] = [2]
    problems = ms.static_problems(lost) + ms.static_problems(twice)
    assert problems == [
        "task 'C' instance 0 (entry 2) is in no worker list and not in the JIT list: it never runs",
        "task 'C' instance 0 (entry 2) is scheduled 2 times (worker 0 position 2, JIT position 0)"]


def test_check_report_and_extreme_runs():
    report = ms.check_deadlock_free(aot_jit(), runs=50, seed=3)
    assert report.runs > 50 and len(report.makespans_ns) == 50
    assert report.nominal.makespan_ns == 1105
    text = ms.format_report(report)
    assert "5 entries (3 AOT, 2 JIT) of 4 tasks on 2 workers, 4 events" in text
    assert "deadlock-free: static proof and" in text
    assert "makespan: 1.1 us" in text
    assert "critical path: 1.1 us, 3 entries: A#0 -> J#0 -> C#0" in text
    assert "utilisation: min" in text


def test_validation_names_the_field():
    bad = chain()
    bad["waits"][1] = [7]
    with pytest.raises(ValueError, match=r"field 'mega.waits\[1\]\[0\]': event 7 out of range"):
        ms.simulate(bad)
    bad = chain()
    bad["aot"].append([])
    with pytest.raises(ValueError, match=r"field 'mega.aot': expected 1 items, got 2"):
        ms.simulate(bad)


# ---------------------------------------------------------------- command line


def _artifact(tmp_path, meta, ptx="// not loaded\n", timeline=False, **kernel_extra):
    n, jit = len(meta["entries"]["task"]), meta["jit"]
    tables, sections = _pack_tables(meta)
    meta = dict(meta, tables=tables, table_sections=sections, num_entries=n,
                num_events=len(meta["events"]), num_jit=len(jit), watchdog_ns=2_000_000_000,
                timeline=timeline)
    vec = {"kind": "tensor", "dtype": "float32", "shape": [4], "strides": [1]}
    i32 = {"kind": "tensor", "dtype": "int32", "strides": [1]}
    tensors = [dict(vec, name="x", role="input"), dict(vec, name="w", role="weight"),
               dict(vec, name="out", role="output"), dict(vec, name="tmp", role="scratch")]
    meta["args"] = tensors
    params = [{"kind": "tensor", "dtype": "int64", "strides": [1], "name": "mega_args",
               "shape": [len(tensors)], "role": "runtime"},
              dict(i32, name="mega_tables", shape=[len(tables)]),
              dict(i32, name="mega_events", shape=[max(1, len(meta["events"]))]),
              dict(i32, name="mega_state", shape=[16]),
              {"kind": "tensor", "dtype": "int64", "strides": [1], "name": "mega_timeline",
               "shape": [max(1, 4 * n)]}]
    kernel = {"name": meta["graph"], "grid": [meta["workers"] + (1 if jit else 0), 1, 1],
              "block": [128, 1, 1], "dynamic_shared_bytes": 0, "params": params, "mega": meta}
    kernel.update(kernel_extra)
    art = {"format": "tilemega.artifact", "version": 1, "name": meta["graph"], "chip": "sm_90a",
           "ptx": meta["graph"] + ".ptx", "cubin": None, "kernels": [kernel]}
    return write_artifact(tmp_path, art, ptx_text=ptx)


def test_cli_report_and_deadlock_exit_code(tmp_path, capsys):
    good = _artifact(tmp_path / "good", aot_jit())
    assert ms.main([good, "--runs", "5"]) == 0
    out = capsys.readouterr().out
    assert "mega-kernel 'g'" in out and "critical path" in out
    bad_meta = chain([[1, 0, 2]])
    path = _artifact(tmp_path / "bad", bad_meta)
    assert ms.main([path, "--runs", "5"]) == 1
    assert "dependency cycle" in capsys.readouterr().err
    proc = subprocess.run([sys.executable, "-m", "tilemega.runtime.mega_sim", path, "--runs", "2"],
                          capture_output=True, text=True, env={"PYTHONPATH": _PYTHON_DIR})
    assert proc.returncode == 1 and "task 'B' instance 0" in proc.stderr


# ---------------------------------------------------------------- timeline


def test_timeline_summary_of_a_simulated_run():
    meta = diamond()
    r = ms.simulate(meta)
    s = mt.summarize(r.rows(), meta)
    assert (s.span_ns, s.recorded, s.missing) == (650, 4, 0)
    assert s.busy_by_kind == {"body_C": 500, "body_B": 200, "body_A": 100, "body_D": 50}
    w0, w1 = s.workers
    assert (w0.busy_ns, w0.gaps_ns, w0.largest_gap_ns) == (350, 300, 300)
    assert w0.largest_gap_between == (1, 3)
    assert (w1.busy_ns, w1.gaps_ns, w1.idle_ns) == (500, 0, 150)
    text = mt.format_summary(s, meta)
    assert "span 650 ns, 4 entries recorded" in text
    assert "CTA 0: largest bubble 300 ns between B#0 and D#0" in text
    # GPU rows: absolute %globaltimer stamps, an entry never written (all zeros)
    rows = [(10_000 + a, 10_000 + b, c, 7) for a, b, c, _ in r.rows()]
    rows[3] = (0, 0, 0, 0)
    s = mt.summarize(rows, meta)
    assert (s.origin_ns, s.span_ns, s.missing) == (10_000, 600, 1)
    with pytest.raises(ValueError, match="expected 4 rows"):
        mt.summarize(rows[:3], meta)


def test_timeline_png(tmp_path):
    pytest.importorskip("matplotlib")
    meta = aot_jit()
    path = mt.render(ms.simulate(meta).rows(), meta, tmp_path / "t.png")
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    png = str(tmp_path / "cli.png")
    assert ms.main([_artifact(tmp_path / "a", meta), "--runs", "1", "--timeline", png]) == 0
    with open(png, "rb") as f:
        assert f.read(4) == b"\x89PNG"


def test_timeline_png_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match="needs matplotlib"):
        mt.render(ms.simulate(chain()).rows(), chain(), tmp_path / "t.png")


# ---------------------------------------------------------------- MegaKernel (no GPU)


class FakeCAI:
    def __init__(self, shape, typestr="<f4", ptr=0x7F0000000000):
        self.__cuda_array_interface__ = dict(shape=tuple(shape), typestr=typestr, strides=None,
                                             data=(ptr, False), version=3)


@pytest.fixture
def mk(tmp_path):
    return load_mega(_artifact(tmp_path, aot_jit()))


def test_megakernel_binding(mk):
    assert [p.name for p in mk.user_params] == ["x", "w", "out"]
    assert "5 entries on 2 workers, bound 0/3" in repr(mk)
    mk.bind({"w": FakeCAI([4])}, x=FakeCAI([4]))
    mk.bind(FakeCAI([4]), FakeCAI([4]), FakeCAI([4]))         # positional: x, w, out
    assert "bound 3/3" in repr(mk)


@pytest.mark.parametrize("call, message", [
    (lambda mk: mk.bind(w=FakeCAI([5])),
     r"g: parameter 'w' \(weight\): expected shape \[4\], got \[5\]"),
    (lambda mk: mk.bind(x=FakeCAI([4], "<i4")),
     r"parameter 'x' \(input\): expected dtype float32, got int32"),
    (lambda mk: mk.bind(out=[0.0] * 4), r"parameter 'out' \(output\): expected a CUDA tensor"),
    (lambda mk: mk.bind(y=FakeCAI([4])), r"no graph parameter 'y'; parameters: x, w, out"),
    (lambda mk: mk.bind(tmp=FakeCAI([4])), r"'tmp' is allocated by the runtime"),
    (lambda mk: mk.bind(mega_state=FakeCAI([4])), r"'mega_state' is allocated by the runtime"),
    (lambda mk: mk.bind(*[FakeCAI([4])] * 4), r"4 positional tensors for 3 params"),
    (lambda mk: mk.bind(FakeCAI([4]), x=FakeCAI([4])), r"'x' given both by position and by name"),
    (lambda mk: mk(x=FakeCAI([4])),
     r"missing tensor for parameters 'w' \(weight\), 'out' \(output\)"),
])
def test_megakernel_argument_errors(mk, call, message):
    with pytest.raises(ArgumentError, match=message):
        call(mk)


def test_failed_bind_stores_nothing(mk):
    with pytest.raises(ArgumentError):
        mk.bind(x=FakeCAI([4]), w=FakeCAI([3]))
    assert "bound 0/3" in repr(mk)


def test_megakernel_layout_is_checked(tmp_path):
    with pytest.raises(ValueError, match=r"grid \[2, 1, 1\] does not match 2 workers \+ 1 sched"):
        MegaKernel(load_artifact(_artifact(tmp_path / "a", aot_jit(), grid=[2, 1, 1])))
    path = _artifact(tmp_path / "b", aot_jit())
    doc = json.load(open(path))
    doc["kernels"][0]["params"][3]["shape"] = [18]
    json.dump(doc, open(path, "w"))
    with pytest.raises(ValueError, match=r"'mega_state' must be a int32 tensor of shape \[16\]"):
        load_mega(path)
    # Workers placed by SM: one claim word a CTA (2 workers + the scheduler).
    doc["kernels"][0]["mega"]["state_words"] = 19
    json.dump(doc, open(path, "w"))
    with pytest.raises(ValueError, match=r"'mega_state' must be a int32 tensor of shape \[19\]"):
        load_mega(path)
    doc["kernels"][0]["params"][3]["shape"] = [19]
    json.dump(doc, open(path, "w"))
    load_mega(path)
    del doc["kernels"][0]["mega"]["state_words"]
    doc["kernels"][0]["params"][3]["shape"] = [16]
    doc["kernels"][0]["params"][0]["role"] = "temp"
    json.dump(doc, open(path, "w"))
    with pytest.raises(ValueError, match=r"field 'kernels\[0\].params\[0\].role': expected one of"):
        load_artifact(path)
    del doc["kernels"][0]["params"][0]["role"]
    doc["kernels"][0]["mega"]["signals"][0] = [9]
    json.dump(doc, open(path, "w"))
    with pytest.raises(ValueError, match=r"field 'kernels\[0\].mega.signals\[0\]\[0\]': event 9"):
        load_artifact(path)


def test_megakernel_needs_a_mega_kernel(artifact_path):
    with pytest.raises(ValueError, match=r"expected one mega-kernel, found \[\]; pass kernel=NAME"):
        MegaKernel(artifact_path)
    with pytest.raises(ValueError, match="kernel 'add_one' has no 'mega' metadata"):
        MegaKernel(load_artifact(artifact_path), kernel="add_one")


# ---------------------------------------------------------------- the watchdog record


def _step_meta():
    meta = mega([("l3_o_proj", 1000)], [1] * 13, [(0, i) for i in range(8)],
                [[]] * 8, [[]] * 8, [[]] * 132, graph="step")
    meta["aot"][0] = list(range(8))
    meta["watchdog_ns"] = 2_000_000_000
    return meta


def _words(code, entry, event, cta, seen, expected):
    return [3, 0, 0, 0, code, entry, event, cta, seen, expected, 1, 0, 0, 0, 0, 0]


def test_decode_worker_timeout():
    err = decode_error(_words(1, 5, 12, 17, 3, 4), _step_meta())
    assert isinstance(err, MegaKernelError)
    assert str(err) == ("mega-kernel 'step' watchdog: worker 17 waited 2.0 s on event 'ev12' "
                        "(counter 3, expected 4) before task 'l3_o_proj' instance 5; "
                        "the kernel stopped")
    assert (err.code, err.cta, err.entry, err.event, err.seen, err.expected) == (1, 17, 5, 12, 3, 4)
    assert err.kind == "worker wait timed out"


def test_decode_other_records():
    meta = _step_meta()
    assert decode_error([0] * 16, meta) is None
    assert str(decode_error(_words(2, 6, 2, 132, 0, 1), meta)) == (
        "mega-kernel 'step' watchdog: the scheduler (CTA 132) waited 2.0 s on event 'ev2' "
        "(counter 0, expected 1) before publishing task 'l3_o_proj' instance 6; the kernel stopped")
    assert str(decode_error(_words(3, -1, -1, 4, 1, 2), meta)) == (
        "mega-kernel 'step' watchdog: worker 4 waited 2.0 s for the JIT queue "
        "(counter 1, expected 2); the kernel stopped")
    meta["watchdog_ns"] = 50_000_000
    assert "waited 50 ms" in str(decode_error(_words(1, 0, 0, 0, 0, 1), meta))
    assert "unknown error code 9" in str(decode_error(_words(9, 0, 0, 0, 0, 1), meta))


def test_check_raises_from_the_state_words(mk, monkeypatch):
    monkeypatch.setattr(mk, "state", lambda: _words(1, 4, 3, 1, 0, 1))
    with pytest.raises(MegaKernelError, match=r"worker 1 waited 2.0 s on event 'ev3' .* "
                                              r"before task 'J' instance 1"):
        mk.check()
    monkeypatch.setattr(mk, "state", lambda: [7] + [0] * 15)
    mk.check()
    assert mk.epoch == 7


def test_residency_error_names_the_limit():
    meta = aot_jit()                                  # 2 workers + the scheduler
    assert residency_error(meta, "g", 3, 256, 0, sms=1, per_sm=3) is None
    err = residency_error(meta, "g", 3, 256, 4096, sms=1, per_sm=2, device=0)
    assert isinstance(err, LaunchError)
    assert str(err) == ("mega-kernel 'g' needs all of its 3 CTAs (2 workers + 1 scheduler) "
                        "resident at once, but device 0 keeps at most 2 (1 SMs x 2 CTAs of "
                        "256 threads and 4096 bytes of dynamic shared memory per SM): recompile "
                        "with at most 1 workers (and mega_max_ctas=2)")
    big = dict(meta, workers=2047, jit=[])
    assert "(2047 workers) resident at once, but this device keeps at most 1056 (132 SMs x 8 " \
        "CTAs of 256 threads per SM): recompile with at most 1056 workers" in \
        str(residency_error(big, "e", 2047, 256, 0, sms=132, per_sm=8))
    assert "cannot run on this device at all" in str(residency_error(meta, "g", 3, 1024, 0,
                                                                     sms=132, per_sm=0))


# ---------------------------------------------------------------- MegaKernel on a GPU


def _gpu_reason():
    try:
        import cuda.bindings.driver  # noqa: F401
        import torch
    except ImportError as exc:
        return f"no CUDA GPU / cuda-python here ({exc})"
    if not torch.cuda.is_available():
        return "no CUDA GPU / cuda-python here (torch.cuda.is_available() is False)"
    return None


_GPU_REASON = _gpu_reason()
gpu = pytest.mark.skipif(_GPU_REASON is not None, reason=_GPU_REASON or "")

# A stand-in for a compiled mega-kernel with the aot_jit() params. CTA 0 thread 0:
# if x[0] < 0 it writes a watchdog record (worker 1, entry 4, event 3, counter 0
# of 1); else out[0] = x[0] * w[0] + tables[0], out[1] = tmp[0], tmp[0] += 1,
# state[0] += 1 (the epoch) and timeline[1] = 22.
FAKE_MEGA_PTX = r"""
.version 8.0
.target sm_90a
.address_size 64

.visible .entry g(
    .param .u64 g_param_0, .param .u64 g_param_1, .param .u64 g_param_2,
    .param .u64 g_param_3, .param .u64 g_param_4, .param .u64 g_param_5,
    .param .u64 g_param_6, .param .u64 g_param_7
)
{
    .reg .pred %p<3>;
    .reg .b32 %r<8>;
    .reg .f32 %f<8>;
    .reg .b64 %rd<10>;

    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %tid.x;
    or.b32 %r3, %r1, %r2;
    setp.ne.u32 %p1, %r3, 0;
    @%p1 bra DONE;
    ld.param.u64 %rd1, [g_param_0];
    ld.param.u64 %rd2, [g_param_1];
    ld.param.u64 %rd3, [g_param_2];
    ld.param.u64 %rd4, [g_param_3];
    ld.param.u64 %rd5, [g_param_4];
    ld.param.u64 %rd6, [g_param_6];
    ld.param.u64 %rd7, [g_param_7];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd3, %rd3;
    cvta.to.global.u64 %rd4, %rd4;
    cvta.to.global.u64 %rd5, %rd5;
    cvta.to.global.u64 %rd6, %rd6;
    cvta.to.global.u64 %rd7, %rd7;
    ld.global.f32 %f1, [%rd1];
    setp.lt.f32 %p2, %f1, 0f00000000;
    @%p2 bra FAIL;
    ld.global.f32 %f2, [%rd2];
    ld.global.u32 %r4, [%rd5];
    cvt.rn.f32.s32 %f3, %r4;
    fma.rn.f32 %f4, %f1, %f2, %f3;
    st.global.f32 [%rd3], %f4;
    ld.global.f32 %f5, [%rd4];
    st.global.f32 [%rd3+4], %f5;
    add.f32 %f6, %f5, 0f3F800000;
    st.global.f32 [%rd4], %f6;
    ld.global.u32 %r5, [%rd6];
    add.s32 %r5, %r5, 1;
    st.global.u32 [%rd6], %r5;
    mov.u64 %rd8, 22;
    st.global.u64 [%rd7+8], %rd8;
    bra DONE;
FAIL:
    mov.u32 %r6, 1;
    st.global.u32 [%rd6+16], %r6;
    st.global.u32 [%rd6+28], %r6;
    st.global.u32 [%rd6+36], %r6;
    mov.u32 %r6, 4;
    st.global.u32 [%rd6+20], %r6;
    mov.u32 %r6, 3;
    st.global.u32 [%rd6+24], %r6;
    mov.u32 %r6, 0;
    st.global.u32 [%rd6+32], %r6;
DONE:
    ret;
}
"""


@pytest.mark.gpu
@gpu
def test_megakernel_launch_check_reset_on_gpu(tmp_path):
    import torch
    # 64 KiB of dynamic shared memory: the launch must raise the function's limit first
    mk = load_mega(_artifact(tmp_path, aot_jit(), ptx=FAKE_MEGA_PTX, timeline=True,
                             dynamic_shared_bytes=64 * 1024))
    x = torch.full((4,), 2.0, device="cuda")
    w = torch.full((4,), 3.0, device="cuda")
    out = torch.zeros(4, device="cuda")
    mk.bind(w=w)
    mk(x=x, out=out)
    assert mk.meta["tables"][0] == 7
    assert out[:2].tolist() == [2.0 * 3.0 + 7, 0.0]    # tables uploaded, scratch zeroed
    assert mk.epoch == 1
    mk(x=x)
    assert out[1].item() == 1.0 and mk.epoch == 2       # scratch persists between launches
    assert mk.kernel._fast is not None and mk.kernel._fast.devices   # the fast path launched
    rows = mk.timeline()
    assert rows.shape == (5, 4) and rows[0, 1] == 22
    x.fill_(-1.0)
    mk.launch()
    with pytest.raises(MegaKernelError, match=r"worker 1 waited 2.0 s on event 'ev3' \(counter 0, "
                                              r"expected 1\) before task 'J' instance 1"):
        mk.check()
    mk.reset()
    assert mk.state() == [0] * 16
    mk.check()


# ---------------------------------------------------------------- hostile artifacts


def _pack_tables(meta):
    """`tables` and `table_sections` of `meta` as convert-mega-to-gpu packs them
    (TaskTables.cpp). Any case fits; case = task + 7 here makes tables[0]
    (entry 0's `case | task << 16`) 7, which the GPU stand-in kernel adds."""
    entries, waits, signals = meta["entries"], meta["waits"], meta["signals"]
    n, triggers = len(entries["task"]), [ev["trigger"] for ev in meta["events"]]

    def offsets(lists):
        out = [0]
        for item in lists:
            out.append(out[-1] + len(item))
        return out

    def record(e):
        w = waits[e][0] if waits[e] else -1
        return [(entries["task"][e] + 7) | (entries["task"][e] << 16), entries["instance"][e],
                len(waits[e]), w, triggers[w] if w >= 0 else 0, len(signals[e]),
                signals[e][0] if signals[e] else -1, e]

    sections = [("records", [v for e in range(n) for v in record(e)]),
                ("aot_records", [v for lst in meta["aot"] for e in lst for v in record(e)]),
                ("entry_case", [t + 7 for t in entries["task"]]),
                ("entry_task", list(entries["task"])),
                ("entry_instance", list(entries["instance"])),
                ("wait_offsets", offsets(waits)), ("waits", [v for w in waits for v in w]),
                ("signal_offsets", offsets(signals)),
                ("signals", [v for s in signals for v in s]), ("triggers", triggers),
                ("aot_offsets", offsets(meta["aot"])),
                ("aot", [e for lst in meta["aot"] for e in lst]), ("jit", list(meta["jit"]))]
    tables, at = [], {}
    for name, words in sections:
        at[name] = len(tables)
        tables += words
    return tables or [0], at


def _hostile_base(tmp_path):
    """A sound artifact of aot_jit() with real tables; returns (json path, doc)."""
    path = _artifact(tmp_path, aot_jit(), ptx=FAKE_MEGA_PTX)
    return path, json.load(open(path))


def _set(path, value):
    """doc -> doc with `value` at the key path `path` (a tuple)."""
    def mutate(doc):
        obj = doc
        for key in path[:-1]:
            obj = obj[key]
        obj[path[-1]] = value(obj[path[-1]]) if callable(value) else value
    return mutate


def _mega(path, value):
    return _set(("kernels", 0, "mega") + path, value)


_DROP = object()


def _without(path):
    def mutate(doc):
        obj = doc
        for key in path[:-1]:
            obj = obj[key]
        del obj[path[-1]]
    return mutate


# (mutation of the JSON document, regular expression of the ValueError)
HOSTILE = {
    "ptx escapes with ..": (_set(("ptx",), "../../x.ptx"),
                            r"field 'ptx': file name '../../x.ptx' has a '..'"),
    "ptx absolute": (_set(("ptx",), "/etc/passwd"), r"field 'ptx': .* is absolute"),
    "ptx backslash ..": (_set(("ptx",), "sub\\..\\..\\x.ptx"), r"field 'ptx': .* '..'"),
    "ptx drive letter": (_set(("ptx",), "C:x.ptx"), r"field 'ptx': .* is absolute"),
    "ptx NUL": (_set(("ptx",), "g.ptx\0.txt"), r"field 'ptx': .* NUL"),
    "cubin escapes": (_set(("cubin",), "../g.cubin"), r"field 'cubin': .* '..'"),
    "huge dynamic shared memory": (_set(("kernels", 0, "dynamic_shared_bytes"), 2**40),
                                   r"field 'kernels\[0\].dynamic_shared_bytes': 1099511627776"),
    "section past the end": (_mega(("table_sections", "jit"), lambda v: v + 5),
                             r"field 'kernels\[0\].mega.table_sections.jit': section starts"),
    "tables truncated": (_mega(("tables",), lambda t: t[:-1]),
                         r"table_sections.jit': section \[\d+, \d+\) ends past the end"),
    "tables too long": (_mega(("tables",), lambda t: t + [0]),
                        r"field 'kernels\[0\].mega.tables': holds \d+ words but its sections end"),
    "section missing": (_without(("kernels", 0, "mega", "table_sections", "triggers")),
                        r"table_sections.triggers': missing"),
    "unknown section": (_mega(("table_sections", "extra"), 0),
                        r"table_sections': unknown sections \['extra'\]"),
    "sections not an object": (_mega(("table_sections",), [0]),
                               r"table_sections': expected an object"),
    "negative section offset": (_mega(("table_sections", "records"), -8),
                                r"table_sections.records': expected an integer >= 0"),
    "table event out of range": (
        lambda doc: doc["kernels"][0]["mega"]["tables"].__setitem__(
            doc["kernels"][0]["mega"]["table_sections"]["waits"], 99),
        r"mega.tables': section 'waits' word 0 is 99, but the lists say 2"),
    "table record corrupted": (
        lambda doc: doc["kernels"][0]["mega"]["tables"].__setitem__(3, 1000),
        r"mega.tables': section 'records' record 0 \(entry 0\)"),
    "table word not int32": (_mega(("tables", 2), 2**31), r"mega.tables\[2\]': expected an int32"),
    "negative count": (_mega(("num_entries",), -1), r"mega.num_entries': is -1 but the tables"),
    "huge count": (_mega(("num_events",), 10**12), r"mega.num_events': is 1000000000000"),
    "trigger beyond int32": (_mega(("events", 0, "trigger"), 2**40),
                             r"mega.events\[0\].trigger': 1099511627776 does not fit"),
    "wait on a missing event": (_mega(("waits", 2), [99]),
                                r"mega.waits\[2\]\[0\]': event 99 out of range \[0, 4\)"),
    "aot entry out of range": (_mega(("aot", 0, 0), 50),
                               r"mega.aot\[0\]\[0\]': entry 50 out of range \[0, 5\)"),
    "aot lists vs workers": (_mega(("aot",), lambda a: a + [[]]),
                             r"mega.aot': expected 2 items, got 3"),
    "jit entry out of range": (_mega(("jit", 0), 5), r"mega.jit\[0\]': entry 5 out of range"),
    "entries lengths differ": (_mega(("entries", "instance"), lambda v: v[:-1]),
                               r"mega.entries.instance': expected 5 items, got 4"),
    "negative watchdog": (_mega(("watchdog_ns",), -1), r"mega.watchdog_ns': expected an integer"),
    "no workers": (_mega(("workers",), 0), r"mega.workers': expected an integer >= 1"),
    "threads zero": (_mega(("threads",), 0), r"mega.threads': expected an integer >= 1"),
    "no table_sections": (_without(("kernels", 0, "mega", "table_sections")),
                          r"kernel 'g': field 'mega.table_sections' missing"),
    "threads vs block": (_mega(("threads",), 256),
                         r"kernel 'g': block \[128, 1, 1\] does not match the 256 threads"),
    "mega_tables shape": (_set(("kernels", 0, "params", 1, "shape"), [10**9]),
                          r"'mega_tables' must be a int32 tensor of shape \[\d+\]"),
    "argument table size": (_set(("kernels", 0, "params", 0, "shape"), [3]),
                           r"'mega_args' must be a int64 tensor of shape \[4\]"),
    "graph args missing": (_without(("kernels", 0, "mega", "args")),
                           r"field 'kernels\[0\].mega.args': missing"),
    "graph arg dtype": (_set(("kernels", 0, "mega", "args", 1, "dtype"), "float8"),
                        r"field 'kernels\[0\].mega.args\[1\].dtype': unknown dtype"),
    "graph arg named twice": (_set(("kernels", 0, "mega", "args", 1, "name"), "x"),
                              r"mega.args\[1\].name': duplicate argument name 'x'"),
    "graph arg as a runtime buffer": (_set(("kernels", 0, "mega", "args", 1, "role"), "runtime"),
                                      r"mega.args\[1\].role': the runtime buffers are params"),
    "graph params beside the buffers": (
        _set(("kernels", 0, "params"), lambda p: [dict(p[0], name="x")] + p),
        r"the params must be \['mega_args', 'mega_tables'"),
    "grid vs workers": (_set(("kernels", 0, "grid"), [2, 1, 1]),
                        r"grid \[2, 1, 1\] does not match 2 workers \+ 1 scheduler"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_artifact_names_the_field(tmp_path, case):
    mutate, message = HOSTILE[case]
    path, doc = _hostile_base(tmp_path)
    load_mega(path)                                    # the base is sound
    mutate(doc)
    json.dump(doc, open(path, "w"))
    with pytest.raises(ValueError, match=message) as info:
        load_mega(path)
    assert path in str(info.value)                     # names the file


def test_hostile_files(tmp_path, monkeypatch):
    from tilemega.runtime import driver

    def untouched():
        raise AssertionError("the driver was reached")

    path, doc = _hostile_base(tmp_path / "a")
    folder = os.path.dirname(path)
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:                         # truncated JSON
        f.write(text[: len(text) // 2])
    with pytest.raises(ValueError, match=r"g.json: not valid JSON"):
        load_artifact(path)
    outside = tmp_path / "outside.ptx"                 # a symlink out of the folder
    outside.write_text(FAKE_MEGA_PTX)
    os.symlink(outside, os.path.join(folder, "link.ptx"))
    json.dump(dict(doc, ptx="link.ptx"), open(path, "w"))
    with pytest.raises(ValueError, match=r"field 'ptx': file 'link.ptx' resolves to .*outside"):
        load_artifact(path)
    json.dump(doc, open(path, "w"))
    ptx = os.path.join(folder, "g.ptx")
    open(ptx, "w").close()                             # empty PTX
    with pytest.raises(ValueError, match=r"field 'ptx': file 'g.ptx' is empty"):
        load_artifact(path)
    monkeypatch.setattr(driver, "cuda", untouched)
    bad_code = {
        "truncated": (FAKE_MEGA_PTX[: len(FAKE_MEGA_PTX) // 2], r"the file is truncated"),
        "other kernel": (FAKE_MEGA_PTX.replace(".entry g(", ".entry h("),
                         r"no '.entry g' for kernels\[0\]; the PTX defines \['h'\]"),
        "fewer threads": (FAKE_MEGA_PTX.replace(")\n{", ")\n.maxntid 64, 1, 1\n{", 1),
                          r"at most \[64, 1, 1\] threads \(.maxntid\) but kernels\[0\].block is "
                          r"\[128, 1, 1\]"),
        "other block": (FAKE_MEGA_PTX.replace(")\n{", ")\n.reqntid 256\n{", 1),
                        r"exactly \[256, 1, 1\] threads \(.reqntid\)"),
        "binary": (FAKE_MEGA_PTX.replace("ret;", "ret;\xe9"), r"non-ASCII byte"),
        "not PTX": ("hello {}", r"no .version directive"),
    }
    for name, (text, message) in bad_code.items():
        with open(ptx, "w", encoding="latin-1") as f:
            f.write(text)
        with pytest.raises(ValueError, match=r"g.json: field 'ptx' .*" + message):
            load_artifact(path).load(0)
    with open(ptx, "w") as f:
        f.write(FAKE_MEGA_PTX.replace(")\n{", ")\n.maxntid 128, 1, 1\n{", 1))
    with open(os.path.join(folder, "g.cubin"), "wb") as f:
        f.write(b"\x7fEL")                             # a truncated cubin
    json.dump(dict(doc, cubin="g.cubin"), open(path, "w"))
    with pytest.raises(ValueError, match=r"field 'cubin': .*g.cubin is not an ELF file \(3 bytes"):
        load_artifact(path).load(0)


# ---------------------------------------------------------------- concurrent launches


@pytest.fixture
def ordered(mk, monkeypatch):
    """mk with the driver's stream/event calls and the kernel launch recorded."""
    import contextlib
    import threading
    import time
    from tilemega.runtime import driver
    log, capturing, running = [], set(), threading.Lock()

    def launch_kernel(*args, stream):
        assert running.acquire(False), "two launches of one MegaKernel overlapped"
        time.sleep(0.002)
        log.append(("launch", stream))
        running.release()

    launch_kernel.bind_launch = lambda args: None    # no packed launch: every one goes here
    monkeypatch.setattr(mk, "_arguments", lambda: ["args"])
    monkeypatch.setattr(mk, "_write_arg_table", lambda stream: log.append(("args", stream)))
    monkeypatch.setattr(mk, "check_resident", lambda: setattr(mk, "_resident_on", mk._device))
    monkeypatch.setattr(mk, "kernel", launch_kernel)
    monkeypatch.setattr(driver, "device_context", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(driver, "stream_is_capturing", lambda s: s in capturing)
    monkeypatch.setattr(driver, "event_create", lambda: "ev")
    monkeypatch.setattr(driver, "event_destroy", lambda ev: None)
    monkeypatch.setattr(driver, "event_record", lambda ev, s: log.append(("record", ev, s)))
    monkeypatch.setattr(driver, "stream_wait_event", lambda s, ev: log.append(("wait", s, ev)))
    return mk, log, capturing


def test_launch_on_another_stream_waits_for_the_previous_one(ordered):
    mk, log, capturing = ordered
    mk.launch(5)
    mk.launch(5)                              # same stream: stream order is enough
    mk.launch(7)                              # another stream: waits for stream 5's work
    capturing.add(9)
    mk.launch(9)                              # into a CUDA graph: no dependency on uncaptured work
    mk.launch(7)                              # after a captured launch: nothing ran there
    capturing.clear()
    mk.launch(types.SimpleNamespace(cuda_stream=11))
    # The argument table is written once, on the first launch's stream.
    assert log == [("args", 5), ("launch", 5), ("launch", 5), ("record", "ev", 5), ("wait", 7, "ev"),
                   ("launch", 7), ("launch", 9), ("launch", 7), ("record", "ev", 7),
                   ("wait", 11, "ev"), ("launch", 11)]


def test_launches_from_two_threads_never_overlap(ordered):
    import threading
    mk, log, _ = ordered
    errors = []

    def worker(stream):
        try:
            for _ in range(5):
                mk.launch(stream)
        except AssertionError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in (21, 22)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    launches = [entry for entry in log if entry[0] == "launch"]
    assert len(launches) == 10
    # every change of stream between consecutive launches is preceded by a wait
    for before, after in zip(log, log[1:]):
        if before[0] == "launch" and after[0] == "launch":
            assert before[1] == after[1]


def test_binding_fills_the_argument_table_words(mk):
    """A bound tensor's word is its address; a scalar's, its bits (low
    bits, what mega.graph_arg truncates to)."""
    from tilemega.runtime.args import check_scalar
    from tilemega.runtime.mega import _scalar_word
    from tilemega.runtime.metadata import ParamSpec

    mk.bind(x=FakeCAI([4], ptr=0x7F0000001000), w=FakeCAI([4], ptr=0x7F0000002000))
    assert mk._bound_ptrs == {"x": 0x7F0000001000, "w": 0x7F0000002000}
    assert [p.name for p in mk.graph_params] == ["x", "w", "out", "tmp"]
    f32 = ParamSpec("alpha", "scalar", "float32")
    assert _scalar_word(check_scalar(f32, 1.0, "alpha")) == 0x3F800000
    i32 = ParamSpec("n", "scalar", "int32")
    assert _scalar_word(check_scalar(i32, -1, "n")) == 0xFFFFFFFF
    i64 = ParamSpec("n", "scalar", "int64")
    assert _scalar_word(check_scalar(i64, -2, "n")) == -2


class _FakeGraphDriver:
    """The driver calls LaunchGraph makes, recorded (no GPU)."""

    class CUstreamCaptureMode:
        CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1

    def __init__(self, launch_error=0):
        self.log, self.launch_error = [], launch_error

    def CUstream(self, handle):
        return ("stream", handle)

    def cuStreamBeginCapture(self, cu, mode):
        self.log.append(("begin", cu, mode))
        return (0,)

    def cuStreamEndCapture(self, cu):
        self.log.append(("end", cu))
        return (0, "graph")

    def cuGraphInstantiate(self, graph, flags):
        self.log.append(("instantiate", graph))
        return (0, "exec")

    def cuGraphDestroy(self, graph):
        self.log.append(("destroy", graph))
        return (0,)

    def cuGraphUpload(self, exec_, cu):
        self.log.append(("upload", exec_, cu))
        return (0,)

    def cuGraphLaunch(self, exec_, cu):
        self.log.append(("launch", exec_, cu))
        return (self.launch_error,)

    def cuGraphExecDestroy(self, exec_):
        return (0,)

    def cuGetErrorName(self, err):
        return (0, b"CUDA_ERROR_INVALID_VALUE")

    def cuGetErrorString(self, err):
        return (0, b"invalid argument")


def test_launch_graph_captures_once_and_launches_with_one_call(monkeypatch):
    from tilemega.runtime import driver

    fake = _FakeGraphDriver()
    monkeypatch.setattr(driver, "_cuda", fake)
    enqueued = []
    g = driver.LaunchGraph(7, lambda: enqueued.append("kernel"))
    assert enqueued == ["kernel"]
    assert fake.log == [("begin", ("stream", 7), 1), ("end", ("stream", 7)),
                        ("instantiate", "graph"), ("destroy", "graph"),
                        ("upload", "exec", ("stream", 7))]
    fake.log.clear()
    g.launch(7)
    g.launch(9)
    assert fake.log == [("launch", "exec", ("stream", 7)), ("launch", "exec", ("stream", 9))]
    fake.launch_error = 1
    with pytest.raises(LaunchError, match="cuGraphLaunch failed"):
        g.launch(7)


def test_launch_graph_ends_the_capture_when_the_enqueue_fails(monkeypatch):
    from tilemega.runtime import driver

    fake = _FakeGraphDriver()
    monkeypatch.setattr(driver, "_cuda", fake)

    def fails():
        raise ArgumentError("missing tensor")

    with pytest.raises(ArgumentError):
        driver.LaunchGraph(7, fails)
    assert [entry[0] for entry in fake.log] == ["begin", "end", "destroy"]


def test_decode_follows_a_stalled_event_upstream_to_its_cause():
    # A -> ev0 -> B -> ev1 -> C: C's worker timed out on ev1 because B's
    # input ev0 never fired (A did not run): the message says so.
    meta = chain()
    err = decode_error(_words(1, 2, 1, 0, 2, 3), meta, counters=[2, 2])
    assert str(err) == ("mega-kernel 'g' watchdog: worker 0 waited too long on event 'ev1' "
                        "(counter 2, expected 3) before task 'C' instance 0; its producers "
                        "wait for 'ev0'; 'ev0' is at 2 of 3; the kernel stopped")
    # ev0 fired: nothing upstream to blame, the message is the plain one.
    assert "producers" not in str(decode_error(_words(1, 2, 1, 0, 2, 3), meta, counters=[3, 2]))


def test_decode_names_the_rank_that_never_signalled():
    # Two ranks: entry 0 pushes to both ranks' words of the peer event
    # "pushed" (words 0, 1: one a sender), entry 1 waits for both and
    # signals ev2, entry 2 waits for ev2. Rank 0 ran alone: its word of
    # rank 1 stayed 0, and entry 2's worker timed out first.
    from tilemega.runtime import mega_meta as mm

    meta = mega([("push", 1), ("sum", 1), ("use", 1)], [1, 1, 1], [(0, 0), (1, 0), (2, 0)],
                [[], [0, 1], [2]], [[mm.PEER_SIGNAL_BIT | 0], [2], []], [[0, 1], [2]])
    meta["events"][0].update(name="pushed", sender=0)
    meta["events"][1].update(name="pushed", sender=1)
    meta["ranks"] = 2
    words = _words(1, 2, 2, 1, 0, 1)
    text = str(decode_error(words, meta, counters=[1, 0, 0], rank=0))
    assert text.endswith("before task 'use' instance 0; its producers wait for 'pushed (from "
                         "rank 1)'; 'pushed (from rank 1)' is at 0 of 1: rank 1 never "
                         "signalled it (is its kernel running?); the kernel stopped"), text
    # Rank 1 alone: rank 0's word is the one missing.
    assert "rank 0 never signalled" in str(decode_error(words, meta, counters=[0, 1, 0], rank=1))
    # A rank's own word is signalled by its own push, which waits for
    # nothing: the chain ends there, blaming no other rank.
    text = str(decode_error(words, meta, counters=[0, 1, 0], rank=0))
    assert "'pushed (from rank 0)' is at 0 of 1; the kernel stopped" in text, text
