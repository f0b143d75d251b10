"""GPU tests of tilemega.runtime: hand-written PTX, launched on torch tensors.

They compile nothing with TileMega. Skipped unless cuda-python imports, torch
sees a CUDA device, and so the launch path can really run.
"""

import json
import os
import shutil
import subprocess
import warnings

import pytest

from tilemega.runtime import ArgumentError, LaunchError, load_artifact


from conftest import gpu_skip_reason

_gpu_reason = gpu_skip_reason
_REASON = _gpu_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]

# y[i] = 2 * x[i] for i < n; fill_affine: y[i] = a * i + b for i < n.
PTX = r"""
.version 8.0
.target sm_90a
.address_size 64

.visible .entry scale2(
    .param .u64 scale2_param_0,
    .param .u64 scale2_param_1,
    .param .u32 scale2_param_2
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [scale2_param_0];
    ld.param.u64 %rd2, [scale2_param_1];
    ld.param.u32 %r1, [scale2_param_2];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.s32 %rd5, %r5, 4;
    add.s64 %rd6, %rd3, %rd5;
    ld.global.f32 %f1, [%rd6];
    add.f32 %f2, %f1, %f1;
    add.s64 %rd7, %rd4, %rd5;
    st.global.f32 [%rd7], %f2;
DONE:
    ret;
}

.visible .entry fill_affine(
    .param .u64 fill_affine_param_0,
    .param .f32 fill_affine_param_1,
    .param .f32 fill_affine_param_2,
    .param .u32 fill_affine_param_3
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [fill_affine_param_0];
    ld.param.f32 %f1, [fill_affine_param_1];
    ld.param.f32 %f2, [fill_affine_param_2];
    ld.param.u32 %r1, [fill_affine_param_3];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvt.rn.f32.s32 %f3, %r5;
    fma.rn.f32 %f4, %f3, %f1, %f2;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.s32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.f32 [%rd4], %f4;
DONE:
    ret;
}
"""

N = 1000
BLOCK = 128
GRID = (N + BLOCK - 1) // BLOCK


def _meta(name="scale2", cubin=None, smem=0, ptx="scale2.ptx"):
    vec = {"kind": "tensor", "dtype": "float32", "shape": [N], "strides": [1]}
    return {
        "format": "tilemega.artifact", "version": 1, "name": name, "chip": "sm_90a",
        "ptx": ptx, "cubin": cubin, "toolchain": {"tilemega": "test"},
        "kernels": [
            {"name": "scale2", "grid": [GRID, 1, 1], "block": [BLOCK, 1, 1],
             "dynamic_shared_bytes": smem,
             "params": [dict(vec, name="x"), dict(vec, name="y"),
                        {"name": "n", "kind": "scalar", "dtype": "int32"}]},
            {"name": "fill_affine", "grid": [GRID, 1, 1], "block": [BLOCK, 1, 1],
             "dynamic_shared_bytes": 0,
             "params": [dict(vec, name="y"),
                        {"name": "a", "kind": "scalar", "dtype": "float32"},
                        {"name": "b", "kind": "scalar", "dtype": "float32"},
                        {"name": "n", "kind": "scalar", "dtype": "int32"}]},
        ],
    }


def _write(folder, meta, ptx=PTX, cubin_bytes=None):
    (folder / meta["ptx"]).write_text(ptx)
    if cubin_bytes is not None:
        (folder / meta["cubin"]).write_bytes(cubin_bytes)
    path = folder / (meta["name"] + ".json")
    path.write_text(json.dumps(meta))
    return load_artifact(path)


@pytest.fixture
def torch():
    import torch
    return torch


@pytest.fixture
def art(tmp_path):
    return _write(tmp_path, _meta())


def _xy(torch):
    x = torch.arange(N, dtype=torch.float32, device="cuda")
    y = torch.full((N,), -1.0, dtype=torch.float32, device="cuda")
    return x, y


def test_scale2_on_torch_tensors(art, torch):
    x, y = _xy(torch)
    art.scale2(x, y, N)
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * x)
    assert art.load(0) == "ptx"      # no cubin in this artifact: the driver JIT-compiled the PTX


def test_float_scalars_and_second_kernel(art, torch):
    _, y = _xy(torch)
    art["fill_affine"](y, 0.5, 3.0, N - 10)
    torch.cuda.synchronize()
    want = torch.arange(N, dtype=torch.float32, device="cuda") * 0.5 + 3.0
    assert torch.equal(y[: N - 10], want[: N - 10])
    assert torch.all(y[N - 10:] == -1.0)       # the bounds check held


