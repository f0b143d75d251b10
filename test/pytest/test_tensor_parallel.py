"""Tensor parallelism on paper (tilemega.mega.tensor_parallel, issue 12):
the sharded step of 1, 2, 4 and 8 ranks equals the unsharded float64 step,
and a world size the model cannot take is an error naming the config
field. CPU only (numpy)."""
import numpy as np
import pytest

from tilemega.mega import generation_reference as ref
from tilemega.mega import generation_state as gs
from tilemega.mega import tensor_parallel as tp
from tilemega.mega.models import ModelConfig

SMALL = dict(layers=2, hidden=128, intermediate=512, heads=8, kv_heads=8, head_dim=32,
             vocab=256, max_seq_len=32, eps=1e-5, rope_theta=10000.0)


@pytest.mark.parametrize("world", [1, 2, 4, 8])
@pytest.mark.parametrize("fields", [
    {},                                                   # GQA group 1, tied embeddings
    dict(kv_heads=8, heads=32, qkv_bias=True, tie_embeddings=False),   # group 4, Qwen2-like
])
def test_the_sharded_step_equals_the_whole_one(world, fields):
    cfg = ModelConfig(**{**SMALL, **fields})
    full = ref.make_numpy_tensors(cfg)
    pos = 13
    full["gen"][gs.POS] = pos
    shards = [tp.shard(full, cfg, world, r) for r in range(world)]
    want = ref.step_float64(cfg, full)
    got = tp.step_float64(cfg, shards, world)
    assert np.allclose(got["logits"], want["logits"], rtol=1e-12, atol=1e-12)
    assert np.allclose(got["x"], want["x"], rtol=1e-12, atol=1e-12)
    for name, row in want["rows"].items():
        assert np.allclose(got["rows"][name], row, rtol=1e-12, atol=1e-12), name
    assert got["pick"] == int(np.argmax(want["logits"]))


def test_each_rank_holds_its_heads_columns_and_vocabulary_rows():
    cfg = ModelConfig(**{**SMALL, "heads": 16, "kv_heads": 4})
    full = ref.make_numpy_tensors(cfg)
    world, D = 2, cfg.head_dim
    s1 = tp.shard(full, cfg, world, 1)
    local = tp.shard_config(cfg, world)
    assert (local.heads, local.kv_heads, local.intermediate, local.vocab) == (8, 2, 256, 128)
    # wqkv: q heads 8..15, k heads 2..3, v heads 2..3 of the full [q | k | v].
    wqkv = full["l0.wqkv"]
    assert np.array_equal(s1["l0.wqkv"][:8 * D], wqkv[8 * D:16 * D])
    assert np.array_equal(s1["l0.wqkv"][8 * D:10 * D], wqkv[(16 + 2) * D:(16 + 4) * D])
    assert np.array_equal(s1["l0.wqkv"][10 * D:], wqkv[(16 + 4 + 2) * D:(16 + 8) * D])
    assert np.array_equal(s1["l0.wo"], full["l0.wo"][:, 8 * D:16 * D])
    assert np.array_equal(s1["l0.wgu"][:256], full["l0.wgu"][256:512])
    assert np.array_equal(s1["l0.wgu"][256:], full["l0.wgu"][512 + 256:])
    assert np.array_equal(s1["l0.wd"], full["l0.wd"][:, 256:])
    assert np.array_equal(s1["l0.k_cache"], full["l0.k_cache"][2:4])
    assert np.array_equal(s1["head"], full["embed"][128:])
    assert s1["final_norm"] is full["final_norm"] and s1["embed"] is full["embed"]


def test_ties_go_to_the_smallest_global_index():
    assert tp.pick([(1.0, 7), (3.0, 130), (3.0, 129)]) == 129
    assert tp.pick([(2.0, 5), (1.0, 0)]) == 5


@pytest.mark.parametrize("fields, world, field", [
    (dict(heads=24, kv_heads=8), 16, "world size 16"),
    (dict(heads=24, kv_heads=8), 0, "world size 0"),
    (dict(heads=24, kv_heads=8, intermediate=512), 3, "num_key_value_heads"),
    (dict(heads=14, kv_heads=2), 4, "num_key_value_heads"),      # Qwen2-0.5B's layout
    (dict(intermediate=320), 2, "intermediate_size"),
    (dict(vocab=250), 4, "vocab_size"),
])
def test_a_world_the_model_cannot_take_is_an_error_naming_the_field(fields, world, field):
    cfg = ModelConfig(**{**SMALL, **fields})
    with pytest.raises(ValueError, match=field):
        tp.check_world(cfg, world)


def test_the_issue_shapes_split_over_two_to_eight_gpus():
    llama1b = ModelConfig()                                        # Llama-3.2-1B
    llama8b = ModelConfig(layers=32, hidden=4096, intermediate=14336, heads=32, kv_heads=8,
                          head_dim=128, vocab=128256)
    for world in (2, 4, 8):
        assert tp.check_world(llama1b, world).kv_heads == 8 // world
        local = tp.check_world(llama8b, world)
        assert local.intermediate == 14336 // world and local.intermediate % 64 == 0
    with pytest.raises(ValueError, match="True"):
        tp.check_world(llama1b, True)
