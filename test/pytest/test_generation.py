"""The generation engine without a GPU (issue 9, item 9): config checks that
name the field, graphs for every supported shape, the compiled graph's
tables and its schedule proven deadlock-free, the device state's rules,
the rope tables, the checkpoint loader on small safetensors files, the
artifact/config match and the CLI's argument errors."""

import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from tilemega.mega import generation_state as gs
from tilemega.mega import rope
from tilemega.mega.checkpoint import config_from_dict, fuse, hf_names, read_config, reader
from tilemega.mega.models import ModelConfig

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SMALL = dict(layers=2, hidden=256, intermediate=512, heads=4, kv_heads=2, head_dim=64,
             vocab=1000, max_seq_len=256)


# ---------------------------------------------------------------- configs


@pytest.mark.parametrize("field, value, message", [
    ("kv_heads", 3, "kv_heads: 3 does not divide heads"),
    ("kv_heads", 1, "a group of 32 query heads per kv head"),
    ("head_dim", 96, "head_dim: 96; 64 and 128 are supported"),
    ("hidden", 2000, "hidden: 2000 is not a multiple of 64"),
    ("intermediate", 8016, "intermediate: 8016 is not a multiple of 64"),
    ("max_seq_len", 40000, "max_seq_len: 40000: a multiple of 64 up to 32768"),
    ("max_seq_len", 1000, "max_seq_len: 1000"),
    ("vocab", 1 << 24, "vocab"),
    ("layers", 0, "layers: must be a positive int"),
    ("dtype", "float16", "dtype"),
])
def test_a_config_the_graph_cannot_serve_names_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**{field: value}).check()


def _graph(rope_in_attention=True, **fields):
    pytest.importorskip("tilemega.ir", reason="the compiler package is not built")
    from tilemega import mega
    return mega.generation_graph(ModelConfig(**{**SMALL, **fields}), workers=8,
                                 rope_in_attention=rope_in_attention)


@pytest.mark.parametrize("heads, kv_heads, head_dim", [
    (4, 4, 64), (4, 2, 64), (6, 2, 64), (14, 2, 64), (7, 1, 64), (16, 1, 64),
    (8, 2, 128), (28, 4, 128), (32, 2, 128)])
def test_the_graph_builds_for_every_gqa_group_and_head_dim(heads, kv_heads, head_dim):
    g = _graph(heads=heads, kv_heads=kv_heads, head_dim=head_dim, hidden=heads * 64)
    # embed, 6 tasks a layer (RoPE inside the attention's partials), the LM
    # head and the two tasks of the pick
    assert len(g.tasks) == 1 + 6 * 2 + 1 + 2
    split = [t for t in g.tasks if t.name.endswith("l0_attn_split")][0]
    assert split.body.name.startswith("rope_attn_at_")
    assert len(_graph(heads=heads, kv_heads=kv_heads, head_dim=head_dim, hidden=heads * 64,
                      rope_in_attention=False).tasks) == 1 + 7 * 2 + 1 + 2
    assert not any(t.variable for t in g.tasks)      # balanced: all on the AOT queues
    names = [t.body.name for t in g.tasks]
    assert names[0].startswith("embed_") and names[-1].startswith("pick_advance_")


def test_fused_glu_puts_the_activation_in_the_gate_up_projection():
    pytest.importorskip("tilemega.ir", reason="the compiler package is not built")
    from tilemega import mega
    cfg = ModelConfig(**SMALL)
    g = mega.generation_graph(cfg, workers=8)       # the default on one GPU
    wgu = next(t for t in g.tasks if t.name.endswith("l0_wgu"))
    wd = next(t for t in g.tasks if t.name.endswith("l0_wd"))
    assert wgu.body.name.startswith("gemv_rms_glu_") and wgu.args[-1].name == "l0.act"
    assert wd.body.name.startswith("gemv_") and "silu" not in wd.body.name
    assert wd.args[1].name == "l0.act" and wgu.args[-1].shape == (cfg.intermediate,)
    # Opted out, the down projection recomputes the activation from gu.
    plain = mega.generation_graph(cfg, workers=8, fused_glu=False)
    assert [t.body.name for t in plain.tasks if t.name.endswith("l0_wd")][0].startswith(
        "gemv_silu_")
    # Over ranks the default keeps the activation in the down projection.
    ranks = mega.generation_graph(ModelConfig(**{**SMALL, "heads": 4, "kv_heads": 2}), world=2)
    assert any(t.body.name.startswith("gemv_silu_") for t in ranks.tasks)
    with pytest.raises(ValueError, match="fused_glu: graphs of several ranks"):
        mega.generation_graph(ModelConfig(**{**SMALL, "heads": 4, "kv_heads": 2}), world=2,
                              fused_glu=True)


def test_qwen2_shape_gets_biases_an_untied_head_and_128_threads():
    g = _graph(hidden=896, intermediate=4864, heads=14, kv_heads=2, qkv_bias=True,
               tie_embeddings=False)
    assert g.threads == 128
    names = {t.name for t in g.tensors}
    assert {"l0.bqkv", "l1.bqkv", "lm_head"} <= names
    head = next(t for t in g.tasks if t.name.endswith("lm_head"))
    assert head.args[0].name == "lm_head"


def test_tied_embeddings_read_the_embedding_in_the_lm_head():
    g = _graph()
    head = next(t for t in g.tasks if t.name.endswith("lm_head"))
    assert head.args[0].name == "embed" and "lm_head" not in {t.name for t in g.tensors}


@pytest.fixture(scope="module")
def small_artifact(tmp_path_factory):
    pytest.importorskip("tilemega.ir", reason="the compiler package is not built")
    import tilemega
    from tilemega import mega

    graph = mega.generation_graph(ModelConfig(**SMALL), workers=8)
    art = tilemega.compile(graph.to_mlir(), chip="sm_90a", name="gen_test")
    return art, art.save(str(tmp_path_factory.mktemp("gen")))


def test_generation_kernel_keeps_its_fragments_in_registers(small_artifact):
    """No stack in the PTX LLVM emits (tile-scalarize-fragments) and, where
    ptxas assembles it (everywhere but under TILEMEGA_NO_PTXAS=1), no stack
    and no spills after register allocation either (nvvm.minctasm)."""
    import re

    from ptxas_policy import ptxas_checks_enabled

    art = small_artifact[0]
    assert ".local" not in art.ptx, re.findall(r".*\.local.*", art.ptx)[:3]
    if ptxas_checks_enabled():
        assert re.search(r"\b0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
                         art.ptxas_log), art.ptxas_log


@pytest.mark.parametrize("options", [dict(mega_early_loads=False), dict(mega_stream_units=True),
                                     dict(mega_early_loads=False, mega_stream_units=True),
                                     dict(mega_fresh_thread_ids=False),
                                     dict(mega_early_depth=1)])
def test_each_weight_streaming_option_changes_the_kernel_and_keeps_it_in_registers(
        small_artifact, options):
    """Early loads and per-body thread ids (on by default), streamed units
    and a shallower early prologue (opt-in: no faster on the GPU) reach the
    kernel through
    tilemega.compile either way, and it still assembles without stack or
    spills."""
    import re

    import tilemega
    from ptxas_policy import ptxas_checks_enabled
    from tilemega import mega

    graph = mega.generation_graph(ModelConfig(**SMALL), workers=8)
    assert any(t.get("units_per_task", 1) > 1
               for t in small_artifact[0].kernels[-1]["mega"]["tasks"]), \
        "no task of several units: nothing to stream"
    art = tilemega.compile(graph.to_mlir(), chip="sm_90a", name="gen_test", **options)
    assert art.ptx != small_artifact[0].ptx
    assert ".local" not in art.ptx
    if ptxas_checks_enabled():
        assert re.search(r"\b0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
                         art.ptxas_log), art.ptxas_log
        if options.get("mega_fresh_thread_ids") is False:
            # Without them every body's per-thread addresses are hoisted
            # before the worker loop and live across all bodies.
            def registers(log):
                return int(re.search(r"Used (\d+) registers", log).group(1))
            assert registers(art.ptxas_log) > registers(small_artifact[0].ptxas_log) + 16, \
                (art.ptxas_log, small_artifact[0].ptxas_log)


def test_compiled_graph_is_proven_deadlock_free_with_attention_on_the_aot_queues(small_artifact):
    from tilemega.runtime import mega_sim as ms

    meta = small_artifact[0].kernels[0]["mega"]
    assert not meta["jit"]
    report = ms.check_deadlock_free(meta, runs=20)
    assert report.proven and report.nominal.deadlock is None


