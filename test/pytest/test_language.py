"""tilemega.language (`T`): tracing Python kernels into tile IR (no GPU needed)."""

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip(
    "tilemega.ir", reason="the compiler package is not built "
    "(run scripts/tilemega.sh build and put build/python_packages on PYTHONPATH)")

import tilemega  # noqa: E402
import tilemega.language as T  # noqa: E402
from tilemega import CompileError  # noqa: E402
from tilemega.ir import Context, Location, Module  # noqa: E402
from tilemega.passmanager import PassManager  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
sys.path.insert(0, EXAMPLES)
import scale_add  # noqa: E402
import scale_add_lang  # noqa: E402

HERE = os.path.abspath(__file__)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEMEGA_CACHE_DIR", str(tmp_path / "cache"))
    from tilemega import cache
    cache.clear_memory()


def line_of(text, path=HERE):
    """The 1-based line of the first line of `path` that contains `text`."""
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if text in line:
                return n
    raise AssertionError(f"{text!r} not in {path}")


def _example_ir():
    with Context(), Location.unknown():
        return str(scale_add.build())


def _normalize(text):
    with Context():
        m = Module.parse(text)
        PassManager.parse("builtin.module(canonicalize,cse)").run(m.operation)
        return str(m)


# ---------------------------------------------------------------------------
# The scale_add example: same IR, same PTX as the raw builder version
# ---------------------------------------------------------------------------

def test_scale_add_ir_matches_builder_example():
    traced, built = scale_add_lang.scale_add.ir(), _example_ir()
    # Identical up to SSA names once both are canonicalised ...
    assert _normalize(traced) == _normalize(built)
    # ... and, before that, line by line apart from where the constants sit
    # (the frontend puts every constant once at the top of the kernel).
    def split(text):
        lines = text.splitlines()
        return ([l for l in lines if "arith.constant" not in l],
                sorted(l.strip() for l in lines if "arith.constant" in l))
    assert split(traced) == split(built)


def test_scale_add_compiles_to_the_same_ptx_and_metadata():
    entry = scale_add_lang.scale_add.compile_entry()
    with Context(), Location.unknown():
        ref = tilemega.compile(scale_add.build())
    got = entry.compiled
    assert ".entry scale_add" in got.ptx and ".target sm_90a" in got.ptx
    assert got.ptx == ref.ptx
    assert got.kernels == ref.kernels
    (kernel,) = got.kernels
    assert kernel["grid"] == [4, 8, 1] and kernel["block"] == [128, 1, 1]
    assert [p["name"] for p in kernel["params"]] == ["A", "B", "alpha"]


def test_ops_carry_the_users_source_lines():
    text = scale_add_lang.scale_add.ir(debug_info=True)
    path = os.path.abspath(scale_add_lang.__file__)
    locs = {name: f"{file}:{line}:{col}" for name, file, line, col in
            re.findall(r'^(#loc\d*) = loc\("([^"]+)":(\d+):(\d+)\)', text, re.M)}
    def loc_of(op):
        m = re.search(rf"{re.escape(op)}.* loc\((#loc\d*)\)", text)
        assert m, op
        return locs[m.group(1)]
    assert loc_of("tile.copy %arg0") == f"{path}:{line_of('T.copy(A[bx', path)}:9"
    # Region ops print their location after the closing brace.
    kernel_loc = re.search(r"^    \} loc\((#loc\d*)\)", text, re.M).group(1)
    assert locs[kernel_loc].startswith(f"{path}:{line_of('with T.Kernel', path)}:")
    assert loc_of("arith.mulf").startswith(f"{path}:{line_of('A_f[i, j] * alpha', path)}:")
    assert loc_of("tile.alloc_shared").startswith(f"{path}:{line_of('T.alloc_shared', path)}:")


# ---------------------------------------------------------------------------
# Diagnostics: MLIR errors point at the user's line
# ---------------------------------------------------------------------------

@tilemega.jit
def reduce_kernel(A: T.Tensor((64, 64), "float32"), O: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=32):
        f = T.alloc_fragment((64, 64), "float32")
        g = T.alloc_fragment((64,), "float32")
        T.copy(A, f)
        T.reduce_sum(f, g, dim=1)   # REDUCE-LINE
        T.copy(g, O)


@tilemega.jit
def gemm_from_registers(A: T.Tensor((32, 32), "float32"), C: T.Tensor((32, 32), "float32")):
    with T.Kernel(1, threads=32):
        a = T.alloc_fragment((32, 32), "float32")
        b = T.alloc_shared((32, 32), "float32")
        c = T.alloc_fragment((32, 32), "float32")
        T.copy(A, a)
        T.copy(A, b)
        T.gemm(a, b, c, clear_accum=True)   # GEMM-LINE
        T.copy(c, C)


@tilemega.jit
def tiny_fragment(A: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=128):
        f = T.alloc_fragment((64,), "float32")   # TINY-LINE
        T.copy(A, f)
        T.copy(f, A)


def test_reduce_builds_ir():
    text = reduce_kernel.ir()
    assert "tile.reduce sum" in text and "dim 1" in text and "{clear}" in text


def test_pipeline_diagnostics_point_at_the_users_line():
    # Kernels that verify but that the pipeline rejects (a SIMT gemm reading
    # A from registers; a fragment smaller than the thread count): the CompileError
    # carries MLIR's diagnostic at the Python line that made the op.
    for kernel, marker in ((gemm_from_registers, "# GEMM-LINE"), (tiny_fragment, "# TINY-LINE")):
        with pytest.raises(CompileError) as info:
            kernel.compile()
        message = str(info.value)
        assert f'"{HERE}":{line_of(marker)}:' in message, message
        assert "reproduce with:" in message


def test_reduce_kernel_compiles():
    assert ".entry" in reduce_kernel.compile().ptx