def test_on_a_torch_stream(art, torch):
    x, y = _xy(torch)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    art.scale2(x, y, N, stream=s)
    s.synchronize()
    assert torch.equal(y, 2 * x)
    y.fill_(0)
    with torch.cuda.stream(s):            # stream=None follows torch's current stream
        art.scale2(x, y, N)
    s.synchronize()
    assert torch.equal(y, 2 * x)


class _CAIOnly:
    def __init__(self, t):
        self._t = t
        self.__cuda_array_interface__ = t.__cuda_array_interface__


class _DLPackOnly:
    def __init__(self, t):
        self._t = t

    def __dlpack__(self, stream=None):
        return self._t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


def test_cuda_array_interface_and_dlpack_objects(art, torch):
    x, y = _xy(torch)
    torch.cuda.synchronize()
    art.scale2.launch(_CAIOnly(x), _DLPackOnly(y), N, sync=True)
    assert torch.equal(y, 2 * x)


def test_cpu_tensor_rejected_before_launch(art, torch):
    x, y = _xy(torch)
    with pytest.raises(ArgumentError, match="argument 0 'x': got a torch tensor on device 'cpu'"):
        art.scale2(x.cpu(), y, N)
    with pytest.raises(ArgumentError, match="expected dtype float32, got float16"):
        art.scale2(x, y.half(), N)


def test_large_dynamic_shared_memory_sets_the_attribute(tmp_path, torch):
    a = _write(tmp_path, _meta(smem=100 * 1024))
    x, y = _xy(torch)
    a.scale2.launch(x, y, N, sync=True)     # fails with INVALID_VALUE without the attribute
    assert torch.equal(y, 2 * x)


def _ptxas():
    for candidate in (shutil.which("ptxas"), "/usr/local/cuda/bin/ptxas"):
        if candidate and os.path.isfile(candidate):
            return candidate
    return None


@pytest.mark.skipif(_ptxas() is None, reason="no ptxas to build a cubin")
def test_cubin_is_preferred(tmp_path, torch):
    (tmp_path / "src.ptx").write_text(PTX)
    subprocess.run([_ptxas(), "-arch=sm_90a", str(tmp_path / "src.ptx"), "-o",
                    str(tmp_path / "scale2.cubin")], check=True)
    meta = _meta(cubin="scale2.cubin")
    # Well-formed enough for the runtime's checks, but the JIT would refuse it.
    (tmp_path / "scale2.ptx").write_text(PTX.replace("add.f32", "add.nosuchtype"))
    (tmp_path / "scale2.json").write_text(json.dumps(meta))
    a = load_artifact(tmp_path / "scale2.json")
    assert a.load(0) == "cubin"
    x, y = _xy(torch)
    a.scale2.launch(x, y, N, sync=True)
    assert torch.equal(y, 2 * x)


def test_bad_cubin_falls_back_to_ptx(tmp_path, torch):
    a = _write(tmp_path, _meta(cubin="scale2.cubin"), cubin_bytes=b"\x7fELF not really a cubin")
    with pytest.warns(RuntimeWarning, match="falling back to JIT-compiling the PTX"):
        assert a.load(0) == "ptx"
    x, y = _xy(torch)
    a.scale2.launch(x, y, N, sync=True)
    assert torch.equal(y, 2 * x)


def test_broken_ptx_raises_launch_error(tmp_path, torch):
    a = _write(tmp_path, _meta(), ptx=PTX.replace("add.f32", "add.nosuchtype"))
    x, y = _xy(torch)
    with pytest.raises(LaunchError) as info:
        a.scale2(x, y, N)
    assert info.value.error_name.startswith("CUDA_ERROR_")
    assert "cuModuleLoadData(scale2 PTX)" in str(info.value)


def test_cli_load(art, capsys):
    from tilemega.runtime.__main__ import main
    assert main(["load", art.path]) == 0
    out = capsys.readouterr().out
    assert "loaded on device 0 from ptx" in out and "num_regs" in out


