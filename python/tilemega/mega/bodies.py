"""Task bodies of the mega-kernel operators, written in `T.*`
(tilemega.language) as tile functions.

Each public function adds a `func.func` holding one `tile.kernel` (a 1-d grid
of `units` blocks, `threads` threads) at the current insertion point and
returns a `Body` record: its name, arguments, units and per-unit footprint.
With `emit=False` only the record is made (the graph builder checks shapes
and writes the graph with it, and emits each distinct body once).

The block index is the unit index and nothing else: a persistent kernel runs
these bodies with the block index set to the unit it works on, so no body
reads gridDim. Tensors are bf16 unless stated; math is f32, rounded once
where stored. Footprints follow docs/mega.md (`#mega.access`); where a unit's
exact range is not a linear function of the unit (or would leave the
tensor), the access covers the whole tensor (stride 0): dependencies are then
conservative, never missing.
"""

import inspect
import math as _math
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Optional, Tuple

import tilemega.language as T

_MLIR_DTYPES = {"bfloat16": "bf16", "float16": "f16", "float32": "f32", "int32": "i32"}


class Access(NamedTuple):
    """Unit u reads/writes flat elements [stride*u + base, ... + size) of
    argument `operand`; with first/last set, only the units first <= u < last
    do (base may then be negative as long as stride*first + base >= 0)."""
    mode: str
    operand: int
    stride: int
    base: int
    size: int
    first: Optional[int] = None
    last: Optional[int] = None

    def mlir(self) -> str:
        units = ""
        if self.first is not None or self.last is not None:
            # The attribute spells "all units from F on" as last = -1.
            last = -1 if self.last is None else self.last
            units = f" units {self.first or 0} to {last}"
        return (f"#mega.access<{self.mode} operand {self.operand} offset "
                f"{self.stride} * u + {self.base} size {self.size}{units}>")

    def units(self, total):
        """The units [first, last) that touch the range, of `total`."""
        return (self.first or 0, total if self.last is None else min(self.last, total))


@dataclass(frozen=True)
class Body:
    name: str
    args: Tuple[Tuple[str, Tuple[int, ...], str], ...]  # (name, shape, dtype)
    units: int
    footprint: Tuple[Access, ...]
    threads: int
    # The `T.*` kernel function (tilemega.language) whose signature is
    # `args` and whose `T.Kernel(units, threads=threads)` is the body
    # (t_body makes the records); None for a record made only to check
    # shapes.
    kernel: Optional[Callable] = field(default=None, compare=False, repr=False)

    @property
    def arg_types(self) -> Tuple[str, ...]:
        """MLIR memref types of the arguments, e.g. "memref<2048xbf16>"."""
        return tuple(memref_type(shape, dtype) for _, shape, dtype in self.args)


def memref_type(shape, dtype) -> str:
    return "memref<" + "".join(f"{d}x" for d in shape) + _MLIR_DTYPES[dtype] + ">"


def emit(body: Body) -> Body:
    """Traces body.kernel (tilemega.language.trace) and inserts the
    function at the current insertion point, in the current context."""
    from tilemega.ir import InsertionPoint, Module

    from ..language.function import KernelSignature, trace

    traced = trace(KernelSignature(body.kernel), {}, {}, name=body.name)
    parsed = Module.parse(traced.text)
    (fn,) = list(parsed.body.operations)
    InsertionPoint.current.insert(fn.detach_from_parent())
    return body


def t_body(name, kernel, units, footprint, threads, emit_now=True) -> Body:
    """The Body of a `T.*` kernel function: its arguments (names, shapes,
    dtypes) are the function's tensor parameters, in order; the function
    opens `T.Kernel(units, threads=threads)` and uses the block index as
    the unit (a persistent kernel sets it to the unit it runs)."""
    from ..language.function import KernelSignature

    sig = KernelSignature(kernel)
    args = []
    for p in sig.params:
        if p.kind != "tensor":
            raise ValueError(f"body {name}: parameter {p.name} is a scalar; task bodies take "
                             "tensors only (graph tensors)")
        args.append((p.name, tuple(p.annotation.resolve({})), p.annotation.dtype.name))
    body = Body(name, tuple(args), units, tuple(footprint), threads, kernel=kernel)
    return emit(body) if emit_now else body


def _check(cond, message):
    if not cond:
        raise ValueError(message)


def _tag(x) -> str:
    """A float as a symbol-name fragment: 1e-05 -> 1em05."""
    return f"{x:g}".replace("-", "m").replace("+", "").replace(".", "p")


def _rmsnorm_into(X, W, n, eps, store):
    """x * rsqrt(mean(x^2) + eps) * w over one global vector X of n, inside
    a T.Kernel, one order of operations for every body that normalises
    (rmsnorm and the GEMVs it is fused into): `store(v, x, i, j)` puts
    element [i, j] (f32) where the caller wants it; returns the [1, n]
    fragment x."""
    x = T.alloc_fragment((1, n), "float32")
    sq = T.alloc_fragment((1, n), "float32")
    ss = T.alloc_fragment((1,), "float32")
    w = T.alloc_fragment((n,), "float32")
    T.copy(X.view(1, n), x)
    # W's layout is the slice of x's along the row: each thread loads
    # (vectorised) just the columns it normalises.
    T.copy(W, w)
    for i, j in T.Parallel(1, n):
        v = x[i, j]
        sq[i, j] = v * v
    T.reduce_sum(sq, ss, dim=1, clear=True)
    for i, j in T.Parallel(1, n):
        mean = ss[i] * (1.0 / n)
        scale = T.rsqrt(mean + eps)
        store(x[i, j] * scale * w[j], x, i, j)
    return x


