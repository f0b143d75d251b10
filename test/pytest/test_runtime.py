"""Tests of tilemega.runtime that need no GPU, no cuda-python and no torch."""

import ctypes
import json
import os
import struct
import subprocess
import threading
import sys
import types

import numpy as np
import pytest

from conftest import write_artifact

from tilemega.runtime import (ArgumentError, Artifact, Kernel, LaunchError, RuntimeUnavailable,
                              load_artifact)
from tilemega.runtime import dlpack, launch
from tilemega.runtime.__main__ import main as cli_main
from tilemega.runtime.dtypes import pack_scalar
from tilemega.runtime.tensors import TensorError, describe


# ---------------------------------------------------------------- fakes


class FakeCAI:
    """A device array exposing only __cuda_array_interface__ (like CuPy)."""

    def __init__(self, shape, typestr="<f4", strides=None, ptr=0x7F0000000000, version=3, **extra):
        self.__cuda_array_interface__ = dict(shape=tuple(shape), typestr=typestr,
                                             strides=strides, data=(ptr, False),
                                             version=version, **extra)


class FakeDLPack:
    """A DLPack producer whose capsule is built by hand with ctypes."""

    def __init__(self, shape, dtype=(2, 32, 1), strides=None, device=(2, 0), ptr=0x7F0000001000,
                 capsule_device=None, byte_offset=0):
        self.device = device
        n = len(shape)
        self._shape = (ctypes.c_int64 * max(n, 1))(*shape)
        self._strides = (ctypes.c_int64 * max(n, 1))(*strides) if strides is not None else None
        cdev = capsule_device or device
        t = dlpack.DLManagedTensor()
        t.dl_tensor.data = ptr
        t.dl_tensor.device = dlpack.DLDevice(*cdev)
        t.dl_tensor.ndim = n
        t.dl_tensor.dtype = dlpack.DLDataType(*dtype)
        t.dl_tensor.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))
        if self._strides is not None:
            t.dl_tensor.strides = ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64))
        t.dl_tensor.byte_offset = byte_offset
        self._managed = t
        self.stream_seen = "not called"

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None):
        self.stream_seen = stream
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self._managed), dlpack.CAPSULE_NAME, None)


@pytest.fixture
def fake_torch(monkeypatch):
    """A stand-in `torch` in sys.modules, enough for the runtime's duck typing
    and for the fast launch path (dtype singletons, is_cuda, get_device,
    torch._C._cuda_getCurrentRawStream)."""
    torch = types.ModuleType("torch")

    class Device:
        def __init__(self, spec):
            self.type, _, idx = spec.partition(":")
            self.index = int(idx) if idx else None

        def __str__(self):
            return self.type + ("" if self.index is None else f":{self.index}")

    class DType:
        def __init__(self, name):
            self.name = name

        def __str__(self):
            return "torch." + self.name

    for name in ("float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16",
                 "int32", "int64", "bool"):
        setattr(torch, name, DType(name))

    class Tensor:
        def __init__(self, shape, dtype="float32", device="cuda:0", strides=None, ptr=0x7F00DEAD0000):
            self.shape = tuple(shape)
            self.dtype = getattr(torch, dtype)
            self.device = Device(device)
            self._strides = strides
            self._ptr = ptr

        def stride(self):
            from tilemega.runtime.dtypes import contiguous_strides
            return self._strides if self._strides is not None else contiguous_strides(self.shape)

        def data_ptr(self):
            return self._ptr

        @property
        def is_cuda(self):
            return self.device.type == "cuda"

        def get_device(self):
            return self.device.index if self.device.type == "cuda" else -1

    class Stream:
        def __init__(self, handle):
            self.cuda_stream = handle

    current = {}                       # device -> raw stream handle; 0xABC by default

    torch.Tensor = Tensor
    torch.cuda = types.SimpleNamespace(
        current_stream=lambda device=None: Stream(current.get(device or 0, 0xABC)),
        current_device=lambda: 0, Stream=Stream, current=current)
    torch._C = types.SimpleNamespace(
        _cuda_getCurrentRawStream=lambda device: current.get(device, 0xABC))
    monkeypatch.setitem(sys.modules, "torch", torch)
    return torch


@pytest.fixture
def art(artifact_path):
    return load_artifact(artifact_path)


def good_args():
    return [FakeCAI((1024, 1024)), FakeCAI((1024, 1024)), 2.0, 7]


# ---------------------------------------------------------------- loading


def test_load_by_json_folder_and_stem(tmp_path, artifact_path):
    for a in (load_artifact(artifact_path), load_artifact(tmp_path, "add_one"),
              load_artifact(tmp_path), load_artifact(str(tmp_path / "add_one"))):
        assert isinstance(a, Artifact)
        assert a.name == "add_one" and a.chip == "sm_90a"
        assert list(a.kernels) == ["add_one"]
        assert isinstance(a.kernels["add_one"], Kernel)
        assert a.add_one is a["add_one"] is a.kernels["add_one"]
        assert a.ptx_path == str(tmp_path / "add_one.ptx") and a.cubin_path is None


def test_kernel_spec_fields(art):
    k = art.add_one
    assert k.spec.grid == (8, 8, 1) and k.spec.block == (128, 1, 1)
    assert [p.name for p in k.spec.params] == ["A", "B", "alpha", "n"]
    assert k.spec.params[0].shape == (1024, 1024) and k.spec.params[0].strides == (1024, 1)
    assert k.spec.params[2].shape is None
    assert "add_one(" in repr(k) and "add_one" in repr(art)


