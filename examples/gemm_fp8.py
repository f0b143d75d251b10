"""An fp8 GEMM in T.* on Hopper's wgmma: C = scale_a * scale_b * (A @ B^T).

A is M x K and B is N x K, both float8_e4m3fn (or float8_e5m2) and K-major,
the only form wgmma reads 8-bit operands in; scale_a and scale_b are
per-tensor float32 scales held in one-element device tensors (as
torch._scaled_mm takes them); C is M x N bfloat16. The kernel is the plain
Hopper GEMM of examples/gemm_hopper.py with 8-bit tiles: K tiles of 128
(one 128-byte swizzle row), which layout inference swizzles as
#tile.swizzle<3, 4, 3> and convert-tile-to-gpu lowers to
wgmma.mma_async.m64nNk32 with e4m3 / e5m2 inputs, the K loop on TMA and
mbarriers; the f32 accumulator is scaled in a T.Parallel epilogue and
stored through a shared tile (`stage_c`). `warp_specialize` gives the K
loop's TMA copies to a producer warpgroup (examples/gemm_hopper.py). M and
N may be anything (masked
tiles); K must be a multiple of 16 so that A's and B's rows are whole
16-byte TMA strides.

`build(name=..., **config)` returns the kernel's MLIR text (parameters:
DEFAULTS); run_examples.EXAMPLES lists the configurations it compiles and
examples_gpu/gemm_fp8.py checks. The compiler is imported in `build()` only.
"""

import sys

from example_config import with_defaults
from gemm_hopper import check_tiling, threads

DEFAULTS = dict(M=1024, N=1024, K=1024, block_m=128, block_n=256, num_stages=4,
                dtype="e4m3", group_m=0, warp_specialize=False)

# One 128-byte swizzle row of 8-bit elements (TileTensorCores.h
# getWgmmaRowElems(8)).
BLOCK_K = 128
DTYPES = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def config(**overrides):
    """DEFAULTS updated with `overrides` (unknown keys are an error)."""
    cfg = with_defaults(DEFAULTS, overrides, "gemm_fp8")
    if cfg["dtype"] not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {cfg['dtype']!r}")
    check_tiling(cfg)
    if cfg["K"] % 16:
        raise ValueError(f"K must be a multiple of 16 (A's and B's rows are TMA strides "
                         f"of whole 16 bytes), got {cfg['K']}")
    return cfg


def build(name="gemm_fp8", **overrides):
    """The MLIR text of one kernel named `name`."""
    import tilemega
    import tilemega.language as T

    cfg = config(**overrides)
    M, N, K = cfg["M"], cfg["N"], cfg["K"]
    BM, BN, stages, group = cfg["block_m"], cfg["block_n"], cfg["num_stages"], cfg["group_m"]
    dtype = DTYPES[cfg["dtype"]]
    row_chunks = T.Swizzle.row_chunks(BN)       # C's rows are BN bf16

    @tilemega.jit(name=name, cache=False)
    def kernel(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype),
               scale_a: T.Tensor((1,), "float32"), scale_b: T.Tensor((1,), "float32"),
               C: T.Tensor((M, N), "bfloat16")):
        grid_m, grid_n = T.ceildiv(M, BM), T.ceildiv(N, BN)
        with T.Kernel(grid_m, grid_n, threads=threads(cfg)) as (bx, by):
            if group:
                T.use_swizzle(group, order="column")
            a_s = T.alloc_shared((BM, BLOCK_K), dtype)
            b_s = T.alloc_shared((BN, BLOCK_K), dtype)
            acc = T.alloc_fragment((BM, BN), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, BLOCK_K), num_stages=stages,
                                 warp_specialize=cfg["warp_specialize"]):
                T.copy(A[bx * BM, k * BLOCK_K], a_s)
                T.copy(B[by * BN, k * BLOCK_K], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            scale = scale_a[0] * scale_b[0]
            for i, j in T.Parallel(BM, BN):
                acc[i, j] = acc[i, j] * scale
            c_s = T.alloc_shared((BM, BN), "bfloat16", swizzle=row_chunks)
            T.copy(acc, c_s)
            T.copy(c_s, C[bx * BM, by * BN])

    return kernel.ir()


def reference(a, b, scale_a, scale_b):
    """float64 reference of C = scale_a * scale_b * (A @ B^T) (torch tensors)."""
    return (a.double() @ b.double().t()) * (scale_a.double() * scale_b.double())


if __name__ == "__main__":
    import tilemega

    print(tilemega.compile(build(), chip="sm_90a").save(
        sys.argv[1] if len(sys.argv) > 1 else "out"))
