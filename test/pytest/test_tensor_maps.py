"""TMA tensor maps in the runtime, without a GPU: the artifact's
`tensor_maps` are validated, encoded once per tensor address (the driver's
encoder replaced by a recorder) and passed by value, 64-byte aligned, after
the kernel's own parameters on both launch paths."""

import ctypes
import os
import struct

import pytest

from conftest import write_artifact
from test_runtime import FakeDriver, _torch_args, fake_driver, fake_torch  # noqa: F401

from tilemega.runtime import ArgumentError, load_artifact
from tilemega.runtime import tensor_maps


def with_map(meta, **over):
    """add_one with a tensor map of A: 64 x 32 f32 boxes (128-byte rows)
    under the 128-byte swizzle."""
    entry = dict(param=0, box=[64, 32], swizzle_bytes=128)
    entry.update(over)
    meta["kernels"][0]["tensor_maps"] = [entry]
    return meta


class Recorder:
    """Stands in for cuTensorMapEncodeTiled: 128 bytes that name the call."""

    def __init__(self):
        self.calls = []

    def __call__(self, dtype, address, dims, strides, box, swizzle):
        self.calls.append((dtype, address, dims, strides, box, swizzle))
        return struct.pack("<Q", address) + bytes([len(self.calls)]) * 120


@pytest.fixture
def recorder(monkeypatch):
    r = Recorder()
    monkeypatch.setattr(tensor_maps, "encoder", r)
    # Encoded maps are cached per kernel spec (args.maps_for, both launch
    # paths): another test's maps, made by another encoder, must not leak in.
    from tilemega.runtime import args
    args.maps_for.cache_clear()
    return r


class AddressDriver(FakeDriver):
    """Also records where each parameter's bytes were."""

    def cuLaunchKernel(self, f, *args):
        params = args[-2]
        ptrs = (ctypes.c_void_p * len(self.sizes)).from_address(params)
        self.addresses = [ptrs[i] for i in range(len(self.sizes))]
        return super().cuLaunchKernel(f, *args)


def test_spec_and_driver_arguments(tmp_path, base_meta):
    k = load_artifact(write_artifact(tmp_path, with_map(base_meta))).add_one
    (m,) = k.spec.tensor_maps
    assert (m.param, m.box, m.swizzle_bytes) == (0, (64, 32), 128)
    assert k.spec.params[0].alignment == 16          # TMA's address rule
    assert k.spec.params[1].alignment == 1
    # float32 (7), dims and byte strides innermost first, box likewise, 128B (3).
    assert tensor_maps.driver_arguments(m, k.spec.params[0]) == (
        7, (1024, 1024), (4096,), (32, 64), 3)


@pytest.mark.parametrize("over, field", [
    (dict(param=2), "tensor_maps[0].param': 2 is not the index of a tensor"),
    (dict(param=9), "tensor_maps[0].param'"),
    (dict(box=[64]), "tensor_maps[0].box'"),
    (dict(box=[512, 32]), "tensor_maps[0].box[0]': 512 exceeds TMA's box limit 256"),
    (dict(box=[64, 2], swizzle_bytes=0), "rows of 8 bytes; TMA needs multiples of 16"),
    (dict(swizzle_bytes=96), "tensor_maps[0].swizzle_bytes'"),
    (dict(box=[64, 8], swizzle_bytes=128), "rows of 32 bytes under a 128-byte swizzle"),
])
def test_bad_tensor_maps_name_the_field(tmp_path, base_meta, over, field):
    path = write_artifact(tmp_path, with_map(base_meta, **over))
    with pytest.raises(ValueError) as info:
        load_artifact(path)
    assert os.path.basename(path) in str(info.value) and field in str(info.value)