def test_missing_file_and_folder_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_artifact(tmp_path / "nope.json")
    write_artifact(tmp_path, stem="one")
    write_artifact(tmp_path, stem="two")
    with pytest.raises(ValueError, match="give the artifact name"):
        load_artifact(tmp_path)
    with pytest.raises(FileNotFoundError):
        load_artifact(tmp_path, "three")


def _mutate(path, value):
    """Return a function setting meta[path...] = value (or deleting it for ...)."""
    def apply(meta):
        target = meta
        for key in path[:-1]:
            target = target[key]
        if value is Ellipsis:
            del target[path[-1]]
        else:
            target[path[-1]] = value
        return meta
    return apply


K = ("kernels", 0)
P1 = K + ("params", 1)


@pytest.mark.parametrize("mutation, field", [
    (_mutate(("format",), "other"), "'format'"),
    (_mutate(("format",), ...), "'format': missing"),
    (_mutate(("version",), 2), "'version'"),
    (_mutate(("version",), True), "'version'"),
    (_mutate(("name",), ""), "'name'"),
    (_mutate(("ptx",), 3), "'ptx'"),
    (_mutate(("cubin",), 5), "'cubin'"),
    (_mutate(("toolchain",), []), "'toolchain'"),
    (_mutate(("kernels",), []), "'kernels'"),
    (_mutate(("kernels",), ...), "'kernels': missing"),
    (_mutate(K, "add_one"), "'kernels[0]'"),
    (_mutate(K + ("name",), ...), "'kernels[0].name': missing"),
    (_mutate(K + ("grid",), [8, 8]), "'kernels[0].grid'"),
    (_mutate(K + ("grid",), [8, 0, 1]), "'kernels[0].grid[1]'"),
    (_mutate(K + ("grid",), [8, 8.5, 1]), "'kernels[0].grid[1]'"),
    (_mutate(K + ("grid",), [1, 70000, 1]), "'kernels[0].grid[1]'"),
    (_mutate(K + ("block",), [1024, 2, 1]), "'kernels[0].block'"),
    (_mutate(K + ("block",), [1, 1, 65]), "'kernels[0].block[2]'"),
    (_mutate(K + ("dynamic_shared_bytes",), -1), "'kernels[0].dynamic_shared_bytes'"),
    (_mutate(K + ("params",), {}), "'kernels[0].params'"),
    (_mutate(P1 + ("name",), "A"), "'kernels[0].params[1].name': duplicate"),
    (_mutate(P1 + ("kind",), "buffer"), "'kernels[0].params[1].kind'"),
    (_mutate(P1 + ("dtype",), "float8"), "'kernels[0].params[1].dtype'"),
    (_mutate(P1 + ("shape",), ...), "'kernels[0].params[1].shape': missing"),
    (_mutate(P1 + ("shape",), [1024, -1]), "'kernels[0].params[1].shape[1]'"),
    (_mutate(P1 + ("strides",), [1]), "'kernels[0].params[1].strides'"),
])
def test_malformed_metadata_names_file_and_field(tmp_path, base_meta, mutation, field):
    path = write_artifact(tmp_path, mutation(base_meta))
    with pytest.raises(ValueError) as info:
        load_artifact(path)
    assert os.path.basename(path) in str(info.value)
    assert field in str(info.value)


def test_duplicate_kernel_names(tmp_path, base_meta):
    base_meta["kernels"].append(dict(base_meta["kernels"][0]))
    with pytest.raises(ValueError, match=r"'kernels\[1\].name': duplicate"):
        load_artifact(write_artifact(tmp_path, base_meta))


