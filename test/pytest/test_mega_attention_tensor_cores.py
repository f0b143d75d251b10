"""The generation attention on tensor cores (generation_graph's default
wherever the shape fits, generation_bodies.attention_at_config): each
key chunk's two products (scores, probabilities times values) become
mma.sync on a 16-row tile whose first rows go out as the partials the
CUDA-core split stores (one merge body for both), and shapes it cannot
serve are refused naming the parameter when asked for, and left on CUDA
cores by the default. Its numbers
on a GPU: examples/gpu_check.py (float64) and bench/generate_ab.py's
variant attention_tensor_cores (docs/mega.md)."""

import re

import pytest

pytest.importorskip("tilemega.ir", reason="the compiler package is not built")

import tilemega  # noqa: E402
from tilemega import mega  # noqa: E402
from tilemega.ir import Context, InsertionPoint, Location, Module  # noqa: E402
from tilemega.mega import bodies  # noqa: E402
from tilemega.mega import generation_bodies as gb  # noqa: E402

from conftest import shipped_config  # noqa: E402

SMALL = shipped_config("gen_small")


@pytest.fixture(scope="module")
def ptx():
    """tensor_cores -> the PTX of gen_small's generation kernel."""
    out = {}
    for tc in (False, True):
        text = mega.generation_graph(SMALL, attention_tensor_cores=tc).to_mlir()
        out[tc] = tilemega.compile(text, chip="sm_90a").ptx
    return out


def test_the_attention_multiplies_on_tensor_cores(ptx):
    # gen_small's graph has no other gemm: every mma.sync is the attention's
    # (scores and outputs of a chunk, one n8 tile a warp, K by 16).
    assert len(re.findall(r"mma\.sync\.aligned\.m16n8k16", ptx[True])) >= 2
    assert "mma.sync" not in ptx[False]


def test_the_graph_names_the_tensor_core_split_and_keeps_the_merge():
    cfg = SMALL
    text = mega.generation_graph(cfg, attention_tensor_cores=True).graph_mlir()
    plain = mega.generation_graph(cfg, attention_tensor_cores=False).graph_mlir()
    splits = [line for line in text.splitlines() if "mega.task" in line and "attn_split" in line]
    assert splits and all("_tc(" in line for line in splits), splits
    merges = [line for line in text.splitlines() if "mega.task" in line and "attn_merge" in line]
    assert merges == [line for line in plain.splitlines()
                      if "mega.task" in line and "attn_merge" in line]
    assert "_tc(" not in plain


@pytest.mark.parametrize("Hq, Hkv", [(32, 8), (14, 2), (4, 2)])
def test_both_splits_store_the_rows_the_merge_reads(Hq, Hkv):
    """Llama-3.2-1B, Qwen2-0.5B and gen_small groups: 4, 7 and 2 heads
    (partial rows 4, 8 and 4; tensor cores compute 16)."""
    D, S, splits = 64, 1024, 8
    merge = gb.attention_merge(Hq, Hkv, D, splits, emit=False)
    want = dict((n, s) for n, s, _ in merge.args)
    P = gb.partial_rows(Hq // Hkv, D, 256)
    assert want["o_part"] == (Hkv * splits * P * D,) and want["lse"] == (Hkv * splits * P,)
    for make in (gb.rope_attention_at, gb.attention_at):
        for tc in (False, True):
            split = make(Hq, Hkv, D, S, splits, tensor_cores=tc, emit=False)
            got = dict((n, s) for n, s, _ in split.args)
            assert (got["o_part"], got["lse"]) == (want["o_part"], want["lse"]), (make, tc)
    assert gb.attention_at_config(Hq, Hkv, D, S, splits, 256, tensor_cores=True)[0] == \
        gb.MMA_ROWS


@pytest.mark.parametrize("args, kwargs, words", [
    # 32 query heads a kv head: more rows than one mma tile.
    ((32, 1, 64, 1024, 8, 256), {}, ["32 query heads", "16 rows"]),
    # 8 warps side by side cover 64 columns: a 32-wide head does not fill them.
    ((32, 8, 32, 1024, 8, 256), {}, ["head_dim 32", "64 columns"]),
    # key chunks a multiple of the 64 columns the warps' tiles cover.
    ((32, 8, 64, 1024, 8, 256), {"key_block": 32}, ["key_block 32", "multiple of 64"]),
])
def test_shapes_the_tensor_cores_cannot_serve_are_refused(args, kwargs, words):
    with pytest.raises(ValueError) as info:
        gb.attention_at_config(*args, tensor_cores=True, **kwargs)
    for w in words:
        assert w in str(info.value), str(info.value)


def test_the_default_takes_tensor_cores_where_the_shape_fits():
    """generation_graph's attention_tensor_cores=None: tensor cores for the
    shipped shapes, CUDA cores (no error) for one the tensor cores refuse,
    and an explicit True refuses that shape naming it."""
    default = mega.generation_graph(SMALL).graph_mlir()
    assert default == mega.generation_graph(SMALL, attention_tensor_cores=True).graph_mlir()
    # 16 warps side by side cover 128 columns: more than a 64-wide head.
    text = mega.generation_graph(SMALL, threads=512).graph_mlir()
    assert "attn_split" in text and "_tc(" not in text
    with pytest.raises(ValueError, match="head_dim 64 is not a multiple of the 128"):
        mega.generation_graph(SMALL, threads=512, attention_tensor_cores=True)
    assert not gb.tensor_cores_serve(4, 2, 64, 256, 8, 512)
    assert gb.tensor_cores_serve(32, 8, 64, 1024, 8, 256)


def test_cuda_core_config_is_unchanged():
    """The default path keeps its rows, chunk and layout (the shipped bodies)."""
    Gp, BN, stages, layout = gb.attention_at_config(32, 8, 64, 1024, 8, 256)
    assert (Gp, BN, stages) == (4, 64, 2) and layout.startswith("#tile.blocked")
    Gp, BN, stages, layout = gb.attention_at_config(32, 8, 64, 1024, 8, 256,
                                                    tensor_cores=True)
    assert (Gp, BN, stages) == (16, 64, 2) and layout == "#tile.mma<warpsPerBlock = [1, 8]>"


@pytest.mark.parametrize("tensor_cores", [False, True])
def test_the_rope_attention_loads_its_heads_and_tables_in_one_round_trip(tensor_cores):
    """rope_attention_at's unit (load_heads) reads its group's q, k and v
    heads and the tables' row into registers in one T.Parallel: every
    global load of the kernel before its first barrier (they were three
    copies into shared memory and the tables' reads in the rotation, one
    round trip each, ahead of the cached keys' first chunks)."""
    body = gb.rope_attention_at(32, 8, 64, 1024, 8, tensor_cores=tensor_cores, emit=False)
    with Context(), Location.unknown():
        module = Module.create()
        with InsertionPoint(module.body):
            bodies.emit(body)
        ptx = tilemega.compile(module, chip="sm_90a").ptx
    before_barrier = ptx[:ptx.index("bar.sync")]
    loads = re.findall(r"ld\.global\.(?:nc\.)?(\w+)", before_barrier)
    # The position, both halves of a head's row, cos and sin.
    assert len(loads) == 5, loads
    assert "ld.global" not in ptx[ptx.index("bar.sync"):ptx.index("mbarrier.init" if tensor_cores
                                                                   else "cp.async")]
