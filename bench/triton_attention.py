"""The Triton peer of bench/attention.py: a FlashAttention-2-style forward
(online softmax, exp2, causal blocks split into the unmasked ones and the
diagonal one), GQA by head index, autotuned over block sizes, warps and
pipeline stages. A peer's kernel, written for the benchmark in Triton's
own idiom, not a TileMega kernel.

    o = triton_attention.attention(q, k, v, causal)   # [B, H, S, D] bf16
"""

import math

import torch
import triton
import triton.language as tl

CONFIGS = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s)
           for bm, bn, w in ((128, 64, 8), (128, 128, 8), (64, 64, 4), (128, 64, 4),
                             (128, 32, 4))
           for s in (2, 3, 4)]


@triton.jit
def _blocks(acc, l_i, m_i, q, k_base, v_base, offs_m, lo, hi, S, qk_scale,
            HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, DIAGONAL: tl.constexpr,
            EVEN: tl.constexpr):
    """Keys [lo, hi) folded into the running (acc, l_i, m_i) of q's rows;
    DIAGONAL masks keys after the row (causal), EVEN drops the bounds."""
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    for start in range(lo, hi, BLOCK_N):
        start = tl.multiple_of(start, BLOCK_N)
        cols = start + offs_n
        if EVEN:
            k = tl.load(k_base + cols[:, None] * HEAD_DIM + offs_d[None, :])
        else:
            k = tl.load(k_base + cols[:, None] * HEAD_DIM + offs_d[None, :],
                        mask=cols[:, None] < S, other=0.0)
        qk = tl.dot(q, tl.trans(k)) * qk_scale
        if DIAGONAL:
            qk = tl.where(offs_m[:, None] >= cols[None, :], qk, float("-inf"))
        if not EVEN:
            qk = tl.where(cols[None, :] < S, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        if EVEN:
            v = tl.load(v_base + cols[:, None] * HEAD_DIM + offs_d[None, :])
        else:
            v = tl.load(v_base + cols[:, None] * HEAD_DIM + offs_d[None, :],
                        mask=cols[:, None] < S, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@triton.autotune(configs=CONFIGS, key=["S", "HEAD_DIM", "CAUSAL", "GROUP"])
@triton.heuristics({"EVEN": lambda a: a["S"] % a["BLOCK_M"] == 0 and a["S"] % a["BLOCK_N"] == 0})
@triton.jit
def _forward(Q, K, V, O, S, sm_scale, H: tl.constexpr, GROUP: tl.constexpr,
             HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr, EVEN: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b, h = bh // H, bh % H
    kv = b * (H // GROUP) + h // GROUP
    q_base = Q + bh.to(tl.int64) * S * HEAD_DIM
    k_base = K + kv.to(tl.int64) * S * HEAD_DIM
    v_base = V + kv.to(tl.int64) * S * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    if EVEN:
        q = tl.load(q_base + rows)
    else:
        q = tl.load(q_base + rows, mask=offs_m[:, None] < S, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    qk_scale = sm_scale * 1.4426950408889634          # exp(x) = exp2(x log2 e)
    if CAUSAL:
        # Keys wholly before the rows' block need no mask; the diagonal
        # block (BLOCK_M a multiple of BLOCK_N) does.
        lo = start_m * BLOCK_M
        acc, l_i, m_i = _blocks(acc, l_i, m_i, q, k_base, v_base, offs_m, 0, lo, S,
                                qk_scale, HEAD_DIM, BLOCK_N, False, EVEN)
        acc, l_i, m_i = _blocks(acc, l_i, m_i, q, k_base, v_base, offs_m, lo,
                                tl.minimum(lo + BLOCK_M, S), S, qk_scale, HEAD_DIM,
                                BLOCK_N, True, EVEN)
    else:
        acc, l_i, m_i = _blocks(acc, l_i, m_i, q, k_base, v_base, offs_m, 0, S, S,
                                qk_scale, HEAD_DIM, BLOCK_N, False, EVEN)
    out = (acc / l_i[:, None]).to(O.dtype.element_ty)
    if EVEN:
        tl.store(O + bh.to(tl.int64) * S * HEAD_DIM + rows, out)
    else:
        tl.store(O + bh.to(tl.int64) * S * HEAD_DIM + rows, out, mask=offs_m[:, None] < S)


def attention(q, k, v, causal, out=None):
    """softmax(q k^T / sqrt(D)) v for q [B, H, S, D] and k, v [B, Hkv, S, D]
    (contiguous, Hkv dividing H), causal or not."""
    B, H, S, D = q.shape
    Hkv = k.shape[1]
    if H % Hkv or k.shape != v.shape or k.shape[0] != B or k.shape[2:] != (S, D):
        raise ValueError(f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}: "
                         "expected [B, H, S, D] and [B, Hkv, S, D] with Hkv | H")
    if not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous()):
        raise ValueError("q, k and v must be contiguous")
    out = torch.empty_like(q) if out is None else out

    def grid(meta):
        return (triton.cdiv(S, meta["BLOCK_M"]), B * H)

    # A causal config needs BLOCK_M to be a multiple of BLOCK_N (the
    # diagonal block); all of CONFIGS' are.
    _forward[grid](q, k, v, out, S, 1.0 / math.sqrt(D), H=H, GROUP=H // Hkv, HEAD_DIM=D,
                   CAUSAL=bool(causal))
    return out
