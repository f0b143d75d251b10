"""The generation graph of one rank of several GPUs (models.generation_graph
with world > 1, issue 12): its tensors are the shards tensor_parallel.shard
makes plus the rank word and the inboxes, it compiles, the simulator proves
the 2-, 4- and 8-rank plans deadlock-free (a rank that never sends is named),
every rank's bindings reach the right peers' inboxes, and the settings the
ranks cannot serve are errors naming the argument. Needs the compiler."""
import copy

import numpy as np
import pytest

import tilemega
from tilemega.mega import generation_reference as ref
from tilemega.mega import tensor_parallel as tp
from tilemega.mega.models import ModelConfig, generation_graph
from tilemega.runtime import mega_sim as ms

SMALL = dict(layers=2, hidden=256, intermediate=512, heads=8, kv_heads=8, head_dim=64,
             vocab=1024, max_seq_len=256)


def rank_graph(world, **fields):
    return generation_graph(ModelConfig(**{**SMALL, **fields}), workers=8, world=world)


def bound_params(graph):
    return {t.name: (t.shape, t.dtype) for t in graph.tensors if t.role != "scratch"}


@pytest.fixture(scope="module")
def compiled():
    """world -> the compiled rank graph's mega kernel description."""
    out = {}
    for world in (2, 4, 8):
        art = tilemega.compile(rank_graph(world).to_mlir(), chip="sm_90a")
        (kernel,) = [k for k in art.kernels if "mega" in k]
        out[world] = kernel["mega"]
    return out


@pytest.mark.parametrize("world", [2, 4, 8])
def test_the_rank_graph_is_proven_deadlock_free(compiled, world):
    meta = compiled[world]
    assert meta["ranks"] == world
    report = ms.check_deadlock_free(meta, runs=5)
    assert report.proven and report.nominal.deadlock is None


def test_a_rank_that_never_sends_its_partials_is_a_deadlock_naming_it(compiled):
    """Rank 1's pick partials taken off its queues: rank 0's pick waits
    forever on the word rank 1 would have advanced, and the report says so."""
    meta = copy.deepcopy(ms.unroll_ranks(compiled[2]))
    names = [meta["tasks"][t]["name"] for t in meta["entries"]["task"]]
    lost = {e for e, n in enumerate(names) if n.startswith("r1:") and n.endswith("pick_partial")}
    assert lost, names
    meta["aot"] = [[e for e in q if e not in lost] for q in meta["aot"]]
    result = ms.simulate(meta)
    assert result.deadlock is not None
    text = result.deadlock.describe(meta)
    assert "pick_partials (from rank 1)" in text and "r0:" in text, text


@pytest.mark.parametrize("fields", [
    {},                                                               # group 1, tied
    dict(heads=14, kv_heads=2, qkv_bias=True, tie_embeddings=False),  # Qwen2's odd group
])
def test_the_rank_graph_takes_each_rank_its_shard(fields):
    world = 2
    cfg = ModelConfig(**{**SMALL, **fields})
    graph = generation_graph(cfg, workers=8, world=world)
    params = bound_params(graph)
    full = ref.make_numpy_tensors(cfg)
    shard = tp.shard(full, cfg, world, 0)
    extra = set(params) - set(shard)
    assert "rank" in extra and all(n == "rank" or "inbox" in n or ".to" in n or "_to" in n
                                   for n in extra), sorted(extra)
    for name in set(params) & set(shard):
        assert tuple(shard[name].shape) == tuple(params[name][0]), name
    # Everything of the shard the graph reads (the unsharded LM head is
    # `head` here, whether tied or not).
    assert set(shard) - set(params) <= {"lm_head"}, sorted(set(shard) - set(params))
    # Two all-reduces a layer and the pick's exchange.
    pushes = [t for t in graph.tasks if t.name.endswith("_push")]
    assert len(pushes) == 2 * cfg.layers
    assert graph.peer_events and all(v >= 1 for v in graph.peer_events.values())


def test_every_rank_is_bound_to_the_other_ranks_inboxes():
    world = 4
    cfg = ModelConfig(**SMALL)
    graph = generation_graph(cfg, workers=8, world=world)
    params = bound_params(graph)
    full = ref.make_numpy_tensors(cfg)
    shards = [tp.shard(full, cfg, world, r) for r in range(world)]

    def zeros(shape, dtype, rank):
        return np.zeros(shape, np.int32 if dtype == "int32" else np.float32)

    ranks = tp.bind_ranks(params, shards, world, zeros)
    for r, mine in enumerate(ranks):
        assert set(mine) == set(params)
        assert mine["rank"][0] == r
        # Own copies of the state the pick writes; weights shared.
        assert mine["gen"] is not shards[r]["gen"] and mine["tokens"] is not full["tokens"]
        assert mine["embed"] is full["embed"]
        for name, (q, inbox) in tp.peer_names(params, world).items():
            assert mine[name] is ranks[q][inbox]
    assert ranks[0]["pick.best_to3"] is ranks[3]["pick.best_inbox"]
    assert ranks[2]["l1.wd_sum.to0"] is ranks[0]["l1.wd_sum.inbox"]


