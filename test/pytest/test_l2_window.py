"""The L2 access-policy window of a mega-kernel's launches
(tilemega/runtime/l2_window.py) without a GPU: the window over a set of
tensors, its checks, and the launch configuration it builds (against a
stand-in for cuda-python's driver module)."""

import types

import pytest

from tilemega.runtime.l2_window import L2Window, launch


class Tensor:
    def __init__(self, ptr, numel, size=2):
        self.ptr, self.n, self.size = ptr, numel, size

    def data_ptr(self):
        return self.ptr

    def numel(self):
        return self.n

    def element_size(self):
        return self.size


def test_the_window_spans_the_lowest_to_the_highest_byte():
    w = L2Window.covering([Tensor(0x2000, 64), Tensor(0x1000, 128)])
    assert (w.base, w.num_bytes, w.hit_ratio) == (0x1000, 0x1000 + 128, 1.0)


@pytest.mark.parametrize("tensors, ratio, message", [
    ([], 1.0, "caches: no tensors to cover"),
    ([Tensor(0x1000, 8)], 0.0, r"caches: hit_ratio must be in \(0, 1\], got 0.0"),
    ([Tensor(0x1000, 8)], 1.5, r"hit_ratio must be in \(0, 1\], got 1.5"),
])
def test_a_bad_window_names_what_is_wrong(tensors, ratio, message):
    with pytest.raises(ValueError, match=message):
        L2Window.covering(tensors, ratio, what="caches")


class Attr:
    def __init__(self):
        self.id = None
        self.value = types.SimpleNamespace(accessPolicyWindow=types.SimpleNamespace(),
                                           cooperative=0)


def fake_driver(calls):
    enum = types.SimpleNamespace
    return types.SimpleNamespace(
        CUlaunchConfig=types.SimpleNamespace, CUlaunchAttribute=Attr,
        CUlaunchAttributeID=enum(CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW="window",
                                 CU_LAUNCH_ATTRIBUTE_COOPERATIVE="cooperative"),
        CUaccessProperty=enum(CU_ACCESS_PROPERTY_PERSISTING="persisting",
                              CU_ACCESS_PROPERTY_STREAMING="streaming"),
        cuLaunchKernelEx=lambda *args: calls.append(args) or (0,))


@pytest.mark.parametrize("cooperative", [True, False])
def test_the_launch_carries_the_window_and_the_cooperative_attribute(cooperative):
    calls = []
    window = L2Window(0x1000, 4096, 0.5)
    assert launch(fake_driver(calls), "f", (264, 1, 1), (256, 1, 1), 1024, "s", 0xbeef,
                  cooperative, window) == (0,)
    (config, function, params, extra), = calls
    assert (function, params, extra) == ("f", 0xbeef, 0)
    assert (config.gridDimX, config.blockDimX, config.sharedMemBytes, config.hStream) == \
        (264, 256, 1024, "s")
    ids = [a.id for a in config.attrs]
    assert ids == (["window", "cooperative"] if cooperative else ["window"])
    assert config.numAttrs == len(ids)
    policy = config.attrs[0].value.accessPolicyWindow
    assert (policy.base_ptr, policy.num_bytes, policy.hitRatio, policy.hitProp,
            policy.missProp) == (0x1000, 4096, 0.5, "persisting", "streaming")
    if cooperative:
        assert config.attrs[1].value.cooperative == 1


def _bench(name):
    """bench/<name>.py, loaded by path (bench/ is not a package)."""
    import importlib.util
    import os

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = importlib.util.spec_from_file_location(
        "bench_" + name, os.path.join(root, "bench", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_run_label_names_the_variant_and_the_engine_options():
    ab = _bench("generate_ab")
    assert ab.split_label("shipped") == ("shipped", {})
    assert ab.split_label("pair_entries@l2_caches") == ("pair_entries", {"l2_caches": True})
    with pytest.raises(SystemExit, match="'shipped@l2': unknown engine option 'l2'"):
        ab.split_label("shipped@l2")


def test_the_caches_are_one_pool_that_one_window_covers(monkeypatch):
    torch = pytest.importorskip("torch")
    from tilemega.mega import checkpoint
    from tilemega.mega import generation_reference as ref
    from tilemega.mega.models import ModelConfig

    cfg = ModelConfig(layers=3, hidden=128, intermediate=256, heads=4, kv_heads=2,
                      head_dim=64, vocab=512, max_seq_len=128)
    # No weights: what assemble adds (the state, the caches, the logits).
    monkeypatch.setattr(checkpoint, "fuse", lambda cfg, get, source, convert: {})
    out = checkpoint.assemble(cfg, None, "none", device="cpu")
    specs = ref.tensor_specs(cfg)
    assert {n: tuple(out[n].shape) for n in specs} == {n: tuple(s) for n, (s, _) in specs.items()}
    caches = [out[n] for n in specs if n.endswith("_cache")]
    assert len(caches) == 6 and all(c.is_contiguous() and not c.any() for c in caches)
    window = L2Window.covering(caches)
    assert window.num_bytes == sum(c.numel() * c.element_size() for c in caches)
    caches[1].fill_(1)   # views of one pool, each its own bytes
    assert not caches[0].any() and not caches[2].any()


def test_the_timeline_run_refuses_an_unknown_engine_option():
    timeline = _bench("generate_timeline")
    with pytest.raises(SystemExit, match="'@l2': unknown engine option 'l2'"):
        timeline.main(["run", "folder", "--out", "out", "l2"])