def _rmsnorm_to_shared(X, W, n, eps):
    """rmsnorm's numbers of X (n), rounded to bf16 as rmsnorm stores them,
    in a shared vector (the GEMVs that normalise their input read their
    chunks from it); inside a T.Kernel."""
    xn_s = T.alloc_shared((n,), "bfloat16")

    def store(v, x, i, j):
        xn_s[j] = T.cast(v, "bfloat16")
    _rmsnorm_into(X, W, n, eps, store)
    return xn_s


def online_softmax_step(sc, v_s, p_s, acc, m, l, m_cur, alpha, c):
    """One key block of flash attention (FlashAttention-2's online softmax),
    after the masked scores `sc` [rows, block_n] of the block: in base 2,
    m' = max(m, rowmax(sc) * c) with c = log2(e) / sqrt(D), alpha = exp2(m -
    m') rescales l and the output `acc` [rows, D] (0 while m = -inf), p =
    exp2(sc * c - m') adds to l and, through shared `p_s`, p @ `v_s` to acc.
    The fixed-length split (attention_split), the decode
    (generation_bodies.attention_at) and the prefill
    (prefill_bodies.attention_rows) attentions share it."""
    rows, block_n = sc.shape
    D = acc.shape[1]
    T.reduce_max(sc, m_cur, dim=1)
    for i in T.Parallel(rows):
        m_new = T.max(m[i], m_cur[i] * c)
        alpha[i] = T.exp2(m[i] - m_new)
        l[i] = l[i] * alpha[i]
        m[i] = m_new
    for i, j in T.Parallel(rows, block_n):
        sc[i, j] = T.exp2(sc[i, j] * c - m[i])
    for i, j in T.Parallel(rows, D):
        acc[i, j] = acc[i, j] * alpha[i]
    T.reduce_sum(sc, l, dim=1, clear=False)
    T.copy(sc, p_s)
    T.gemm(p_s, v_s, acc)


def _silu(g):
    """silu_mul's SiLU of an f32 value: g / (1 + exp(-g)), the division
    approximate (CUDA's __fdividef), as every body that applies it."""
    return T.fast_div(g, 1.0 + T.exp(-g))


# --- bodies ---------------------------------------------------------------------

def rmsnorm(H, eps=1e-5, *, threads=256, emit=True) -> Body:
    """y = x * rsqrt(mean(x^2) + eps) * w, one vector of H: args (x, w, y)."""
    name = f"rmsnorm_{H}" + ("" if eps == 1e-5 else f"_eps{_tag(eps)}")
    foot = (Access("read", 0, 0, 0, H), Access("read", 1, 0, 0, H), Access("write", 2, 0, 0, H))

    def kernel(x: T.Tensor((H,), "bfloat16"), w: T.Tensor((H,), "bfloat16"),
               y: T.Tensor((H,), "bfloat16")):
        with T.Kernel(1, threads=threads):
            def store(v, xf, i, j):
                xf[i, j] = v
            xf = _rmsnorm_into(x, w, H, eps, store)
            T.copy(xf, y.view(1, H))

    return t_body(name, kernel, 1, foot, threads, emit)


#: gemv_config's most stages of W in flight a unit, unless a body is given
#: another limit (its `stages`: generation_graph's gemv_stages).
GEMV_STAGES = 4


