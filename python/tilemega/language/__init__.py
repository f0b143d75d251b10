"""`tilemega.language`: a TileLang-style Python frontend (import it as `T`).

    import tilemega
    import tilemega.language as T

    @tilemega.jit
    def scale_add(A: T.Tensor((256, 1024), "float32"), B: T.Tensor((256, 1024), "float32"),
                  alpha: T.float32):
        with T.Kernel(256 // 64, 1024 // 128, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 128), "float32")
            A_f = T.alloc_fragment((64, 128), "float32")
            T.copy(A[bx * 64, by * 128], A_s)
            T.copy(A_s, A_f)
            for i, j in T.Parallel(64, 128):
                A_f[i, j] = A_f[i, j] * alpha + 1.0
            T.copy(A_f, B[bx * 64, by * 128])

The body runs once, at trace time, with proxy objects, and builds `tile`
dialect IR through `tilemega.dialects`; every op carries the location of the
Python line that made it. `help(tilemega.jit)` describes compilation,
specialisation on symbolic shapes (one artifact per concrete shape) and the
on-disk cache; `help(tilemega.autotune)` the autotuner.

Importing this package does not load MLIR.
"""

from .function import KernelSignature, TracedKernel, trace  # noqa: F401
from .kernel import Kernel, Parallel, Pipelined, num_blocks, serial
from .mathops import (abs, ceil, cos, exp, exp2, fast_div, floor, fma, infinity, log,  # noqa: A004
                      log2, max, max_value, min, min_value, rsqrt, sin, sqrt, tanh)
from .ops import (Blocked, Swizzle, alloc_fragment, alloc_shared, annotate_layout,
                  atomic_add, atomic_max, block_atomic_add, clear, copy, fill, gemm, reduce_absmax,
                  prefetch_point, task_wait, reduce_max, reduce_min, reduce_sum, use_swizzle,
                  wait_wgmma)
from .trace import TileLangError, TileLangTypeError
from .types import (DTYPES, Buffer, DType, SymExpr, Symbol, Tensor, bfloat16, ceildiv,
                    dynamic, float8_e4m3fn, float8_e5m2, float16, float32, float64,
                    int8, int16, int32, int64,
                    symbolic)
from .values import BufferRegion, Expr, cast, if_then_else, reinterpret
from .values import Buffer as TileBuffer  # noqa: F401  (the proxy class)

__all__ = [
    # types and annotations
    "Tensor", "Buffer", "DType", "float16", "bfloat16", "float32", "float64",
    "float8_e4m3fn", "float8_e5m2", "int8",
    "int16", "int32", "int64", "symbolic", "dynamic", "ceildiv", "SymExpr", "Symbol",
    # kernel structure
    "Kernel", "Parallel", "Pipelined", "serial", "num_blocks",
    # tiles
    "alloc_shared", "alloc_fragment", "copy", "gemm", "clear", "fill", "reduce_sum",
    "reduce_max", "reduce_min", "reduce_absmax", "atomic_add", "atomic_max", "block_atomic_add",
    "annotate_layout", "use_swizzle", "Blocked", "Swizzle", "prefetch_point", "task_wait",
    "wait_wgmma",
    # scalar math
    "exp", "exp2", "fma", "fast_div", "log", "log2", "sqrt", "rsqrt", "tanh", "sin", "cos", "floor", "ceil",
    "abs", "max", "min", "cast", "reinterpret", "if_then_else", "infinity", "max_value",
    "min_value",
    # errors and proxies
    "TileLangError", "TileLangTypeError", "Expr", "BufferRegion", "TileBuffer", "DTYPES",
    # tracing machinery (used by tilemega.jit)
    "KernelSignature", "TracedKernel", "trace",
]