def test_bad_json_and_top_level(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    with pytest.raises(ValueError, match="bad.json: not valid JSON"):
        load_artifact(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="bad.json: expected a JSON object"):
        load_artifact(bad)


def test_missing_ptx_file_is_an_error(tmp_path, base_meta):
    path = write_artifact(tmp_path, base_meta, ptx_text=None)
    with pytest.raises(ValueError, match="field 'ptx': file 'add_one.ptx' not found"):
        load_artifact(path)


def test_missing_cubin_warns_and_uses_ptx(tmp_path, base_meta):
    base_meta["cubin"] = "add_one.cubin"
    path = write_artifact(tmp_path, base_meta)
    with pytest.warns(RuntimeWarning, match="cubin 'add_one.cubin' not found"):
        a = load_artifact(path)
    assert a.cubin_path is None
    (tmp_path / "add_one.cubin").write_bytes(b"\x7fELF")
    assert load_artifact(path).cubin_path == str(tmp_path / "add_one.cubin")


def test_multi_kernel_artifact_call_needs_a_name(tmp_path, base_meta):
    second = json.loads(json.dumps(base_meta["kernels"][0]))
    second["name"] = "sub_one"
    base_meta["kernels"].append(second)
    a = load_artifact(write_artifact(tmp_path, base_meta))
    with pytest.raises(TypeError, match=r"\['add_one', 'sub_one'\]"):
        a(*good_args())
    assert a.sub_one.name == "sub_one" and "sub_one" in a
    with pytest.raises(AttributeError, match="sub_one"):
        a.mul_one
    with pytest.raises(KeyError, match="mul_one"):
        a["mul_one"]


# ---------------------------------------------------------------- argument checks


def test_good_args_bind_and_pack(art):
    bound = art.add_one.check(*good_args())
    assert [type(v) for v in bound.values] == [ctypes.c_uint64, ctypes.c_uint64,
                                              ctypes.c_float, ctypes.c_int32]
    assert bound.values[0].value == 0x7F0000000000
    assert bound.values[2].value == 2.0 and bound.values[3].value == 7
    assert bound.device is None and not bound.first_tensor_is_torch


def test_wrong_arity_names_params(art):
    with pytest.raises(ArgumentError, match=r"add_one: expected 4 arguments \(A, B, alpha, n\), got 3"):
        art.add_one.check(*good_args()[:3])
    with pytest.raises(ValueError):   # ArgumentError is a ValueError
        art.add_one(*good_args(), 1)


def test_wrong_dtype(art):
    args = good_args()
    args[1] = FakeCAI((1024, 1024), typestr="<f2")
    with pytest.raises(ArgumentError,
                       match="add_one: argument 1 'B': expected dtype float32, got float16"):
        art.add_one.check(*args)


def test_wrong_shape(art):
    args = good_args()
    args[0] = FakeCAI((1024, 512))
    with pytest.raises(ArgumentError,
                       match=r"argument 0 'A': expected shape \[1024, 1024\], got \[1024, 512\]"):
        art.add_one.check(*args)


def test_non_contiguous_strides_rejected(art):
    args = good_args()
    args[0] = FakeCAI((1024, 1024), strides=(4, 4096))      # transposed, in bytes
    with pytest.raises(ArgumentError, match=r"argument 0 'A': expected strides \[1024, 1\].*"
                                            r"got \[1, 1024\]"):
        art.add_one.check(*args)


def test_explicit_contiguous_byte_strides_accepted(art):
    args = good_args()
    args[0] = FakeCAI((1024, 1024), strides=(4096, 4), version=2)
    art.add_one.check(*args)


def test_extent_one_strides_ignored(tmp_path, base_meta):
    p = base_meta["kernels"][0]["params"][0]
    p["shape"], p["strides"] = [1, 1024], [1024, 1]
    a = load_artifact(write_artifact(tmp_path, base_meta))
    args = good_args()
    args[0] = FakeCAI((1, 1024), strides=(4, 4))    # torch-style odd stride of a size-1 dim
    a.add_one.check(*args)


def test_numpy_array_rejected_as_host_memory(art):
    args = good_args()
    args[0] = np.zeros((1024, 1024), np.float32)
    with pytest.raises(ArgumentError, match="argument 0 'A': .*host memory"):
        art.add_one.check(*args)


def test_non_tensor_rejected(art):
    args = good_args()
    args[1] = 3.0
    with pytest.raises(ArgumentError, match="argument 1 'B': expected a CUDA tensor.*got float"):
        art.add_one.check(*args)


def test_cai_mask_and_bad_strides_rejected():
    with pytest.raises(TensorError, match="masked"):
        describe(FakeCAI((4,), mask=object()))
    with pytest.raises(TensorError, match="do not fit"):
        describe(FakeCAI((4,), strides=(6,)))


def test_cai_typestrs():
    for typestr, name in [("<f2", "float16"), ("<f4", "float32"), ("<f8", "float64"),
                          ("|i1", "int8"), ("|u1", "uint8"), ("<i2", "int16"),
                          ("<i4", "int32"), ("<i8", "int64")]:
        assert describe(FakeCAI((2,), typestr=typestr)).dtype == name
    assert describe(FakeCAI((2,), typestr=">f4")).dtype == ">f4"    # big-endian: unknown


def test_dlpack_cuda_tensor_accepted(art):
    args = good_args()
    args[0] = FakeDLPack((1024, 1024), device=(2, 0), ptr=0x7F0000001000, byte_offset=16)
    bound = art.add_one.check(*args, stream=0x55)
    assert bound.values[0].value == 0x7F0000001010
    assert bound.device == 0
    assert args[0].stream_seen == 0x55


def test_dlpack_fields_and_bfloat16():
    d = describe(FakeDLPack((3, 4), dtype=(4, 16, 1), strides=(4, 1), device=(2, 1)))
    assert (d.dtype, d.shape, d.strides, d.device, d.source) == (
        "bfloat16", (3, 4), (4, 1), 1, "dlpack")
    assert describe(FakeDLPack((3, 4), dtype=(0, 64, 1))).dtype == "int64"
    assert describe(FakeDLPack((3, 4), dtype=(2, 32, 4))).dtype == "float32x4"
    assert describe(FakeDLPack((3, 4), dtype=(2, 32, 1))).strides == (4, 1)
    assert FakeDLPack((2,)).__dlpack__ and describe(FakeDLPack((2,))).ptr == 0x7F0000001000


def test_dlpack_default_stream_is_none():
    t = FakeDLPack((2,))
    describe(t, stream=0)     # DLPack forbids 0: the legacy stream is passed as None
    assert t.stream_seen is None


def test_dlpack_host_tensors_rejected():
    with pytest.raises(TensorError, match="host memory"):
        describe(FakeDLPack((2,), device=(1, 0)))
    with pytest.raises(TensorError, match="kDLCPU"):
        describe(FakeDLPack((2,), device=(2, 0), capsule_device=(1, 0)))
    with pytest.raises(TensorError, match="kDLROCM"):
        describe(FakeDLPack((2,), device=(10, 0)))


def test_mixed_devices_rejected(art):
    args = good_args()
    args[0] = FakeDLPack((1024, 1024), device=(2, 0))
    args[1] = FakeDLPack((1024, 1024), device=(2, 1))
    with pytest.raises(ArgumentError, match="different devices"):
        art.add_one.check(*args)


def test_torch_tensors(art, fake_torch):
    T = fake_torch.Tensor
    bound = art.add_one.check(T((1024, 1024)), T((1024, 1024), device="cuda:0"), 1.5, 3)
    assert bound.first_tensor_is_torch and bound.device == 0
    assert launch.default_stream(0, bound.first_tensor_is_torch) == 0xABC
    with pytest.raises(ArgumentError, match="argument 0 'A': got a torch tensor on device 'cpu'"):
        art.add_one.check(T((1024, 1024), device="cpu"), T((1024, 1024)), 1.5, 3)
    with pytest.raises(ArgumentError, match="expected dtype float32, got bfloat16"):
        art.add_one.check(T((1024, 1024)), T((1024, 1024), dtype="bfloat16"), 1.5, 3)
    with pytest.raises(ArgumentError, match=r"expected strides \[1024, 1\]"):
        art.add_one.check(T((1024, 1024), strides=(1, 1024)), T((1024, 1024)), 1.5, 3)
    with pytest.raises(ArgumentError, match="different devices"):
        art.add_one.check(T((1024, 1024)), T((1024, 1024), device="cuda:1"), 1.5, 3)


# ---------------------------------------------------------------- scalars


@pytest.mark.parametrize("value, message", [
    (2**31, r"value 2147483648 out of range for int32 \[-2147483648, 2147483647\]"),
    (-(2**31) - 1, "out of range for int32"),
    (1.5, "expected an int for int32, got float"),
    ("7", "expected an int for int32, got str"),
    (True, "got bool"),
])
def test_int_scalar_errors(art, value, message):
    args = good_args()
    args[3] = value
    with pytest.raises(ArgumentError, match=f"argument 3 'n': .*{message}"):
        art.add_one.check(*args)


@pytest.mark.parametrize("value, message", [
    ("2", "expected an int or float for float32, got str"),
    (None, "expected an int or float for float32, got NoneType"),
    (1e39, "out of range for float32"),
    (False, "got bool"),
])
def test_float_scalar_errors(art, value, message):
    args = good_args()
    args[2] = value
    with pytest.raises(ArgumentError, match=f"argument 2 'alpha': .*{message}"):
        art.add_one.check(*args)


def test_scalar_accepts_int_for_float_and_numpy_scalars(art):
    args = good_args()
    args[2], args[3] = 3, np.int64(-5)
    bound = art.add_one.check(*args)
    assert bound.values[2].value == 3.0 and bound.values[3].value == -5
    args[2] = np.float32(0.5)
    assert art.add_one.check(*args).values[2].value == 0.5


def test_pack_scalar_bit_patterns():
    def raw(obj):
        return bytes(obj)
    assert raw(pack_scalar("float16", 1.0)) == struct.pack("<H", 0x3C00)
    assert raw(pack_scalar("bfloat16", 1.0)) == struct.pack("<H", 0x3F80)
    assert raw(pack_scalar("bfloat16", -2.5)) == struct.pack("<H", 0xC020)
    assert raw(pack_scalar("bfloat16", 1.00390625)) == struct.pack("<H", 0x3F80)  # ties to even
    assert raw(pack_scalar("bfloat16", float("inf"))) == struct.pack("<H", 0x7F80)
    assert raw(pack_scalar("int8", -1)) == b"\xff"
    assert raw(pack_scalar("uint8", 255)) == b"\xff"
    assert raw(pack_scalar("int64", -2)) == struct.pack("<q", -2)
    assert raw(pack_scalar("float64", 0.1)) == struct.pack("<d", 0.1)
    with pytest.raises(OverflowError):
        pack_scalar("float16", 70000.0)
    with pytest.raises(OverflowError):
        pack_scalar("bfloat16", 3.4e38)


def test_float16_scalar_range(tmp_path, base_meta):
    base_meta["kernels"][0]["params"][2]["dtype"] = "float16"
    a = load_artifact(write_artifact(tmp_path, base_meta))
    args = good_args()
    args[2] = 1e5
    with pytest.raises(ArgumentError, match="out of range for float16"):
        a.add_one.check(*args)


# ---------------------------------------------------------------- launch helpers


def test_param_array_points_at_values():
    values = [ctypes.c_uint64(0x1234), ctypes.c_float(2.0), ctypes.c_int32(-3)]
    arr, addr = launch.param_array(values)
    ptrs = (ctypes.c_void_p * 3).from_address(addr)
    assert ctypes.c_uint64.from_address(ptrs[0]).value == 0x1234
    assert ctypes.c_float.from_address(ptrs[1]).value == 2.0
    assert ctypes.c_int32.from_address(ptrs[2]).value == -3
    assert launch.param_array([]) == (None, None)


def test_stream_handles():
    assert launch.stream_handle(None) is None
    assert launch.stream_handle(42) == 42
    assert launch.stream_handle(types.SimpleNamespace(cuda_stream=7)) == 7

    class CoreStream:
        def __cuda_stream__(self):
            return (0, 99)

    assert launch.stream_handle(CoreStream()) == 99
    with pytest.raises(ArgumentError, match="stream"):
        launch.stream_handle("default")
    assert launch.default_stream(0, first_tensor_is_torch=False) == 0


def test_normalize_dims():
    assert launch.normalize_dims(5, "grid") == (5, 1, 1)
    assert launch.normalize_dims((2, 3), "grid") == (2, 3, 1)
    with pytest.raises(ArgumentError, match="block"):
        launch.normalize_dims((0, 1), "block")
    with pytest.raises(ArgumentError, match="grid"):
        launch.normalize_dims((1, 1, 1, 1), "grid")


def test_launch_checks_args_before_touching_cuda(art, monkeypatch):
    from tilemega.runtime import driver

    def boom():
        raise AssertionError("the driver was touched before the arguments were checked")

    monkeypatch.setattr(driver, "cuda", boom)
    with pytest.raises(ArgumentError):
        art.add_one(*good_args()[:2], "x", 1)
    with pytest.raises(ArgumentError):
        art.add_one.launch(*good_args(), grid=(0,))


def test_launch_without_cuda_python_raises_runtime_unavailable(art, monkeypatch):
    # Hide cuda-python (whether or not this machine has it): None in
    # sys.modules makes the runtime's lazy import fail as if it were absent.
    from tilemega.runtime import driver
    for name in ("cuda", "cuda.bindings", "cuda.bindings.driver"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setattr(driver, "_cuda", None)
    with pytest.raises(RuntimeUnavailable, match="cuda-python is not installed"):
        art.add_one(*good_args())
    assert issubclass(RuntimeUnavailable, RuntimeError) and issubclass(LaunchError, RuntimeError)


# ---------------------------------------------------------------- import hygiene and CLI


def test_import_pulls_in_no_cuda_torch_or_mlir():
    code = (
        "import sys, tilemega.runtime\n"
        "bad = sorted(m for m in sys.modules if m == 'cuda' or m.startswith(('cuda.', 'torch', "
        "'tilemega._mlir_libs', 'mlir')))\n"
        "print(repr(bad))\n"
    )
    env = dict(os.environ)
    src = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_cli_info(artifact_path, capsys):
    assert cli_main(["info", artifact_path]) == 0
    out = capsys.readouterr().out
    assert "kernel add_one: grid [8, 8, 1] block [128, 1, 1]" in out
    assert "alpha" in out and "scalar" in out and "shape [1024, 1024] strides [1024, 1]" in out


def test_cli_reports_bad_artifact(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert cli_main(["info", str(bad)]) == 1
    assert "field 'format'" in capsys.readouterr().err


def test_misaligned_tensor_is_rejected(tmp_path):
    """A view starting mid-row breaks the kernel's 16-byte vector accesses."""
    import copy as _copy
    from conftest import BASE_META, write_artifact
    from tilemega.runtime import ArgumentError, load_artifact

    meta = _copy.deepcopy(BASE_META)
    for p in meta["kernels"][0]["params"]:
        if p["kind"] == "tensor":
            p["alignment"] = 16
    art = load_artifact(write_artifact(tmp_path, meta))

    class Fake:
        def __init__(self, ptr):
            self.__cuda_array_interface__ = {
                "shape": (1024, 1024), "typestr": "<f4", "data": (ptr, False),
                "strides": None, "version": 3}

    art.kernels["add_one"].check(Fake(0x10000), Fake(0x20000), 1.0, 3)
    with pytest.raises(ArgumentError, match=r"argument 0 'A'.*16-byte aligned"):
        art.kernels["add_one"].check(Fake(0x10004), Fake(0x20000), 1.0, 3)


# ---------------------------------------------------------------- fast launch path (fake driver)


class FakeDriver:
    """Enough of cuda.bindings.driver for a launch; contexts are ints, and the
    current one is per thread (a stack, as in the real driver)."""

    PRIMARY = 0x1000                    # primary context of device d: PRIMARY + d

    class CUstream:
        def __init__(self, handle=0):
            self.handle = int(handle)

        def __int__(self):
            return self.handle

    def __init__(self, sizes):
        self.sizes = sizes              # bytes of each kernel parameter, to read them back
        self.tls = threading.local()
        self.launches = []
        self.launch_result = 0
        self.streams_made = 0

    def _stack(self):
        if not hasattr(self.tls, "stack"):
            self.tls.stack = []
        return self.tls.stack

    def current(self):
        stack = self._stack()
        return stack[-1] if stack else 0

    def cuDeviceGet(self, ordinal):
        return (0, ordinal)

    def cuDevicePrimaryCtxRetain(self, dev):
        return (0, self.PRIMARY + dev)

    def cuCtxGetCurrent(self):
        return (0, self.current())

    def cuCtxSetCurrent(self, ctx):
        stack = self._stack()
        if stack:
            stack[-1] = int(ctx)
        else:
            stack.append(int(ctx))
        return (0,)

    def cuCtxPushCurrent(self, ctx):
        self._stack().append(int(ctx))
        return (0,)

    def cuCtxPopCurrent(self):
        return (0, self._stack().pop())

    def cuModuleLoadData(self, image):
        return (0, "module")

    def cuModuleGetFunction(self, module, name):
        return (0, "function " + name.decode())

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra,
                       cooperative=False):
        ptrs = (ctypes.c_void_p * len(self.sizes)).from_address(params)
        raw = [ctypes.string_at(ptrs[i], n) for i, n in enumerate(self.sizes)]
        self.launches.append(dict(function=f, grid=(gx, gy, gz), block=(bx, by, bz), smem=smem,
                                  stream=int(stream), raw=raw, context=self.current(),
                                  cooperative=cooperative))
        return (self.launch_result,)

    def cuLaunchCooperativeKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params):
        return self.cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, stream, params, 0, True)

    def cuGetErrorName(self, err):
        return (0, b"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")

    def cuGetErrorString(self, err):
        return (0, b"too many resources requested for launch")


