"""8-bit float inputs (float8_e4m3fn, float8_e5m2) without a GPU: their
spelling in T.* and the runtime, the wgmma-only gemm rule (an error at the
gemm where wgmma cannot take it, never a fallback), and the artifact rules
(tensor parameters only, TMA moving them as bytes). Their numbers are
checked on the H200 by examples/gemm_fp8.py's entries in
test/gpu/results.json."""

import re

import pytest

from conftest import write_artifact

from tilemega.runtime import load_artifact, tensor_maps
from tilemega.runtime.dtypes import from_dlpack


def test_runtime_names_and_dlpack_codes():
    assert from_dlpack(10, 8, 1) == "float8_e4m3fn"
    assert from_dlpack(12, 8, 1) == "float8_e5m2"
    assert tensor_maps._DATA_TYPES["float8_e4m3fn"] == tensor_maps._DATA_TYPES["uint8"]


def test_an_8_bit_float_scalar_parameter_is_refused(tmp_path, base_meta):
    base_meta["kernels"][0]["params"][2]["dtype"] = "float8_e4m3fn"
    with pytest.raises(ValueError, match=r"kernels\[0\]\.params\[2\]\.dtype.*a scalar "
                                            r"parameter cannot be float8_e4m3fn"):
        load_artifact(write_artifact(tmp_path, base_meta))


def test_8_bit_float_tensor_parameters_load(tmp_path, base_meta):
    for p in base_meta["kernels"][0]["params"][:2]:
        p["dtype"] = "float8_e5m2"
    art = load_artifact(write_artifact(tmp_path, base_meta))
    (kernel,) = art.kernels.values()
    assert [p.dtype for p in kernel.spec.params[:2]] == ["float8_e5m2"] * 2


tilemega = pytest.importorskip("tilemega.ir", reason="the compiler package is not built") and \
    __import__("tilemega")
import tilemega.language as T  # noqa: E402


def fp8_gemm(transpose_b=True, block_k=128, dtype="float8_e4m3fn"):
    M = N = 256
    K = 512
    b_shape = (N, K) if transpose_b else (K, N)

    @tilemega.jit(cache=False)
    def kernel(A: T.Tensor((M, K), dtype), B: T.Tensor(b_shape, dtype),
               C: T.Tensor((M, N), "float32")):
        with T.Kernel(M // 128, N // 128, threads=256) as (bx, by):
            a_s = T.alloc_shared((128, block_k), dtype)
            b_s = T.alloc_shared((128, block_k) if transpose_b else (block_k, 128), dtype)
            acc = T.alloc_fragment((128, 128), "float32")
            T.clear(acc)
            for k in T.Pipelined(K // block_k, num_stages=3):
                T.copy(A[bx * 128, k * block_k], a_s)
                if transpose_b:
                    T.copy(B[by * 128, k * block_k], b_s)
                else:
                    T.copy(B[k * block_k, by * 128], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=transpose_b)
            T.copy(acc, C[bx * 128, by * 128])
    return kernel


def test_the_dtypes_and_their_aliases():
    from tilemega.language.types import as_dtype
    assert as_dtype("e4m3") is T.float8_e4m3fn and as_dtype("fp8_e5m2") is T.float8_e5m2
    assert T.float8_e4m3fn.itemsize == 1


def test_an_fp8_gemm_takes_wgmma_k32():
    for dtype, kind in (("float8_e4m3fn", "e4m3"), ("float8_e5m2", "e5m2")):
        art = tilemega.compile(fp8_gemm(dtype=dtype).ir(), chip="sm_90a", assemble=False)
        steps = re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n128k32\.f32\.{kind}\.{kind}",
                           art.ptx)
        # Four k32 steps per 128-wide K tile (the loop may be unrolled).
        assert steps and len(steps) % 4 == 0 and "mma.sync" not in art.ptx


@pytest.mark.parametrize("build, options, why", [
    (lambda: fp8_gemm(), dict(wgmma=False), "the wgmma lowering is off"),
    (lambda: fp8_gemm(), dict(chip="sm_90"), "the wgmma lowering is off"),
    (lambda: fp8_gemm(transpose_b=False), {}, "K-major only"),
    (lambda: fp8_gemm(block_k=64), {}, "A must be rows of a multiple of 128 elements of K"),
])
def test_an_fp8_gemm_wgmma_cannot_take_is_an_error_at_the_gemm(build, options, why):
    options = {"chip": "sm_90a", **options}
    with pytest.raises(tilemega.compiler.CompileError,
                       match="multiplies 8-bit floats, which only wgmma does") as info:
        tilemega.compile(build().ir(), assemble=False, **options)
    assert why in str(info.value)


def test_swizzle_column_blocks_spelling():
    assert str(T.Swizzle(3, 3, 3, columns=64)) == \
        "#tile.swizzle<bits = 3, base = 3, shift = 3, columns = 64>"
    assert "columns" not in str(T.Swizzle(3, 3, 3))
    with pytest.raises(T.TileLangError, match="columns"):
        T.Swizzle(3, 3, 3, columns=-1)