@tilemega.jit
def bad_fragment_index(A: T.Tensor((64, 64), "float32")):
    with T.Kernel(1, threads=64):
        f = T.alloc_fragment((64, 64), "float32")
        T.copy(A, f)
        for i, j in T.Parallel(64, 64):
            f[i, j] = f[j, i] + 1.0   # BAD-INDEX-LINE
        T.copy(f, A)


def test_verifier_error_names_the_users_line():
    with pytest.raises(CompileError) as info:
        bad_fragment_index.ir()
    message = str(info.value)
    assert "does not verify" in message
    assert f'"{HERE}":{line_of("# BAD-INDEX-LINE")}:' in message


@tilemega.jit
def gemm_bf16_into_f16(A: T.Tensor((64, 64), "bfloat16"), C: T.Tensor((64, 64), "float16")):
    with T.Kernel(1, threads=128):
        a = T.alloc_shared((64, 64), "bfloat16")
        c = T.alloc_fragment((64, 64), "float16")
        T.copy(A, a)
        T.gemm(a, a, c, clear_accum=True)   # BF16-F16-LINE
        T.copy(c, C)


def test_bf16_gemm_into_f16_is_rejected_at_the_users_line():
    # mma.sync has no bf16-input, f16-accumulator form; the tensor-core rule
    # rejects it in the verifier rather than running it on CUDA cores.
    with pytest.raises(CompileError) as info:
        gemm_bf16_into_f16.ir()
    message = str(info.value)
    assert f'"{HERE}":{line_of("# BF16-F16-LINE")}:' in message, message
    assert "unsupported accumulation: 'bf16' inputs into 'f16'" in message
    assert "accumulate bf16 in f32" in message


# ---------------------------------------------------------------------------
# Python-side misuse: the exception names the argument and the user's line
# ---------------------------------------------------------------------------

def _kernel_with(body, threads=128):
    @tilemega.jit
    def k(A: T.Tensor((256, 256), "float32"), H: T.Tensor((256, 256), "float16"),
          n: T.int32):
        with T.Kernel(4, 4, threads=threads) as (bx, by):
            S = T.alloc_shared((64, 64), "float32")
            F = T.alloc_fragment((64, 64), "float32")
            body(A, H, n, S, F, bx, by)
    return k


def _store_half(A, H, n, S, F, bx, by):
    for i, j in T.Parallel(64, 64):
        F[i, j] = H[i, j]                                # MISUSE-store


def _mix(A, H, n, S, F, bx, by):
    for i, j in T.Parallel(64, 64):
        F[i, j] = A[i, j] * H[i, j]                      # MISUSE-mix


def _twice_rastered(A, H, n, S, F, bx, by):
    T.use_swizzle(2)
    T.use_swizzle(2)                                     # MISUSE-raster-twice


def _raster_in_loop(A, H, n, S, F, bx, by):
    for i in T.Parallel(64):
        T.use_swizzle(2)                                 # MISUSE-raster-loop


def _leak(A, H, n, S, F, bx, by):
    for i, j in T.Parallel(64, 64):
        x = S[i, j]
    S[0, 0] = x                                          # MISUSE-leak


MISUSE = [
    (lambda A, H, n, S, F, bx, by: T.copy(A[bx * 64], S),          # MISUSE-rank
     "MISUSE-rank", T.TileLangError, r"A\[\.\.\.\]: wrong rank: .*rank 2, got 1 index"),
    (lambda A, H, n, S, F, bx, by: T.copy(A[0:64, 0:32], S),       # MISUSE-extent
     "MISUSE-extent", T.TileLangError, r"T.copy: extents do not match: src region of A "
                                        r"\(extents \[64, 32\]\) vs dst S \(shape \[64, 64\]\)"),
    (lambda A, H, n, S, F, bx, by: T.copy(A[200, 0], S),           # MISUSE-bounds
     "MISUSE-bounds", T.TileLangError, r"T.copy: src box \[200, 264\) in dimension 0"),
    (lambda A, H, n, S, F, bx, by: T.copy(A[0, 0], H[0, 0]),       # MISUSE-twopoints
     "MISUSE-twopoints", T.TileLangError, r"T.copy: both src and dst are region starts"),
    (lambda A, H, n, S, F, bx, by: T.copy(A, H),                   # MISUSE-g2g
     "MISUSE-g2g", T.TileLangError, r"cannot copy global A to global H"),
    (_store_half, "MISUSE-store", T.TileLangTypeError,
     r"dtype mismatch: storing a float16 value into float32 buffer F"),
    (_mix, "MISUSE-mix", T.TileLangTypeError, r"`\*` on values of different types: float32 "
                                             r"and float16"),
    (lambda A, H, n, S, F, bx, by: n * 0.5,                        # MISUSE-floatlit
     "MISUSE-floatlit", T.TileLangTypeError, r"int32 with the float 0.5"),
    (lambda A, H, n, S, F, bx, by: 1 if n > 0 else 0,              # MISUSE-bool
     "MISUSE-bool", T.TileLangTypeError, r"no Python truth value.*T.if_then_else"),
    (lambda A, H, n, S, F, bx, by: F[0, 0] + 1.0,                  # MISUSE-fragment
     "MISUSE-fragment", T.TileLangError, r"fragment F can be read element-wise only inside "
                                         r"T.Parallel"),
    (lambda A, H, n, S, F, bx, by: bx / 2,                         # MISUSE-div
     "MISUSE-div", T.TileLangTypeError, r"use `//` for integer division"),
    (lambda A, H, n, S, F, bx, by: list(range(bx)),                # MISUSE-range
     "MISUSE-range", T.TileLangTypeError, r"not a Python int"),
    (lambda A, H, n, S, F, bx, by: T.gemm(S, S, A),                # MISUSE-gemm
     "MISUSE-gemm", T.TileLangError, r"T.gemm: C \(A\) must be fragment, got global"),
    (lambda A, H, n, S, F, bx, by: T.reduce_max(F, S, dim=1),      # MISUSE-reduce
     "MISUSE-reduce", T.TileLangError, r"T.reduce_max: dst S must have shape \[64\]"),
    (lambda A, H, n, S, F, bx, by: T.annotate_layout(             # MISUSE-layout
        {F: T.Blocked([1, 4], [1, 32], [2, 1])}),
     "MISUSE-layout", T.TileLangError, r"layout of F: the layout spreads over 64 threads .* "
                                       r"the kernel has 128"),
    (lambda A, H, n, S, F, bx, by: T.use_swizzle(F),               # MISUSE-swizzle
     "MISUSE-swizzle", T.TileLangError, r"F is a fragment buffer; swizzles apply to shared"),
    (lambda A, H, n, S, F, bx, by: T.use_swizzle(0),               # MISUSE-panel
     "MISUSE-panel", T.TileLangError, r"T.use_swizzle: panel_size must be >= 1, got 0"),
    (lambda A, H, n, S, F, bx, by: T.use_swizzle(4, order="diag"), # MISUSE-order
     "MISUSE-order", T.TileLangError, r"order must be 'row' or 'column', got 'diag'"),
    (lambda A, H, n, S, F, bx, by: T.use_swizzle("4"),             # MISUSE-panel-type
     "MISUSE-panel-type", T.TileLangTypeError, r"a panel size \(an int\) or a shared tile, "
                                              r"got str"),
    (_twice_rastered, "MISUSE-raster-twice", T.TileLangError,
     r"block raster is already set \(one T.use_swizzle a kernel\)"),
    (_raster_in_loop, "MISUSE-raster-loop", T.TileLangError,
     r"block rasterisation belongs at the kernel's top level"),
    (lambda A, H, n, S, F, bx, by: T.alloc_shared((64, "x")),      # MISUSE-shape
     "MISUSE-shape", T.TileLangTypeError, r"T.alloc_shared: shape\[1\] must be an int"),
    (lambda A, H, n, S, F, bx, by: T.fill(S, n),                   # MISUSE-fill
     "MISUSE-fill", T.TileLangTypeError, r"T.fill: dtype mismatch: filling float32 tile S "
                                         r"with a int32 value"),
    (_leak, "MISUSE-leak", T.TileLangError, r"computed inside T.Parallel at .* is used after"),
]