@pytest.fixture
def fake_driver(monkeypatch):
    from tilemega.runtime import driver
    drv = FakeDriver(sizes=[8, 8, 4, 4])          # add_one(A, B, alpha: f32, n: i32)
    monkeypatch.setattr(driver, "_cuda", drv)
    monkeypatch.setattr(driver, "_device_count", 2)
    monkeypatch.setattr(driver, "_primary", {})
    # The fake driver loads no code, and these artifacts hold a one-line dummy
    # PTX; the PTX checks have their own tests (test_hostile_code_files).
    from tilemega.runtime import artifact
    monkeypatch.setattr(artifact, "check_ptx", lambda ptx, spec, where: None)
    return drv


@pytest.fixture
def general_calls(monkeypatch):
    """Counts launches through the general path (Kernel.launch)."""
    calls = []
    original = Kernel.launch

    def spy(self, *args, **kwargs):
        calls.append(args)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Kernel, "launch", spy)
    return calls


def _unpack(launch):
    a, b, alpha, n = launch["raw"]
    return (struct.unpack("<Q", a)[0], struct.unpack("<Q", b)[0], struct.unpack("<f", alpha)[0],
            struct.unpack("<i", n)[0])


def _torch_args(torch, **over):
    args = dict(A=torch.Tensor((1024, 1024), ptr=0x10000), B=torch.Tensor((1024, 1024), ptr=0x20000),
                alpha=1.5, n=7)
    args.update(over)
    return [args["A"], args["B"], args["alpha"], args["n"]]


