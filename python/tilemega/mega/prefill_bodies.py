"""Kernels of the prompt's prefill, written in `T.*`: a chunk of C prompt
positions [start, start + count) at a time, `span` = (start, count) an
int32 tensor on the device, so one artifact serves every prompt length
(prefill.py launches them one per operator).

  embed_rows      x[r] = embedding[tokens[start + r]]
  rmsnorm_rows    y[r] = x[r] * rsqrt(mean(x[r]^2) + eps) * w
  linear          y = a @ w^T (+ bias) (+ residual): wgmma tiles, TMA
                  copies pipelined over K (linear_tile)
  rope_rows_kv    RoPE of row r's q and k heads at position start + r; the
                  k and v heads go to the caches' row start + r (r < count)
  attention_rows  causal GQA attention of the chunk's queries over the
                  cache's keys 0 .. start + r, online softmax
                  (FlashAttention-2 style), one (query block, head) a CTA
  gate_up_silu    a = silu(h @ wg^T) * (h @ wu^T): linear's tiles, the two
                  products of a block of columns side by side

A block of rows wholly past `count` does nothing (every kernel reads the
count on the device: a prompt shorter than the chunk pays for its own
rows); rows past `count` inside a block that has prompt rows compute on
whatever they hold and are never written to the caches: nothing valid
depends on them (each row is independent except in attention, where a
query reads only keys at or before its position).
The numbers are the decode step's: the same bf16 roundings at the same
places (generation_bodies.py), so a prefilled cache is what the decode
steps would have written, within the bf16 noise of summation order.
"""

import math as _math
from typing import NamedTuple

import tilemega.language as T

from .bodies import Body, _check, t_body
from .bodies import online_softmax_step


def prompt_rows(first, span):
    """A loop of one trip when a block whose first row is `first` holds a
    row of the prompt (first < span's count), else none: what a block past
    the prompt skips."""
    return T.serial(T.if_then_else(first < span[1], 1, 0))


def embed_rows(V, H, S, C, *, threads=128) -> Body:
    def embed(table: T.Tensor((V, H), "bfloat16"), tokens: T.Tensor((S,), "int32"),
              span: T.Tensor((2,), "int32"), x: T.Tensor((C, H), "bfloat16")):
        with T.Kernel(C, threads=threads) as r:
            row = T.alloc_shared((1, H), "bfloat16")
            for _ in prompt_rows(r, span):
                T.copy(table[tokens[span[0] + r], 0], row)
                T.copy(row, x[r, 0])

    return t_body(f"prefill_embed_{V}x{H}_s{S}_c{C}", embed, C, (), threads, False)


def rmsnorm_rows(H, C, eps, *, threads=128) -> Body:
    from .bodies import _tag

    def norm(x: T.Tensor((C, H), "bfloat16"), w: T.Tensor((H,), "bfloat16"),
             span: T.Tensor((2,), "int32"), y: T.Tensor((C, H), "bfloat16")):
        with T.Kernel(C, threads=threads) as r:
            xs = T.alloc_fragment((1, H), "float32")
            sq = T.alloc_fragment((1, H), "float32")
            ws = T.alloc_fragment((1, H), "float32")
            total = T.alloc_fragment((1,), "float32")
            ys = T.alloc_fragment((1, H), "bfloat16")
            for _ in prompt_rows(r, span):
                T.copy(x[r, 0], xs)
                T.copy(w.view(1, H)[0, 0], ws)
                for i, j in T.Parallel(1, H):
                    sq[i, j] = xs[i, j] * xs[i, j]
                T.reduce_sum(sq, total, dim=1)
                for i, j in T.Parallel(1, H):
                    # As gemv_rmsnorm: the normalised row rounds to bf16
                    # before the weight multiplies it.
                    n = T.cast(xs[i, j] * T.rsqrt(total[i] / H + eps), "bfloat16")
                    ys[i, j] = T.cast(T.cast(n, "float32") * ws[i, j], "bfloat16")
                T.copy(ys, y[r, 0])

    tag = "" if eps == 1e-5 else f"_eps{_tag(eps)}"
    return t_body(f"prefill_rmsnorm_{H}_c{C}{tag}", norm, C, (), threads, False)