def test_a_to_tensor_without_its_inbox_is_refused():
    with pytest.raises(ValueError, match="'x.to1'.*'x.inbox'"):
        tp.peer_names({"x.to1": ((2, 8), "bfloat16")}, 2)


@pytest.mark.parametrize("settings, ok", [
    (dict(), True), (dict(temperature=0.8), True), (dict(temperature=0.8, top_k=50), True),
    (dict(temperature=0.8, top_k=64, top_p=0.9), True),
    (dict(temperature=0.8, top_p=0.9), False), (dict(temperature=1.0, top_k=65), False),
])
def test_the_ranks_pick_serves_greedy_temperature_and_top_k(settings, ok):
    if ok:
        tp.check_sampling(**settings)
    else:
        with pytest.raises(ValueError, match="top_k="):
            tp.check_sampling(**settings)


def test_a_world_the_graph_cannot_take_names_the_field_before_building():
    with pytest.raises(ValueError, match="num_key_value_heads"):
        rank_graph(4, heads=6, kv_heads=2)
    with pytest.raises(ValueError, match="vocab_size"):
        rank_graph(8, vocab=1000 + 4)
    with pytest.raises(ValueError, match="jit_attention"):
        generation_graph(ModelConfig(**SMALL), workers=8, world=2, jit_attention=True)


def test_the_issue_shapes_build_as_rank_graphs():
    """Llama-3.2-1B and the Llama-3.1-8B shape over 2 GPUs: the graphs build
    (compiled and run on the GPU machine)."""
    llama8b = ModelConfig(layers=32, hidden=4096, intermediate=14336, heads=32, kv_heads=8,
                          head_dim=128, vocab=128256)
    for cfg in (ModelConfig(), llama8b):
        graph = generation_graph(cfg, world=2)
        params = bound_params(graph)
        assert params["head"][0] == (cfg.vocab // 2, cfg.hidden)
        assert params[f"l{cfg.layers - 1}.wd"][0] == (cfg.hidden, cfg.intermediate // 2)
        assert graph.schedulers == 0 and graph.ranks == 2


def test_the_loopback_artifact_builds_and_its_ranks_bind_every_parameter(tmp_path):
    """examples/generation_tp.py's artifact (checked on a GPU machine): its
    kernel's user parameters are exactly what bind_ranks gives each rank."""
    import json
    import os
    import sys

    from tilemega.runtime import metadata

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    import generation_tp

    (path,) = generation_tp.build_all(str(tmp_path), ["gen_small_tp2"])
    with open(path) as f:
        spec = metadata.parse(json.load(f), path)
    (kernel,) = [k for k in spec.kernels if k.mega is not None]
    params = {p.name: (tuple(p.shape), p.dtype) for p in kernel.graph_args
              if p.role != "scratch"}
    cfg, world = generation_tp.config("gen_small_tp2"), 2
    full = ref.make_numpy_tensors(cfg)
    shards = [tp.shard(full, cfg, world, r) for r in range(world)]

    def zeros(shape, dtype, rank):
        return np.zeros(shape, np.int32 if dtype == "int32" else np.float32)

    for mine in tp.bind_ranks(params, shards, world, zeros):
        assert set(mine) == set(params)
        for name, (shape, _) in params.items():
            assert tuple(mine[name].shape) == shape, name


def test_a_lone_rank_stops_with_a_message_naming_the_missing_one(compiled):
    """Rank 0 launched alone (the loopback check's dead peer): every entry
    whose events can fire does; a later task's worker then times out on an
    event downstream of the all-reduce (what the H200 run reported), and the
    watchdog's message follows it upstream to the peer word rank 1 never
    signalled."""
    from tilemega.runtime import mega_meta as mm
    from tilemega.runtime.mega import decode_error

    meta = compiled[2]
    triggers = [e["trigger"] for e in meta["events"]]
    counters, ran = [0] * len(triggers), set()
    while True:
        ready = [e for e in range(len(meta["waits"])) if e not in ran and
                 all(counters[w] >= triggers[w] for w in meta["waits"][e])]
        if not ready:
            break
        for e in ready:
            ran.add(e)
            for v in meta["signals"][e]:
                counters[mm.signal_word(v)] += 1      # rank 0's own word of a peer event
    stalled = next(e for e in range(len(meta["waits"])) if e not in ran and
                   all("sender" not in meta["events"][w] for w in meta["waits"][e]))
    event = next(w for w in meta["waits"][stalled] if counters[w] < triggers[w])
    words = [1, 0, 0, 0, 1, stalled, event, 0, counters[event], triggers[event],
             1, 0, 0, 0, 0, 0]
    text = str(decode_error(words, meta, counters=counters, rank=0))
    assert "its producers wait for" in text and "(from rank 1)" in text, text
    assert "rank 1 never signalled it" in text, text