def test_fast_path_launches_without_the_general_path(art, fake_torch, fake_driver, general_calls):
    k = art.add_one
    k(*_torch_args(fake_torch))
    k(*_torch_args(fake_torch, alpha=-2, n=-3))          # int for a float param
    assert general_calls == []
    first, second = fake_driver.launches
    assert _unpack(first) == (0x10000, 0x20000, 1.5, 7)
    assert _unpack(second) == (0x10000, 0x20000, -2.0, -3)
    assert first["grid"] == (8, 8, 1) and first["block"] == (128, 1, 1) and first["smem"] == 0
    assert first["function"] == "function add_one"
    assert first["stream"] == 0xABC                      # torch's current stream
    assert first["context"] == FakeDriver.PRIMARY        # set current by the first call
    assert k._fast is not None and list(k._fast.devices) == [0]


def _bad_calls(torch):
    T = torch.Tensor
    return [
        _torch_args(torch, B=T((1024, 1024), dtype="bfloat16", ptr=0x20000)),
        _torch_args(torch, A=T((1024, 512), ptr=0x10000)),
        _torch_args(torch, A=T((512, 1024), ptr=0x10000)),       # strides alone would pass
        _torch_args(torch, A=T((1024, 1024), strides=(1, 1024), ptr=0x10000)),
        _torch_args(torch, A=T((1024, 1024), device="cpu")),
        _torch_args(torch, B=T((1024, 1024), device="cuda:1", ptr=0x20000)),
        _torch_args(torch, A=T((1024, 1024), device="cuda:1", ptr=0x10000)),
        _torch_args(torch, A=np.zeros((1024, 1024), np.float32)),
        _torch_args(torch, n=2**31),
        _torch_args(torch, n=True),
        _torch_args(torch, n=1.0),
        _torch_args(torch, alpha=1e39),
        _torch_args(torch, alpha=10**400),
        _torch_args(torch, alpha="1"),
        _torch_args(torch, alpha=False),
        _torch_args(torch)[:3],
        _torch_args(torch) + [1],
    ]


