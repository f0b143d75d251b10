"""FlashAttention forward (prefill) in T.*, on Hopper's wgmma.

O = softmax(Q K^T / sqrt(D) [+ causal mask]) V for Q [B, Hq, S, D] and K, V
[B, Hkv, S, D] (torch's scaled_dot_product_attention layout, contiguous),
grouped-query: head h reads kv head h // (Hq / Hkv). One CTA computes
block_m query rows of one (batch, head), one warpgroup per 64 rows, looping
over blocks of block_n keys with FlashAttention-2's online softmax (in base
2: exp(x / sqrt(D)) = exp2(x * log2(e) / sqrt(D))):

    S_blk = Q K_blk^T                     wgmma, Q and K K-major in shared
    m' = max(m, rowmax(S_blk) c); alpha = exp2(m - m')
    P = exp2(S_blk c - m'); l = l alpha + rowsum(P); O = O alpha + P V_blk
                                          wgmma, P through a shared tile
                                          (or, register_p, from the
                                          registers: wgmma's register-A
                                          form), V as stored (N-major)

wgmma reads operands in rows of 64 16-bit elements under the 128-byte
swizzle (tile::chooseWgmma), so head_dim 128 is two 64-wide halves: Q K^T
sums two gemms, and O is two accumulators of 64 columns, each P @ V_half.
The key blocks stream through T.Pipelined stages (TMA boxes on sm_90a).
Causal attention stops at the block's last query; only the blocks on the
diagonal (a second pipelined loop) mask the keys past each query.

With `overlap` (FlashAttention-3's overlap inside a warpgroup) the gemms
are asynchronous (T.gemm(..., wg_wait=-1)): iteration t issues S_{t+1} =
Q K_{t+1}^T and O += P_t V_t back to back, waits for the scores only
(T.wait_wgmma), computes softmax of S_{t+1} while P_t V_t still runs, then
waits for O and rescales it. S_0 comes before the loop and P_{n-1} V_{n-1}
after it, through one extra key/value tile ("edge"). P_{t+1} is written
after the wait for P_t V_t, so it may live in registers too (register_p;
that combination compiles without spills or wgmma serialisation; on an
H100 it was 4.7 % faster causal at 8k, 2 % slower non-causal than the tile
of that run: bench/build_artifacts.py --experiments `_ov_rp`,
docs/results/attention_whole_d_h100.json).

`whole_d` keeps Q, K, V and O as whole head_dim-wide tiles (one gemm each
for Q K^T and P V: wgmma reads K-major rows wider than 64 elements in
64-column blocks). None (the default) is `causal`: on an H100 whole tiles
made causal head_dim 128 at 8k 8 % faster and left non-causal within 2 %
(docs/results/attention_whole_d_h100.json).

`warp_specialize` (non-causal only: one key loop) hands the K/V copies to a
producer warpgroup on mbarriers (T.Pipelined(..., warp_specialize=True)).

The sequence must be a multiple of block_m and block_n (the tiles of a head
are rows of one [B * H * S, D] view, so an overhanging tile would read and
write the next head's rows): a ValueError otherwise.

`build(name=..., **config)` returns the kernel's MLIR text (parameters:
DEFAULTS); run_examples.EXAMPLES lists the configurations it compiles and
examples_gpu/flash_attention.py checks them against float64 torch.
"""

import math
import sys

from example_config import with_defaults

# 64-row query blocks (one warpgroup, 91 KiB of shared memory at head_dim
# 128): two CTAs an SM, one's softmax under the other's wgmma (1.10x SDPA
# flash at 8k where 128-row blocks, one CTA an SM, gave 1.01x; bench/).
DEFAULTS = dict(batch=1, heads=8, kv_heads=8, seq=1024, head_dim=128, causal=False,
                block_m=64, block_n=64, num_stages=2, dtype="bf16", register_p=False,
                overlap=False, warp_specialize=False, whole_d=None)

# wgmma's operand rows (TileTensorCores.h kWgmmaRowElems).
PART = 64


def config(**overrides):
    """DEFAULTS updated with `overrides`; ValueError naming the parameter it
    cannot serve."""
    cfg = with_defaults(DEFAULTS, overrides, "flash_attention")
    if cfg["dtype"] not in ("f16", "bf16"):
        raise ValueError(f"dtype must be 'f16' or 'bf16', got {cfg['dtype']!r}")
    if cfg["head_dim"] not in (64, 128):
        raise ValueError(f"head_dim must be 64 or 128, got {cfg['head_dim']}")
    if cfg["heads"] % cfg["kv_heads"]:
        raise ValueError(f"heads {cfg['heads']} is not a multiple of kv_heads "
                         f"{cfg['kv_heads']}")
    if cfg["block_m"] % 64 or cfg["block_m"] > 256:
        raise ValueError(f"block_m must be 64, 128, 192 or 256 (one warpgroup per 64 "
                         f"rows), got {cfg['block_m']}")
    if cfg["warp_specialize"] and cfg["causal"]:
        raise ValueError("warp_specialize needs one key loop (a kernel has one producer "
                         "warpgroup), but causal attention has two (unmasked, diagonal): "
                         "causal must be False")
    if cfg["whole_d"] is None:
        cfg["whole_d"] = cfg["causal"]
    if cfg["block_n"] != PART:
        raise ValueError(f"block_n must be {PART} (P is one wgmma operand of rows of "
                         f"{PART} keys), got {cfg['block_n']}")
    for block in ("block_m", "block_n"):
        if cfg["seq"] % cfg[block]:
            raise ValueError(f"seq {cfg['seq']} is not a multiple of {block} "
                             f"{cfg[block]}")
    return cfg


