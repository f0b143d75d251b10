"""Graphs of several ranks (issue 12) on the CPU: Graph.all_reduce compiles
to a persistent kernel per rank with peer events, the artifact's metadata
says how many ranks and which counter words belong to which sender, and the
simulator proves the 2-, 4- and 8-rank plans deadlock-free with the ranks
side by side, and names the rank of a worker that a bad schedule blocks."""
import copy

import pytest

pytest.importorskip("tilemega.ir", reason="the compiler package is not built")

import tilemega  # noqa: E402
from tilemega.mega.graph import Graph  # noqa: E402
from tilemega.runtime import mega_meta as mm  # noqa: E402
from tilemega.runtime import mega_sim  # noqa: E402


def all_reduce_meta(ranks, n=4096, workers=4):
    g = Graph("allreduce", workers=workers, threads=256, schedulers=0, ranks=ranks)
    x = g.input("x", [n])
    out = g.output("out", [n])
    g.all_reduce(x, out, name="ar")
    art = tilemega.compile(g.to_mlir(), chip="sm_90a", name=f"allreduce_r{ranks}")
    return art, art.kernels[0]["mega"]


@pytest.fixture(scope="module")
def metas():
    return {r: all_reduce_meta(r)[1] for r in (2, 4, 8)}


@pytest.mark.parametrize("ranks", [2, 4, 8])
def test_the_all_reduce_plan_is_proven_deadlock_free_on_every_rank_count(metas, ranks):
    meta = metas[ranks]
    assert meta["ranks"] == ranks
    # One counter word a sender for the peer event.
    assert [ev.get("sender") for ev in meta["events"]] == list(range(ranks))
    report = mega_sim.check_deadlock_free(meta, runs=25)
    assert report.proven and report.workers == 4 * ranks
    text = mega_sim.format_report(report)
    assert f"x {ranks} ranks" in text and "r0:" in text


def test_the_sum_waits_for_every_ranks_push(metas):
    meta = metas[2]
    unrolled = mega_sim.unroll_ranks(meta)
    push = [e for e in range(len(unrolled["entries"]["task"]))
            if unrolled["tasks"][unrolled["entries"]["task"][e]]["name"].endswith("ar_push")]
    result = mega_sim.simulate(meta, costs=None)
    ends = {e: result.end_ns[e] for e in push}
    for e, task in enumerate(unrolled["entries"]["task"]):
        if unrolled["tasks"][task]["name"].endswith("ar_sum"):
            # Every rank's sums start after every rank's pushes ended.
            assert result.start_ns[e] >= max(ends.values())


def test_a_sum_queued_before_its_ranks_push_is_a_deadlock_naming_the_ranks(metas):
    meta = copy.deepcopy(metas[2])
    # Worker 0 runs a sum before the push the other ranks wait for.
    tasks = [meta["tasks"][t]["name"] for t in meta["entries"]["task"]]
    push = [e for e, t in enumerate(tasks) if t.endswith("ar_push")]
    sums = [e for e, t in enumerate(tasks) if t.endswith("ar_sum")]
    meta["aot"] = [[sums[0], push[0]], [push[1], sums[1]]] + [[] for _ in meta["aot"][2:]]
    meta.pop("tables")
    meta.pop("table_sections")
    problems = mega_sim.static_problems(meta)
    assert problems and any("r0:" in p for p in problems), problems
    result = mega_sim.simulate(meta)
    assert result.deadlock is not None
    text = result.deadlock.describe(mega_sim.unroll_ranks(meta))
    assert "ar_pushed (from rank 0)" in text and "r1:" in text, text


def test_peer_signals_and_senders_are_validated(metas):
    meta = copy.deepcopy(metas[2])
    word = meta["signals"][0][0]
    assert mm.is_peer_signal(word) and mm.signal_word(word) == 0
    meta["signals"][0] = [mm.signal_word(word)]          # the peer bit lost
    with pytest.raises(ValueError, match=r"signals\[0\]\[0\]': 0: a peer event is signalled"):
        mm.validate(meta)
    meta = copy.deepcopy(metas[2])
    meta["events"][1]["sender"] = 3
    with pytest.raises(ValueError, match=r"events\[1\].sender': 3"):
        mm.validate(meta)
    meta = copy.deepcopy(metas[2])
    meta["ranks"] = 9
    with pytest.raises(ValueError, match=r"ranks': 9 is over 8"):
        mm.validate(meta)


def test_a_graph_of_one_rank_has_no_all_reduce():
    g = Graph("g", workers=2, threads=256)
    x = g.input("x", [2048])
    with pytest.raises(ValueError, match="one rank"):
        g.all_reduce(x, g.output("y", [2048]))
    with pytest.raises(ValueError, match="ranks must be 1 to 8"):
        Graph("g", workers=2, ranks=16)


def test_the_multi_rank_check_refuses_a_jit_queue(metas):
    meta = copy.deepcopy(metas[2])
    meta["jit"] = [meta["aot"][0].pop()]
    meta["num_jit"] = 1
    meta.pop("tables")
    meta.pop("table_sections")
    with pytest.raises(ValueError, match="schedulers 0"):
        mega_sim.unroll_ranks(meta)


class FakeTensor:
    """A CUDA-array-interface tensor with no device behind it (CPU tests)."""

    def __init__(self, shape, typestr, ptr=0x7F0000000000):
        self.__cuda_array_interface__ = dict(shape=tuple(shape), typestr=typestr, strides=None,
                                             data=(ptr, False), version=3)


def test_remote_tensors_bind_in_a_graph_of_several_ranks_after_the_own_ones(tmp_path):
    """MegaKernel.bind_remote (another GPU's inboxes): refused for a graph of
    one rank, before the rank's own tensors fix the kernel's device, and in
    another form than a dict or keywords."""
    from tilemega.runtime import ArgumentError, load_mega

    art, _ = all_reduce_meta(2)
    mk = load_mega(art.save(str(tmp_path / "r2")))
    with pytest.raises(ArgumentError, match="bind this rank's own tensors first"):
        mk.bind_remote({"ar.rank": FakeTensor([1], "<i4")})
    with pytest.raises(ArgumentError, match="takes a dict or keywords"):
        mk.bind_remote(FakeTensor([1], "<i4"))
    one = Graph("one", workers=2, threads=256, schedulers=0)
    x = one.input("x", [2048])
    one.add(x, x, one.output("y", [2048]))
    single = load_mega(tilemega.compile(one.to_mlir(), chip="sm_90a", name="one")
                       .save(str(tmp_path / "r1")))
    with pytest.raises(ArgumentError, match="a graph of one rank has no remote tensors"):
        single.bind_remote(x=FakeTensor([2048], "<f2"))
    with pytest.raises(ArgumentError, match="a graph of one rank has no peers to share"):
        single.use_events(FakeTensor([1], "<i4"))
