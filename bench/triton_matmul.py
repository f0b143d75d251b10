"""A Triton GEMM peer: the standard blocked tl.dot kernel with grouped tile
order and a small autotune space, the way Triton users write one."""

import torch
import triton
import triton.language as tl

CONFIGS = [
    triton.Config({"BM": 128, "BN": 256, "BK": 64, "G": 8}, num_stages=3, num_warps=8),
    triton.Config({"BM": 128, "BN": 128, "BK": 64, "G": 8}, num_stages=4, num_warps=4),
    triton.Config({"BM": 64, "BN": 128, "BK": 64, "G": 8}, num_stages=4, num_warps=4),
    triton.Config({"BM": 128, "BN": 64, "BK": 64, "G": 8}, num_stages=4, num_warps=4),
    triton.Config({"BM": 16, "BN": 128, "BK": 128, "G": 1}, num_stages=4, num_warps=4),
]


# TRANS_A / TRANS_B only key the autotune cache: each layout tunes its own.
@triton.autotune(configs=CONFIGS, key=["M", "N", "K", "TRANS_A", "TRANS_B", "SCALED"])
@triton.jit
def _matmul(a, b, c, scale_a, scale_b, M, N, K, sam, sak, sbk, sbn, scm, scn,
            TRANS_A: tl.constexpr, TRANS_B: tl.constexpr, SCALED: tl.constexpr,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, G: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    group = pid // (G * num_n)
    first_m = group * G
    size_m = min(num_m - first_m, G)
    pm = first_m + (pid % (G * num_n)) % size_m
    pn = (pid % (G * num_n)) // size_m
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        x = tl.load(a + rm[:, None] * sam + kk[None, :] * sak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        y = tl.load(b + kk[:, None] * sbk + rn[None, :] * sbn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(x, y)
    if SCALED:
        acc = acc * (tl.load(scale_a) * tl.load(scale_b))
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(c.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b, trans_b=False, out=None, scale_a=None, scale_b=None):
    """C = A @ B (or A @ B^T when trans_b, with B stored N x K); A may be a
    transposed view (stored K x M). With one-element scale_a and scale_b
    (fp8 inputs): C = scale_a * scale_b * (A @ B), scaled in f32."""
    M, K = a.shape
    N = b.shape[0] if trans_b else b.shape[1]
    c = out if out is not None else torch.empty(M, N, device=a.device, dtype=a.dtype)
    sbk, sbn = (b.stride(1), b.stride(0)) if trans_b else (b.stride(0), b.stride(1))
    grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)  # noqa: E731
    scaled = scale_a is not None
    _matmul[grid](a, b, c, scale_a if scaled else c, scale_b if scaled else c, M, N, K,
                  a.stride(0), a.stride(1), sbk, sbn, c.stride(0), c.stride(1),
                  TRANS_A=a.stride(0) == 1 and M > 1, TRANS_B=trans_b, SCALED=scaled)
    return c