def threads(cfg):
    """One warpgroup (128 threads) per 64 query rows of the block."""
    return cfg["block_m"] // 64 * 128


def grid(cfg):
    return (cfg["seq"] // cfg["block_m"], cfg["batch"] * cfg["heads"])


def flops(cfg):
    """Tensor-core FLOPs of the forward pass (two GEMMs, 4 B H S^2 D; half
    with the causal mask), the convention FlashAttention reports in."""
    full = 4 * cfg["batch"] * cfg["heads"] * cfg["seq"] ** 2 * cfg["head_dim"]
    return full // 2 if cfg["causal"] else full


def build(name="flash_attention", **overrides):
    """The MLIR text of one kernel named `name`."""
    import tilemega
    import tilemega.language as T

    cfg = config(**overrides)
    B, Hq, Hkv, S, D = (cfg[k] for k in ("batch", "heads", "kv_heads", "seq", "head_dim"))
    BM, BN, stages, causal = cfg["block_m"], cfg["block_n"], cfg["num_stages"], cfg["causal"]
    ws = cfg["warp_specialize"]
    # Tiles of head_dim columns in 64-column parts, or whole (whole_d: one
    # gemm for Q K^T and one for P V, wgmma reading K-major rows of D in
    # 64-column blocks, as a TileLang kernel writes it).
    G = Hq // Hkv
    part = D if cfg["whole_d"] else PART
    parts = D // part
    c = math.log2(math.e) / math.sqrt(D)
    dtype = {"f16": "float16", "bf16": "bfloat16"}[cfg["dtype"]]

    @tilemega.jit(name=name, cache=False)
    def kernel(Q: T.Tensor((B, Hq, S, D), dtype), K: T.Tensor((B, Hkv, S, D), dtype),
               V: T.Tensor((B, Hkv, S, D), dtype), O: T.Tensor((B, Hq, S, D), dtype)):
        with T.Kernel(S // BM, B * Hq, threads=threads(cfg)) as (bx, bh):
            Q2, O2 = Q.view(B * Hq * S, D), O.view(B * Hq * S, D)
            K2, V2 = K.view(B * Hkv * S, D), V.view(B * Hkv * S, D)
            q_row = bh * S + bx * BM
            kv_row = (bh // Hq * Hkv + bh % Hq // G) * S
            q_s = [T.alloc_shared((BM, part), dtype) for _ in range(parts)]
            k_s = [T.alloc_shared((BN, part), dtype) for _ in range(parts)]
            v_s = [T.alloc_shared((BN, part), dtype) for _ in range(parts)]
            # P in registers (register_p: wgmma's register-A form reads the
            # fragment softmax wrote, in the scores' layout) or through a
            # swizzled shared tile.
            p_s = (T.alloc_fragment if cfg["register_p"] else T.alloc_shared)((BM, BN), dtype)
            sc = T.alloc_fragment((BM, BN), "float32")
            acc = [T.alloc_fragment((BM, part), "float32") for _ in range(parts)]
            m = T.alloc_fragment((BM,), "float32")
            l = T.alloc_fragment((BM,), "float32")
            m_cur = T.alloc_fragment((BM,), "float32")
            alpha = T.alloc_fragment((BM,), "float32")
            for x in range(parts):
                T.copy(Q2[q_row, x * part], q_s[x])
                T.clear(acc[x])
            T.fill(m, -T.infinity("float32"))
            T.clear(l)
            def softmax(t, masked):
                """The online-softmax step of the scores of key block t (in
                sc): m, l and alpha updated, sc = P in float32; `masked`
                hides the keys past each query (causal)."""
                if masked:
                    for i, j in T.Parallel(BM, BN):
                        sc[i, j] = T.if_then_else(t * BN + j <= bx * BM + i, sc[i, j],
                                                  -T.infinity("float32"))
                T.reduce_max(sc, m_cur, dim=1)
                for i in T.Parallel(BM):
                    m_new = T.max(m[i], m_cur[i] * c)
                    alpha[i] = T.exp2(m[i] - m_new)
                    l[i] = l[i] * alpha[i]
                    m[i] = m_new
                for i, j in T.Parallel(BM, BN):
                    sc[i, j] = T.exp2(T.fma(sc[i, j], c, -m[i]))
                T.reduce_sum(sc, l, dim=1, clear=False)

            def store_p():
                """P = sc in the input dtype: into the registers wgmma's
                register-A form reads (register_p) or the shared tile."""
                if cfg["register_p"]:
                    for i, j in T.Parallel(BM, BN):
                        p_s[i, j] = T.cast(sc[i, j], dtype)
                else:
                    T.copy(sc, p_s)

            def key_block(t, masked):
                """One block of BN keys from row t * BN: S = Q K^T, softmax,
                O = O alpha + P V, each gemm waited for."""
                for x in range(parts):
                    T.copy(K2[kv_row + t * BN, x * part], k_s[x])
                    T.copy(V2[kv_row + t * BN, x * part], v_s[x])
                for x in range(parts):
                    T.gemm(q_s[x], k_s[x], sc, transpose_B=True, clear_accum=x == 0)
                softmax(t, masked)
                store_p()
                for x in range(parts):
                    for i, j in T.Parallel(BM, part):
                        acc[x][i, j] = acc[x][i, j] * alpha[i]
                    T.gemm(p_s, v_s[x], acc[x])

            def overlapped_block(t, masked):
                """Iteration t of the overlapped loop: S_{t+1} and P_t V_t in
                flight together, softmax of S_{t+1} under P_t V_t."""
                for x in range(parts):
                    T.copy(K2[kv_row + (t + 1) * BN, x * part], k_s[x])
                    T.copy(V2[kv_row + t * BN, x * part], v_s[x])
                for x in range(parts):
                    T.gemm(q_s[x], k_s[x], sc, transpose_B=True, clear_accum=x == 0,
                           wg_wait=-1)
                for x in range(parts):
                    T.gemm(p_s, v_s[x], acc[x], wg_wait=-1)
                T.wait_wgmma(parts)  # the scores; P_t V_t stays in flight
                softmax(t + 1, masked)
                T.wait_wgmma(0)
                for x in range(parts):
                    for i, j in T.Parallel(BM, part):
                        acc[x][i, j] = acc[x][i, j] * alpha[i]
                store_p()

            # Key blocks wholly at or before the block's first query need no
            # mask (causal); the BM / BN blocks on the diagonal do.
            full = bx * (BM // BN) if causal else S // BN
            blocks = full + BM // BN if causal else S // BN
            if cfg["overlap"]:
                # S_0 before the loop (masked when causal: the diagonal
                # block when bx is 0), P_{n-1} V_{n-1} after it, both
                # through the edge tiles.
                edge = [T.alloc_shared((BN, part), dtype) for _ in range(parts)]
                for x in range(parts):
                    T.copy(K2[kv_row, x * part], edge[x])
                for x in range(parts):
                    T.gemm(q_s[x], edge[x], sc, transpose_B=True, clear_accum=x == 0)
                softmax(0, masked=causal)
                store_p()
                last_full = T.max(full - 1, 0) if causal else full - 1
                for t in T.Pipelined(last_full, num_stages=stages, warp_specialize=ws):
                    overlapped_block(t, masked=False)
                if causal:
                    for t in T.Pipelined(last_full, blocks - 1, num_stages=stages, warp_specialize=ws):
                        overlapped_block(t, masked=True)
                for x in range(parts):
                    T.copy(V2[kv_row + (blocks - 1) * BN, x * part], edge[x])
                for x in range(parts):
                    T.gemm(p_s, edge[x], acc[x])
            elif causal:
                for t in T.Pipelined(full, num_stages=stages, warp_specialize=ws):
                    key_block(t, masked=False)
                for t in T.Pipelined(full, blocks, num_stages=stages, warp_specialize=ws):
                    key_block(t, masked=True)
            else:
                for t in T.Pipelined(blocks, num_stages=stages, warp_specialize=ws):
                    key_block(t, masked=False)
            for x in range(parts):
                for i, j in T.Parallel(BM, part):
                    acc[x][i, j] = acc[x][i, j] / l[i]
                T.copy(acc[x], O2[q_row, x * part])

    return kernel.ir()


def reference(q, k, v, causal):
    """float64 O of q [B, Hq, S, D], k, v [B, Hkv, S, D] (torch tensors)."""
    import torch

    G = q.shape[1] // k.shape[1]
    q, k, v = q.double(), k.double(), v.double()
    k, v = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1),
                          float("-inf"))
    return torch.softmax(s, dim=-1) @ v


if __name__ == "__main__":
    import tilemega

    print(tilemega.compile(build(), chip="sm_90a").save(
        sys.argv[1] if len(sys.argv) > 1 else "out"))
