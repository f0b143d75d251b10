"""The output projection that merges the attention's partials itself.

The flash-decoding split leaves per (kv head, split) partial outputs and
log-sum-exps; a merge task turns them into the attention's output and the
output projection reads that. Both are short, latency-bound stages: the
merge's period (its wait, one round trip to L2, a few shuffles, its
store and signal) costs as much as streaming 6 MB of weights. Here every
unit of the projection merges all heads itself, into shared memory, after
its wait; its weights have loaded early (they depend on no event), so the
merge takes the place of the activation's load, and the merge task and its
stage boundary go away. Redundant work: each unit reads every partial
(64 KB for Llama-3.2-1B, from L2) where the merge task read them once.

projection_merge_config is the one rule of which shapes this serves (the
graph refuses the others with its reason); gemv_merge is the body."""

import tilemega.language as T

from .bodies import (Access, Body, _check, _combine_layout, _gemv_args, _gemv_blocks,
                     _gemv_kernel, _gemv_setup, t_body)
from .generation_bodies import load_partials, merge_fragments, merge_loaded, partial_rows

# f32 registers a thread holds for the partials of one round of groups (the
# partials and their weights): rounds of more groups issue more loads
# before the first one returns, but must stay inside the 128 registers of
# a two-CTA-an-SM kernel with the projection's own.
ROUND_REGISTERS = 64


def projection_merge_config(Hq, Hkv, D, splits, threads):
    """(G, layout, groups a round) of gemv_merge; ValueError naming what it
    cannot serve. The partials must be unpadded (partial_rows == G, so that
    a group's merged rows are contiguous heads of the output vector) and
    their splits fit the lanes of a warp (bodies._combine_layout: the
    reductions over the splits are shuffles)."""
    _check(Hq % Hkv == 0, f"merge_in_projection: heads {Hq} not a multiple of kv_heads {Hkv}")
    G = Hq // Hkv
    P = partial_rows(G, D, threads)
    _check(P == G, f"merge_in_projection: the {G} query heads of a kv head are padded to {P} "
           f"partial rows on {threads} threads (the merge task serves that shape)")
    layout = _combine_layout(splits, G, D, threads)
    _check(layout is not None,
           f"merge_in_projection: {splits} splits of {G} heads of {D} do not fit the lanes "
           f"of {threads // 32} warps (the merge task serves that shape)")
    per_group = 2 * splits * G * D // threads
    rounds = next(n for n in range(Hkv, 0, -1)
                  if Hkv % n == 0 and (n * per_group <= ROUND_REGISTERS or n == 1))
    return G, layout, rounds


def merge_to_shared(o_part, lse, Hq, Hkv, D, splits, threads):
    """Inside a T.Kernel: the attention's output [Hq*D], merged from the
    partials as attention_merge computes it (generation_bodies.merge_group:
    w_s = exp2(lse_s - max lse), sum_s w_s o_s / sum_s w_s, rounded to
    bf16 as the merge stores it), in a shared vector. Each round loads the
    partials of several groups before it computes any (one round trip)."""
    G, layout, per_round = projection_merge_config(Hq, Hkv, D, splits, threads)
    x_s = T.alloc_shared((Hq * D,), "bfloat16")
    for first in range(0, Hkv, per_round):
        loaded = []
        for g in range(first, first + per_round):
            frags = merge_fragments(splits, G, D, layout)
            load_partials(g, o_part, lse, Hkv, D, splits, G, *frags[:2])
            loaded.append((g, frags))
        for g, frags in loaded:
            merge_loaded(*frags, splits, G, D)
            num = frags[4]
            for i, d in T.Parallel(G, D):
                x_s[(g * G + i) * D + d] = T.cast(num[i, d], "bfloat16")
    return x_s


def gemv_merge(N, Hq, Hkv, D, splits, rows_per_unit, residual=True, *, threads=256,
               emit=True) -> Body:
    """y = (r +) W @ merge(o_part, lse): args (W [N, Hq*D], o_part
    [Hkv*splits*G*D] f32, lse [Hkv*splits*G] f32, r [N], y [N]) or without
    r; the partials in attention_at's layout (row (g*splits + s)*G + i).
    The numbers of attention_merge then gemv."""
    R, K = rows_per_unit, Hq * D
    G = projection_merge_config(Hq, Hkv, D, splits, threads)[0]
    BK, STAGES = _gemv_setup("gemv_merge", N, K, R, threads)
    rows = Hkv * splits * G
    args, foot = _gemv_args(N, K, R, [("o_part", (rows * D,), "float32"),
                                      ("lse", (rows,), "float32")],
                            [Access("read", 1, 0, 0, rows * D), Access("read", 2, 0, 0, rows)],
                            residual)

    def build(W, OP, LSE, *rest):
        with T.Kernel(N // R, threads=threads) as u:
            row = u * R
            x_s = merge_to_shared(OP, LSE, Hq, Hkv, D, splits, threads)
            # The chunks come from shared memory: nothing to pipeline for x.
            (out,) = _gemv_blocks([row], W, K, R, BK, STAGES, lambda: (
                lambda kk, xc: T.copy(x_s[kk], xc), None), rest[0] if residual else None)
            T.copy(out, rest[-1][row])

    return t_body(f"gemv_merge_{N}x{Hq}x{Hkv}x{D}_k{splits}_r{R}" + ("_res" if residual else ""),
                  _gemv_kernel(args, build), N // R, foot, threads, emit)