def test_fast_path_rejects_what_the_general_path_rejects(art, fake_torch, fake_driver):
    k = art.add_one
    k(*_torch_args(fake_torch))                          # warm: the fast path is set up
    for bad in _bad_calls(fake_torch):
        with pytest.raises(ArgumentError) as general:
            k.check(*bad)
        with pytest.raises(ArgumentError) as fast:
            k(*bad)
        assert str(fast.value) == str(general.value)
    assert len(fake_driver.launches) == 1


def test_fast_path_alignment_is_checked(tmp_path, base_meta, fake_torch, fake_driver):
    for p in base_meta["kernels"][0]["params"]:
        if p["kind"] == "tensor":
            p["alignment"] = 16
    k = load_artifact(write_artifact(tmp_path, base_meta)).add_one
    k(*_torch_args(fake_torch))
    bad = _torch_args(fake_torch, B=fake_torch.Tensor((1024, 1024), ptr=0x20004))
    with pytest.raises(ArgumentError, match=r"argument 1 'B'.*16-byte aligned"):
        k(*bad)
    assert len(fake_driver.launches) == 1


def test_general_path_takes_what_the_fast_path_leaves(tmp_path, base_meta, fake_torch,
                                                      fake_driver, general_calls):
    p = base_meta["kernels"][0]["params"][0]
    p["shape"], p["strides"] = [1, 1024], [1024, 1]
    k = load_artifact(write_artifact(tmp_path, base_meta)).add_one
    odd = fake_torch.Tensor((1, 1024), strides=(1, 1), ptr=0x10000)   # size-1 dim, any stride
    k(*_torch_args(fake_torch, A=odd))
    assert general_calls == []                                     # strides rule kept
    k(*_torch_args(fake_torch, A=odd, n=np.int32(5), alpha=np.float32(0.25)))
    assert len(general_calls) == 1                                 # numpy scalars: general path
    assert _unpack(fake_driver.launches[-1])[2:] == (0.25, 5)
    assert len(fake_driver.launches) == 2


