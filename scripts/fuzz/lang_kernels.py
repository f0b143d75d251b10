"""Random valid `T.*` kernels for fuzz_lang.py: hypothesis strategies for a
kernel *spec* (a dict of plain values) and the Python source of the kernel
that a spec describes.

The source is a self-contained module defining `kernel`, a `@tilemega.jit`
function with static shapes: a failing spec is saved as that file and
replays with `python kernel.py`.

Kinds:
  elementwise  2-D tiles global -> (shared ->) fragment -> element-wise math
               in T.Parallel -> global (or an atomic add), masked edge tiles
  reduce       a fragment tile reduced along one dimension (sum/max/min/absmax)
  gemm         C = op(A) @ op(B) over a T.Pipelined (or serial) K loop, with
               transposes, input and accumulator dtypes, stages, block sizes
"""

from __future__ import annotations

from hypothesis import strategies as st

# Ordered simplest first: hypothesis shrinks towards the first entry.
FLOATS = ["float32", "float16", "bfloat16"]
TILES = [32, 64, 16, 128, 8, 256]
THREADS = [128, 32, 64, 256]
DIMS = st.one_of(st.sampled_from([64, 128, 256, 512]), st.integers(1, 600))


def _elementwise(draw):
    return {
        "kind": "elementwise",
        "M": draw(DIMS), "N": draw(DIMS),
        "bm": draw(st.sampled_from(TILES)), "bn": draw(st.sampled_from(TILES)),
        "dtype": draw(st.sampled_from(FLOATS)),
        "out_dtype": draw(st.sampled_from(FLOATS)),
        "threads": draw(st.sampled_from(THREADS)),
        "via_shared": draw(st.booleans()),
        "swizzle": draw(st.one_of(st.none(), st.tuples(st.integers(0, 3), st.integers(0, 4),
                                                        st.integers(0, 4)))),
        "math": draw(st.sampled_from(["scale_add", "exp", "relu", "rsqrt", "select"])),
        "store": draw(st.sampled_from(["copy", "copy", "atomic_add"])),
    }


def _reduce(draw):
    return {
        "kind": "reduce",
        "M": draw(DIMS), "N": draw(DIMS),
        "bm": draw(st.sampled_from(TILES)), "bn": draw(st.sampled_from(TILES)),
        "dtype": draw(st.sampled_from(FLOATS)),
        "threads": draw(st.sampled_from(THREADS)),
        "op": draw(st.sampled_from(["sum", "max", "min", "absmax"])),
        "dim": draw(st.sampled_from([1, 0])),
        "clear": draw(st.booleans()),
    }


def _gemm(draw):
    return {
        "kind": "gemm",
        "M": draw(DIMS), "N": draw(DIMS), "K": draw(DIMS),
        "bm": draw(st.sampled_from([64, 128, 32, 16])),
        "bn": draw(st.sampled_from([64, 128, 32, 16, 256])),
        "bk": draw(st.sampled_from([32, 16, 64, 8])),
        "dtype": draw(st.sampled_from(["float16", "bfloat16", "float32"])),
        "acc": draw(st.sampled_from(["float32", "float16"])),
        "transpose_a": draw(st.booleans()), "transpose_b": draw(st.booleans()),
        "pipelined": draw(st.booleans()),
        "stages": draw(st.integers(1, 4)),
        "threads": draw(st.sampled_from([128, 64, 256, 32])),
        "a_in_registers": draw(st.booleans()) and draw(st.booleans()),
    }


@st.composite
def kernel_specs(draw):
    kind = draw(st.sampled_from(["elementwise", "gemm", "reduce"]))
    return {"elementwise": _elementwise, "reduce": _reduce, "gemm": _gemm}[kind](draw)


# ---------------------------------------------------------------------------
# Source
# ---------------------------------------------------------------------------

_HEADER = '''\
import tilemega
import tilemega.language as T

# fuzz_lang spec: {spec!r}

'''

_FOOTER = '''

if __name__ == "__main__":
    print(kernel.compile().ptx[:400])
'''


def _cdiv(a, b):
    return (a + b - 1) // b