def test_no_current_context_in_a_fresh_thread(art, torch):
    # A new thread has no current CUDA context: the runtime must set one up.
    import threading
    x, y = _xy(torch)
    torch.cuda.synchronize()
    errors = []

    def work():
        try:
            art.scale2.launch(_CAIOnly(x), _CAIOnly(y), N, sync=True)
        except Exception as exc:   # reported in the main thread
            errors.append(exc)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert not errors, errors
    assert torch.equal(y, 2 * x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert art.load(0) == "ptx"


# ---------------------------------------------------------------- the fast path of Kernel.__call__


def test_fast_path_checks_every_call(tmp_path, torch):
    meta = _meta()
    meta["kernels"][0]["params"][1]["alignment"] = 16
    k = _write(tmp_path, meta).scale2
    x, y = _xy(torch)
    k(x, y, N)
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * x)
    assert k._fast is not None and 0 in k._fast.devices      # the fast path is set up
    every_other = torch.arange(2 * N, dtype=torch.float32, device="cuda")[::2]
    shifted = torch.zeros(N + 4, dtype=torch.float32, device="cuda")[1:N + 1]
    bad = [
        ((x.half(), y, N), "argument 0 'x': expected dtype float32, got float16"),
        ((x, y.to(torch.bfloat16), N), "argument 1 'y': expected dtype float32, got bfloat16"),
        ((x[:500], y, N), r"argument 0 'x': expected shape \[1000\], got \[500\]"),
        ((x.view(10, 100), y, N), r"argument 0 'x': expected shape \[1000\], got \[10, 100\]"),
        ((every_other, y, N), r"argument 0 'x': expected strides \[1\].*got \[2\]"),
        ((x, shifted, N), r"argument 1 'y': .*16-byte aligned"),
        ((x.cpu(), y, N), "argument 0 'x': got a torch tensor on device 'cpu'"),
        ((x, y, 2**31), r"argument 2 'n': value 2147483648 out of range for int32"),
        ((x, y, float(N)), "argument 2 'n': expected an int for int32, got float"),
        ((x, y, True), "argument 2 'n': expected a number for int32, got bool"),
        ((x, y), r"scale2: expected 3 arguments \(x, y, n\), got 2"),
    ]
    y.fill_(-1.0)
    for args, message in bad:
        with pytest.raises(ArgumentError, match=message) as fast:
            k(*args)
        with pytest.raises(ArgumentError) as general:
            k.check(*args)
        assert str(fast.value) == str(general.value)
    torch.cuda.synchronize()
    assert torch.all(y == -1.0)                 # none of them launched
    k(x, y, N)
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * x)


def _busy(torch, stream):
    """Keep `stream` busy for ~0.1 s, so work queued behind it visibly waits."""
    with torch.cuda.stream(stream):
        torch.cuda._sleep(200_000_000)


@pytest.mark.parametrize("how", ["current", "explicit"])
def test_fast_path_launches_on_the_torch_stream(art, torch, how):
    x, y = _xy(torch)
    k = art.scale2
    k(x, y, N)                                  # sets the fast path up, on the default stream
    torch.cuda.synchronize()
    y.fill_(-1.0)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    _busy(torch, s)
    if how == "current":
        with torch.cuda.stream(s):              # stream=None follows torch.cuda.current_stream()
            k(x, y, N)
    else:
        k(x, y, N, stream=s)
    torch.cuda.current_stream().synchronize()   # the default stream does not wait for s ...
    assert not s.query(), "the sleep was too short for this test"
    assert torch.all(y == -1.0)                 # ... so the launch, queued on s, has not run
    s.synchronize()
    assert torch.equal(y, 2 * x)
    y.fill_(0.0)
    k(x, y, N)                                  # and back on the default stream
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * x)


def test_fast_path_in_a_fresh_thread(art, torch):
    # No context is current in a new thread: the first call sets the primary one.
    import threading
    x, y = _xy(torch)
    torch.cuda.synchronize()
    errors = []

    def work():
        try:
            for _ in range(3):
                art.scale2(x, y, N)
            torch.cuda.synchronize()
        except Exception as exc:   # reported in the main thread
            errors.append(exc)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert not errors, errors
    assert torch.equal(y, 2 * x)


def _create_context(drv):
    """A new (non-primary) context on device 0, made current; skip where impossible."""
    dev = drv.cuDeviceGet(0)[1]
    for create in (lambda: drv.cuCtxCreate(None, 0, dev),      # cuda.bindings 13
                   lambda: drv.cuCtxCreate(0, dev)):           # cuda.bindings 12
        try:
            err, ctx = create()
        except TypeError:
            continue
        if int(getattr(err, "value", err)) == 0:
            return ctx
    pytest.skip("could not create a CUDA context with this cuda.bindings")


def test_a_users_own_context_stays_current(art, torch):
    from tilemega.runtime import driver
    drv = driver.cuda()
    x, y = _xy(torch)
    k = art.scale2
    k(x, y, N)                                  # the fast path is set up
    y.fill_(-1.0)
    torch.cuda.synchronize()
    ctx = _create_context(drv)
    try:
        k(x, y, N)                              # must launch in the primary context ...
        current = drv.cuCtxGetCurrent()[1]
        assert int(current) == int(ctx)         # ... and leave the user's one current
    finally:
        drv.cuCtxDestroy(ctx)                   # also pops it: torch's context is current again
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * x)