def test_fast_path_follows_torch_current_stream(art, fake_torch, fake_driver, general_calls):
    k = art.add_one
    k(*_torch_args(fake_torch))
    fake_torch.cuda.current[0] = 0x5151                 # e.g. inside `with torch.cuda.stream(s)`
    k(*_torch_args(fake_torch))
    fake_torch.cuda.current[0] = 0xABC
    k(*_torch_args(fake_torch))
    k(*_torch_args(fake_torch), stream=0x77)
    k(*_torch_args(fake_torch), stream=types.SimpleNamespace(cuda_stream=0x78))
    k(*_torch_args(fake_torch), stream=0)
    assert [x["stream"] for x in fake_driver.launches] == [0xABC, 0x5151, 0xABC, 0x77, 0x78, 0]
    assert general_calls == []
    with pytest.raises(ArgumentError, match="stream"):
        k(*_torch_args(fake_torch), stream="default")


def test_fast_path_without_raw_stream_getter(art, fake_torch, fake_driver, general_calls):
    del fake_torch._C
    fake_torch.cuda.current[0] = 0x99
    art.add_one(*_torch_args(fake_torch))
    assert fake_driver.launches[0]["stream"] == 0x99 and general_calls == []


def test_another_current_context_goes_through_the_general_path(art, fake_torch, fake_driver,
                                                               general_calls):
    k = art.add_one
    k(*_torch_args(fake_torch))
    fake_driver.cuCtxPushCurrent(0x7777)               # e.g. the user's own context
    k(*_torch_args(fake_torch))
    assert len(general_calls) == 1
    assert fake_driver.launches[-1]["context"] == FakeDriver.PRIMARY     # pushed for the launch
    assert fake_driver.current() == 0x7777                               # and popped again
    fake_driver.cuCtxPopCurrent()
    k(*_torch_args(fake_torch))
    assert len(general_calls) == 1 and len(fake_driver.launches) == 3


def test_switching_devices_launches_in_each_devices_context(art, fake_torch, fake_driver):
    k = art.add_one
    T = fake_torch.Tensor
    k(*_torch_args(fake_torch))
    on1 = [T((1024, 1024), device="cuda:1", ptr=0x30000), T((1024, 1024), device="cuda:1"), 1.0, 1]
    fake_torch.cuda.current[1] = 0x111
    k(*on1)                          # device 0's context is current: device 1's is pushed
    k(*_torch_args(fake_torch))
    contexts = [x["context"] for x in fake_driver.launches]
    assert contexts == [FakeDriver.PRIMARY, FakeDriver.PRIMARY + 1, FakeDriver.PRIMARY]
    assert [x["stream"] for x in fake_driver.launches] == [0xABC, 0x111, 0xABC]
    assert fake_driver.current() == FakeDriver.PRIMARY
    assert sorted(k._fast.devices) == [0, 1]


def test_fast_path_in_other_threads(art, fake_torch, fake_driver):
    k = art.add_one
    k(*_torch_args(fake_torch))
    errors = []

    def work():
        try:                         # a new thread has no current context
            for _ in range(50):
                k(*_torch_args(fake_torch))
        except Exception as exc:     # reported in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(fake_driver.launches) == 201
    assert all(_unpack(x) == (0x10000, 0x20000, 1.5, 7) for x in fake_driver.launches)


def test_busy_buffer_uses_the_general_path(art, fake_torch, fake_driver, general_calls):
    k = art.add_one
    k(*_torch_args(fake_torch))
    with k._fast.lock:               # as if another thread were launching right now
        k(*_torch_args(fake_torch, n=9))
    assert len(general_calls) == 1 and _unpack(fake_driver.launches[-1])[3] == 9


def test_fast_path_reports_driver_errors(art, fake_torch, fake_driver):
    k = art.add_one
    k(*_torch_args(fake_torch))
    fake_driver.launch_result = 701
    with pytest.raises(LaunchError) as info:
        k(*_torch_args(fake_torch))
    assert str(info.value).startswith(
        "cuLaunchKernel('add_one', grid=(8, 8, 1), block=(128, 1, 1), dynamic_shared_bytes=0) "
        "failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (701)")
    assert info.value.code == 701


def test_scalar_packing_matches_the_general_path(tmp_path, base_meta, fake_torch, fake_driver):
    """Every scalar dtype: the fast path writes the bytes pack_scalar would."""
    from tilemega.runtime.dtypes import DTYPES, SCALAR_DTYPES
    cases = {"float16": [1.0, -2.5, 65504.0, 1e-8, 3], "bfloat16": [1.0, 1.00390625, -2.5, 7],
             "float32": [0.1, -1e38, float("inf"), 2], "float64": [0.1, 1e300],
             "int8": [-128, 127], "uint8": [0, 255], "int16": [-32768, 32767],
             "int32": [-(2**31), 2**31 - 1], "int64": [-(2**63), 2**63 - 1]}
    assert set(cases) == set(SCALAR_DTYPES)
    for dtype, values in cases.items():
        meta = json.loads(json.dumps(base_meta))
        meta["kernels"][0]["params"][2]["dtype"] = dtype
        folder = tmp_path / dtype
        k = load_artifact(write_artifact(folder, meta)).add_one
        size = DTYPES[dtype].itemsize
        fake_driver.sizes = [8, 8, size, 4]
        for v in values:
            k(*_torch_args(fake_torch, alpha=v))
            want = pack_scalar(dtype, v if DTYPES[dtype].int_range else float(v))
            assert fake_driver.launches[-1]["raw"][2] == bytes(want), (dtype, v)
        assert k._fast is not None and len(k._fast.devices) == 1