def test_each_attention_group_waits_only_for_the_units_that_write_its_heads(small_artifact):
    """The attention's footprint names its group's q, k and v heads of qkv,
    so mega-plan-events gives each kv group its own event, fired by the
    units of the qkv GEMV that write those heads, not by all of them."""
    meta = small_artifact[0].kernels[0]["mega"]
    tasks, entries = meta["tasks"], meta["entries"]["task"]
    qkv = next(i for i, t in enumerate(tasks) if t["name"].endswith("l0_qkv"))
    split = next(i for i, t in enumerate(tasks) if t["name"].endswith("l0_attn_split"))
    waits = [meta["waits"][e] for e, t in enumerate(entries) if t == split]
    events = {tuple(w) for w in waits}
    cfg = ModelConfig(**SMALL)
    rows = (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim // tasks[qkv]["units"]
    group_rows = (cfg.heads // cfg.kv_heads + 2) * cfg.head_dim
    assert len(events) == cfg.kv_heads and all(len(w) == 1 for w in waits)
    for (e,) in events:
        assert meta["events"][e]["trigger"] == -(-group_rows // rows) < tasks[qkv]["units"]


def _check_wo_waits_for_the_splits(meta):
    """Layer 0's output projection waits for one event, which every
    instance of the attention's split task fires (no merge task between),
    and the schedule is proven deadlock-free."""
    from tilemega.runtime import mega_sim as ms

    tasks, entries = meta["tasks"], meta["entries"]["task"]
    split_i = next(i for i, t in enumerate(tasks) if t["name"].endswith("l0_attn_split"))
    wo_i = next(i for i, t in enumerate(tasks) if t["name"].endswith("l0_wo"))
    waits = {tuple(meta["waits"][e]) for e, t in enumerate(entries) if t == wo_i}
    assert len(waits) == 1 and len(next(iter(waits))) == 1
    (event,) = next(iter(waits))
    assert meta["events"][event]["trigger"] == tasks[split_i]["count"]
    report = ms.check_deadlock_free(meta, runs=20)
    assert report.proven and report.nominal.deadlock is None


def test_merge_in_split_leaves_the_merge_to_each_groups_last_split():
    """merge_in_split: no merge task; the split task counts on its own
    int32 scratch and writes o, so each layer's output projection waits
    for the splits themselves (one event a layer fired by all of them);
    the kernel counts with T.block_atomic_add (a fenced atomic add a
    split) and its schedule is proven deadlock-free."""
    pytest.importorskip("tilemega.ir", reason="the compiler package is not built")
    import tilemega
    from tilemega import mega

    cfg = ModelConfig(**SMALL)
    graph = mega.generation_graph(cfg, workers=8, merge_in_split=True)
    names = [t.name for t in graph.tasks]
    assert not [n for n in names if "merge" in n]
    assert len(names) == len(mega.generation_graph(cfg, workers=8).tasks) - cfg.layers
    split = next(t for t in graph.tasks if t.name.endswith("l0_attn_split"))
    assert [a.name for a in split.args[-2:]] == ["l0.attn.arrivals", "l0.attn"]
    assert split.args[-2].role == "scratch" and split.args[-2].dtype == "int32"
    assert split.body.name.startswith("rope_attn_merged_at_")

    art = tilemega.compile(graph.to_mlir(), chip="sm_90a", name="gen_merged")
    _check_wo_waits_for_the_splits(art.kernels[0]["mega"])
    # (A generic-address atom: the persistent kernel reads its tensors'
    # addresses from the argument table.)
    assert re.search(r"fence.acq_rel.gpu;\s+atom(.global)?.add.u32\s+%r\d+, \[%rd\d+\], 1;"
                     r"\s+fence.acq_rel.gpu;", art.ptx)


def test_merge_in_split_on_the_jit_queue_is_proven_deadlock_free_and_refused_over_ranks():
    pytest.importorskip("tilemega.ir", reason="the compiler package is not built")
    import tilemega
    from tilemega import mega
    from tilemega.runtime import mega_sim as ms

    cfg = ModelConfig(**SMALL)
    graph = mega.generation_graph(cfg, workers=8, merge_in_split=True, jit_attention=True)
    meta = tilemega.compile(graph.to_mlir(), chip="sm_90a", name="gen_merged_jit").kernels[0]["mega"]
    assert meta["jit"] and ms.check_deadlock_free(meta, runs=10).proven
    with pytest.raises(ValueError, match="merge_in_split: graphs of several ranks"):
        mega.generation_graph(cfg, world=2, merge_in_split=True)


def test_rows_per_unit_sets_each_projections_unit_and_names_a_bad_entry():
    """generation_graph(rows_per_unit=): the named projections' units take
    that many rows (over ranks too), the others keep the cost model's, and
    an unknown projection or a count that is not a positive int is refused
    naming it."""
    pytest.importorskip("tilemega.ir", reason="the compiler package is not built")
    from tilemega import mega

    cfg = ModelConfig(**SMALL)

    def bodies(graph):
        """{projection: body name} of layer 0 and the LM head."""
        names = {re.sub(r"^t\d+_(l0_)?", "", t.name): t.body.name for t in graph.tasks}
        return {p: names[p] for p in ("qkv", "wo", "wgu", "wd", "lm_head")}

    base = bodies(mega.generation_graph(cfg, workers=8))
    graph = mega.generation_graph(cfg, workers=8, rows_per_unit=dict(wd=4, wgu=16, lm_head=8))
    got = bodies(graph)
    assert got["wd"].startswith("gemv_256x512_r4") and got["wgu"].endswith("_r16")
    assert got["lm_head"].endswith("_r8")
    assert got["qkv"] == base["qkv"] and got["wo"] == base["wo"]
    assert next(t for t in graph.tasks if t.name.endswith("l0_wd")).body.name != base["wd"]
    tp = mega.generation_graph(cfg, world=2, rows_per_unit=dict(wo=4))
    assert next(t for t in tp.tasks if t.name.endswith("l0_wo")).body.name.startswith(
        "gemv_256x128_r4")
    with pytest.raises(ValueError, match=r"rows_per_unit: 'w_o' is not a projection .*wd"):
        mega.generation_graph(cfg, rows_per_unit=dict(w_o=4))
    for bad in (0, 2.0, True):
        with pytest.raises(ValueError, match=r"rows_per_unit\['wd'\]: .* positive number"):
            mega.generation_graph(cfg, rows_per_unit=dict(wd=bad))
    with pytest.raises(ValueError, match="gemv: N=256 is not a multiple of rows_per_unit=3"):
        mega.generation_graph(cfg, workers=8, rows_per_unit=dict(wd=3))


def test_gemv_stages_limits_each_projections_stages_in_flight():
    """generation_graph(gemv_stages=): the named projections' bodies keep at
    most that many stages of W in flight (bodies.gemv_config), named
    `_s<n>`; a whole-early output projection keeps its whole unit; a bad
    entry, or the down projection of fused_glu=False, is refused naming it."""
    pytest.importorskip("tilemega.ir", reason="the compiler package is not built")
    from tilemega import mega
    from tilemega.mega import bodies as mb

    cfg = ModelConfig(**SMALL)
    graph = mega.generation_graph(cfg, workers=8, gemv_stages=dict(wgu=2, wd=1, wo=3))
    names = {re.sub(r"^t\d+_(l0_)?", "", t.name): t.body.name for t in graph.tasks}
    assert names["wgu"].endswith("_s2") and names["wd"].endswith("_s1")
    assert names["wo"].endswith("_whole") and not names["qkv"].endswith(("_s1", "_s2", "_s3"))
    assert mb.gemv_config(8, 8192)[1] == mb.GEMV_STAGES == 4
    assert mb.gemv_config(8, 8192, max_stages=6) == (1024, 6)
    assert mb.gemv_config(8, 2048, max_stages=6) == (1024, 2)   # no more than K's tiles
    with pytest.raises(ValueError, match=r"gemv_stages\['wgu'\]: 0 is not a positive "
                                         r"number of stages"):
        mega.generation_graph(cfg, gemv_stages=dict(wgu=0))
    with pytest.raises(ValueError, match="gemv_stages: 'x' is not a projection"):
        mega.generation_graph(cfg, gemv_stages=dict(x=2))
    with pytest.raises(ValueError, match="gemv_stages: the down projection of fused_glu=False"):
        mega.generation_graph(cfg, fused_glu=False, gemv_stages=dict(wd=2))
    with pytest.raises(ValueError, match=r"stages: 2.5 is not a positive number of stages"):
        mb.gemv(256, 512, 8, stages=2.5, emit=False)


def test_merge_in_projection_leaves_the_merge_to_every_output_projection_unit():
    """merge_in_projection: no merge task; the output projection reads the
    splits' partials (gemv_merge), so it waits for the splits themselves,
    loads its weights early like any GEMV, and the schedule is proven
    deadlock-free; the shapes it cannot serve are refused with the reason."""
    pytest.importorskip("tilemega.ir", reason="the compiler package is not built")
    import tilemega
    from tilemega import mega

    cfg = ModelConfig(**dict(SMALL, heads=8))   # 4 query heads a kv head: unpadded
    graph = mega.generation_graph(cfg, workers=8, merge_in_projection=True)
    names = [t.name for t in graph.tasks]
    assert not [n for n in names if "merge" in n]
    assert len(names) == len(mega.generation_graph(cfg, workers=8).tasks) - cfg.layers
    wo = next(t for t in graph.tasks if t.name.endswith("l0_wo"))
    assert wo.body.name.startswith("gemv_merge_256x8x2x64_k8_")
    assert [a.name for a in wo.args[1:3]] == ["l0.attn.o_part", "l0.attn.lse"]
    assert "l0.attn" not in {a.name for t in graph.tasks for a in t.args}

    art = tilemega.compile(graph.to_mlir(), chip="sm_90a", name="gen_merge_proj")
    _check_wo_waits_for_the_splits(art.kernels[0]["mega"])

    with pytest.raises(ValueError, match=r"merge_in_projection: the 2 query heads of a kv "
                                         r"head are padded to 4 partial rows"):
        mega.generation_graph(ModelConfig(**SMALL), workers=8, merge_in_projection=True)
    with pytest.raises(ValueError, match="merge_in_projection: graphs of several ranks"):
        mega.generation_graph(cfg, world=2, merge_in_projection=True)
    with pytest.raises(ValueError, match="merge_in_split and merge_in_projection are two"):
        mega.generation_graph(cfg, workers=8, merge_in_projection=True, merge_in_split=True)


def test_linear_of_attention_partials_checks_its_operands():
    from tilemega import mega

    g = mega.Graph("t", workers=4)
    qkv = g.input("qkv", [12 * 64])
    cos, sin = g.input("cos", [32], "float32"), g.input("sin", [32], "float32")
    kc, vc = g.cache("kc", [2, 128, 64]), g.cache("vc", [2, 128, 64])
    o = g.scratch("o", [8 * 64])
    with pytest.raises(ValueError, match="merge_in_projection writes no o"):
        g.rope_attention_at(qkv, cos, sin, None, kc, vc, o, splits=4, pos=5, name="a",
                            merge_in_projection=True)
    with pytest.raises(ValueError, match="names the partials after the task: give name="):
        g.rope_attention_at(qkv, cos, sin, None, kc, vc, None, splits=4, pos=5,
                            merge_in_projection=True)
    with pytest.raises(ValueError, match=r"64 splits of 4 heads of 64 do not fit the lanes"):
        g.rope_attention_at(qkv, cos, sin, None, kc, vc, None, splits=64, pos=5, name="a",
                            merge_in_projection=True, tensor_cores=False)
    parts = g.rope_attention_at(qkv, cos, sin, None, kc, vc, None, splits=4, pos=5, name="a",
                                merge_in_projection=True)
    assert (parts.heads, parts.kv_heads, parts.head_dim, parts.splits) == (8, 2, 64, 4)
    assert [t.body.name for t in g.tasks] == ["rope_attn_8x2x64_s128_k4_p5"]
    x, y = g.input("x", [256]), g.scratch("y", [256])
    with pytest.raises(ValueError, match=r"W \(w2\) has 256 columns, the attention's partials "
                                         r"merge to 512"):
        g.linear(g.weight("w2", [256, 256]), parts, y)
    with pytest.raises(ValueError, match="take no norm or bias"):
        g.linear(g.weight("w", [256, 512]), parts, y, norm=g.weight("n", [512]))
    g.linear(g.weight("wo", [256, 512]), parts, y, residual=x, name="wo")
    assert g.tasks[-1].body.name == "gemv_merge_256x8x2x64_k4_r64_res"


@pytest.mark.parametrize("depth", [-1, 1.5, "2"])
def test_a_bad_early_depth_is_refused(depth):
    pytest.importorskip("tilemega.ir", reason="the compiler package is not built")
    import tilemega
    with pytest.raises(ValueError, match=r"mega_early_depth must be an int >= 0"):
        tilemega.compile(_graph().to_mlir(), chip="sm_90a", mega_early_depth=depth)


def test_compiled_graph_is_proven_deadlock_free_with_attention_on_the_jit_queue():
    pytest.importorskip("tilemega.ir", reason="the compiler package is not built")
    import tilemega
    from tilemega import mega
    from tilemega.runtime import mega_meta as mm
    from tilemega.runtime import mega_sim as ms

    graph = mega.generation_graph(ModelConfig(**SMALL), workers=8, jit_attention=True)
    assert [t.variable for t in graph.tasks].count(True) == 2
    art = tilemega.compile(graph.to_mlir(), chip="sm_90a", name="gen_test_jit")
    meta = art.kernels[0]["mega"]
    mm.validate_tables(meta, "gen_test")
    jit_tasks = {meta["tasks"][meta["entries"]["task"][e]]["body"] for e in meta["jit"]}
    assert jit_tasks and all("attn_at_" in b for b in jit_tasks), jit_tasks
    report = ms.check_deadlock_free(meta, runs=20)
    assert report.proven and report.nominal.deadlock is None
    assert ms.simulate(meta, workers=11, seed=3).deadlock is None


def test_compiled_graph_repeats_until_done_at_most_max_seq_len_steps(small_artifact):
    from tilemega.runtime import load_mega

    art, path = small_artifact
    params = [p["name"] for p in art.kernels[0]["mega"]["args"]]
    loop = art.kernels[0]["mega"]["loop"]
    assert loop == {"stop_argument": params.index("gen"), "stop_element": gs.DONE,
                    "max_steps": SMALL["max_seq_len"]}
    mk = load_mega(path)          # no GPU needed to check the step limit's argument
    assert mk.max_steps == SMALL["max_seq_len"]
    for bad in (0, SMALL["max_seq_len"] + 1, 2.0):
        with pytest.raises(ValueError, match=r"steps must be an int in \[1, 256\]"):
            mk.set_step_limit(bad)


def test_repeat_until_needs_a_written_int32_word_and_a_bound():
    pytest.importorskip("tilemega.ir", reason="the compiler package is not built")
    from tilemega.mega.graph import Graph

    g = Graph("g", workers=2)
    flag = g.cache("flag", [4], "int32")
    x = g.cache("x", [4], "float32")
    with pytest.raises(ValueError, match="no task writes 'flag'"):
        g.repeat_until(flag, 1, 8)
    g._writer["flag"] = None      # as if a task wrote it
    with pytest.raises(ValueError, match="element 4 is outside 'flag'"):
        g.repeat_until(flag, 4, 8)
    with pytest.raises(ValueError, match="max_steps must be an int in"):
        g.repeat_until(flag, 1, 0)
    with pytest.raises(ValueError, match="must be int32"):
        g.repeat_until(x, 1, 8)
    g.repeat_until(flag, 1, 8)
    assert "stop_word = array<i64: 0, 1>, max_steps = 8" in g.graph_mlir()


def test_a_step_barrier_timeout_names_the_cta_and_the_epochs():
    from tilemega.runtime.mega import decode_error

    meta = {"workers": 4, "graph": "generate", "watchdog_ns": 2_000_000_000, "tasks": [],
            "events": [], "entries": {"task": [], "instance": []}}
    words = [0] * 16
    words[4:10] = [4, -1, -1, 2, 6, 7]
    err = decode_error(words, meta)
    assert "worker 2 waited 2.0 s at the barrier after a step" in str(err)
    assert "(epoch 6, expected 7)" in str(err)


def test_a_loop_field_the_kernel_cannot_have_is_refused():
    from tilemega.runtime import mega_meta as mm

    base = {"workers": 1, "tasks": [], "events": [], "entries": {"task": [], "instance": []},
            "waits": [], "signals": [], "aot": [[]], "jit": []}
    with pytest.raises(ValueError, match=r"mega.loop.max_steps': 16777217 is over"):
        mm.validate({**base, "loop": {"stop_argument": 0, "stop_element": 0,
                                      "max_steps": (1 << 24) + 1}})
    with pytest.raises(ValueError, match=r"mega.loop.stop_element': missing"):
        mm.validate({**base, "loop": {"stop_argument": 0, "max_steps": 3}})


def test_compiled_graph_takes_the_tensors_the_reference_describes(small_artifact):
    from tilemega.mega import generation_reference as ref
    from tilemega.mega.engine import check_artifact

    art, path = small_artifact
    cfg = ModelConfig(**SMALL)
    check_artifact(path, cfg)        # no error
    params = [p["name"] for p in art.kernels[0]["mega"]["args"] if p.get("role") != "scratch"]
    assert params == list(ref.tensor_specs(cfg))
    with pytest.raises(ValueError, match="max_seq_len 512"):
        check_artifact(path, ModelConfig(**{**SMALL, "max_seq_len": 512}))
    with pytest.raises(ValueError, match="another rms_norm_eps than 1e-06"):
        check_artifact(path, ModelConfig(**{**SMALL, "eps": 1e-6}))


# ---------------------------------------------------------------- the state


def test_the_state_walks_the_prompt_then_generates_then_stops():
    tokens = [5, 6, 7, 0, 0, 0, 0, 0]
    words = gs.initial(0, given=3, end=6)
    picks = iter([40, 41, 42, 43, 44, 45])
    history = []
    for _ in range(7):
        words = gs.advance(words, next(picks, 99), tokens)
        history.append((words[gs.POS], words[gs.DONE], words[gs.GENERATED]))
    # positions 0, 1 only advance; 2, 3, 4 write tokens 3, 4, 5 (5 = end - 1: done)
    assert tokens == [5, 6, 7, 42, 43, 44, 0, 0]
    assert history[:5] == [(1, 0, 0), (2, 0, 0), (3, 0, 1), (4, 0, 2), (5, 1, 3)]
    assert history[5:] == [(5, 1, 3), (5, 1, 3)]          # done: nothing changes


def test_the_state_stops_at_eos_and_at_the_end_of_the_cache():
    tokens = [1, 0, 0, 0]
    words = gs.advance(gs.initial(0, 1, 4, eos=9), 9, tokens)
    assert tokens[1] == 9 and words[gs.DONE] and words[gs.POS] == 1
    tokens = [1, 2, 3, 4]
    words = gs.advance(gs.initial(3, 4, 4), 7, tokens)       # no room after position 3
    assert words[gs.DONE] and words[gs.POS] == 3 and tokens == [1, 2, 3, 4]
    assert words[gs.LAST] == 7


def test_any_of_several_eos_ids_stops_and_the_seed_splits_into_two_words():
    words = gs.initial(0, 1, 8, eos=[128001, 128008, 128009], seed=(7 << 32) | 0xFFFFFFFE)
    assert [words[w] for w in gs.EOS_WORDS[:4]] == [128001, 128008, 128009, gs.NO_EOS]
    assert words[gs.SEED_LO] == -2 and words[gs.SEED_HI] == 7     # int32 bit patterns
    tokens = [1] + [0] * 7
    words = gs.advance(words, 128008, tokens)
    assert words[gs.DONE] and tokens[1] == 128008
    assert not gs.advance(gs.initial(0, 1, 8, eos=[]), 0, [1] + [0] * 7)[gs.DONE]


@pytest.mark.parametrize("eos, message", [
    (list(range(9)), "9 stop ids; at most 8"), ([3, -1], "-1 is not a token id"),
    ([True], "True is not a token id")])
def test_bad_eos_ids_are_refused(eos, message):
    with pytest.raises(ValueError, match=message):
        gs.initial(0, 1, 8, eos=eos)


@pytest.mark.parametrize("seed", [-1, 1 << 64, 1.5])
def test_a_bad_seed_is_refused(seed):
    with pytest.raises(ValueError, match="seed must be an int in"):
        gs.initial(0, 1, 8, seed=seed)


@pytest.mark.parametrize("ids, message", [
    ([1, True], r"prompt_ids\[1\] = True is not"), ([1, 2.0], r"prompt_ids\[1\] = 2.0 is not"),
    ([3, -1], r"prompt_ids\[1\] = -1 is not"), ([0, 5, 100], r"prompt_ids\[2\] = 100 is not"),
    ([7, 1 << 40], "= 1099511627776 is not"), ([None], r"prompt_ids\[0\] = None is not"),
    ([], "is empty"), ("ab", "a sequence of token ids"), ([1] * 16, "room for at most 15")])
def test_a_prompt_is_checked_id_by_id(ids, message):
    from tilemega.mega.engine import checked_prompt

    with pytest.raises(ValueError, match=message):
        checked_prompt(ids, 4, 16, 100)


def test_a_checked_prompt_is_the_int32_array_the_staging_copies():
    from tilemega.mega.engine import checked_prompt

    ids = checked_prompt((0, 99, 5), 4, 16, 100)
    assert ids.typecode == "i" and ids.tolist() == [0, 99, 5]
    with pytest.raises(ValueError, match="max_new_tokens must be a positive int"):
        checked_prompt([1], True, 16, 100)


def test_a_prompt_may_be_a_one_dimensional_integer_array():
    """A tokenizer's input_ids[0] (numpy here; a torch tensor has the same
    dtype names with "torch." before them) goes in as its ids."""
    np = pytest.importorskip("numpy")
    from tilemega.mega.engine import checked_prompt

    assert checked_prompt(np.array([3, 0, 99], dtype=np.int64), 4, 16, 100).tolist() == [3, 0, 99]
    assert checked_prompt(np.array([7], dtype=np.uint16), 4, 16, 100).tolist() == [7]
    for ids, message in ((np.array([[1, 2]]), r"must be 1-D \(one prompt\), got shape \(1, 2\)"),
                         (np.array([1.0]), "needs an integer dtype, got float64"),
                         (np.array([True]), "needs an integer dtype, got bool"),
                         (np.array([4, 100]), r"prompt_ids\[1\] = 100 is not"),
                         ({1, 2}, "a sequence of token ids, got set")):
        with pytest.raises(ValueError, match=message):
            checked_prompt(ids, 4, 16, 100)


# ---------------------------------------------------------------- sampling


def test_philox_matches_the_published_known_answers():
    """Random123's kat_vectors for philox4x32 10."""
    from tilemega.mega.philox import philox

    cases = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
             ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2,
              (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
             ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
              (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for counter, key, want in cases:
        assert [int(w) for w in philox(*counter, *key)] == list(want)


def test_gumbel_noise_is_reproducible_and_gumbel_distributed():
    from tilemega.mega.philox import gumbel, uniform

    g = gumbel(np.arange(200000), 17, 0xDEADBEEF12345678)
    assert np.array_equal(g, gumbel(np.arange(200000), 17, 0xDEADBEEF12345678))
    assert not np.array_equal(g, gumbel(np.arange(200000), 18, 0xDEADBEEF12345678))
    assert not np.array_equal(g, gumbel(np.arange(200000), 17, 0xDEADBEEF12345679))
    # Gumbel(0, 1): mean = Euler's gamma, variance pi^2 / 6.
    assert abs(g.mean() - 0.5772156649) < 0.01
    assert abs(g.var() - math.pi ** 2 / 6) < 0.03
    u = uniform(np.array([0, 0xFFFFFFFF], dtype=np.uint64))
    assert u[0] == 2.0 ** -24 and u[1] == 1.0 - 2.0 ** -24     # never 0 or 1
    assert np.isfinite(gumbel(np.arange(1 << 20), 3, 5)).all()


def test_gumbel_max_samples_the_softmax():
    """What the device does (argmax of logit / T + noise) draws from
    softmax(logits / T): frequencies over many positions (independent
    noise) match the probabilities."""
    from tilemega.mega.philox import gumbel

    logits, T = np.array([2.0, 1.0, 0.5, -1.0, 0.0]), 0.8
    p = np.exp(logits / T) / np.exp(logits / T).sum()
    picks = [int(np.argmax(logits / T + gumbel(np.arange(5), pos, 42))) for pos in range(20000)]
    freq = np.bincount(picks, minlength=5) / len(picks)
    assert np.abs(freq - p).max() < 0.015


@pytest.mark.parametrize("p", [0, 1, 63, 64, 639, 1023])
def test_split_partials_with_the_current_key_added_by_the_last_split_merge_to_softmax(p):
    """The arithmetic of rope_attention_at (generation_bodies._split_partials
    with `current`, _add_current_key) and attention_merge, in numpy: keys
    0..p-1 in chunks of 64 spread over 8 splits (masked past p - 1), key p
    added by the last split to its online softmax (a no-op elsewhere, also
    where a split had no keys: alpha 1, weight 0), the splits merged by
    their base-2 log-sum-exp - equal to softmax attention over keys 0..p."""
    rng = np.random.default_rng(p)
    D, BN, splits, c = 64, 64, 8, np.log2(np.e) / np.sqrt(64)
    q, K, V = rng.normal(size=D), rng.normal(size=(p + 1, D)), rng.normal(size=(p + 1, D))
    chunks = -(-p // BN)
    per = -(-chunks // splits)
    outs, lses = [], []
    for s in range(splits):
        m, l, acc = -np.inf, 0.0, np.zeros(D)
        first = min(s * per, chunks)
        for t in range(first, min(first + per, chunks)):
            # The chunk's keys below p (those past it are masked to -inf:
            # they add nothing; a chunk below `chunks` holds at least one).
            keys = range(t * BN, min((t + 1) * BN, p))
            sc = np.array([q @ K[k] for k in keys])
            m_new = max(m, sc.max() * c)
            alpha = np.exp2(m - m_new)
            e = np.exp2(sc * c - m_new)
            l = l * alpha + e.sum()
            acc = acc * alpha + e @ V[keys.start:keys.stop]
            m = m_new
        owner = s == splits - 1
        x = q @ K[p] * c if owner else -np.inf
        m_new = max(m, x)
        alpha = np.exp2(m - m_new) if owner else 1.0
        w = np.exp2(x - m_new) if owner else 0.0
        l, acc, m = l * alpha + w, acc * alpha + w * V[p], m_new
        outs.append(acc / l if l > 0 else np.zeros(D))
        lses.append(m + np.log2(l) if l > 0 else -np.inf)
    lses = np.array(lses)
    weights = np.exp2(lses - lses.max())
    got = (weights[:, None] * np.array(outs)).sum(0) / weights.sum()
    scores = K @ q / np.sqrt(D)
    want = np.exp(scores - scores.max()) @ V / np.exp(scores - scores.max()).sum()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_the_launch_runs_with_the_collector_held_off_and_restores_it():
    import gc

    from tilemega.mega.engine import uncollected
    assert gc.isenabled()
    assert uncollected(gc.isenabled) is False and gc.isenabled()
    with pytest.raises(ZeroDivisionError):
        uncollected(lambda: 1 / 0)
    assert gc.isenabled()
    gc.disable()
    try:
        assert uncollected(lambda x, y=0: x + y, 1, y=2) == 3 and not gc.isenabled()
    finally:
        gc.enable()


def test_the_collector_stays_off_through_a_block_and_comes_back():
    """collector_held_off (generate's prepare-to-read, stream's
    prepare-to-launch): off inside, on after, also after an exception or an
    early return; a block inside another leaves it off for the outer."""
    import gc

    from tilemega.mega.engine import collector_held_off

    def early():
        with collector_held_off():
            return gc.isenabled()

    assert early() is False and gc.isenabled()
    with pytest.raises(KeyError):
        with collector_held_off():
            raise KeyError("x")
    assert gc.isenabled()
    with collector_held_off():
        with collector_held_off():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_engine_checks_its_sampling_settings():
    from tilemega.mega.engine import Engine

    assert Engine._sampling(None, 50, 0.9) == [0.0, 0.0, 1.0]      # greedy ignores them
    assert Engine._sampling(0.5, None, None) == [2.0, 0.0, 1.0]
    assert Engine._sampling(0.5, 50, 0.9) == [2.0, 50.0, 0.9]
    assert Engine._sampling(0.5, 65, None) == [2.0, 65.0, 1.0]     # the whole vocabulary
    assert Engine._sampling(0.5, None, 0.9) == [2.0, 0.0, 0.9]
    with pytest.raises(ValueError, match=r"top_k=-1: 0 \(the whole vocabulary\) or a"):
        Engine._sampling(0.7, -1, None)
    # Top-p within a top-k over the candidates' 64 (sample_filtered's top_k_mass).
    assert Engine._sampling(0.5, 65, 0.9) == [2.0, 65.0, 0.9]
    with pytest.raises(ValueError, match=r"top_p=0: a number in \(0, 1\]"):
        Engine._sampling(0.7, 5, 0)
    with pytest.raises(ValueError, match="temperature must be 0"):
        Engine._sampling(-1.0, None, None)


def test_top_k_keeps_exactly_k_and_top_p_the_prefix_below_its_mass():
    from tilemega.mega.generation_reference import sampled_set

    logits = np.array([3.0, 2.0, 2.0, 1.0, 0.0, 2.0])
    assert sampled_set(logits, 1.0, 0, 1.0).all()
    assert list(np.flatnonzero(sampled_set(logits, 1.0, 3, 1.0))) == [0, 1, 2]  # ties: lower
    four = np.array([3.0, 2.0, 1.0, 0.0])
    # masses e^3, e^2, e^1, e^0 of 31.19: ranked above each 0, 20.1, 27.5, 30.2
    assert list(np.flatnonzero(sampled_set(four, 1.0, 4, 0.6))) == [0]
    assert list(np.flatnonzero(sampled_set(four, 1.0, 4, 0.7))) == [0, 1]
    assert list(np.flatnonzero(sampled_set(four, 1.0, 4, 0.95))) == [0, 1, 2]
    assert list(np.flatnonzero(sampled_set(four, 1.0, 4, 0.97))) == [0, 1, 2, 3]


def test_the_filtered_rounds_find_the_largest_score_of_the_kept_set():
    """sample_filtered's algorithm (generation_reference.filtered_pick, the
    same rounds in float64) is the Gumbel-max of the set sampled_set keeps,
    ties included (logits rounded to a few values), for top-p alone and a
    large top-k, in few rounds."""
    from tilemega.mega.generation_reference import filtered_pick, sampled_set
    from tilemega.mega.philox import gumbel

    rng = np.random.default_rng(0)
    worst = 0
    for trial in range(300):
        V = int(rng.integers(2, 3000))
        logits = rng.normal(size=V) * rng.uniform(0.1, 4)
        if trial % 3 == 0:
            logits = np.round(logits * 2) / 2          # many ties
        inv_t = float(rng.uniform(0.3, 3))
        top_k, top_p = [(0, float(rng.uniform(0.01, 0.99))),
                        (int(rng.integers(1, V + 1)), 1.0),
                        (int(rng.integers(1, V + 1)), float(rng.uniform(0.01, 0.99)))][trial % 3]
        scores = logits * inv_t + gumbel(np.arange(V), trial, 7)
        pick, rounds = filtered_pick(logits, scores, inv_t, top_k, top_p)
        keep = sampled_set(logits, inv_t, top_k, top_p)
        assert pick == int(np.argmax(np.where(keep, scores, -np.inf))), trial
        worst = max(worst, rounds)
    assert worst < 30


def _bf16(values):
    """float32 values cut to bfloat16: (their 16 bits as int16, the values
    as float64)."""
    bits = (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return bits.view(np.int16), (bits.astype(np.uint32) << 16).view(np.float32).astype(float)


def test_the_radix_select_finds_the_kth_largest_bf16_logit_and_the_k_mass():
    """top_k_mass's algorithm (generation_reference.kth_key_by_digits, the
    same digit passes): order_key orders bfloat16 values as floats (both
    zeros, infinities, subnormals), and the digit passes find the k-th
    largest key and the count above it for any k, ties included; the k's
    mass from them equals a sort's."""
    from tilemega.mega.generation_reference import kth_key_by_digits, order_keys

    bits, values = _bf16([0.0, -0.0, 1e-40, -1e-40, 3.0, -3.0, np.inf, -np.inf, 65504.0,
                          -2.5e38, 2.5e38, -1e-3])
    keys = order_keys(bits)
    for a in range(len(values)):
        for b in range(len(values)):
            if values[a] < values[b]:
                assert keys[a] < keys[b], (values[a], values[b])
    assert (keys >= 0).all() and (keys < 65536).all()
    rng = np.random.default_rng(1)
    for trial in range(60):
        V = int(rng.integers(1, 5000))
        raw = rng.normal(size=V) * rng.uniform(0.01, 30)
        if trial % 3 == 0:
            raw = np.round(raw * 2) / 2                       # many ties
        bits, x = _bf16(raw)
        keys = order_keys(bits)
        for k in {1, V, int(rng.integers(1, V + 1))}:
            for digit_bits in (1, 2, 4):
                kth, above = kth_key_by_digits(keys, k, digit_bits)
                assert kth == np.sort(keys)[::-1][k - 1], (trial, k, digit_bits)
                assert above == int((keys > kth).sum()), (trial, k, digit_bits)
            e = np.exp(x - x.max())
            mass = e[keys > kth].sum() + (k - above) * e[keys == kth][0]
            assert np.isclose(mass, np.sort(e)[::-1][:k].sum(), rtol=1e-12)


def test_gumbel_max_within_the_kept_set_samples_its_renormalised_softmax():
    from tilemega.mega.generation_reference import sampled_set
    from tilemega.mega.philox import gumbel

    logits, T = np.array([2.0, 1.0, 0.5, -1.0, 0.0, 1.5]), 0.8
    keep = sampled_set(logits, 1 / T, 4, 0.9)
    p = np.where(keep, np.exp(logits / T), 0.0)
    p /= p.sum()
    picks = [int(np.argmax(np.where(keep, logits / T + gumbel(np.arange(6), pos, 3), -np.inf)))
             for pos in range(20000)]
    freq = np.bincount(picks, minlength=6) / len(picks)
    assert np.abs(freq - p).max() < 0.015 and freq[~keep].sum() == 0


def test_a_cache_that_does_not_fit_the_device_names_max_seq_len():
    from tilemega.mega.checkpoint import check_fits, device_bytes

    cfg = ModelConfig(max_seq_len=32768)            # Llama-3.2-1B shape
    need = device_bytes(cfg)
    weights = 2 * (128256 * 2048 + 16 * (2048 * 3072 + 2048 * 2048 + 2 * 8192 * 2048
                                         + 8192 * 2048 + 2 * 2048) + 2048)
    caches = 2 * 16 * 8 * 32768 * 64 * 2
    assert need > weights + caches
    check_fits(cfg, "llama/config.json", need + 2 ** 31)           # fits: no error
    with pytest.raises(ValueError, match=r"llama/config.json: max_seq_len 32768: the model's "
                                         r"tensors need 3\.\d GiB \(the k/v caches 1\.0 GiB"):
        check_fits(cfg, "llama/config.json", 4 * 2 ** 30)


def test_a_stopped_generation_says_what_it_left():
    from tilemega.mega.engine import stopped_generation

    words = gs.initial(9, 6, 40)
    words[gs.GENERATED] = 3
    note = stopped_generation(words, 3, given=6)
    assert "stopped in step 4 of its launch, at position 9" in note
    assert "tokens[6:9] (3 generated)" in note and "rows 0 .. 8 are complete" in note
    assert "resets the kernel at the next start()" in note


# ---------------------------------------------------------------- prefill


def test_prefill_reference_is_the_decode_steps_one_after_another():
    """prefill_float64 (all rows at once, causal) equals step_float64 run
    position by position on caches the earlier steps filled."""
    from tilemega.mega import generation_reference as ref

    cfg = ModelConfig(layers=2, hidden=128, intermediate=256, heads=4, kv_heads=2,
                      head_dim=64, vocab=50, max_seq_len=64, qkv_bias=True,
                      tie_embeddings=False)
    t = ref.make_numpy_tensors(cfg)
    rows = ref.prefill_float64(cfg, t, 6)
    for pos in range(6):
        got = ref.step_float64(cfg, t, pos=pos)
        for name, row in got["rows"].items():
            t[name][:, pos] = row
    for name in ref.cache_names(cfg):
        np.testing.assert_allclose(rows[name], t[name][:, :6], rtol=1e-9, atol=1e-12)


def test_the_engine_compiles_its_artifacts_once_into_the_disk_cache(tmp_path, monkeypatch):
    """compile_generation / compile_prefill_cached: what from_pretrained
    compiles on a machine with the compiler; the second call is a cache
    hit, and the artifacts are those of the config."""
    pytest.importorskip("tilemega.ir", reason="the compiler package is not built")
    from tilemega.mega.engine import check_artifact, compile_generation, compile_prefill_cached
    from tilemega.mega.prefill import prefill_bodies
    from tilemega.runtime import load_artifact

    monkeypatch.setenv("TILEMEGA_CACHE_DIR", str(tmp_path))
    cfg = ModelConfig(**SMALL)
    said = []
    gen = compile_generation(cfg, said.append)
    pre = compile_prefill_cached(cfg, said.append)
    assert gen.startswith(str(tmp_path)) and pre.startswith(str(tmp_path))
    check_artifact(gen, cfg)
    art = load_artifact(pre)
    assert {b.name for b in prefill_bodies(cfg).values()} <= set(art.kernels)
    assert compile_generation(cfg) == gen and compile_prefill_cached(cfg) == pre
    assert any("compiled in" in m for m in said), said


def test_prefill_kernels_build_for_both_architectures_and_name_their_config():
    pytest.importorskip("tilemega.ir", reason="the compiler package is not built")
    from tilemega.mega import prefill

    for fields in ({}, dict(qkv_bias=True, eps=1e-6)):
        cfg = ModelConfig(**{**SMALL, **fields})
        names = {b.name for b in prefill.prefill_bodies(cfg).values()}
        text = prefill.prefill_mlir(cfg)
        assert all(f"func.func @{n}(" in text for n in names), names
    assert "prefill_linear_512x256_c512_bias" in names       # q/k/v with their biases
    assert "prefill_rmsnorm_256_c512_eps1em06" in names
    with pytest.raises(ValueError, match="chunk 100 is not a multiple of 64"):
        prefill.prefill_bodies(ModelConfig(**SMALL), C=100)


def test_prefill_gemms_run_on_wgmma_with_tma_copies():
    """Every prefill projection compiles to wgmma fed by TMA (linear_tile's
    blockings: 64 x 64 six k-tiles deep while they fit one wave, else 128 x
    128, or 128 x 256 for a wide gate/up projection, both with a producer
    warpgroup; the gate/up projection with its SiLU-mul, gate_up_tile's
    halves of them), none to mma.sync, and none spills."""
    pytest.importorskip("tilemega.ir", reason="the compiler package is not built")
    import re
    import warnings

    import tilemega
    from tilemega.mega import prefill
    from tilemega.mega.prefill_bodies import gate_up_tile, linear_tile

    assert linear_tile(16384, 2048, 512) == (128, 256, 64, 256, 3, True, True)
    assert linear_tile(2048, 8192, 512) == (64, 64, 64, 128, 6, False, False)   # 256 blocks
    assert linear_tile(3072, 2048, 512).bm == 128                              # 384 of 64 x 64
    assert linear_tile(2752, 2048, 512).bn == 64          # 2 x 1376: no 128- or 256-wide blocks
    assert gate_up_tile(8192, 2048, 512) == (128, 128, 64, 256, 4, True, True)
    assert gate_up_tile(1376, 2048, 512) == (64, 64, 64, 128, 4, False, False)
    cfg = ModelConfig(**{**SMALL, "intermediate": 4096})     # a wide gate/up (8192)
    with warnings.catch_warnings():
        # No CompileWarning: a spill (or a gemm off tensor cores) fails here.
        warnings.simplefilter("error", tilemega.CompileWarning)
        art = tilemega.compile(prefill.prefill_mlir(cfg), chip="sm_90a", name="pre")
    entries = {re.match(r"\w+", e)[0]: e for e in art.ptx.split(".entry ")[1:]}
    linears = {n: body for n, body in entries.items()
               if "prefill_linear" in n or "prefill_gate_up_silu" in n}
    assert len(linears) == 4 and "prefill_gate_up_silu_4096x256_c512" in linears, list(entries)
    assert not any("silu_mul" in n for n in entries), list(entries)     # fused
    for name, body in linears.items():
        assert "wgmma.mma_async" in body and "cp.async.bulk.tensor" in body, name
        assert "mma.sync" not in body, name


def test_a_prefill_artifact_of_other_kernels_is_refused_before_any_gpu_work(tmp_path):
    """Prefill checks the artifact against the kernels it launches: another
    config's chunk, or kernels of another version (here: the RMSNorm
    without its row count), is a ValueError naming the file and kernel."""
    pytest.importorskip("tilemega.ir", reason="the compiler package is not built")
    import json

    import tilemega
    from tilemega.mega import prefill

    cfg = ModelConfig(**SMALL)
    path = tilemega.compile(prefill.prefill_mlir(cfg), chip="sm_90a",
                            name="prefill_small").save(str(tmp_path))
    with pytest.raises(ValueError, match=r"not the prefill artifact of this config \(chunk 256"):
        prefill.Prefill(cfg, {}, path, C=256)
    with open(path) as f:
        meta = json.load(f)
    norm = next(k for k in meta["kernels"] if k["name"].startswith("prefill_rmsnorm"))
    norm["params"] = [p for p in norm["params"] if p["name"] != "span"]
    with open(path, "w") as f:
        json.dump(meta, f)
    with pytest.raises(ValueError, match=r"prefill_small.json: kernel 'prefill_rmsnorm_256_c512' "
                                         r"takes .* another version of the prefill"):
        prefill.Prefill(cfg, {}, path)
    # An artifact of the kernels before the gate/up GEMM took the SiLU-mul:
    # the fused kernel is missing, and the error says which.
    fused = next(k for k in meta["kernels"] if k["name"].startswith("prefill_gate_up_silu"))
    fused["name"] = "prefill_linear_1024x256_c512"
    with open(path, "w") as f:
        json.dump(meta, f)
    with pytest.raises(ValueError, match=r"this version of the prefill kernels: no kernel "
                                         r"'prefill_gate_up_silu_512x256_c512' \(compile it again"):
        prefill.Prefill(cfg, {}, path)


def test_chunk_spans_cover_the_prompt_rows_and_fill_the_whole_spans_tensor():
    """The spans a generation stages for its prefill (engine._prepare):
    a (start, count) row a 512-row chunk of rows 0 .. P - 1, then rows that
    write nothing, always max_chunks + 1 rows; the last cache row is the
    decode step's, so P = max_seq_len - 1 is the most."""
    from tilemega.mega.prefill import chunk_spans, max_chunks

    assert max_chunks(4096) == 8 and max_chunks(513) == 1 and max_chunks(514) == 2
    chunks, words = chunk_spans(1000, 4096)
    assert chunks == 2 and len(words) == 4 * 9
    assert words[:8] == [0, 512, 0, 0, 512, 488, 0, 0] and not any(words[8:])
    assert chunk_spans(0, 4096) == (0, [0] * 36)
    chunks, words = chunk_spans(4095, 4096)
    assert chunks == 8 and words[28:36] == [3584, 511, 0, 0, 0, 0, 0, 0]
    for bad in (-1, 4096):
        with pytest.raises(ValueError, match=f"prefill of {bad} rows: the cache has 4096"):
            chunk_spans(bad, 4096)


# ---------------------------------------------------------------- rope


def test_default_rope_tables_are_the_rotation_of_every_position():
    cos, sin = rope.tables(64, 64, 10000.0)
    j = np.arange(32)
    angle = 37 * 10000.0 ** (-2.0 * j / 64)
    assert cos.dtype == np.float32 and cos.shape == (64, 32)
    np.testing.assert_allclose(cos[37], np.cos(angle), rtol=0, atol=2e-5)
    np.testing.assert_allclose(sin[37], np.sin(angle), rtol=0, atol=2e-5)


def test_llama3_scaling_keeps_high_frequencies_and_divides_low_ones():
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    base = rope.inv_freq(128, 500000.0)
    scaled = rope.inv_freq(128, 500000.0, scaling)
    wavelen = 2 * math.pi / base
    high, low = wavelen < 8192 / 4.0, wavelen > 8192 / 1.0
    assert high.any() and low.any()
    np.testing.assert_array_equal(scaled[high], base[high])
    np.testing.assert_allclose(scaled[low], base[low] / 8.0, rtol=1e-6)
    mid = ~high & ~low
    assert np.all((scaled[mid] < base[mid]) & (scaled[mid] > base[mid] / 8.0))


def test_an_unsupported_rope_type_names_it():
    with pytest.raises(ValueError, match="rope_type: 'yarn' is not supported"):
        rope.inv_freq(64, 10000.0, {"rope_type": "yarn", "factor": 4.0})
    with pytest.raises(ValueError, match="rope_scaling.factor: missing"):
        rope.inv_freq(64, 10000.0, {"rope_type": "llama3"})


# ---------------------------------------------------------------- checkpoints


def llama_dict(**changes):
    d = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
         "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 1000, "rms_norm_eps": 1e-5,
         "rope_theta": 500000.0, "tie_word_embeddings": True, "hidden_act": "silu",
         "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
    d.update(changes)
    return {k: v for k, v in d.items() if v is not None}


def test_configs_of_both_architectures_and_both_rope_spellings():
    cfg = config_from_dict(llama_dict(), 256)
    assert (cfg.layers, cfg.hidden, cfg.heads, cfg.kv_heads, cfg.head_dim) == (2, 256, 4, 2, 64)
    assert cfg.tie_embeddings and not cfg.qkv_bias and cfg.rope_scaling["factor"] == 32.0
    # transformers 5: rope_parameters holds rope_theta and the scaling.
    v5 = llama_dict(rope_scaling=None, rope_theta=None,
                    rope_parameters={"rope_type": "default", "rope_theta": 1234.0})
    cfg = config_from_dict(v5, 256)
    assert cfg.rope_theta == 1234.0 and cfg.rope_scaling is None
    qwen = llama_dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2",
                      rope_scaling=None, tie_word_embeddings=False, use_sliding_window=False)
    cfg = config_from_dict(qwen, 256)
    assert cfg.qkv_bias and not cfg.tie_embeddings


@pytest.mark.parametrize("changes, message", [
    (dict(architectures=["MistralForCausalLM"]), "field 'architectures'"),
    (dict(architectures=None, model_type="gpt2"), "field 'model_type': 'gpt2'"),
    (dict(hidden_act="gelu"), "field 'hidden_act'"),
    (dict(attention_bias=True), "field 'attention_bias'"),
    (dict(num_hidden_layers=None), "field 'num_hidden_layers' is missing"),
    (dict(hidden_size="256"), "field 'hidden_size' must be int"),
    (dict(num_key_value_heads=3), "field 'num_key_value_heads': 3 does not divide"),
    (dict(rope_scaling={"rope_type": "yarn"}), "rope_type: 'yarn' is not supported"),
    (dict(hidden_size=200, head_dim=64), "field 'hidden_size': 200 is not a multiple of 64"),
])
def test_a_config_json_we_cannot_serve_names_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        config_from_dict(llama_dict(**changes), 256, "ckpt/config.json")


def test_read_config_names_the_file(tmp_path):
    with pytest.raises(ValueError, match="config.json: no such file"):
        read_config(str(tmp_path))
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json: not valid JSON"):
        read_config(str(tmp_path))


def _checkpoint(folder, cfg, drop=(), reshape=None, sharded=False):
    """A random float32 checkpoint of cfg in transformers' names."""
    from safetensors.numpy import save_file

    from tilemega.mega.checkpoint import _part_shapes

    rng = np.random.default_rng(0)
    names = [n for parts in hf_names(cfg).values() for n in parts]
    shapes = _part_shapes(cfg)
    tensors = {n: rng.standard_normal(shapes[n]).astype(np.float32) for n in names
               if n not in drop}
    if reshape:
        tensors[reshape] = tensors[reshape].reshape(-1)
    if sharded:
        half = len(names) // 2
        parts = [dict(list(tensors.items())[:half]), dict(list(tensors.items())[half:])]
        index = {}
        for i, part in enumerate(parts):
            save_file(part, str(folder / f"model-{i}.safetensors"))
            index.update({n: f"model-{i}.safetensors" for n in part})
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": index}))
    else:
        save_file(tensors, str(folder / "model.safetensors"))
    return tensors


@pytest.mark.parametrize("sharded", [False, True])
def test_the_loader_fuses_qkv_and_gate_up_in_order(tmp_path, sharded):
    cfg = config_from_dict(llama_dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2",
                                      rope_scaling=None, tie_word_embeddings=False), 256)
    hf = _checkpoint(tmp_path, cfg, sharded=sharded)
    ours = fuse(cfg, reader(str(tmp_path), "np"), str(tmp_path), lambda t: t)
    a = "model.layers.1.self_attn."
    np.testing.assert_array_equal(ours["l1.wqkv"], np.concatenate(
        [hf[a + "q_proj.weight"], hf[a + "k_proj.weight"], hf[a + "v_proj.weight"]]))
    np.testing.assert_array_equal(ours["l1.bqkv"], np.concatenate(
        [hf[a + "q_proj.bias"], hf[a + "k_proj.bias"], hf[a + "v_proj.bias"]]))
    m = "model.layers.0.mlp."
    np.testing.assert_array_equal(ours["l0.wgu"], np.concatenate(
        [hf[m + "gate_proj.weight"], hf[m + "up_proj.weight"]]))
    np.testing.assert_array_equal(ours["lm_head"], hf["lm_head.weight"])
    assert set(ours) == set(hf_names(cfg))


def test_a_checkpoint_with_a_missing_or_misshapen_tensor_names_it(tmp_path):
    cfg = config_from_dict(llama_dict(), 256)
    (tmp_path / "a").mkdir()
    _checkpoint(tmp_path / "a", cfg, drop=("model.layers.1.mlp.up_proj.weight",))
    with pytest.raises(ValueError, match=r"tensor 'model.layers.1.mlp.up_proj.weight' is "
                                         r"missing \(needed for l1.wgu\)"):
        fuse(cfg, reader(str(tmp_path / "a"), "np"), "a", lambda t: t)
    (tmp_path / "b").mkdir()
    _checkpoint(tmp_path / "b", cfg, reshape="model.layers.0.mlp.down_proj.weight")
    with pytest.raises(ValueError, match=r"tensor 'model.layers.0.mlp.down_proj.weight' has "
                                         r"shape \[131072\], the config implies \[256, 512\]"):
        fuse(cfg, reader(str(tmp_path / "b"), "np"), "b", lambda t: t)


def test_a_hostile_or_damaged_checkpoint_is_refused(tmp_path):
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"model.norm.weight": "../outside.safetensors"}}))
    with pytest.raises(ValueError, match=r"weight_map.model.norm.weight.*not a file name"):
        reader(str(tmp_path), "np")
    (tmp_path / "model.safetensors.index.json").unlink()
    (tmp_path / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{broken")
    with pytest.raises(ValueError, match="model.safetensors: not a readable safetensors file"):
        reader(str(tmp_path), "np")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="neither model.safetensors nor"):
        reader(str(empty), "np")


# ---------------------------------------------------------------- the CLI


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(ROOT, "python")] + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    return subprocess.run([sys.executable, "-m", "tilemega.generate", *args],
                          capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("args, message", [
    ([], "the following arguments are required: --model"),
    (["--model", "/nonexistent", "--prompt-ids", "1"], "--model /nonexistent: not a folder"),
    (["--model", ".", "--prompt-ids", "1"], "no config.json in it"),
    (["--model", ".", "--prompt-ids", "1,x"], "expected comma-separated token ids"),
    (["--model", ".", "--prompt-ids", "1", "--max-new-tokens", "0"], "must be >= 1"),
    (["--model", ".", "--prompt", "hi", "--prompt-ids", "1"], "not allowed with"),
    (["--model", ".", "--prompt-ids", "1", "--temperature", "-1"], "0 (greedy) or in"),
    (["--model", ".", "--prompt-ids", "1", "--seed", "-5"], "must be in [0, 2^64)"),
    (["--model", ".", "--prompt-ids", "1", "--eos-id", "2,b"], "expected comma-separated"),
    (["--model", ".", "--prompt-ids", "1", "--temperature", "1", "--top-p", "1.5",
      "--top-k", "100"], "top_p=1.5: a number in (0, 1]"),
    (["--model", ".", "--prompt-ids", "1", "--temperature", "1", "--top-k", "-3"],
     "top_k=-3: 0 (the whole vocabulary) or a positive int"),
])
def test_cli_argument_errors(args, message, tmp_path):
    proc = _cli(*[str(tmp_path) if a == "." else a for a in args])
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr, proc.stderr


@pytest.mark.parametrize("args, message", [
    (["--world", "2", "--temperature", "1", "--top-p", "0.9"],
     "--world 2: top_k=0, top_p=0.9: a graph of several ranks samples"),
    (["--world", "2", "--devices", "0"], "--devices: 1 GPUs for --world 2"),
    (["--world", "0"], "must be >= 1"),
    (["--world", "2", "--ctas-per-sm", "2"], "--ctas-per-sm: the graphs of several ranks"),
    (["--ctas-per-sm", "9"], "--ctas-per-sm: ctas_per_sm must be 1 to 8, got 9"),
    (["--ctas-per-sm", "0"], "must be >= 1"),
    (["--ctas-per-sm", "2", "--artifact", __file__], "--ctas-per-sm is a compile option"),
])
def test_cli_tensor_parallel_argument_errors(args, message, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(llama_dict()))
    proc = _cli("--model", str(tmp_path), "--prompt-ids", "1", *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr, proc.stderr


def test_the_engines_are_reached_as_the_docs_spell_them():
    from tilemega.mega import Engine, TensorParallelEngine
    from tilemega.mega.engine import Engine as E
    from tilemega.mega.tp_engine import TensorParallelEngine as T

    assert Engine is E and TensorParallelEngine is T
    with pytest.raises(AttributeError, match="no attribute 'Engines'"):
        import tilemega.mega

        tilemega.mega.Engines


def test_a_world_the_checkpoint_cannot_take_is_refused_before_loading(tmp_path):
    """TensorParallelEngine.from_pretrained names the config field before it
    compiles or loads anything (no safetensors in the folder here)."""
    from tilemega.mega.tp_engine import TensorParallelEngine

    (tmp_path / "config.json").write_text(json.dumps(llama_dict(num_key_value_heads=2)))
    with pytest.raises(ValueError, match=r"config.json: num_key_value_heads = 2 cannot be "
                                         r"split over 4 GPUs"):
        TensorParallelEngine.from_pretrained(str(tmp_path), world=4, max_seq_len=256)


def test_cli_text_prompt_without_a_tokenizer_is_an_argument_error(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(llama_dict()))
    proc = _cli("--model", str(tmp_path), "--prompt", "hello")
    assert proc.returncode == 2 and "--prompt needs a tokenizer" in proc.stderr, proc.stderr


def test_more_workers_than_sms_make_ptxas_fit_two_ctas_an_sm():
    """A generation kernel of 263 workers (max-ctas 264: two CTAs on each of
    the 132 SMs) carries .minnctapersm 2, so ptxas caps its registers at 128
    (65536 / (2 x 256)) instead of letting one CTA take an SM's file; with
    per-body thread ids it does so without spilling."""
    import re

    import tilemega
    from ptxas_policy import ptxas_checks_enabled
    from tilemega import mega

    graph = mega.generation_graph(ModelConfig(**SMALL), workers=263)
    art = tilemega.compile(graph.to_mlir(), chip="sm_90a", name="gen_test",
                           mega_max_ctas=264, mega_fresh_thread_ids=True)
    assert art.kernels[-1]["grid"][0] == 263
    assert re.search(r"^\.minnctapersm 2$", art.ptx, re.M)
    if ptxas_checks_enabled():
        assert int(re.search(r"Used (\d+) registers", art.ptxas_log).group(1)) <= 128
        assert re.search(r"\b0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
                         art.ptxas_log), art.ptxas_log


def test_a_generation_graph_of_two_ctas_an_sm_fills_twice_the_sms():
    """generation_graph(cfg, ctas_per_sm=2): 2 x 132 CTAs less the
    scheduler's, the graph says so (convert-mega-to-gpu admits them without
    max-ctas) and the kernel fits them; a bad value names the argument, and
    a compile option given with a prebuilt artifact is refused."""
    import re

    import tilemega
    from tilemega import mega
    from tilemega.mega.engine import Engine

    graph = mega.generation_graph(ModelConfig(**SMALL), ctas_per_sm=2)
    assert graph.workers == 263 and "ctas_per_sm = 2" in graph.to_mlir()
    # The default on one GPU (GENERATION_CTAS_PER_SM); one CTA on request.
    assert mega.generation_graph(ModelConfig(**SMALL)).to_mlir() == graph.to_mlir()
    assert mega.generation_graph(ModelConfig(**SMALL), ctas_per_sm=1).workers == 131
    art = tilemega.compile(graph.to_mlir(), chip="sm_90a", name="gen_test")
    assert art.kernels[-1]["grid"][0] == 263
    assert re.search(r"^\.minnctapersm 2$", art.ptx, re.M)
    # Any other mega option keeps the graph's CTAs an SM (mega_max_ctas
    # unset admits the SMs x ctas_per_sm, not the SM count alone).
    timed = tilemega.compile(graph.to_mlir(), chip="sm_90a", name="gen_test",
                             mega_timeline=True, assemble=False)
    assert timed.kernels[-1]["grid"][0] == 263
    with pytest.raises(ValueError, match="ctas_per_sm must be 1 to 8, got 0"):
        mega.generation_graph(ModelConfig(**SMALL), ctas_per_sm=0)
    with pytest.raises(ValueError, match="ctas_per_sm=2 is a compile option, but artifact="):
        Engine.from_model(None, artifact="gen.json", ctas_per_sm=2)


def test_registers_capped_into_spills_by_ctas_per_sm_are_a_compile_warning():
    """Eight CTAs of 256 threads an SM leave 32 registers a thread (four,
    64): ptxas spills, and tilemega.compile says so, naming the CTAs an SM
    that capped them (a slow kernel is not silent)."""
    import tilemega
    from ptxas_policy import ptxas_checks_enabled
    from tilemega import mega
    from tilemega.compiler import CompileWarning

    from tilemega.compiler import spill_warnings

    # The message from a ptxas log alone (no ptxas needed).
    ptx = ".visible .entry generate(\n.param .u64 a\n)\n.maxntid 256, 1, 1\n.minnctapersm 8\n{"
    log = ("ptxas info    : Compiling entry function 'generate' for 'sm_90a'\n"
           "ptxas info    : Function properties for generate\n"
           "    32 bytes stack frame, 48 bytes spill stores, 44 bytes spill loads\n"
           "ptxas info    : Used 32 registers, used 1 barriers\n")
    assert spill_warnings(ptx, log) == [
        "kernel 'generate': ptxas spilled 48 bytes of registers to local memory (32 registers "
        "a thread: the most that lets 8 CTAs share an SM, as the graph's ctas_per_sm or "
        "max-ctas asks)"]
    assert spill_warnings(ptx, log.replace("48 bytes spill", "0 bytes spill")) == []
    # End to end with four CTAs an SM (eight would not fit the bodies' shared
    # memory on an SM: a compile error of its own, below).
    graph = mega.generation_graph(ModelConfig(**SMALL), workers=4 * 132 - 1, ctas_per_sm=4)
    if ptxas_checks_enabled():   # end to end: tilemega.compile warns
        with pytest.warns(CompileWarning, match=r"kernel 'generate': ptxas spilled \d+ bytes "
                                                r".*\(64 registers a thread: the most that "
                                                r"lets 4 CTAs"):
            tilemega.compile(graph.to_mlir(), chip="sm_90a", name="gen_test")
    eight = mega.generation_graph(ModelConfig(**SMALL), workers=8 * 132 - 1, ctas_per_sm=8)
    with pytest.raises(tilemega.CompileError, match=r"persistent kernel keeps 8 CTAs resident "
                                                   r"on each SM, each with \d+ bytes of shared "
                                                   r"memory"):
        tilemega.compile(eight.to_mlir(), chip="sm_90a", name="gen_test")


def test_generation_timeline_tables_per_task_and_per_role():
    """bench/generate_timeline.py's tables from a step's stamps: per task
    (graph order) instances, first start, last end, mean; per layer role
    the mean span and period over the layers (the period runs to the next
    task's first start); entries never stamped are left out."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "generate_timeline", os.path.join(ROOT, "bench", "generate_timeline.py"))
    gt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gt)
    names = ["t0_embed", "t1_l0_qkv", "t2_l0_wo", "t3_l1_qkv", "t4_l1_wo", "t5_lm_head"]
    meta = {"tasks": [{"name": n} for n in names],
            "entries": {"task": [0, 1, 1, 2, 3, 4, 5, 5]}}
    us = 1000
    rows = [(5 * us, 6 * us, 0, 0),                       # embed
            (6 * us, 8 * us, 0, 0), (7 * us, 10 * us, 1, 0),  # l0 qkv: 2 instances
            (11 * us, 12 * us, 0, 0),                     # l0 wo
            (12 * us, 15 * us, 0, 0),                     # l1 qkv
            (16 * us, 18 * us, 0, 0),                     # l1 wo
            (19 * us, 20 * us, 0, 0), (0, 0, 0, 0)]       # lm head, one never ran
    table = gt.task_table(rows, meta)
    assert table == [("t0_embed", 1, 0.0, 1.0, 1.0), ("t1_l0_qkv", 2, 1.0, 5.0, 2.5),
                     ("t2_l0_wo", 1, 6.0, 7.0, 1.0), ("t3_l1_qkv", 1, 7.0, 10.0, 3.0),
                     ("t4_l1_wo", 1, 11.0, 13.0, 2.0), ("t5_lm_head", 1, 14.0, 15.0, 1.0)]
    roles = gt.per_role(table)
    assert roles == {"qkv": ((4.0 + 3.0) / 2, (5.0 + 4.0) / 2, 2),
                     "wo": ((1.0 + 2.0) / 2, (1.0 + 3.0) / 2, 2)}
    # Every entry that ran, times from the step's first start.
    raw = gt.entries_doc(rows, meta)
    assert raw["tasks"] == names and len(raw["entries"]) == 7
    assert raw["entries"][2] == [1, 2 * us, 5 * us, 1, 0]
    # A layer's tasks from those entries: l1's wo started 1 us after l1's
    # qkv ended, on the CTA that ran that qkv.
    rows_l1 = gt.layer_entries(raw, 1)
    assert [r["task"] for r in rows_l1] == ["t3_l1_qkv", "t4_l1_wo"]
    assert rows_l1[0]["duration_us"] == [3.0, 3.0, 3.0] and rows_l1[0]["end_us"][-1] == 3.0
    assert rows_l1[1]["start_after_previous_end_us"] == {"l1_qkv": [1.0, 1.0, 1.0, 1]}
    assert gt.layer_entries(raw, 0)[0]["start_spread_us"] == 1.0       # qkv's 2 instances


def test_generation_timeline_balance_bounds_what_the_slowest_cta_costs():
    """bench/generate_timeline.py balance: per task of many instances, the
    slowest entry against its units divided in proportion to each CTA's
    measured rate, and how alike the CTAs' speeds are across tasks; the
    entries' units from the metadata (a short last instance)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "generate_timeline", os.path.join(ROOT, "bench", "generate_timeline.py"))
    gt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gt)
    meta = {"tasks": [{"name": "t0_l0_wgu", "units": 4, "units_per_task": 1},
                      {"name": "t1_lm_head", "units": 7, "units_per_task": 2}],
            "entries": {"task": [0, 0, 0, 0, 1, 1, 1, 1],
                        "instance": [0, 1, 2, 3, 0, 1, 2, 3]}}
    us = 1000
    # CTA 3 is twice as slow as the others in both tasks; the head's last
    # instance (CTA 3) runs 1 unit.
    rows = [(0, 1 * us, 0, 0), (0, 1 * us, 1, 0), (0, 1 * us, 2, 1), (0, 2 * us, 3, 1),
            (2 * us, 4 * us, 0, 0), (2 * us, 4 * us, 1, 0), (2 * us, 4 * us, 2, 1),
            (2 * us, 4 * us, 3, 1)]
    doc = gt.entries_doc(rows, meta)
    assert doc["units"] == [1, 1, 1, 1, 2, 2, 2, 1]
    got = gt.balance(doc, min_ctas=4)
    wgu, head = got["tasks"]
    # 4 units at rates 1, 1, 1, 0.5 a us: 4 / 3.5 us balanced, 2 us slowest.
    assert wgu["duration_us"] == [1.0, 1.0, 2.0]
    assert wgu["balanced_us"] == pytest.approx(4 / 3.5) and wgu["excess_us"] == pytest.approx(2 - 4 / 3.5)
    # 7 units at rates 1, 1, 1, 0.5: balanced 2 us, every entry 2 us.
    assert head["balanced_us"] == pytest.approx(2.0) and head["excess_us"] == pytest.approx(0.0)
    assert got["roles"] == {"wgu": pytest.approx(2 - 4 / 3.5), "t1_lm_head": pytest.approx(0.0)}
    assert got["excess_us"] == pytest.approx(2 - 4 / 3.5)
    # Without units every entry counts one; the head is the largest task and
    # the gate/up durations follow the same CTAs as its own - but its
    # durations are all equal, so there is no correlation to report.
    del doc["units"]
    plain = gt.balance(doc, min_ctas=4)
    assert plain["correlation_with"] == "t1_lm_head" and plain["correlation"] == {}
    assert gt.balance(doc, min_ctas=5) == {"tasks": [], "roles": {}, "excess_us": 0}
    # The same CTA slow in both: durations alike, correlation 1.
    slow = [list(e) for e in doc["entries"]]
    slow[7][2] = slow[7][1] + 4 * us
    alike = gt.balance({"tasks": doc["tasks"], "entries": slow}, min_ctas=4)
    assert alike["correlation"] == {"wgu": pytest.approx(1.0)}
    # A CTA's two entries of one task count as one CTA: their units and
    # times summed (CTA 0 ran 2 units in 2 us, the rate of CTAs 1-3).
    two = {"tasks": ["t0_l0_wd"], "units": [1, 1, 1, 1, 1],
           "entries": [[0, 0, us, 0, 0], [0, us, 2 * us, 0, 0], [0, 0, us, 1, 0],
                       [0, 0, us, 2, 1], [0, 0, us, 3, 1]]}
    wd = gt.balance(two, min_ctas=4)["tasks"][0]
    assert wd["ctas"] == 4 and wd["duration_us"] == [1.0, 1.0, 2.0]
    assert wd["balanced_us"] == pytest.approx(5 / 4) and wd["excess_us"] == pytest.approx(0.75)
    # A task that claims its units: no units an entry (null), no bound; its
    # CTAs' ends spread over 1 us, and it stays out of the sums.
    claimed_meta = {"tasks": [{"name": "t1_lm_head", "units": 7, "units_per_task": 2,
                               "claims_units": True}],
                    "entries": {"task": [0, 0, 0, 0], "instance": [0, 1, 2, 3]}}
    claimed = gt.entries_doc([(0, 3 * us, 0, 0), (0, 3 * us, 1, 0), (0, 2 * us, 2, 1),
                              (0, 3 * us, 3, 1)], claimed_meta)
    assert claimed["units"] == [None] * 4
    head = gt.balance(claimed, min_ctas=4)
    assert head["tasks"] == [{"task": "t1_lm_head", "ctas": 4, "claims_units": True,
                              "duration_us": [2.0, 3.0, 3.0], "end_spread_us": 1.0}]
    assert head["excess_us"] == 0


def test_generation_timeline_reads_only_entries_documents(tmp_path):
    """bench/generate_timeline.py entries / placement / balance on a file
    that is not an entries document exit naming the file and the field."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "generate_timeline", os.path.join(ROOT, "bench", "generate_timeline.py"))
    gt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gt)
    cases = {"broken.json": ("{", "not a readable JSON document"),
             "other.json": ('{"step_us": 1}', "no 'tasks' and 'entries' lists"),
             "task.json": ('{"tasks": ["t0"], "entries": [[1, 0, 5, 0, 0]]}',
                           r"entries\[0\] is not \[task, start ns"),
             "units.json": ('{"tasks": ["t0"], "entries": [[0, 0, 5, 0, 0]], "units": []}',
                            "'units' does not give one count"),
             "negative.json": ('{"tasks": ["t0"], "entries": [[0, 0, 5, 0, 0]], "units": [-1]}',
                               "'units' does not give one count")}
    for name, (text, message) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        for command in ("entries", "placement", "balance"):
            with pytest.raises(SystemExit, match=re.escape(str(path)) + ": " + message):
                gt.main([command, str(path)])
    good = tmp_path / "good.json"
    good.write_text('{"tasks": ["t0"], "entries": [[0, 0, 5, 0, 0]]}')
    assert gt.read_entries(str(good))["entries"] == [[0, 0, 5, 0, 0]]