@pytest.mark.parametrize("body, marker, exc, pattern", MISUSE, ids=[m[1] for m in MISUSE])
def test_misuse_names_argument_and_line(body, marker, exc, pattern):
    with pytest.raises(exc) as info:
        _kernel_with(body).ir()
    message = str(info.value)
    assert message.startswith(f"{HERE}:{line_of('# ' + marker)}: "), message
    assert re.search(pattern, message), message
    assert info.value.filename == HERE and info.value.lineno == line_of("# " + marker)


@pytest.mark.parametrize("threads, exc, pattern", [
    (100, T.TileLangError, "threads must be a positive multiple of 32"),
    (128.0, T.TileLangTypeError, "threads must be an int, got float"),
    ((128, 1), T.TileLangTypeError, "threads must be one int"),
])
def test_bad_threads(threads, exc, pattern):
    with pytest.raises(exc, match=pattern) as info:
        _kernel_with(lambda *a: None, threads=threads).ir()
    assert str(info.value).startswith(f"{HERE}:")


def test_signature_errors_name_the_parameter():
    with pytest.raises(T.TileLangError, match="parameter x needs an annotation"):
        @tilemega.jit
        def k(x):
            pass
    with pytest.raises(T.TileLangTypeError, match="dtype: unknown or unsupported element type"):
        T.Tensor((4, 4), "float8")
    with pytest.raises(T.TileLangError, match=r"shape\[1\] must be >= 1"):
        T.Tensor((4, 0), "float32")

    @tilemega.jit
    def no_kernel(A: T.Tensor((4,), "float32")):
        pass
    with pytest.raises(T.TileLangError, match=r"never opened `with T.Kernel"):
        no_kernel.ir()


def test_t_api_outside_a_trace_is_an_error():
    with pytest.raises(T.TileLangError, match="while a @tilemega.jit function is traced"):
        T.alloc_shared((4, 4), "float32")


# ---------------------------------------------------------------------------
# Arithmetic, math, casts
# ---------------------------------------------------------------------------

@tilemega.jit
def arith_kernel(A: T.Tensor((256,), "float32"), C: T.Tensor((256,), "int32"),
                 n: T.int32, s: T.float16):
    with T.Kernel(4, threads=64) as bx:
        f = T.alloc_fragment((64,), "float32")
        g = T.alloc_fragment((64,), "int32")
        for i in T.Parallel(64):
            idx = bx * 64 + i                       # index arithmetic, hoisted
            x = A[idx]
            y = T.if_then_else(idx < n, T.max(x, 0.0) + T.cast(s, "float32"),
                               T.sqrt(T.abs(x)))
            z = T.exp(-y) / (1.0 + T.rsqrt(T.min(y, 2.0))) + T.log(2.0 + x * x)
            f[i] = z - T.cast(idx % 7, "float32") + T.cast(i - n, T.float32) % 3.0
            g[i] = n // 3 + n % 5 - T.cast(idx // 2, "int32") * 2
        T.copy(f, A[bx * 64])
        T.copy(g, C[bx * 64])