def _elementwise_source(s):
    M, N, bm, bn, t = s["M"], s["N"], s["bm"], s["bn"], s["threads"]
    dt, out = s["dtype"], s["out_dtype"]
    body = {
        "scale_add": "F[i, j] * 2.0 + 1.0",
        "exp": "T.exp(F[i, j])",
        "relu": f"T.max(F[i, j], T.cast(0.0, '{dt}'))",
        "rsqrt": "T.rsqrt(T.abs(F[i, j]) + 1.0)",
        "select": f"T.if_then_else(F[i, j] > 0.5, F[i, j], T.cast(bx, '{dt}'))",
    }[s["math"]]
    lines = [
        "@tilemega.jit(cache=False)",
        f"def kernel(A: T.Tensor(({M}, {N}), '{dt}'), B: T.Tensor(({M}, {N}), '{out}')):",
        f"    with T.Kernel({_cdiv(M, bm)}, {_cdiv(N, bn)}, threads={t}) as (bx, by):",
        f"        F = T.alloc_fragment(({bm}, {bn}), '{dt}')",
        f"        G = T.alloc_fragment(({bm}, {bn}), '{out}')",
    ]
    if s["via_shared"]:
        swizzle = "" if s["swizzle"] is None else f", swizzle=T.Swizzle{tuple(s['swizzle'])}"
        lines += [f"        S = T.alloc_shared(({bm}, {bn}), '{dt}'{swizzle})",
                  f"        T.copy(A[bx * {bm}, by * {bn}], S)",
                  "        T.copy(S, F)"]
    else:
        lines.append(f"        T.copy(A[bx * {bm}, by * {bn}], F)")
    lines += [f"        for i, j in T.Parallel({bm}, {bn}):",
              f"            G[i, j] = T.cast({body}, '{out}')"]
    if s["store"] == "atomic_add":
        lines.append(f"        T.atomic_add(B[bx * {bm}, by * {bn}], G)")
    else:
        lines.append(f"        T.copy(G, B[bx * {bm}, by * {bn}])")
    return "\n".join(lines)


def _reduce_source(s):
    M, N, bm, bn, t, dt = s["M"], s["N"], s["bm"], s["bn"], s["threads"], s["dtype"]
    rows = s["dim"] == 1
    out_shape, out_tile = (M,) if rows else (N,), bm if rows else bn
    start = f"bx * {bm}" if rows else f"by * {bn}"
    return "\n".join([
        "@tilemega.jit(cache=False)",
        f"def kernel(A: T.Tensor(({M}, {N}), '{dt}'), O: T.Tensor({out_shape!r}, '{dt}')):",
        f"    with T.Kernel({_cdiv(M, bm)}, {_cdiv(N, bn)}, threads={t}) as (bx, by):",
        f"        F = T.alloc_fragment(({bm}, {bn}), '{dt}')",
        f"        R = T.alloc_fragment(({out_tile},), '{dt}')",
        "        T.clear(R)",
        f"        T.copy(A[bx * {bm}, by * {bn}], F)",
        f"        T.reduce_{s['op']}(F, R, dim={s['dim']}, clear={s['clear']})",
        f"        T.copy(R, O[{start}])",
    ])


def _gemm_source(s):
    M, N, K, bm, bn, bk = s["M"], s["N"], s["K"], s["bm"], s["bn"], s["bk"]
    dt, acc, t = s["dtype"], s["acc"], s["threads"]
    ta, tb = s["transpose_a"], s["transpose_b"]
    a_shape = (K, M) if ta else (M, K)
    b_shape = (N, K) if tb else (K, N)
    a_tile = (bk, bm) if ta else (bm, bk)
    b_tile = (bn, bk) if tb else (bk, bn)
    a_at = "k * {bk}, by * {bm}" if ta else "by * {bm}, k * {bk}"
    b_at = "bx * {bn}, k * {bk}" if tb else "k * {bk}, bx * {bn}"
    loop = (f"T.Pipelined({_cdiv(K, bk)}, num_stages={s['stages']})" if s["pipelined"]
            else f"T.serial({_cdiv(K, bk)})")
    lines = [
        "@tilemega.jit(cache=False)",
        f"def kernel(A: T.Tensor({a_shape!r}, '{dt}'), B: T.Tensor({b_shape!r}, '{dt}'),",
        f"           C: T.Tensor(({M}, {N}), '{acc}')):",
        f"    with T.Kernel({_cdiv(N, bn)}, {_cdiv(M, bm)}, threads={t}) as (bx, by):",
        f"        A_s = T.alloc_shared({a_tile!r}, '{dt}')",
        f"        B_s = T.alloc_shared({b_tile!r}, '{dt}')",
        f"        C_f = T.alloc_fragment(({bm}, {bn}), '{acc}')",
    ]
    a_operand = "A_s"
    if s["a_in_registers"]:
        lines.append(f"        A_f = T.alloc_fragment({a_tile!r}, '{dt}')")
        a_operand = "A_f"
    lines += [
        "        T.clear(C_f)",
        f"        for k in {loop}:",
        f"            T.copy(A[{a_at.format(bm=bm, bk=bk)}], A_s)",
        f"            T.copy(B[{b_at.format(bn=bn, bk=bk)}], B_s)",
    ]
    if s["a_in_registers"]:
        lines.append("            T.copy(A_s, A_f)")
    lines += [
        f"            T.gemm({a_operand}, B_s, C_f, transpose_A={ta}, transpose_B={tb})",
        f"        T.copy(C_f, C[by * {bm}, bx * {bn}])",
    ]
    return "\n".join(lines)


def kernel_source(spec) -> str:
    """The Python module (text) of the kernel `spec` describes."""
    body = {"elementwise": _elementwise_source, "reduce": _reduce_source,
            "gemm": _gemm_source}[spec["kind"]](spec)
    return _HEADER.format(spec=spec) + body + "\n" + _FOOTER