def test_unaligned_tensor_strides_are_refused(tmp_path, base_meta):
    p = base_meta["kernels"][0]["params"][0]
    p["shape"], p["strides"] = [1024, 3], [3, 1]
    with pytest.raises(ValueError, match=r"16-byte row strides"):
        load_artifact(write_artifact(tmp_path, with_map(base_meta, box=[64, 4],
                                                        swizzle_bytes=0)))


@pytest.mark.parametrize("path", ["fast", "general"])
def test_maps_follow_the_params_aligned_and_cached(tmp_path, base_meta, fake_torch, monkeypatch,
                                                   recorder, path):
    from tilemega.runtime import artifact, driver
    drv = AddressDriver(sizes=[8, 8, 4, 4, 128])
    monkeypatch.setattr(driver, "_cuda", drv)
    monkeypatch.setattr(driver, "_device_count", 1)
    monkeypatch.setattr(driver, "_primary", {})
    monkeypatch.setattr(artifact, "check_ptx", lambda ptx, spec, where: None)
    k = load_artifact(write_artifact(tmp_path, with_map(base_meta))).add_one
    launch = k if path == "fast" else k.launch
    launch(*_torch_args(fake_torch))
    launch(*_torch_args(fake_torch, n=9))                 # same A: no new encoding
    other = fake_torch.Tensor((1024, 1024), ptr=0x30000)
    launch(*_torch_args(fake_torch, A=other))
    assert [c[1] for c in recorder.calls] == [0x10000, 0x30000]
    assert recorder.calls[0] == (7, 0x10000, (1024, 1024), (4096,), (32, 64), 3)
    first, second, third = drv.launches
    assert first["raw"][4] == struct.pack("<Q", 0x10000) + bytes([1]) * 120
    assert second["raw"][4] == first["raw"][4]
    assert third["raw"][4][:8] == struct.pack("<Q", 0x30000)
    assert drv.addresses[4] % 64 == 0


def test_misaligned_tensor_is_refused_before_encoding(tmp_path, base_meta, fake_torch,
                                                      fake_driver, recorder):
    k = load_artifact(write_artifact(tmp_path, with_map(base_meta))).add_one
    bad = fake_torch.Tensor((1024, 1024), ptr=0x10008)
    with pytest.raises(ArgumentError, match=r"argument 0 'A'.*16-byte aligned"):
        k(*_torch_args(fake_torch, A=bad))
    assert recorder.calls == []


def test_persistent_kernels_take_no_maps(tmp_path, base_meta):
    with_map(base_meta)["kernels"][0]["mega"] = {}
    with pytest.raises(ValueError, match=r"tensor_maps': a persistent mega-kernel takes no"):
        load_artifact(write_artifact(tmp_path, base_meta))


def test_a_view_map_describes_the_views_shape(tmp_path, base_meta):
    """`shape`: the map of a row-major reshape of the tensor (`.view`), here
    A [1024, 1024] f32 seen as [4096, 256]: the driver gets the view's dims
    and row strides."""
    k = load_artifact(write_artifact(tmp_path, with_map(base_meta, shape=[4096, 256]))).add_one
    (m,) = k.spec.tensor_maps
    assert m.shape == (4096, 256)
    assert tensor_maps.driver_arguments(m, k.spec.params[0]) == (
        7, (256, 4096), (1024,), (32, 64), 3)


@pytest.mark.parametrize("shape, strides, match", [
    ([4096, 128], None, r"tensor_maps\[0\].shape': a view of \[4096, 128\] has 524288 elements, "
                        r"tensor 'A' 1048576"),
    ([1024, 1024], [2048, 1], r"tensor_maps\[0\].shape': a view needs tensor 'A' contiguous"),
    ("x", None, r"tensor_maps\[0\].shape'"),
])
def test_bad_view_maps_name_the_field(tmp_path, base_meta, shape, strides, match):
    if strides:
        base_meta["kernels"][0]["params"][0]["strides"] = strides
    with pytest.raises(ValueError, match=match):
        load_artifact(write_artifact(tmp_path, with_map(base_meta, shape=shape)))