def test_arithmetic_emits_typed_ops_and_compiles():
    text = arith_kernel.ir()
    for op in ("arith.muli", "arith.addi", "arith.cmpi slt", "arith.select", "arith.maxnumf",
               "arith.minnumf", "math.sqrt", "math.absf", "math.exp", "math.rsqrt", "math.log",
               "arith.extf %arg3 : f16 to f32", "arith.index_cast", "arith.sitofp",
               "arith.remf", "arith.floordivsi", "arith.divf", "arith.divsi", "arith.remsi"):
        assert op in text, op
    # n // 3 on a possibly negative int32 keeps floor semantics.
    assert re.search(r"arith.floordivsi %arg2, %c3_i32 : i32", text)
    # Non-negative index math uses the plain ops.
    assert re.search(r"arith.divsi %\d+, %c2 : index", text)
    # Block-invariant bx * 64 is computed once, at the top of the kernel.
    assert text.count("arith.muli %arg4, %c64") == 1
    kernel_body = text.split("tile.kernel")[1]
    assert kernel_body.index("arith.muli %arg4, %c64") < kernel_body.index("tile.alloc_fragment")
    # The compiled kernel assembles (ptxas runs when it is installed).
    result = arith_kernel.compile()
    assert ".entry arith_kernel" in result.ptx