def gemv_config(rows, K, threads=256, max_stages=None):
    """(BLOCK_K, STAGES) for a unit of `rows` rows of K.

    Per-SM bandwidth x latency on an H200 is ~32 KB, and a persistent worker
    runs one CTA per SM, so each unit keeps ~16 KB stages of W in flight,
    up to GEMV_STAGES (max_stages when given) of them (<= 64 KB of shared
    memory): a unit of <= 64 KB of W issues all of it at once. BLOCK_K is a
    power of two dividing K, large enough for one 16-byte vector (8 bf16)
    per thread and stage."""
    target = max(16384 // (2 * rows), 8 * threads // rows, 8)
    block_k = min(K, 1 << (target.bit_length() - 1))  # a power of two
    while K % block_k:
        block_k //= 2
    stages = max(1, min(max_stages or GEMV_STAGES, K // block_k))
    return block_k, stages


def _stages_tag(stages):
    """A body name's mark of a stage limit other than the default's."""
    if stages is None:
        return ""
    _check(isinstance(stages, int) and not isinstance(stages, bool) and stages >= 1,
           f"stages: {stages!r} is not a positive number of stages")
    return f"_s{stages}"


def _gemv_setup(what, N, K, R, threads, stages=None):
    """(BLOCK_K, STAGES) of a GEMV body, with its shape checks."""
    _check(N % R == 0, f"{what}: N={N} is not a multiple of rows_per_unit={R}")
    BK, STAGES = gemv_config(R, K, threads, stages)
    _check(K % BK == 0 and BK % 8 == 0,
           f"{what}: K={K} must be a multiple of BLOCK_K={BK} (itself of 8)")
    return BK, STAGES


def _gemv_blocks(rows, W, K, R, BK, STAGES, x_source, r_src=None):
    """Inside a T.Kernel: for each row start in `rows`, the [R] f32
    fragment W[row:row+R] @ x, from one pipelined loop over K (with
    r_src[row:row+R] added when there is one block). x_source() allocates
    the vector's tiles and returns (early, late), callables (kk, x) or
    None that together put chunk kk of the vector into the f32 fragment x
    [BK] (their global-to-shared copies are pipelined with W's): early runs
    before W's chunk moves from shared memory to registers, late after it:
    work done early does not hold w's registers (gemv_silu's activation
    runs there)."""
    w_s = [T.alloc_shared((R, BK), "bfloat16") for _ in rows]
    early, late = x_source()
    w = [T.alloc_fragment((R, BK), "float32") for _ in rows]
    x = T.alloc_fragment((BK,), "float32")
    acc = [T.alloc_fragment((R, BK), "float32") for _ in rows]
    out = [T.alloc_fragment((R,), "float32") for _ in rows]
    for a in acc:
        T.clear(a)
    if r_src is not None:
        _check(len(rows) == 1, "_gemv_blocks: a residual is added to one block of rows")
        # Loaded ahead of the loop, so its latency hides behind W's.
        r = T.alloc_fragment((R,), "float32")
        T.copy(r_src[rows[0]], r)
    # W streams through shared memory STAGES chunks ahead (cp.async);
    # products accumulate elementwise and are reduced across threads
    # once, after the loop (examples/gemv.py).
    for kk in T.Pipelined(0, K, BK, num_stages=STAGES):
        for row, ws in zip(rows, w_s):
            T.copy(W[row, kk], ws)
        if early is not None:
            early(kk, x)
        for ws, wf in zip(w_s, w):
            T.copy(ws, wf)
        if late is not None:
            late(kk, x)
        for wf, a in zip(w, acc):
            for i, j in T.Parallel(R, BK):
                prod = wf[i, j] * x[j]
                a[i, j] = a[i, j] + prod
    for a, o in zip(acc, out):
        T.reduce_sum(a, o, dim=1, clear=True)
    if r_src is not None:
        for i in T.Parallel(R):
            out[0][i] = out[0][i] + r[i]
    return out


def _gemv_args(N, K, R, x_args, x_foot, residual):
    """Arguments and footprint of a GEMV body: W, the vector arguments
    x_args (which read x_foot), [r], y."""
    args = [("W", (N, K), "bfloat16")] + list(x_args)
    foot = [Access("read", 0, R * K, 0, R * K)] + list(x_foot)
    if residual:
        args.append(("r", (N,), "bfloat16"))
        foot.append(Access("read", len(args) - 1, R, 0, R))
    args.append(("y", (N,), "bfloat16"))
    foot.append(Access("write", len(args) - 1, R, 0, R))
    return tuple(args), tuple(foot)


def _gemv_kernel(args, build):
    """A T.* kernel function whose tensor parameters are `args` (name,
    shape, dtype), in order, calling build(*tensors): the GEMV bodies'
    signatures vary with their options (a residual, a bias)."""
    def kernel(*tensors):
        build(*tensors)

    kernel.__signature__ = inspect.Signature([
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                          annotation=T.Tensor(shape, dtype)) for name, shape, dtype in args])
    return kernel


#: Most bytes of W a unit may put whole into its loop's prologue
#: (gemv(..., whole_early=True)): gemv_config's most stages of in flight.
WHOLE_EARLY_BYTES = 65536


def gemv(N, K, rows_per_unit, residual=False, *, whole_early=False, stages=None,
         threads=256, emit=True) -> Body:
    """y = W @ x (+ r): args (W[N,K], x[K], y[N]) or (W, x, r[N], y).

    whole_early: one stage more than the unit's K tiles, so that the loop's
    prologue - what a persistent kernel issues before the task's wait
    under early loads - is all of the unit's W, not STAGES - 1 tiles, and
    the x tiles all load at once after the wait (units of at most
    WHOLE_EARLY_BYTES of W; Graph.linear's choice, whole_early_for).
    stages: at most that many stages of W in flight (gemv_config; None:
    GEMV_STAGES), marked `_s<n>` in the name; a whole_early unit's prologue
    is all of it whatever the limit."""
    R = rows_per_unit
    tag = _stages_tag(stages)
    BK, STAGES = _gemv_setup("gemv", N, K, R, threads, stages)
    if whole_early:
        _check(R * K * 2 <= WHOLE_EARLY_BYTES,
               f"gemv: whole_early needs a unit of at most {WHOLE_EARLY_BYTES} bytes of W, "
               f"not {R} rows of {K}")
        STAGES = K // BK + 1
    args, foot = _gemv_args(N, K, R, [("x", (K,), "bfloat16")],
                            [Access("read", 1, 0, 0, K)], residual)

    def build(W, X, *rest):
        with T.Kernel(N // R, threads=threads) as u:
            row = u * R

            def x_source():
                x_s = T.alloc_shared((BK,), "bfloat16")
                return (lambda kk, x: T.copy(X[kk], x_s), lambda kk, x: T.copy(x_s, x))

            (out,) = _gemv_blocks([row], W, K, R, BK, STAGES, x_source,
                                  rest[0] if residual else None)
            T.copy(out, rest[-1][row])

    return t_body(f"gemv_{N}x{K}_r{R}" + ("_res" if residual else "")
                  + ("_whole" if whole_early else tag),
                  _gemv_kernel(args, build), N // R, foot, threads, emit)


def gemv_rmsnorm(N, K, rows_per_unit, eps=1e-5, bias=False, *, stages=None, threads=256,
                 emit=True) -> Body:
    """y = W @ rmsnorm(x, norm_w) (+ b): args (W[N,K], x[K], norm_w[K], y[N]),
    or (W, x, norm_w, b[N], y) with bias (Qwen2's q/k/v biases: added to
    the f32 sums, as the residual of `gemv` is).

    The numbers of `rmsnorm` then `gemv`: every unit normalises the whole of
    x as rmsnorm does (it needs sum(x^2) over all K anyway), rounds it to
    bf16 (what rmsnorm stores) into shared memory, then streams W past it.
    x and norm_w are read once per unit (4-16 KB each, from L2 after the
    first units). stages: as gemv's."""
    R = rows_per_unit
    tag = _stages_tag(stages)
    BK, STAGES = _gemv_setup("gemv_rmsnorm", N, K, R, threads, stages)
    args, foot = _gemv_args(N, K, R, [("x", (K,), "bfloat16"), ("norm_w", (K,), "bfloat16")],
                            [Access("read", 1, 0, 0, K), Access("read", 2, 0, 0, K)], bias)
    if bias:   # _gemv_args names the added vector `r`: here it is the bias
        args = args[:3] + (("b", args[3][1], args[3][2]),) + args[4:]
    name = (f"gemv_rms_{N}x{K}_r{R}" + ("" if eps == 1e-5 else f"_eps{_tag(eps)}")
            + ("_bias" if bias else "") + tag)

    def build(W, X, NW, *rest):
        with T.Kernel(N // R, threads=threads) as u:
            row = u * R
            xn_s = _rmsnorm_to_shared(X, NW, K, eps)
            # The chunks come from shared memory: nothing to pipeline for x.
            (out,) = _gemv_blocks([row], W, K, R, BK, STAGES, lambda: (
                lambda kk, xc: T.copy(xn_s[kk], xc), None), rest[0] if bias else None)
            T.copy(out, rest[-1][row])

    return t_body(name, _gemv_kernel(args, build), N // R, foot, threads, emit)


def gemv_rmsnorm_glu(N, K, rows_per_unit, eps=1e-5, *, stages=None, threads=256,
                     emit=True) -> Body:
    """y = silu(Wg @ xn) * (Wu @ xn), xn = rmsnorm(x, norm_w), W = [Wg; Wu]:
    args (W[2N, K], x[K], norm_w[K], y[N]).

    The gate/up projection with the activation in its epilogue: unit u
    streams gate rows u*R.. and the same up rows N + u*R.. in one loop (a
    stage holds both blocks: gemv_config of 2R rows, the bytes of a
    gemv_rmsnorm unit of 2R rows), rounds both sums to bf16 and applies
    silu_mul's math to them - the numbers of gemv_rmsnorm then gemv_silu,
    whose down projection then reads y as a plain vector (`gemv`) instead of
    recomputing the activation of every chunk in every unit. stages: as
    gemv's."""
    R = rows_per_unit
    _check(N % R == 0, f"gemv_rmsnorm_glu: N={N} is not a multiple of rows_per_unit={R}")
    tag = _stages_tag(stages)
    BK, STAGES = gemv_config(2 * R, K, threads, stages)
    _check(K % BK == 0 and BK % 8 == 0,
           f"gemv_rmsnorm_glu: K={K} must be a multiple of BLOCK_K={BK} (itself of 8)")
    args = (("W", (2 * N, K), "bfloat16"), ("x", (K,), "bfloat16"),
            ("norm_w", (K,), "bfloat16"), ("y", (N,), "bfloat16"))
    foot = (Access("read", 0, R * K, 0, R * K), Access("read", 0, R * K, N * K, R * K),
            Access("read", 1, 0, 0, K), Access("read", 2, 0, 0, K),
            Access("write", 3, R, 0, R))
    name = f"gemv_rms_glu_{N}x{K}_r{R}" + ("" if eps == 1e-5 else f"_eps{_tag(eps)}") + tag

    def build(W, X, NW, Y):
        with T.Kernel(N // R, threads=threads) as u:
            row = u * R
            xn_s = _rmsnorm_to_shared(X, NW, K, eps)
            gate, up = _gemv_blocks([row, row + N], W, K, R, BK, STAGES,
                                    lambda: (lambda kk, xc: T.copy(xn_s[kk], xc), None))
            for i in T.Parallel(R):
                # What gemv_silu computes from the stored (bf16) gate and up.
                g = T.cast(T.cast(gate[i], "bfloat16"), "float32")
                sig = _silu(g)
                upv = T.cast(T.cast(up[i], "bfloat16"), "float32")
                gate[i] = sig * upv
            T.copy(gate, Y[row])

    return t_body(name, _gemv_kernel(args, build), N // R, foot, threads, emit)


def gemv_silu(N, K, rows_per_unit, residual=True, *, threads=256, emit=True) -> Body:
    """y = (r +) W @ (silu(gu[:K]) * gu[K:]): args (W[N,K], gu[2K], r[N], y[N]),
    or (W, gu, y) without the residual.

    The numbers of `silu_mul` then `gemv`: the activation of each K chunk is
    computed inside the GEMV loop (the gate and up chunks stream in with
    W's) and rounded to bf16, as silu_mul stores it. Each element is
    computed once per unit, by a parallel over the chunk's shared tiles
    alone (one element per thread), into a shared tile that x then loads:
    computed on x itself, whose layout is the slice of W's [R, BLOCK_K]
    one, every element would be computed by each of the warps sharing its
    column (8x the exp and div at 16 rows, enough MUFU work to slow the
    loop by a third). Computed in the loop rather than before it, the
    activation keeps W's first stages in flight from the unit's start."""
    R = rows_per_unit
    BK, STAGES = _gemv_setup("gemv_silu", N, K, R, threads)
    args, foot = _gemv_args(N, K, R, [("gu", (2 * K,), "bfloat16")],
                            [Access("read", 1, 0, 0, 2 * K)], residual)

    def build(W, GU, *rest):
        with T.Kernel(N // R, threads=threads) as u:
            row = u * R

            def x_source():
                g_s = T.alloc_shared((BK,), "bfloat16")
                u_s = T.alloc_shared((BK,), "bfloat16")
                a_s = T.alloc_shared((BK,), "bfloat16")

                def early(kk, x):
                    T.copy(GU[kk], g_s)
                    T.copy(GU[kk + K], u_s)
                    for j in T.Parallel(BK):
                        g = T.cast(g_s[j], "float32")
                        # silu_mul's math: g / (1 + exp(-g)) * up.
                        sig = _silu(g)
                        upv = T.cast(u_s[j], "float32")
                        a_s[j] = T.cast(sig * upv, "bfloat16")
                    T.copy(a_s, x)
                return early, None

            (out,) = _gemv_blocks([row], W, K, R, BK, STAGES, x_source,
                                  rest[0] if residual else None)
            T.copy(out, rest[-1][row])

    return t_body(f"gemv_silu_{N}x{K}_r{R}" + ("_res" if residual else ""),
                  _gemv_kernel(args, build), N // R, foot, threads, emit)


def _rotate_half(load, j, COS, SIN, D):
    """Element j of the Llama RoPE of one head, in f32 (inside a T.Parallel);
    load(jj) reads element jj of the head (bf16):
    out[j] = x[j] cos[i] - x[j + D/2] sin[i] in the first half,
             x[j] cos[i] + x[j - D/2] sin[i] in the second (i = j mod D/2)."""
    half = D // 2
    i = j % half
    partner = (j + half) % D
    first = j < half
    a = T.cast(load(j), "float32")
    b = T.cast(load(partner), "float32")
    sb = b * SIN[i]
    sb = T.if_then_else(first, -sb, sb)
    return a * COS[i] + sb


def rope(Hq, Hkv, D, *, threads=256, emit=True) -> Body:
    """Llama rotate-half RoPE of the q and k heads of a fused qkv vector.

    args (qkv[(Hq+2Hkv)*D], cos[D/2] f32, sin[D/2] f32, q_out[Hq*D],
    k_out[Hkv*D]); unit u < Hq rotates q head u, unit Hq + h k head h (head u
    of qkv either way: q and k heads are adjacent there)."""
    _check(D % 2 == 0, f"rope: head_dim {D} must be even")
    half, total = D // 2, (Hq + 2 * Hkv) * D
    # Units < Hq write q head u, the others k head u - Hq: one access per
    # output, each over its units only.
    foot = (Access("read", 0, D, 0, D), Access("read", 1, 0, 0, half),
            Access("read", 2, 0, 0, half), Access("write", 3, D, 0, D, 0, Hq),
            Access("write", 4, D, -Hq * D, D, Hq, Hq + Hkv))

    def kernel(qkv: T.Tensor((total,), "bfloat16"), cos: T.Tensor((half,), "float32"),
               sin: T.Tensor((half,), "float32"), q_out: T.Tensor((Hq * D,), "bfloat16"),
               k_out: T.Tensor((Hkv * D,), "bfloat16")):
        with T.Kernel(Hq + Hkv, threads=threads) as u:
            # One head (D elements) is less than one element per thread,
            # which no fragment layout allows: the head goes through shared
            # memory.
            x_s = T.alloc_shared((D,), "bfloat16")
            o_s = T.alloc_shared((D,), "bfloat16")
            T.copy(qkv[u * D], x_s)
            for j in T.Parallel(D):
                o_s[j] = T.cast(_rotate_half(lambda jj: x_s[jj], j, cos, sin, D), "bfloat16")
            # The other output's offset points past its end: those stores
            # are masked off (tile.copy drops out-of-bounds global elements).
            is_q = u < Hq
            q_off = T.if_then_else(is_q, u * D, Hq * D)
            k_head = T.if_then_else(is_q, Hkv, u - Hq)
            T.copy(o_s, q_out[q_off])
            T.copy(o_s, k_out[k_head * D])

    return t_body(f"rope_{Hq}x{Hkv}x{D}", kernel, Hq + Hkv, foot, threads, emit)


def kv_append(Hq, Hkv, D, S, pos, *, threads=256, emit=True) -> Body:
    """Writes the new token's k (rotated) and v into the caches at `pos`.

    args (k_rot[Hkv*D], qkv[(Hq+2Hkv)*D], k_cache[Hkv,S,D], v_cache[Hkv,S,D]);
    unit h: k_cache[h, pos] = k_rot[h], v_cache[h, pos] = v head h of qkv."""
    _check(0 <= pos < S, f"kv_append: pos {pos} is outside the cache of {S}")
    total, v0 = (Hq + 2 * Hkv) * D, (Hq + Hkv) * D
    foot = (Access("read", 0, D, 0, D), Access("read", 1, D, v0, D),
            Access("write", 2, S * D, pos * D, D), Access("write", 3, S * D, pos * D, D))

    def kernel(k_rot: T.Tensor((Hkv * D,), "bfloat16"), qkv: T.Tensor((total,), "bfloat16"),
               k_cache: T.Tensor((Hkv, S, D), "bfloat16"),
               v_cache: T.Tensor((Hkv, S, D), "bfloat16")):
        with T.Kernel(Hkv, threads=threads) as h:
            # Global -> shared -> global (a copy needs one non-global side;
            # a head is too small for a fragment over all the threads).
            k_s = T.alloc_shared((D,), "bfloat16")
            v_s = T.alloc_shared((D,), "bfloat16")
            T.copy(k_rot[h * D], k_s)
            T.copy(qkv[(h + (Hq + Hkv)) * D], v_s)
            at = (h * S + pos) * D
            T.copy(k_s, k_cache.view(Hkv * S * D)[at])
            T.copy(v_s, v_cache.view(Hkv * S * D)[at])

    return t_body(f"kv_append_{Hq}x{Hkv}x{D}_s{S}_p{pos}", kernel, Hkv, foot, threads, emit)


def rope_kv_append(Hq, Hkv, D, S, pos, *, threads=256, emit=True) -> Body:
    """rope then kv_append in one body, one unit per kv head g.

    args (qkv[(Hq+2Hkv)*D], cos[D/2] f32, sin[D/2] f32, q_out[Hq*D],
    k_cache[Hkv,S,D], v_cache[Hkv,S,D]): unit g rotates the G = Hq/Hkv query
    heads of group g into q_out (the heads attention's group g reads), and
    k head g into k_cache[g, pos]; it copies v head g to v_cache[g, pos]."""
    _check(D % 2 == 0, f"rope_kv_append: head_dim {D} must be even")
    _check(Hq % Hkv == 0, f"rope_kv_append: heads {Hq} not a multiple of kv_heads {Hkv}")
    _check(0 <= pos < S, f"rope_kv_append: pos {pos} is outside the cache of {S}")
    G, half, total = Hq // Hkv, D // 2, (Hq + 2 * Hkv) * D
    foot = (Access("read", 0, G * D, 0, G * D),                 # q heads of group g
            Access("read", 0, D, Hq * D, D),                    # k head g
            Access("read", 0, D, (Hq + Hkv) * D, D),            # v head g
            Access("read", 1, 0, 0, half), Access("read", 2, 0, 0, half),
            Access("write", 3, G * D, 0, G * D),
            Access("write", 4, S * D, pos * D, D),
            Access("write", 5, S * D, pos * D, D))

    def kernel(qkv: T.Tensor((total,), "bfloat16"), cos: T.Tensor((half,), "float32"),
               sin: T.Tensor((half,), "float32"), q_out: T.Tensor((Hq * D,), "bfloat16"),
               k_cache: T.Tensor((Hkv, S, D), "bfloat16"),
               v_cache: T.Tensor((Hkv, S, D), "bfloat16")):
        with T.Kernel(Hkv, threads=threads) as g:
            heads = qkv.view(Hq + 2 * Hkv, D)
            # Rows 0..G-1: the group's q heads, row G: its k head. Heads are
            # less than one element per thread: they go through shared memory.
            x_s = T.alloc_shared((G + 1, D), "bfloat16")
            o_s = T.alloc_shared((G + 1, D), "bfloat16")
            v_s = T.alloc_shared((D,), "bfloat16")
            T.copy(heads[g * G:g * G + G, 0:D], x_s[0:G, 0:D])
            T.copy(heads[g + Hq:g + Hq + 1, 0:D], x_s[G:G + 1, 0:D])
            T.copy(qkv[(g + (Hq + Hkv)) * D], v_s)
            for h, j in T.Parallel(G + 1, D):
                o_s[h, j] = T.cast(_rotate_half(lambda jj: x_s[h, jj], j, cos, sin, D),
                                   "bfloat16")
            at = g * S + pos   # cache row [g, pos]
            T.copy(o_s[0:G, 0:D], q_out.view(Hq, D)[g * G, 0])
            T.copy(o_s[G:G + 1, 0:D], k_cache.view(Hkv * S, D)[at, 0])
            T.copy(v_s, v_cache.view(Hkv * S * D)[at * D])

    return t_body(f"rope_kv_{Hq}x{Hkv}x{D}_s{S}_p{pos}", kernel, Hkv, foot, threads, emit)


def attention_config(Hq, Hkv, D, S_len, splits, threads):
    """(block_n, stages, layout) of the split body: S [G, block_n] and the
    accumulator [G, D] share one blocked layout (G query rows over the warps,
    the rest of the warps side by side along the columns), so the row
    statistics are one slice of it for both (examples/decode_attention.py)."""
    G, warps = Hq // Hkv, threads // 32
    _check(Hq % Hkv == 0, f"attention: heads {Hq} not a multiple of kv_heads {Hkv}")
    _check(warps % G == 0 or G % warps == 0,
           f"attention: {G} query rows per group do not spread over {warps} warps")
    row_warps = min(G, warps)
    col_threads = 32 * (warps // row_warps)
    keys = S_len // splits if S_len % splits == 0 else 0
    block_n = max(col_threads, 32)
    _check(keys and keys % block_n == 0,
           f"attention: kv_len {S_len} must split into {splits} ranges of whole "
           f"{block_n}-key chunks")
    _check(D % col_threads == 0 and D >= 64 and D & (D - 1) == 0,
           f"attention: head_dim {D} must be a power of two >= 64 and a multiple "
           f"of {col_threads}")
    stages = min(2, keys // block_n)
    layout = (f"#tile.blocked<sizePerThread = [1, 1], threadsPerWarp = [1, 32], "
              f"warpsPerBlock = [{row_warps}, {warps // row_warps}], order = [1, 0]>")
    return block_n, stages, layout


def attention_split(Hq, Hkv, D, S_len, S_max, splits, *, threads=256, emit=True) -> Body:
    """Flash-decoding partials of one (kv head g, split s) per unit u = g*splits + s.

    args (q[Hq*D], k_cache[Hkv,S_max,D], v_cache, o_part[Hq*splits*D] f32,
    lse[Hq*splits] f32). The G = Hq/Hkv query heads of group g attend over
    keys [s*S_len/splits, (s+1)*S_len/splits) with q.k * D^-0.5; the unit
    stores its normalised partial output at o_part[(u*G + i)*D ...] and the
    base-2 log-sum-exp at lse[u*G + i] (i = head within the group): each
    unit's results are contiguous, and so are each group's for the combine."""
    _check(splits >= 1 and 1 <= S_len <= S_max,
           f"attention: need splits >= 1 and 1 <= kv_len {S_len} <= cache length {S_max}")
    G, keys = Hq // Hkv, S_len // splits
    BN, STAGES, layout = attention_config(Hq, Hkv, D, S_len, splits, threads)
    # q of group g = u // splits is not linear in u: cover all of q. The
    # keys of unit u start at (g*S_max + s*keys)*D, which is u*keys*D only
    # when the cache is full (S_len = S_max); otherwise cover the cache.
    kv = (Access("read", 1, keys * D, 0, keys * D), Access("read", 2, keys * D, 0, keys * D)) \
        if S_len == S_max else \
        (Access("read", 1, 0, 0, Hkv * S_max * D), Access("read", 2, 0, 0, Hkv * S_max * D))
    foot = (Access("read", 0, 0, 0, Hq * D),) + kv + \
        (Access("write", 3, G * D, 0, G * D), Access("write", 4, G, 0, G))
    c = _math.log2(_math.e) / _math.sqrt(D)  # exp(x/sqrt(D)) = exp2(x*c)

    def kernel(q: T.Tensor((Hq * D,), "bfloat16"),
               k_cache: T.Tensor((Hkv, S_max, D), "bfloat16"),
               v_cache: T.Tensor((Hkv, S_max, D), "bfloat16"),
               o_part: T.Tensor((Hq * splits * D,), "float32"),
               lse: T.Tensor((Hq * splits,), "float32")):
        with T.Kernel(Hkv * splits, threads=threads) as u:
            g = u // splits
            s = u % splits
            K2, V2 = k_cache.view(Hkv * S_max, D), v_cache.view(Hkv * S_max, D)
            q_s = T.alloc_shared((G, D), "bfloat16")
            # Each 4-byte word of K row r is XORed with r % 32, so the lanes
            # of the S gemm, which read different K rows at one column, hit
            # different banks.
            k_s = T.alloc_shared((BN, D), "bfloat16",
                                 swizzle=T.Swizzle(bits=5, base=1, shift=D.bit_length() - 2))
            v_s = T.alloc_shared((BN, D), "bfloat16")
            p_s = T.alloc_shared((G, BN), "bfloat16")
            sc = T.alloc_fragment((G, BN), "float32", layout=layout)
            acc = T.alloc_fragment((G, D), "float32", layout=layout)
            m = T.alloc_fragment((G,), "float32")
            l = T.alloc_fragment((G,), "float32")  # noqa: E741
            m_cur = T.alloc_fragment((G,), "float32")
            alpha = T.alloc_fragment((G,), "float32")
            first_key = g * S_max + s * keys
            T.copy(q.view(Hq, D)[g * G, 0], q_s)
            T.fill(m, -T.infinity())
            T.clear(l)
            T.clear(acc)
            for t in T.Pipelined(0, keys // BN, 1, num_stages=STAGES):
                n0 = first_key + t * BN
                T.copy(K2[n0, 0], k_s)
                T.copy(V2[n0, 0], v_s)
                T.gemm(q_s, k_s, sc, transpose_B=True, clear_accum=True)
                online_softmax_step(sc, v_s, p_s, acc, m, l, m_cur, alpha, c)
            for i, j in T.Parallel(G, D):
                acc[i, j] = acc[i, j] / l[i]
            row0 = u * G
            T.copy(acc, o_part.view(Hq * splits, D)[row0, 0])
            # Every thread holding row i has m[i] and l[i]; they store the
            # same value.
            for i in T.Parallel(G):
                lse[row0 + i] = m[i] + T.log2(l[i])

    return t_body(f"attn_split_{Hq}x{Hkv}x{D}_l{S_len}_s{S_max}_k{splits}", kernel,
                  Hkv * splits, foot, threads, emit)


def _combine_layout(splits, G, D, threads):
    """The splits along the lanes of a warp, so that the reductions over
    them are shuffles (the inferred layout puts them across warps: a trip
    through shared memory and ~136 registers); None (inferred) when the
    shapes do not fit it."""
    warps = threads // 32
    if splits > 32 or 32 % splits:
        return None
    lanes_d = 32 // splits
    warps_g = next((wg for wg in range(min(G, warps), 0, -1)
                    if G % wg == 0 and warps % wg == 0), 1)
    warps_d = warps // warps_g
    if D % (4 * lanes_d * warps_d):
        return None
    return (f"#tile.blocked<sizePerThread = [1, 1, 4], threadsPerWarp = [{splits}, 1, "
            f"{lanes_d}], warpsPerBlock = [1, {warps_g}, {warps_d}], order = [2, 1, 0]>")


def attention_combine(Hq, Hkv, D, splits, *, threads=256, emit=True) -> Body:
    """o = sum_s w_s o_part_s / sum_s w_s, w_s = exp2(lse_s - max lse): one
    unit per kv-head group g (its G query heads), reading the group's
    contiguous partials (attention_split's layout: row (g*splits + s)*G + i).

    args (o_part[Hq*splits*D] f32, lse[Hq*splits] f32, o[Hq*D])."""
    G = Hq // Hkv
    foot = (Access("read", 0, splits * G * D, 0, splits * G * D),
            Access("read", 1, splits * G, 0, splits * G),
            Access("write", 2, G * D, 0, G * D))
    layout = _combine_layout(splits, G, D, threads)

    def kernel(o_part: T.Tensor((Hq * splits * D,), "float32"),
               lse: T.Tensor((Hq * splits,), "float32"), o: T.Tensor((Hq * D,), "bfloat16")):
        with T.Kernel(Hkv, threads=threads) as g:
            x = T.alloc_fragment((splits, G, D), "float32", layout=layout)  # partials
            w = T.alloc_fragment((splits, G, D), "float32", layout=layout)  # lse, weights
            mx = T.alloc_fragment((G, D), "float32")
            den = T.alloc_fragment((G, D), "float32")
            num = T.alloc_fragment((G, D), "float32")
            first = g * splits
            T.copy(o_part.view(Hkv * splits, G, D)[first, 0, 0], x)
            # lse broadcast over D: every reduction and division below runs
            # over tiles of one layout.
            for sp, i, d in T.Parallel(splits, G, D):
                w[sp, i, d] = lse[(first + sp) * G + i]
            T.reduce_max(w, mx, dim=0, clear=True)
            for sp, i, d in T.Parallel(splits, G, D):
                wt = T.exp2(w[sp, i, d] - mx[i, d])
                w[sp, i, d] = wt
                x[sp, i, d] = x[sp, i, d] * wt
            T.reduce_sum(w, den, dim=0, clear=True)
            T.reduce_sum(x, num, dim=0, clear=True)
            for i, d in T.Parallel(G, D):
                num[i, d] = num[i, d] / den[i, d]
            T.copy(num, o.view(Hq, D)[g * G, 0])

    return t_body(f"attn_combine_{Hq}x{Hkv}x{D}_k{splits}", kernel, Hkv, foot, threads, emit)


def _elementwise_chunk(n, chunk, what):
    _check(chunk > 0 and n % chunk == 0,
           f"{what}: size {n} is not a multiple of chunk {chunk}")


def silu_mul(I, chunk, *, threads=256, emit=True) -> Body:  # noqa: E741
    """a[i] = silu(gu[i]) * gu[I + i]: args (gu[2I], a[I]); unit = chunk of a."""
    _elementwise_chunk(I, chunk, "silu_mul")
    foot = (Access("read", 0, chunk, 0, chunk), Access("read", 0, chunk, I, chunk),
            Access("write", 1, chunk, 0, chunk))

    def kernel(gu: T.Tensor((2 * I,), "bfloat16"), a: T.Tensor((I,), "bfloat16")):
        with T.Kernel(I // chunk, threads=threads) as u:
            gate = T.alloc_fragment((1, chunk), "float32")
            up = T.alloc_fragment((1, chunk), "float32")
            gu2 = gu.view(2, I)
            col = u * chunk
            T.copy(gu2[0, col], gate)
            T.copy(gu2[1, col], up)
            for i, j in T.Parallel(1, chunk):
                x = gate[i, j]
                # silu(x) = x / (1 + exp(-x))
                sig = x / (1.0 + T.exp(-x))
                gate[i, j] = sig * up[i, j]
            T.copy(gate, a.view(1, I)[0, col])

    return t_body(f"silu_mul_{I}_c{chunk}", kernel, I // chunk, foot, threads, emit)


def residual_add(H, chunk, *, threads=256, emit=True) -> Body:
    """y = a + b: args (a[H], b[H], y[H]); unit = chunk of y."""
    _elementwise_chunk(H, chunk, "residual_add")
    foot = (Access("read", 0, chunk, 0, chunk), Access("read", 1, chunk, 0, chunk),
            Access("write", 2, chunk, 0, chunk))

    def kernel(a: T.Tensor((H,), "bfloat16"), b: T.Tensor((H,), "bfloat16"),
               y: T.Tensor((H,), "bfloat16")):
        with T.Kernel(H // chunk, threads=threads) as u:
            a_f = T.alloc_fragment((chunk,), "float32")
            b_f = T.alloc_fragment((chunk,), "float32")
            col = u * chunk
            T.copy(a[col], a_f)
            T.copy(b[col], b_f)
            for j in T.Parallel(chunk):
                a_f[j] = a_f[j] + b_f[j]
            T.copy(a_f, y[col])

    return t_body(f"add_{H}_c{chunk}", kernel, H // chunk, foot, threads, emit)
