"""Compiles the benchmark-only artifacts (needs the compiler; run here, then
carry out/ to the GPU machine):

    PYTHONPATH=build/python_packages python bench/build_artifacts.py --out out
    PYTHONPATH=build/python_packages python bench/build_artifacts.py --experiments --out DIR

The example kernels themselves come from examples/run_examples.py;
`scripts/tilemega.sh main` builds these, the examples and the mega-kernels
(examples/shipped.py) in one go.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

# Name -> examples/gemm.py configuration; shapes from the issue.
GEMMS = {
    "bench_gemm_bf16_nn_4096": dict(M=4096, N=4096, K=4096, dtype="bf16"),
    "bench_gemm_f16_nn_4096": dict(M=4096, N=4096, K=4096, dtype="f16"),
    "bench_gemm_bf16_nt_4096": dict(M=4096, N=4096, K=4096, dtype="bf16", transpose_b=True),
    "bench_gemm_bf16_nn_8192": dict(M=8192, N=8192, K=8192, dtype="bf16"),
    # Deeper K tiles: half the barriers per FLOP.
    "bench_gemm_bf16_nn_4096_bk64s3": dict(M=4096, N=4096, K=4096, dtype="bf16",
                                           block_k=64, num_stages=3),
    "bench_gemm_bf16_nn_4096_bk64s4": dict(M=4096, N=4096, K=4096, dtype="bf16",
                                           block_k=64, num_stages=4),
    "bench_gemm_bf16_nn_8192_bk64s3": dict(M=8192, N=8192, K=8192, dtype="bf16",
                                           block_k=64, num_stages=3),
    # Grouped block order (L2 reuse).
    "bench_gemm_bf16_nn_4096_g8": dict(M=4096, N=4096, K=4096, dtype="bf16", group_m=8),
    "bench_gemm_bf16_nn_8192_g8": dict(M=8192, N=8192, K=8192, dtype="bf16", group_m=8),
    "bench_gemm_bf16_nn_8192_bk64s3g8": dict(M=8192, N=8192, K=8192, dtype="bf16",
                                             block_k=64, num_stages=3, group_m=8),
    "bench_gemm_bf16_nn_16x8192x2048": dict(M=16, N=8192, K=2048, dtype="bf16",
                                            block_m=16, block_n=64, block_k=64),
    "bench_gemm_bf16_nn_128x14336x4096": dict(M=128, N=14336, K=4096, dtype="bf16"),
}

# Name -> examples/gemm_hopper.py configuration (C = A @ B^T unless the name
# says _nn_ / _tn_), on wgmma, each k-tile's wgmma in flight into the next
# iteration: sm_90a's default.
def _cube(n, **config):
    """An n x n x n Hopper GEMM configuration."""
    return dict(M=n, N=n, K=n, **config)


HOPPER_GEMMS = {
    "bench_gemm_hopper_bf16_nt_4096": _cube(4096, block_n=256, num_stages=4),
    "bench_gemm_hopper_bf16_nt_4096_s3": _cube(4096, block_n=256, num_stages=3),
    "bench_gemm_hopper_bf16_nt_4096_bn128": _cube(4096, block_n=128, num_stages=4),
    # 3 stages of 128 x 128: 96 KiB, two CTAs an SM (one's epilogue under
    # the other's main loop).
    "bench_gemm_hopper_bf16_nt_4096_bn128_s3": _cube(4096, block_n=128, num_stages=3),
    "bench_gemm_hopper_bf16_nt_8192": _cube(8192, block_n=256, num_stages=4),
    "bench_gemm_hopper_bf16_nt_8192_bn128_s3": _cube(8192, block_n=128, num_stages=3),
    # C through a shared tile (coalesced 16-byte stores), over the stages'
    # bytes once the K loop is done (tiles whose live ranges do not overlap
    # share shared memory); then the same with 3 stages.
    "bench_gemm_hopper_bf16_nt_4096_stage_c": _cube(4096, block_n=256, num_stages=4,
                                                    stage_c=True),
    "bench_gemm_hopper_bf16_nt_8192_stage_c": _cube(8192, block_n=256, num_stages=4,
                                                    stage_c=True),
    "bench_gemm_hopper_bf16_nt_4096_s3_stage_c": _cube(4096, block_n=256, num_stages=3,
                                                       stage_c=True),
    "bench_gemm_hopper_bf16_nt_8192_s3_stage_c": _cube(8192, block_n=256, num_stages=3,
                                                       stage_c=True),
    # Grouped block order (8 row tiles a group: L2 reuse of A and B tiles).
    "bench_gemm_hopper_bf16_nt_4096_stage_c_g8": _cube(4096, block_n=256, num_stages=4,
                                                       stage_c=True, group_m=8),
    "bench_gemm_hopper_bf16_nt_8192_stage_c_g8": _cube(8192, block_n=256, num_stages=4,
                                                       stage_c=True, group_m=8),
    # The other operand forms (B K x N: N-major; A K x M: M-major), read by
    # wgmma as 64-column blocks, each one TMA box.
    "bench_gemm_hopper_bf16_nn_4096_stage_c_g8": _cube(4096, block_n=256, num_stages=4,
                                                       stage_c=True, group_m=8,
                                                       transpose_b=False),
    "bench_gemm_hopper_bf16_nn_8192_stage_c_g8": _cube(8192, block_n=256, num_stages=4,
                                                       stage_c=True, group_m=8,
                                                       transpose_b=False),
    "bench_gemm_hopper_bf16_tn_4096_stage_c_g8": _cube(4096, block_n=256, num_stages=4,
                                                       stage_c=True, group_m=8,
                                                       transpose_a=True, transpose_b=False),
    # The odd shape (masked edges; K = 1234 leaves A's rows 2468
    # bytes, not TMA's 16-byte multiple, in the NN and NT forms: cp.async).
    **{f"bench_gemm_hopper_bf16_{form}_3000x5000x1234{suffix}":
       dict(M=3000, N=5000, K=1234, num_stages=4, stage_c=True, group_m=8,
            transpose_a=form[0] == "t", transpose_b=form[1] == "t", **extra)
       for form in ("nn", "tn", "nt")
       for suffix, extra in (("_stage_c_g8", dict(block_n=256)),
                             ("_bn128_stage_c_g8", dict(block_n=128)))},
    # 3 stages of 128 x 128 (96 KiB): two blocks an SM, one's prologue and C
    # store under the other's main loop.
    "bench_gemm_hopper_bf16_tn_3000x5000x1234_bn128_s3_stage_c_g8": dict(
        M=3000, N=5000, K=1234, block_n=128, num_stages=3, stage_c=True, group_m=8,
        transpose_a=True, transpose_b=False),
    # Warp-specialised: a producer warpgroup runs the TMA copies ahead on
    # full / empty mbarriers; no block barrier per k-tile.
    **{f"bench_gemm_hopper_bf16_{form}_{n}_stage_c_g8_ws":
       _cube(n, block_n=256, num_stages=4, stage_c=True, group_m=8,
             transpose_a=form[0] == "t", transpose_b=form[1] == "t",
             warp_specialize=True)
       for form, n in (("nt", 4096), ("nt", 8192), ("nn", 4096), ("nn", 8192),
                       ("tn", 4096))},
    # The same in clusters of 2 (4) row tiles: each producer loads half (a
    # quarter) of the B tile the cluster's blocks read, multicast into all
    # of them (T.Kernel(cluster=c)).
    **{f"bench_gemm_hopper_bf16_{form}_{n}_stage_c_g8_ws_c{c}":
       _cube(n, block_n=256, num_stages=4, stage_c=True, group_m=8,
             transpose_a=form[0] == "t", transpose_b=form[1] == "t",
             warp_specialize=True, cluster=c)
       for form, n, c in (("nt", 4096, 2), ("nt", 8192, 2), ("nn", 4096, 2),
                          ("nn", 8192, 2), ("tn", 4096, 2),
                          ("nt", 4096, 4), ("nt", 8192, 4), ("nn", 8192, 4))},
    **{f"bench_gemm_hopper_bf16_tn_3000x5000x1234{suffix}": dict(
        M=3000, N=5000, K=1234, stage_c=True, transpose_a=True, transpose_b=False,
        warp_specialize=True, **dict(dict(block_n=256, num_stages=4, group_m=8, cluster=2),
                                     **extra))
       for suffix, extra in (("_stage_c_g8_ws_c2", {}),
                             ("_stage_c_g8_ws_c2_s3", dict(num_stages=3)),
                             ("_stage_c_g4_ws_c2", dict(group_m=4)),
                             ("_stage_c_g8_ws_c4", dict(cluster=4)),
                             ("_bn128_stage_c_g8_ws_c2", dict(block_n=128)))},
    # Persistent (one block an SM walking the tiles in grouped order): the
    # producer loads the next tile's k-tiles while the consumers store C.
    **{f"bench_gemm_hopper_bf16_{form}_{n}_persistent":
       _cube(n, block_n=256, num_stages=3, stage_c=True, group_m=8,
             transpose_a=form[0] == "t", transpose_b=form[1] == "t",
             warp_specialize=True, persistent=132)
       for form, n in (("nt", 4096), ("nt", 8192), ("nn", 4096), ("nn", 8192),
                       ("tn", 4096))},
    # Persistent clusters: 66 (33) clusters of 2 (4) blocks walk tiles of
    # 2 (4) row tiles, multicasting B.
    **{f"bench_gemm_hopper_bf16_{form}_{n}_persistent_c{c}":
       _cube(n, block_n=256, num_stages=3, stage_c=True, group_m=8,
             transpose_a=form[0] == "t", transpose_b=form[1] == "t",
             warp_specialize=True, persistent=132, cluster=c)
       for form, n, c in (("nt", 4096, 2), ("nt", 8192, 2), ("nn", 8192, 2),
                          ("nt", 8192, 4), ("nn", 4096, 2), ("tn", 4096, 2))},
    # At most 33 clusters of 4: the runtime launches those the device
    # co-schedules (30 on an H100; 33 launched ran a fourth round of
    # tiles on 3 of them: 100 us against 69). Panels of 8 and 4 row tiles.
    **{f"bench_gemm_hopper_bf16_tn_3000x5000x1234_persistent{suffix}_c4": dict(
        M=3000, N=5000, K=1234, block_n=256, num_stages=3, stage_c=True, group_m=g,
        transpose_a=True, transpose_b=False, warp_specialize=True, persistent=132,
        cluster=4)
       for suffix, g in (("", 8), ("_g4", 4))},
    "bench_gemm_hopper_bf16_nt_4096_bn128_persistent": _cube(
        4096, block_n=128, num_stages=4, stage_c=True, group_m=8,
        warp_specialize=True, persistent=132),
    "bench_gemm_hopper_bf16_tn_3000x5000x1234_persistent": dict(
        M=3000, N=5000, K=1234, block_n=256, num_stages=3, stage_c=True, group_m=8,
        transpose_a=True, transpose_b=False, warp_specialize=True, persistent=132),
    # C stored by TMA, one tile a block (4 stages) and persistent (3).
    **{f"bench_gemm_hopper_bf16_{form}_{n}_tma_store":
       _cube(n, block_n=256, num_stages=4, stage_c=True, group_m=8,
             transpose_a=form[0] == "t", transpose_b=form[1] == "t", tma_store=True)
       for form, n in (("nt", 4096), ("nt", 8192))},
    **{f"bench_gemm_hopper_bf16_{form}_{n}_persistent_tma_store":
       _cube(n, block_n=256, num_stages=3, stage_c=True, group_m=8,
             transpose_a=form[0] == "t", transpose_b=form[1] == "t",
             warp_specialize=True, persistent=132, tma_store=True)
       for form, n in (("nt", 4096), ("nt", 8192))},
    **{f"bench_gemm_hopper_bf16_{form}_{n}_stage_c_g8_ws_c4":
       _cube(n, block_n=256, num_stages=4, stage_c=True, group_m=8,
             transpose_a=form[0] == "t", transpose_b=form[1] == "t",
             warp_specialize=True, cluster=4)
       for form, n in (("nt", 4096), ("nt", 8192), ("nn", 8192))},
    **{f"bench_gemm_hopper_bf16_tn_3000x5000x1234{suffix}": dict(
        M=3000, N=5000, K=1234, block_n=256, stage_c=True, group_m=8,
        transpose_a=True, transpose_b=False, tma_store=True, **extra)
       for suffix, extra in (("_tma_store", dict(num_stages=4)),
                             ("_persistent_tma_store",
                              dict(num_stages=3, warp_specialize=True, persistent=132)))},
    "bench_gemm_hopper_bf16_tn_3000x5000x1234_stage_c_g8_ws": dict(
        M=3000, N=5000, K=1234, block_n=256, num_stages=4, stage_c=True, group_m=8,
        transpose_a=True, transpose_b=False, warp_specialize=True),
    # The same kernels with cp.async stages instead of TMA (tilemega.compile's
    # tma=False): the A/B of the TMA pipeline, in the same run.
    "bench_gemm_hopper_bf16_nt_4096_cpasync": _cube(4096, block_n=256, num_stages=4, tma=False),
    "bench_gemm_hopper_bf16_nt_8192_cpasync": _cube(8192, block_n=256, num_stages=4, tma=False),
}

# Name -> examples/gemm_fp8.py configuration (e4m3 A @ B^T with per-tensor
# scales, bf16 out; bench/gemm_fp8.py runs them against torch._scaled_mm).
FP8_GEMMS = {
    f"bench_fp8_gemm_e4m3_{n}{suffix}": dict(M=n, N=n, K=n, **extra)
    for n in (4096, 8192)
    for suffix, extra in (("", dict(block_n=256, num_stages=4)),
                          ("_g8", dict(block_n=256, num_stages=4, group_m=8)),
                          ("_s3_g8", dict(block_n=256, num_stages=3, group_m=8)),
                          ("_g8_ws", dict(block_n=256, num_stages=4, group_m=8,
                                          warp_specialize=True)))
}

# Name -> examples/flash_attention.py configuration: 16k tokens a batch
# (B * S), 16 heads, FlashAttention's benchmark shapes; tile variants at 8k.
def _attention(seq, head_dim=128, causal=False, **config):
    return dict(batch=max(1, 16384 // seq), heads=16, kv_heads=16, seq=seq,
                head_dim=head_dim, causal=causal, **config)


ATTENTIONS = {
    f"bench_attention_d{d}_s{s}{'_causal' if c else ''}": _attention(s, d, c)
    for d, s in ((128, 2048), (128, 8192), (128, 16384), (64, 4096)) for c in (False, True)
}
ATTENTIONS.update({
    "bench_attention_d128_s8192_s3": _attention(8192, num_stages=3),
    "bench_attention_d128_s8192_bm128": _attention(8192, block_m=128),
})
# P @ V with P from registers (register_p), beside each shape's P through
# shared memory.
ATTENTIONS.update({
    f"bench_attention_d{d}_s{s}{'_causal' if c else ''}_rp": _attention(s, d, c, register_p=True)
    for d, s in ((128, 2048), (128, 8192), (128, 16384), (64, 4096)) for c in (False, True)
})

# Candidates beside the shipped kernels (built with --experiments into their
# own folder; bench/gemm.py and bench/attention.py time any bench_gemm_* /
# bench_attention_* there, each checked against float64 first), not
# shipped. Measured on the H100 (docs/benchmarks.md, "FlashAttention
# forward"): docs/results/attention_overlap_h100.json. (The 128 x 192 TN
# GEMM tiles measured there lost to the shipped 128 x 256 ones,
# docs/results/gemm_tn192_h100.json, and are gone.)
EXPERIMENTS = {}

# FlashAttention-3's overlap inside a warpgroup (flash_attention's
# `overlap`: softmax of S_{t+1} under the in-flight P_t V_t, asynchronous
# gemms and T.wait_wgmma) on each benchmark shape.
EXPERIMENTS.update({
    f"{name}_ov": dict(config, overlap=True)
    for name, config in ATTENTIONS.items()
    if not name.endswith(("_rp", "_s3", "_bm128"))
})

# The overlap with P from registers (register_p: no shared round trip for P;
# H100, docs/results/attention_whole_d_h100.json: causal 8k -4.7 %,
# non-causal +2 % against the shipped tile of that run).
EXPERIMENTS.update({
    f"{name}_ov_rp": dict(config, overlap=True, register_p=True)
    for name, config in ATTENTIONS.items()
    if not name.endswith(("_rp", "_s3", "_bm128"))
})

# The K/V copies on a producer warpgroup (warp_specialize, non-causal), with
# and without the overlap, 64- and 128-row query blocks.
EXPERIMENTS.update({
    f"bench_attention_d{d}_s{s}{suffix}": _attention(s, d, warp_specialize=True, **extra)
    for d, s in ((128, 8192), (64, 4096))
    for suffix, extra in (("_ws", {}), ("_ws_ov", dict(overlap=True)),
                          ("_bm128_ws_ov", dict(overlap=True, block_m=128)))
})

# Whole head_dim-wide tiles (whole_d: Q K^T and P V one gemm each over
# head_dim 128, wgmma stepping through the 64-column blocks), alone and
# with the overlap.
EXPERIMENTS.update({
    f"{name}{suffix}": dict(config, whole_d=True, **extra)
    for name, config in ATTENTIONS.items()
    if config["head_dim"] == 128 and not name.endswith(("_rp", "_s3", "_bm128"))
    for suffix, extra in (("_wd", {}), ("_wd_ov", dict(overlap=True)))
})

# 256 x 128 tiles (cuBLAS's shape at 4096^3) with four consumer warpgroups
# and the producer, 640 threads: one tile a block, in clusters of 2, and
# persistent. Their first run hung (a register split over the launch's,
# fixed in WarpSpecialize.cpp); measured since on an H100
# (docs/results/gemm_bm256_h100.json): 0.80-0.95x cuBLAS, below the
# shipped 128 x 256 tiles (0.96-0.99x) in every form.
EXPERIMENTS.update({
    f"bench_gemm_hopper_bf16_{form}_4096_bm256_bn128{suffix}": _cube(
        4096, block_m=256, block_n=128, stage_c=True, group_m=8, warp_specialize=True,
        transpose_a=form[0] == "t", transpose_b=form[1] == "t", **extra)
    for form in ("nn", "nt", "tn")
    for suffix, extra in (("_s4", dict(num_stages=4)), ("_s4_c2", dict(num_stages=4, cluster=2)),
                          ("_p132_c2", dict(num_stages=3, cluster=2, persistent=132)))
})

# Keys of a configuration that are tilemega.compile options, not the example's.
COMPILE_OPTIONS = ("tma",)


def example_of(name):
    """(example module name, configuration) of benchmark artifact `name`."""
    if name in ATTENTIONS or name.startswith("bench_attention_") and name in EXPERIMENTS:
        return "flash_attention", ATTENTIONS.get(name) or EXPERIMENTS[name]
    if name in HOPPER_GEMMS or name in EXPERIMENTS:
        config = HOPPER_GEMMS.get(name) or EXPERIMENTS[name]
        return "gemm_hopper", {k: v for k, v in config.items() if k not in COMPILE_OPTIONS}
    if name in FP8_GEMMS:
        return "gemm_fp8", FP8_GEMMS[name]
    return "gemm", GEMMS[name]


def compile_options(name):
    """The tilemega.compile options of benchmark artifact `name`."""
    config = HOPPER_GEMMS.get(name) or EXPERIMENTS.get(name) or GEMMS.get(name, {})
    return {k: v for k, v in config.items() if k in COMPILE_OPTIONS}


def names():
    return list(GEMMS) + list(HOPPER_GEMMS) + list(FP8_GEMMS) + list(ATTENTIONS)


def compile_one(name):
    """The CompiledModule of benchmark artifact `name` (needs the compiler),
    built by its example module."""
    import run_examples
    import tilemega
    from tilemega.ir import Context, Location

    module_name, config = example_of(name)
    example = run_examples.example_module(module_name)
    with Context(), Location.unknown():
        return tilemega.compile(example.build(name=name, **config), chip="sm_90a", name=name,
                                **compile_options(name))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="out")
    parser.add_argument("--experiments", action="store_true",
                        help="build the benchmark candidates (EXPERIMENTS) instead")
    parser.add_argument("--only", default="",
                        help="build only the names that contain this text")
    args = parser.parse_args()
    for name in (list(EXPERIMENTS) if args.experiments else names()):
        if args.only not in name:
            continue
        result = compile_one(name)
        (kernel,) = result.kernels
        print(f"{result.save(args.out)}: registers {kernel.get('registers')}, "
              f"smem {kernel['dynamic_shared_bytes']} B, grid {kernel['grid']}")


if __name__ == "__main__":
    main()