def test_fma_rounds_once_and_needs_floats():
    """T.fma(a, b, c): math.fma, one fma.rn in the PTX where a * b + c is a
    mul.rn and an add.rn; Python numbers take the traced operand's type."""
    @tilemega.jit(cache=False)
    def fma_kernel(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((128,), "float32")
            for i in T.Parallel(128):
                f[i] = T.fma(A[i], 0.5, -B[i])
            T.copy(f, A[0])

    assert "math.fma" in fma_kernel.ir()
    assert "fma.rn.f32" in fma_kernel.compile().ptx

    @tilemega.jit(cache=False)
    def int_fma(A: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            g = T.alloc_fragment((128,), "int32")
            for i in T.Parallel(128):
                g[i] = T.fma(A[i], 2, 1)
            T.copy(g, A[0])

    with pytest.raises(T.TileLangTypeError, match=r"T.fma.*needs float values, got int32"):
        int_fma.ir()


def test_fast_div_is_the_approximate_division_and_needs_floats():
    """T.fast_div(a, b): arith.divf with fastmath<afn>, an approximate
    division in the PTX where `/` is the IEEE div.rn (the GEMV bodies'
    SiLU, mega/bodies.py)."""
    @tilemega.jit(cache=False)
    def div_kernel(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((128,), "float32")
            g = T.alloc_fragment((128,), "float32")
            for i in T.Parallel(128):
                f[i] = T.fast_div(A[i], 1.0 + B[i])
                g[i] = A[i] / B[i]
            T.copy(f, A[0])
            T.copy(g, B[0])

    assert "fastmath<afn>" in div_kernel.ir()
    ptx = div_kernel.compile().ptx
    assert "div.approx.f32" in ptx and "div.rn.f32" in ptx

    @tilemega.jit(cache=False)
    def int_div(A: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            g = T.alloc_fragment((128,), "int32")
            for i in T.Parallel(128):
                g[i] = T.fast_div(A[i], 2)
            T.copy(g, A[0])

    with pytest.raises(T.TileLangTypeError, match=r"T.fast_div.*needs float values, got int32"):
        int_div.ir()


def test_reinterpret_reads_the_bits_and_names_a_width_mismatch():
    """T.reinterpret: a bfloat16's bits as an int16 (arith.bitcast), the
    order key of sample_filtered's radix select; widths must match."""
    @tilemega.jit
    def keys(X: T.Tensor((64,), "bfloat16"), K: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64):
            g = T.alloc_fragment((64,), "int32")
            for i in T.Parallel(64):
                b = T.cast(T.reinterpret(X[i], "int16"), "int32")
                g[i] = T.if_then_else(b >= 0, b, b ^ 0x7FFF) + 32768
            T.copy(g, K)
    text = keys.ir()
    assert "arith.bitcast" in text and ": bf16 to i16" in text
    assert ".entry keys" in keys.compile().ptx

    @tilemega.jit
    def wide(X: T.Tensor((64,), "bfloat16"), K: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64):
            g = T.alloc_fragment((64,), "int32")
            for i in T.Parallel(64):
                g[i] = T.reinterpret(X[i], "int32")
            T.copy(g, K)
    with pytest.raises(T.TileLangTypeError,
                       match=r"cannot reinterpret bfloat16 \(16 bits\) as int32 \(32 bits\)"):
        wide.ir()


def test_python_modulo_semantics_for_signed_ints():
    @tilemega.jit
    def k(C: T.Tensor((64,), "int32"), n: T.int32):
        with T.Kernel(1, threads=64):
            g = T.alloc_fragment((64,), "int32")
            for i in T.Parallel(64):
                g[i] = n % 5
            T.copy(g, C)
    text = k.ir()
    # r = remsi(n, 5); r + 5 where r != 0 and r < 0 (5 > 0): floor modulo.
    assert "arith.remsi %arg1, %c5_i32" in text and "arith.select" in text


def test_constants_fold_and_are_shared():
    @tilemega.jit
    def k(A: T.Tensor((256, 256), "float32")):
        with T.Kernel(4, threads=128) as bx:
            s = T.alloc_shared((64, 64), "float32")
            T.copy(A[bx * 64 + 0, 2 * 32], s)
            T.copy(s, A[bx * 64, 64 * 1])
    text = k.ir()
    assert text.count("arith.muli") == 1
    assert "%arg0[%0, 64]" in text and "%arg1" not in text.split("tile.kernel")[0]


# ---------------------------------------------------------------------------
# Regions, copies, tiles
# ---------------------------------------------------------------------------

def test_copy_slices_points_and_whole_buffers():
    @tilemega.jit
    def k(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float32")):
        with T.Kernel(4, 2, threads=128) as (bx, by):
            s = T.alloc_shared((64, 128), "float16")
            f = T.alloc_fragment((64, 128), "float32")
            T.copy(A[bx * 64:bx * 64 + 64, by * 128:(by * 128) + 128], s)
            T.copy(s, f)                         # element types convert (f16 -> f32)
            T.copy(f, B[bx * 64, by * 128])
            T.copy(A[0:64, 128:], s)
    text = k.ir()
    assert "tile.copy %arg0[%0, %1] to %2[0, 0] sizes [64, 128]" in text
    assert "tile.copy %arg0[0, 128] to %2[0, 0] sizes [64, 128]" in text
    assert "memref.load" not in text         # region starts leave no element reads behind
    k.compile()


def test_gemm_pipelined_and_symbolic_grid():
    M, N, K = T.symbolic("M"), T.symbolic("N"), T.symbolic("K")

    @tilemega.jit(out_idx=[-1])
    def matmul(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
               C: T.Tensor((M, N), "float32"), *, block_M: int = 64, block_N: int = 64,
               block_K: int = 32, stages: int = 2):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_f = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * block_M, bx * block_N])

    text = matmul.ir(M=256, N=512, K=1024, block_M=128)
    assert "memref<256x1024xf16>" in text and "memref<1024x512xf16>" in text
    assert "in [8, 2] threads 128" in text
    assert re.search(r"tile.pipelined %arg5 = %c0 to %c32 step %c1 num_stages 2", text)
    assert "tile.gemm" in text and "tile.clear" in text
    result = matmul.compile(M=200, N=512, K=1024, config={"stages": 3})
    assert result.kernels[0]["grid"] == [8, 4, 1]
    assert result.kernels[0]["params"][0]["shape"] == [200, 1024]
    with pytest.raises(TypeError, match=r"give the symbolic dimension\(s\) \['K'\]"):
        matmul.ir(M=256, N=512)
    with pytest.raises(TypeError, match="no symbolic dimension or keyword-only parameter 'Q'"):
        matmul.ir(M=256, N=512, K=64, Q=1)


@pytest.mark.parametrize("order", ["row", "column"])
@pytest.mark.parametrize("g0, g1, panel", [(4, 6, 4), (5, 7, 3), (3, 3, 1), (8, 2, 5),
                                           (1, 9, 2), (16, 24, 8)])
def test_block_raster_is_a_permutation_in_panels(order, g0, g1, panel):
    # T.use_swizzle(panel, order): every block gets a distinct tile, and
    # consecutive launch blocks stay inside one panel of `panel` rows
    # (columns) until it is used up.
    from tilemega.language.kernel import raster_indices
    launch = [raster_indices(b0, b1, g0, g1, panel, order)
              for b1 in range(g1) for b0 in range(g0)]
    assert sorted(launch) == sorted((x, y) for x in range(g0) for y in range(g1))
    panel_of = [(y if order == "row" else x) // panel for x, y in launch]
    assert panel_of == sorted(panel_of)


@pytest.mark.parametrize("order", ["row", "column"])
@pytest.mark.parametrize("g0, g1, panel, cluster", [(8, 6, 2, 2), (12, 5, 3, 4), (4, 4, 1, 2)])
def test_block_raster_in_clusters(order, g0, g1, panel, cluster):
    # With clusters along the first index the raster orders whole clusters:
    # every block still gets a distinct tile, and the blocks of a cluster
    # (launch indices cluster c .. cluster c + cluster - 1) take consecutive
    # first indices and the same second one (what their multicast needs).
    from tilemega.language.kernel import raster_indices
    tiles = {(b0, b1): raster_indices(b0, b1, g0, g1, panel, order, cluster=cluster)
             for b1 in range(g1) for b0 in range(g0)}
    assert sorted(tiles.values()) == sorted((x, y) for x in range(g0) for y in range(g1))
    for (b0, b1), (x, y) in tiles.items():
        first = tiles[(b0 - b0 % cluster, b1)]
        assert y == first[1] and x == first[0] + b0 % cluster


def test_kernel_cluster_errors():
    # T.Kernel(cluster=N): 2 to 8 blocks, the first grid dimension a
    # multiple of N; the kernel carries it.
    def build(grid, cluster):
        @tilemega.jit(name="k", cache=False)
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(*grid, threads=128, cluster=cluster) as ids:
                for i in T.Parallel(64):
                    A[i] = 1.0
        return k.ir()
    assert "in [4, 2] threads 128 cluster 2 {" in build((4, 2), 2)
    with pytest.raises(T.TileLangError, match=r"cluster must be 2 to 8 blocks, got 16"):
        build((32,), 16)
    with pytest.raises(T.TileLangError, match=r"need it to be a multiple of 2, got grid\[0\] = 3"):
        build((3, 2), 2)


def _resident_copy(grid=(8,), resident=True, dim=0, cluster=None):
    """Blocks of a resident grid walk 64 rows of 4096 with the launched
    count as their stride (T.num_blocks())."""
    @tilemega.jit(name="walk", cache=False, out_idx=None)
    def k(A: T.Tensor((4096, 64), "float32"), B: T.Tensor((4096, 64), "float32")):
        with T.Kernel(*grid, threads=128, cluster=cluster, resident=resident) as ids:
            b = ids if len(grid) == 1 else ids[0]
            for t in T.serial(b, 64, T.num_blocks(dim)):
                s = T.alloc_fragment((64, 64), "float32")
                T.copy(A[t * 64, 0], s)
                T.copy(s, B[t * 64, 0])
    return k


def test_resident_kernel_strides_by_the_launched_count():
    # T.Kernel(resident=True): tile.kernel ... resident, T.num_blocks() its
    # tile.num_blocks; the PTX reads %nctaid.x (the runtime's count), the
    # artifact says the grid is resident, and a kernel that is not resident
    # gets its grid size as a constant (clusters: test_wgmma.py).
    assert "in [8] threads 128 cluster 2 resident {" in _resident_copy(cluster=2).ir()
    k = _resident_copy()
    text = k.ir()
    assert "in [8] threads 128 resident {" in text, text
    assert re.search(r"%\w+ = tile.num_blocks 0\b", text), text
    compiled = k.compile()
    assert "%nctaid.x" in compiled.ptx
    (meta,) = compiled.kernels
    assert meta["resident"] is True and meta["grid"] == [8, 1, 1]
    fixed = _resident_copy(resident=False).compile()
    assert "%nctaid" not in fixed.ptx
    (meta,) = fixed.kernels
    assert "resident" not in meta and "cluster" not in meta


def test_resident_kernel_errors():
    with pytest.raises(T.TileLangError, match=r"a resident grid is 1-D .* got 2 dimensions"):
        _resident_copy(grid=(8, 2)).ir()
    with pytest.raises(T.TileLangError, match=r"resident must be True or False, got 1"):
        _resident_copy(resident=1).ir()

    @tilemega.jit(name="unstrided", cache=False, out_idx=None)
    def unstrided(A: T.Tensor((8, 64), "float32")):
        with T.Kernel(8, threads=128, resident=True) as b:
            for i in T.Parallel(64):
                A[b, i] = 1.0
    with pytest.raises(T.TileLangError, match=r"test_language.py:\d+: T.Kernel: resident=True: "
                                              r"the runtime may launch fewer than the 8 blocks, "
                                              r"but the body never reads how many"):
        unstrided.ir()
    with pytest.raises(T.TileLangError,
                       match=r"dim must name a dimension of the kernel's 1-D grid \(0 to 0\), "
                             r"got 1"):
        _resident_copy(dim=1).ir()


def test_early_copies_and_prefetch_points():
    # T.copy(early=True) marks a global-to-shared copy of a T.Pipelined loop
    # tile.early, T.prefetch_point() is where its prologue may start; the
    # misuses name the argument.
    def build(where="loop", early=True, src_scope="global"):
        @tilemega.jit(name="k", cache=False)
        def k(A: T.Tensor((256, 64), "bfloat16"), B: T.Tensor((16, 64), "bfloat16")):
            with T.Kernel(1, threads=128) as b:
                a_s = T.alloc_shared((16, 64), "bfloat16")
                c_s = T.alloc_shared((16, 64), "bfloat16")
                acc = T.alloc_fragment((16, 64), "float32")
                T.clear(acc)
                if where == "parallel":
                    for i in T.Parallel(16):
                        T.prefetch_point()
                T.prefetch_point()
                if where == "kernel":
                    T.copy(A[0, 0], a_s, early=early)
                for t in T.Pipelined(16, num_stages=2):
                    T.copy(A[t * 16, 0] if src_scope == "global" else c_s, a_s, early=early)
                    T.copy(a_s, acc)
                T.copy(acc, B)
        return k.ir()
    ir = build()
    assert ir.index("tile.prefetch_point") < ir.index("tile.pipelined")
    assert "{tile.early}" in ir
    assert "tile.early" not in build(early=False)
    with pytest.raises(T.TileLangError, match=r"early applies to a copy directly in a "
                                              r"T.Pipelined loop"):
        build(where="kernel")
    with pytest.raises(T.TileLangError, match=r"early loads a global tensor into a shared "
                                              r"tile, got shared c_s to shared a_s"):
        build(src_scope="shared")
    with pytest.raises(T.TileLangTypeError, match=r"early must be a Python bool, got 1"):
        build(early=1)
    with pytest.raises(T.TileLangError, match=r"a prefetch point cannot sit inside a "
                                              r"T.Parallel loop"):
        build(where="parallel")


def test_task_wait():
    # T.task_wait() emits tile.task_wait in its place at the top of the kernel
    # body (ops before it run before the task's wait, in a mega task); outside
    # a kernel or inside a T.Parallel loop it is a frontend error naming the
    # call; in a T.serial loop the op's verifier reports it at the call.
    def build(where="kernel"):
        @tilemega.jit(name="k", cache=False)
        def k(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            if where == "outside":
                T.task_wait()
            with T.Kernel(1, threads=64) as b:
                a = T.alloc_fragment((64,), "float32")
                T.copy(A[0], a)
                if where == "kernel":
                    T.task_wait()
                if where == "serial":
                    for t in T.serial(2):
                        T.task_wait()
                for i in T.Parallel(64):
                    if where == "parallel":
                        T.task_wait()
                    a[i] = a[i] + 1.0
                T.copy(a, B[0])
        return k.ir()
    ir = build()
    assert ir.count("tile.task_wait") == 1
    assert ir.index("tile.copy") < ir.index("tile.task_wait") < ir.index("tile.parallel")
    with pytest.raises(T.TileLangError, match=r"T\.task_wait: must be inside `with T\.Kernel"):
        build(where="outside")
    with pytest.raises(T.TileLangError, match=r"T\.task_wait: a task wait cannot sit inside a "
                                              r"T\.Parallel loop"):
        build(where="parallel")
    with pytest.raises(CompileError, match=r"'tile.task_wait' op must be directly in a "
                                           r"tile.kernel body"):
        build(where="serial")


def test_block_raster_ir_replaces_every_use():
    # The remap sits at the kernel's start and every use of the block
    # indices, before the call too, reads the remapped values; disabled, the
    # kernel is unchanged; a 1-D grid is refused.
    def build(enable=True, grid=(4, 6)):
        @tilemega.jit(name="k", cache=False)
        def k(A: T.Tensor((64, 96), "float32")):
            with T.Kernel(*grid, threads=128) as ids:
                bx, by = ids if len(grid) == 2 else (ids, ids)
                early = bx * 16
                T.use_swizzle(3, enable=enable)
                for i, j in T.Parallel(16, 16):
                    A[early + i, by * 16 + j] = 1.0
        return k.ir()
    text = build()
    body = text[text.index("tile.kernel"):]
    first_ops = body.splitlines()[1:4]
    assert any("arith.muli %arg2" in line for line in first_ops), body
    assert "arith.minui" in body and "arith.select" in body
    # The stores index with the remapped values only.
    assert re.search(r"memref.store .*%arg0\[%\d+, %\d+\]", body)
    # Each launch index: the kernel header and the remap's linear index.
    assert body.count("%arg1") == 2 and body.count("%arg2") == 2
    assert "arith.minui" not in build(enable=False)
    with pytest.raises(T.TileLangError, match=r"reorders a 2-D grid; this kernel's grid is \[8\]"):
        build(grid=(8,))


def test_layouts_and_swizzles():
    @tilemega.jit
    def k(A: T.Tensor((64, 128), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 128), "float32", swizzle=T.Swizzle(2, 2, 3))
            t = T.alloc_shared((64, 128), "float32")
            u = T.alloc_shared((64, 128), "float32")
            f = T.alloc_fragment((64, 128), "float32")
            T.use_swizzle(t, bits=3, base=3, shift=3)
            T.annotate_layout({
                f: T.Blocked(size_per_thread=[1, 4], threads_per_warp=[1, 32],
                             warps_per_block=[4, 1], order=[1, 0]),
                u: "#tile.swizzle<bits = 1, base = 2, shift = 3>",
            })
            T.copy(A, s)
            T.copy(s, f)
            T.copy(f, t)
            T.copy(t, u)
            T.copy(u, A)
    text = k.ir()
    assert "swizzle = #tile.swizzle<bits = 2, base = 2, shift = 3>" in text
    assert "swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>" in text
    assert "swizzle = #tile.swizzle<bits = 1, base = 2, shift = 3>" in text
    assert ("layout = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], "
            "warpsPerBlock = [4, 1], order = [1, 0]>") in text
    k.compile()


def test_fill_clear_atomic_and_elementwise_global_access():
    @tilemega.jit
    def k(A: T.Tensor((256,), "float32"), C: T.Tensor((256,), "float32")):
        with T.Kernel(4, threads=64) as bx:
            f = T.alloc_fragment((64,), "float32")
            T.fill(f, -T.infinity("float32"))
            T.clear(f)
            for i in T.Parallel(64):
                f[i] = f[i] + A[bx * 64 + i] * 2
            T.atomic_add(C[bx * 64], f)
    text = k.ir()
    assert "tile.fill %0, %cst" in text or re.search(r"tile.fill %\d+, %cst", text)
    assert "0xFF800000" in text
    assert re.search(r"tile.atomic add %\d+ to %arg1\[%\d+\]", text)
    k.compile()


def test_jit_attribute_survives_importing_the_submodule():
    import tilemega.autotune  # noqa: F401  (binds tilemega.autotune to the module)
    import tilemega.jit  # noqa: F401

    @tilemega.jit(out_idx=None)
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            f = T.alloc_fragment((64,), "float32")
            T.copy(A, f)
            T.copy(f, A)
    assert "tile.kernel" in k.ir()
    assert callable(tilemega.autotune)


def test_importing_the_frontend_loads_no_mlir():
    code = ("import sys, tilemega, tilemega.language as T, tilemega.jit, tilemega.autotune, "
            "tilemega.cache, tilemega.runtime\n"
            "M = T.symbolic('M')\n"
            "@tilemega.jit\n"
            "def k(A: T.Tensor((M, 4), 'float32')):\n"
            "    pass\n"
            "assert not [m for m in sys.modules if '_mlir' in m], sorted(sys.modules)\n")
    env = dict(os.environ)
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


@pytest.mark.parametrize("op, pred", [("<", "olt"), ("<=", "ole"), (">", "ogt"), (">=", "oge"),
                                      ("==", "oeq"), ("!=", "une")])
def test_float_comparisons_build_cmpf(op, pred):
    """Found by scripts/fuzz/fuzz_lang.py: a float comparison raised
    AttributeError (the predicate enum's members are upper-case)."""
    compare = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
               ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}[op]

    @tilemega.jit(cache=False)
    def pick(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            F = T.alloc_fragment((64, 64), "float32")
            T.copy(A[0, 0], F)
            for i, j in T.Parallel(64, 64):
                F[i, j] = T.if_then_else(compare(F[i, j], 0.5), F[i, j], 0.0)
            T.copy(F, B[0, 0])

    text = str(pick.ir())
    assert f"arith.cmpf {pred}" in text, text
    assert pick.compile().ptx


def test_errors_in_the_mega_bodies_point_at_their_lines():
    """The mega package's task bodies are T.* kernels: their frames are the
    user's (the location of a diagnostic), the language's own are not."""
    import importlib

    from tilemega.language import ops
    from tilemega.mega import generation_bodies

    tr = importlib.import_module("tilemega.language.trace")   # the module, not T.trace

    assert not tr._is_internal(generation_bodies.__file__)
    assert tr._is_internal(ops.__file__) and tr._is_internal(tr.__file__)


# ---------------------------------------------------------------------------
# Asynchronous gemms: T.gemm(..., wg_wait=-1) and T.wait_wgmma
# ---------------------------------------------------------------------------

@tilemega.jit
def two_async_gemms(A: T.Tensor((64, 64), "bfloat16"), C: T.Tensor((64, 64), "float32")):
    with T.Kernel(1, threads=128):
        a = T.alloc_shared((64, 64), "bfloat16")
        s = T.alloc_fragment((64, 64), "float32")
        o = T.alloc_fragment((64, 64), "float32")
        T.copy(A, a)
        T.clear(o)
        T.gemm(a, a, s, transpose_B=True, clear_accum=True, wg_wait=-1)
        T.gemm(a, a, s, transpose_B=True, wg_wait=-1)
        T.gemm(a, a, o, wg_wait=-1)
        T.wait_wgmma(1)
        T.copy(s, C)
        T.wait_wgmma(0)
        T.copy(o, C)


def test_async_gemms_and_their_waits():
    text = two_async_gemms.ir()
    assert len(re.findall(r"tile.gemm [^{]*{async", text)) == 3, text
    # With one group left pending, the two gemms into s are complete and o's
    # is not: the wait hands back s only; the second wait hands back o.
    waits = re.findall(r"tile.wgmma_wait pending (\d) (%\w+)", text)
    assert [w[0] for w in waits] == ["1", "0"], text
    assert waits[0][1] != waits[1][1]
    kernel = two_async_gemms.compile()
    assert kernel.kernels[0]["registers"] > 0


@tilemega.jit
def read_before_wait(A: T.Tensor((64, 64), "bfloat16"), C: T.Tensor((64, 64), "float32")):
    with T.Kernel(1, threads=128):
        a = T.alloc_shared((64, 64), "bfloat16")
        s = T.alloc_fragment((64, 64), "float32")
        T.copy(A, a)
        T.gemm(a, a, s, transpose_B=True, clear_accum=True, wg_wait=-1)
        T.copy(s, C)   # READ-IN-FLIGHT-LINE
        T.wait_wgmma(0)


@tilemega.jit
def never_waited(A: T.Tensor((64, 64), "bfloat16")):
    with T.Kernel(1, threads=128):
        a = T.alloc_shared((64, 64), "bfloat16")
        s = T.alloc_fragment((64, 64), "float32")
        T.copy(A, a)
        T.gemm(a, a, s, transpose_B=True, clear_accum=True, wg_wait=-1)   # NEVER-WAITED-LINE


def test_async_gemm_misuse_is_reported_at_the_users_line():
    with pytest.raises(CompileError) as info:
        read_before_wait.ir()
    message = str(info.value)
    assert f'"{HERE}":{line_of("# READ-IN-FLIGHT-LINE")}:' in message, message
    assert "uses the accumulator of an asynchronous tile.gemm still in flight" in message
    with pytest.raises(CompileError) as info:
        never_waited.ir()
    message = str(info.value)
    assert f'"{HERE}":{line_of("# NEVER-WAITED-LINE")}:' in message, message
    assert "still in flight at the end of its block" in message

    @tilemega.jit
    def bad_wg_wait(A: T.Tensor((64, 64), "bfloat16")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((64, 64), "bfloat16")
            s = T.alloc_fragment((64, 64), "float32")
            T.gemm(a, a, s, wg_wait=1)

    with pytest.raises(T.TileLangError, match=r"wg_wait must be 0 \(wait at once\) or -1"):
        bad_wg_wait.ir()

    @tilemega.jit
    def bad_pending(A: T.Tensor((64, 64), "bfloat16")):
        with T.Kernel(1, threads=128):
            T.wait_wgmma(-1)

    with pytest.raises(T.TileLangError, match=r"T\.wait_wgmma: pending must be a non-negative"):
        bad_pending.ir()


def _last_block_sum():
    """Each block stores its partial sum; the last block to count itself
    in (T.block_atomic_add's old value n - 1) adds the partials and
    resets the counter: a split reduction without a second kernel."""
    @tilemega.jit(out_idx=None)
    def k(A: T.Tensor((1024,), "float32"), part: T.Tensor((128,), "float32"),
          counts: T.Tensor((1,), "int32"), out: T.Tensor((1,), "float32")):
        with T.Kernel(8, threads=128) as b:
            x = T.alloc_fragment((1, 128), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(A.view(8, 128)[b, 0], x)
            T.reduce_sum(x, s, dim=1)
            for i in T.Parallel(1):
                part[b + i] = s[i]
            old = T.block_atomic_add(counts[0], 1)
            for _ in T.serial(T.if_then_else(old == 7, 1, 0)):
                p = T.alloc_fragment((1, 128), "float32")   # part[8:] stays 0
                t = T.alloc_fragment((1,), "float32")
                T.copy(part.view(1, 128)[0, 0], p)
                T.reduce_sum(p, t, dim=1)
                for i in T.Parallel(1):
                    out[i] = t[i]
                counts[0] = 0
    return k


def test_block_atomic_add_traces_to_the_op_and_compiles():
    k = _last_block_sum()
    text = k.ir()
    assert re.search(r"tile.block_atomic_add %c1_i32 to %arg2\[%\w+\] via %\d+ : i32, "
                     r"memref<1xi32>, memref<1xi32, #gpu.address_space<workgroup>>", text), text
    ptx = k.compile().ptx
    assert re.search(r"fence.acq_rel.gpu;\s+atom.global.add.u32\s+%r\d+, \[%rd\d+\], 1;\s+"
                     r"fence.acq_rel.gpu;", ptx), ptx


@pytest.mark.parametrize("bad, message", [
    ("T.block_atomic_add(A[0], 1)", "must hold int32 or int64 counters, got float32"),
    ("T.block_atomic_add(c, 1)", "dst must be one element of a global tensor"),
    ("T.block_atomic_add(c[0], 1.5)", "value"),
])
def test_block_atomic_add_rejects_what_it_cannot_count(bad, message):
    src = ("def k(A: T.Tensor((64,), 'float32'), c: T.Tensor((4,), 'int32')):\n"
           "    with T.Kernel(1, threads=64):\n"
           f"        {bad}\n")
    scope = {"T": T}
    exec(compile(src, "<bad>", "exec"), scope)
    with pytest.raises(T.TileLangError, match=message):
        tilemega.jit(out_idx=None)(scope["k"]).ir()


def test_block_atomic_add_inside_parallel_is_an_error():
    @tilemega.jit(out_idx=None)
    def k(c: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                T.block_atomic_add(c[0], 1)
    with pytest.raises(T.TileLangError, match="cannot sit inside a T.Parallel loop"):
        k.ir()
