"""The generation attention on tensor cores (generation_graph(...,
attention_tensor_cores=True), generation_bodies.attention_at_config): each
key chunk's two products (scores, probabilities times values) become
mma.sync on a 16-row tile, the partials and the merge take 16 rows a unit,
and shapes it cannot serve are refused naming the parameter. Its numbers
on a GPU: examples/gpu_check.py (float64) and bench/generate_ab.py's
variant attention_tensor_cores (docs/mega.md)."""

import re

import pytest

pytest.importorskip("tilemega.ir", reason="the compiler package is not built")

import tilemega  # noqa: E402
from tilemega import mega  # noqa: E402
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


def test_the_graph_names_the_tensor_core_bodies_and_their_16_row_partials():
    cfg = SMALL
    G = cfg.heads // cfg.kv_heads
    text = mega.generation_graph(cfg, attention_tensor_cores=True).graph_mlir()
    tasks = [line for line in text.splitlines() if "mega.task" in line and "attn" in line]
    assert tasks and all("_tc(" in line for line in tasks), tasks
    # o_part: a unit's 16 rows of head_dim, every (kv head, split) unit.
    splits = 8
    rows = cfg.kv_heads * splits * gb.MMA_ROWS
    assert f"memref<{rows * cfg.head_dim}xf32>" in text
    assert G < gb.MMA_ROWS
    plain = mega.generation_graph(cfg).graph_mlir()
    assert "_tc(" not in plain


def test_split_and_merge_agree_on_the_rows_of_a_unit():
    Hq, Hkv, D, S, splits = 32, 8, 64, 1024, 8
    for tc in (False, True):
        split = gb.rope_attention_at(Hq, Hkv, D, S, splits, tensor_cores=tc, emit=False)
        merge = gb.attention_merge(Hq, Hkv, D, splits, tensor_cores=tc, emit=False)
        o_part = dict((n, s) for n, s, _ in split.args)["o_part"]
        assert dict((n, s) for n, s, _ in merge.args)["o_part"] == o_part
        Gp = gb.padded_group(Hq // Hkv, D, 256, tc)[0]
        assert o_part == (Hkv * splits * Gp * D,)
    assert gb.padded_group(4, 64, 256, True)[0] == gb.MMA_ROWS


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


def test_cuda_core_config_is_unchanged():
    """The default path keeps its rows, chunk and layout (the shipped bodies)."""
    Gp, BN, stages, layout = gb.attention_at_config(32, 8, 64, 1024, 8, 256)
    assert (Gp, BN, stages) == (4, 64, 2) and layout.startswith("#tile.blocked")
    Gp, BN, stages, layout = gb.attention_at_config(32, 8, 64, 1024, 8, 256,
                                                    tensor_cores=True)
    assert (Gp, BN, stages) == (16, 64, 2) and layout == "#tile.mma<warpsPerBlock = [1, 8]>"