def test_no_fast_path_for_kernels_without_tensors(tmp_path, base_meta, fake_torch):
    from tilemega.runtime.fast import FastLauncher
    meta = json.loads(json.dumps(base_meta))
    meta["kernels"][0]["params"] = meta["kernels"][0]["params"][2:]
    k = load_artifact(write_artifact(tmp_path, meta)).add_one
    assert FastLauncher.build(k, fake_torch) is None


# ---------------------------------------------------------------- launch overrides


def test_launch_overrides_must_match_the_compiled_kernel(art, monkeypatch):
    from tilemega.runtime import driver

    def boom():
        raise AssertionError("the driver was touched before the overrides were checked")

    monkeypatch.setattr(driver, "cuda", boom)
    k = art.add_one
    for kw, message in [
            (dict(grid=(16, 8)), r"add_one: grid=\[16, 8, 1\] differs from the compiled grid "
                                 r"\[8, 8, 1\]; the kernel is compiled for exactly"),
            (dict(grid=4), r"grid=\[4, 1, 1\] differs"),
            (dict(block=64), r"add_one: block=\[64, 1, 1\] differs from the compiled block "
                             r"\[128, 1, 1\]"),
            (dict(block=(128, 2)), r"block=\[128, 2, 1\] differs"),
            (dict(dynamic_shared_bytes=True), r"dynamic_shared_bytes must be an int"),
            (dict(dynamic_shared_bytes=1.5), r"dynamic_shared_bytes must be an int")]:
        with pytest.raises(ArgumentError, match=message):
            k.launch(*good_args(), **kw)
    assert k._check_overrides((8, 8, 1), 128, None) == 0      # restating the shape is fine
    assert k._check_overrides(None, None, 4096) == 4096       # more shared memory is fine


def test_dynamic_shared_override_bounds(tmp_path, base_meta):
    base_meta["kernels"][0]["dynamic_shared_bytes"] = 8192
    k = load_artifact(write_artifact(tmp_path, base_meta)).add_one
    with pytest.raises(ArgumentError, match=r"dynamic_shared_bytes=4096 is less than the 8192 "
                                            r"bytes the kernel is compiled for"):
        k._check_overrides(None, None, 4096)
    k.cooperative = True          # a persistent kernel: exactly the compiled amount
    with pytest.raises(ArgumentError, match=r"dynamic_shared_bytes=16384 differs from the "
                                            r"compiled 8192; a persistent kernel"):
        k._check_overrides(None, None, 16384)
    with pytest.raises(ArgumentError, match=r"the persistent kernel is compiled for exactly"):
        k._check_overrides(9, None, None)


class _LaunchDriver:
    """Records which launch API was called; answers with `result`."""

    def __init__(self, result=0):
        self.calls, self.result = [], result
        self.CUstream = int

    def cuLaunchKernel(self, *args):
        self.calls.append(("cuLaunchKernel", len(args)))
        return (self.result,)

    def cuLaunchCooperativeKernel(self, *args):
        self.calls.append(("cuLaunchCooperativeKernel", len(args)))
        return (self.result,)

    def cuGetErrorName(self, err):
        return (0, b"CUDA_ERROR_X")

    def cuGetErrorString(self, err):
        return (0, b"")


def test_persistent_kernels_launch_cooperatively(monkeypatch):
    from tilemega.runtime import driver
    drv = _LaunchDriver()
    monkeypatch.setattr(driver, "_cuda", drv)
    launch.launch_kernel("f", (3, 1, 1), (128, 1, 1), 0, 0, [], "g", cooperative=True)
    launch.launch_kernel("f", (3, 1, 1), (128, 1, 1), 0, 0, [], "k")
    assert drv.calls == [("cuLaunchCooperativeKernel", 10), ("cuLaunchKernel", 11)]
    drv.result = launch.COOPERATIVE_LAUNCH_TOO_LARGE
    with pytest.raises(LaunchError, match=r"cuLaunchCooperativeKernel\('g', grid=\(300, 1, 1\).*"
                                          r"CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE \(720\): the "
                                          r"driver refuses to start persistent kernel 'g', whose "
                                          r"300 CTAs cannot all be resident") as info:
        launch.launch_kernel("f", (300, 1, 1), (128, 1, 1), 0, 0, [], "g", cooperative=True)
    assert info.value.code == 720
    drv.result = 1
    with pytest.raises(LaunchError, match=r"cuLaunchKernel\('k'.* failed: CUDA_ERROR_X \(1\)"):
        launch.launch_kernel("f", (3, 1, 1), (128, 1, 1), 0, 0, [], "k")


def test_fast_path_of_a_persistent_kernel_is_cooperative(art, fake_torch, fake_driver):
    k = art.add_one
    k.cooperative = True                    # as Kernel sets it for a spec with `mega`
    k(*_torch_args(fake_torch))
    assert fake_driver.launches[-1]["cooperative"]