class LinearTile(NamedTuple):
    """A prefill GEMM's blocking: block M, N, K, threads (a warpgroup per 64
    rows: wgmma), pipeline stages, a producer warpgroup for the K loop's
    TMA copies (warp_specialize), C through a swizzled shared tile
    (stage_c: coalesced 16-byte stores instead of the fragment's 4-byte
    pieces)."""
    bm: int
    bn: int
    bk: int
    threads: int
    stages: int
    warp_specialize: bool = False
    stage_c: bool = False


# Blocks of one wave: 132 SMs (H100 and H200 SXM) x two CTAs of <= 113 KB.
ONE_WAVE = 2 * 132


def linear_tile(N, K, C) -> LinearTile:
    """The blocking of the prefill GEMM y [C, N] = a [C, K] @ w [N, K]^T,
    ranked on an H100 (bench/prefill/screen.py, Llama-3.2-1B's projections
    at chunks of 256 and 512 rows, docs/results/prefill_screen_h100.json):
    the wide gate/up projection (N >= 8192) in 128 x 256 blocks with a
    producer warpgroup and C staged through shared memory (79.1 us at 512
    rows against 156.6 for the mma.sync tiles before; cuBLAS 53.9); a
    narrow one in 64 x 64 blocks six k-tiles deep while they fit one wave
    (o and down at 512 rows: 256 blocks, 20.1 and 52.6 us against 36.9 and
    119.9), else in 128 x 128 blocks like the wide ones' (qkv at 512 rows:
    20.8 us against 30.0 in 384 blocks of 64 x 64, 39.4 before). A shape
    the larger blocks do not divide takes the next smaller ones (N and C
    are multiples of 64 in every supported config)."""
    if N >= 8192 and N % 256 == 0:
        return LinearTile(128, 256, 64, 256, 3, warp_specialize=True, stage_c=True)
    if (C // 64) * (N // 64) <= ONE_WAVE or N % 128 or C % 128:
        return LinearTile(64, 64, 64, 128, 6)
    return LinearTile(128, 128, 64, 256, 4, warp_specialize=True, stage_c=True)


def _blocks(t, N, K, C, what):
    """(BM, BN, BK, column blocks) of a prefill GEMM of N outputs over K
    inputs at chunks of C rows in LinearTile t; ValueError naming `what`
    where the blocks do not divide the shape."""
    _check(C % t.bm == 0, f"prefill {what}: chunk {C} is not a multiple of {t.bm}")
    _check(N % t.bn == 0, f"prefill {what}: {N} outputs are not a multiple of {t.bn}")
    _check(K % t.bk == 0, f"prefill {what}: {K} inputs are not a multiple of {t.bk}")
    return t.bm, t.bn, t.bk, N // t.bn


def linear(N, K, C, bias=False, residual=False, *, tile=None) -> Body:
    """y [C, N] = a [C, K] @ w [N, K]^T (+ bias [N]) (+ residual [C, N]),
    f32 accumulation, one bf16 rounding at the store; on wgmma (BLOCK_K 64)
    with TMA copies. tile: a LinearTile, linear_tile's by default."""
    t = tile or linear_tile(N, K, C)
    BM, BN, BK, grid_n = _blocks(t, N, K, C, "linear")

    def body(a, w, span, y, b=None, res=None):
        with T.Kernel(C // BM * grid_n, threads=t.threads) as u:
            bx, by = u // grid_n, u % grid_n
            a_s = T.alloc_shared((BM, BK), "bfloat16")
            w_s = T.alloc_shared((BN, BK), "bfloat16")
            acc = T.alloc_fragment((BM, BN), "float32")
            res_f = T.alloc_fragment((BM, BN), "bfloat16") if res is not None else None
            c_s = T.alloc_shared((BM, BN), "bfloat16",
                                 swizzle=T.Swizzle.row_chunks(BN)) if t.stage_c else None
            for _ in prompt_rows(bx * BM, span):
                T.clear(acc)
                for k in T.Pipelined(K // BK, num_stages=t.stages,
                                     warp_specialize=t.warp_specialize):
                    T.copy(a[bx * BM, k * BK], a_s)
                    T.copy(w[by * BN, k * BK], w_s)
                    T.gemm(a_s, w_s, acc, transpose_B=True)
                if b is not None:
                    for i, j in T.Parallel(BM, BN):
                        acc[i, j] = acc[i, j] + T.cast(b[by * BN + j], "float32")
                if res is not None:
                    T.copy(res[bx * BM, by * BN], res_f)
                    for i, j in T.Parallel(BM, BN):
                        acc[i, j] = acc[i, j] + T.cast(res_f[i, j], "float32")
                if c_s is not None:
                    T.copy(acc, c_s)
                    T.copy(c_s, y[bx * BM, by * BN])
                else:
                    T.copy(acc, y[bx * BM, by * BN])

    A = T.Tensor((C, K), "bfloat16")
    Wt = T.Tensor((N, K), "bfloat16")
    Y = T.Tensor((C, N), "bfloat16")
    Span = T.Tensor((2,), "int32")
    if bias and residual:
        raise ValueError("prefill linear: bias and residual together are not used")
    if bias:
        def kernel(a: A, w: Wt, b: T.Tensor((N,), "bfloat16"), span: Span, y: Y):
            body(a, w, span, y, b=b)
    elif residual:
        def kernel(a: A, w: Wt, res: Y, span: Span, y: Y):
            body(a, w, span, y, res=res)
    else:
        def kernel(a: A, w: Wt, span: Span, y: Y):
            body(a, w, span, y)
    tag = "_bias" if bias else "_res" if residual else ""
    return t_body(f"prefill_linear_{N}x{K}_c{C}{tag}", kernel, C // BM * grid_n, (),
                  t.threads, False)


def gate_up_tile(I, K, C) -> LinearTile:
    """gate_up_silu's blocking (bn: the columns of the gate tile, and of
    the up tile): linear_tile's for the [2I, K] projection with each half
    of its block a gate and an up tile, so a block holds as many
    accumulators as the unfused GEMM's. 64-row blocks: a gate and an up
    tile of 64 columns. 4 stages (for the 64-row blocks the shared memory
    of the unfused GEMM's 6). Timed on an H100 at 512 rows of
    Llama-3.2-1B (bench/prefill/screen.py,
    docs/results/prefill_gate_up_silu_h100.json): 128 x (128 + 128) with
    C staged 81.6 us with 3 stages, 75.8 with 4, unstaged 86.0;
    128 x (64 + 64) 114.5; 64 x (64 + 64) 124.4; the unfused GEMM and
    SiLU-mul 77.5 + 20.1. The whole 511-row prefill with 4 stages against
    3, one process (bench/prefill/time_ab.py,
    docs/results/prefill_gate_up_stages_ab_h100.json): 2.855 / 2.799
    against 2.921 / 2.870 ms."""
    t = linear_tile(2 * I, K, C)
    return t._replace(bn=t.bn if t.bm == 64 else t.bn // 2, stages=4)


def gate_up_silu(I, K, C, *, tile=None) -> Body:
    """a [C, I] = silu(x @ wg^T) * (x @ wu^T), wgu = [wg; wu] [2I, K] (the
    decode's fused gate/up weight): both GEMMs of a block of columns in one
    kernel, two accumulators, the SiLU-mul in the epilogue; each product
    rounds to bf16 before it, as the decode's gate/up GEMV stores them,
    and the SiLU is bodies._silu, the decode's. One launch and no [C, 2I]
    product in memory where linear + a SiLU-mul kernel took two (the
    SiLU-mul kernel alone was 20.2 us of a 512-row chunk's layer on an
    H100, docs/results/prefill_row_kernels_h100.json). tile:
    gate_up_tile's by default."""
    from .bodies import _silu

    t = tile or gate_up_tile(I, K, C)
    BM, BN, BK, grid_n = _blocks(t, I, K, C, "gate/up")

    def kernel(x: T.Tensor((C, K), "bfloat16"), wgu: T.Tensor((2 * I, K), "bfloat16"),
               span: T.Tensor((2,), "int32"), a: T.Tensor((C, I), "bfloat16")):
        with T.Kernel(C // BM * grid_n, threads=t.threads) as u:
            bx, by = u // grid_n, u % grid_n
            x_s = T.alloc_shared((BM, BK), "bfloat16")
            g_s = T.alloc_shared((BN, BK), "bfloat16")
            u_s = T.alloc_shared((BN, BK), "bfloat16")
            gate = T.alloc_fragment((BM, BN), "float32")
            up = T.alloc_fragment((BM, BN), "float32")
            c_s = T.alloc_shared((BM, BN), "bfloat16",
                                 swizzle=T.Swizzle.row_chunks(BN)) if t.stage_c else None
            for _ in prompt_rows(bx * BM, span):
                T.clear(gate)
                T.clear(up)
                for k in T.Pipelined(K // BK, num_stages=t.stages,
                                     warp_specialize=t.warp_specialize):
                    T.copy(x[bx * BM, k * BK], x_s)
                    T.copy(wgu[by * BN, k * BK], g_s)
                    T.copy(wgu[I + by * BN, k * BK], u_s)
                    T.gemm(x_s, g_s, gate, transpose_B=True)
                    T.gemm(x_s, u_s, up, transpose_B=True)
                for i, j in T.Parallel(BM, BN):
                    g = T.cast(T.cast(gate[i, j], "bfloat16"), "float32")
                    gate[i, j] = _silu(g) * T.cast(T.cast(up[i, j], "bfloat16"), "float32")
                if c_s is not None:
                    T.copy(gate, c_s)
                    T.copy(c_s, a[bx * BM, by * BN])
                else:
                    T.copy(gate, a[bx * BM, by * BN])

    return t_body(f"prefill_gate_up_silu_{I}x{K}_c{C}", kernel, C // BM * grid_n, (),
                  t.threads, False)


def rope_rows_kv(Hq, Hkv, D, S, C, *, threads=128) -> Body:
    """Row r at position p = start + r: its Hq q heads rotated into q_out[r],
    its Hkv k heads rotated and v heads copied to the caches' row p when
    r < count (bodies.rope_kv_at's numbers)."""
    half, total = D // 2, (Hq + 2 * Hkv) * D
    R = Hq + Hkv

    def rope(qkv: T.Tensor((C, total), "bfloat16"), cos: T.Tensor((S, half), "float32"),
             sin: T.Tensor((S, half), "float32"), span: T.Tensor((2,), "int32"),
             q_out: T.Tensor((C, Hq * D), "bfloat16"),
             k_cache: T.Tensor((Hkv, S, D), "bfloat16"),
             v_cache: T.Tensor((Hkv, S, D), "bfloat16")):
        with T.Kernel(C, threads=threads) as r:
            heads = qkv.view(C * (Hq + 2 * Hkv), D)
            x_s = T.alloc_shared((R, D), "bfloat16")
            o_s = T.alloc_shared((R, D), "bfloat16")
            v_s = T.alloc_shared((Hkv, D), "bfloat16")
            base = r * (Hq + 2 * Hkv)
            for _ in prompt_rows(r, span):       # row r of the prompt: p < S
                p = span[0] + r
                T.copy(heads[base:base + R, 0:D], x_s)
                T.copy(heads[base + R:base + R + Hkv, 0:D], v_s)
                for h, j in T.Parallel(R, D):
                    i = j % half
                    a = T.cast(x_s[h, j], "float32")
                    b = T.cast(x_s[h, (j + half) % D], "float32") * sin[p, i]
                    o_s[h, j] = T.cast(a * cos[p, i] + T.if_then_else(j < half, -b, b),
                                       "bfloat16")
                T.copy(o_s[0:Hq, 0:D], q_out.view(C * Hq, D)[r * Hq, 0])
                for g in range(Hkv):
                    T.copy(o_s[Hq + g:Hq + g + 1, 0:D], k_cache.view(Hkv * S, D)[g * S + p, 0])
                    T.copy(v_s[g:g + 1, 0:D], v_cache.view(Hkv * S, D)[g * S + p, 0])

    return t_body(f"prefill_rope_kv_{Hq}x{Hkv}x{D}_s{S}_c{C}", rope, C, (), threads, False)


ATTENTION_TILE = (64, 64)        # query rows, keys per block


def attention_rows(Hq, Hkv, D, S, C, *, threads=128, stages=2) -> Body:
    """o[r, h] = softmax(q[r, h] . k[g, 0..p] / sqrt(D)) v[g, 0..p], p =
    start + r, g = h / (Hq / Hkv): the cache holds every position up to the
    chunk's end (rope_rows_kv wrote the chunk's rows before)."""
    BM, BN = ATTENTION_TILE
    _check(C % BM == 0, f"prefill attention: chunk {C} is not a multiple of {BM}")
    G = Hq // Hkv
    c = _math.log2(_math.e) / _math.sqrt(D)   # exp(x / sqrt(D)) = exp2(x * c)
    blocks = C // BM

    def attention(q: T.Tensor((C, Hq * D), "bfloat16"),
                  k_cache: T.Tensor((Hkv, S, D), "bfloat16"),
                  v_cache: T.Tensor((Hkv, S, D), "bfloat16"), span: T.Tensor((2,), "int32"),
                  o: T.Tensor((C, Hq * D), "bfloat16")):
        with T.Kernel(blocks * Hq, threads=threads) as u:
            bx, h = u // Hq, u % Hq
            g = h // G
            first_pos = span[0] + bx * BM
            # Keys 0 .. first_pos + BM - 1 (the block's last query), clipped
            # to the cache.
            keys = T.min(first_pos + BM, S)
            chunks = (keys + (BN - 1)) // BN
            K2, V2 = k_cache.view(Hkv * S, D), v_cache.view(Hkv * S, D)
            q_s = T.alloc_shared((BM, D), "bfloat16")
            k_s = T.alloc_shared((BN, D), "bfloat16")
            v_s = T.alloc_shared((BN, D), "bfloat16")
            p_s = T.alloc_shared((BM, BN), "bfloat16")
            sc = T.alloc_fragment((BM, BN), "float32")
            acc = T.alloc_fragment((BM, D), "float32")
            m = T.alloc_fragment((BM,), "float32")
            l = T.alloc_fragment((BM,), "float32")
            m_cur = T.alloc_fragment((BM,), "float32")
            alpha = T.alloc_fragment((BM,), "float32")
            for _ in prompt_rows(bx * BM, span):
                T.copy(q[bx * BM, h * D], q_s)
                T.fill(m, -T.infinity("float32"))
                T.clear(l)
                T.clear(acc)
                for t in T.Pipelined(0, chunks, num_stages=stages):
                    T.copy(K2[g * S + t * BN, 0], k_s)
                    T.copy(V2[g * S + t * BN, 0], v_s)
                    T.gemm(q_s, k_s, sc, transpose_B=True, clear_accum=True)
                    for i, j in T.Parallel(BM, BN):
                        sc[i, j] = T.if_then_else(t * BN + j <= first_pos + i, sc[i, j],
                                                  -T.infinity("float32"))
                    online_softmax_step(sc, v_s, p_s, acc, m, l, m_cur, alpha, c)
                for i, j in T.Parallel(BM, D):
                    acc[i, j] = acc[i, j] / l[i]
                T.copy(acc, o[bx * BM, h * D])

    return t_body(f"prefill_attention_{Hq}x{Hkv}x{D}_s{S}_c{C}", attention, blocks * Hq, (),
                  threads, False)
