"""The main job: compile every example kernel to an artifact, and run it where
a GPU exists.

    python examples/run_examples.py --out out

Compiling needs the built tilemega package (build/python_packages on
PYTHONPATH, as scripts/tilemega.sh sets it); running needs only the artifacts,
tilemega.runtime, cuda-python and torch, so on a GPU machine without the
compiler `PYTHONPATH=python python examples/run_examples.py --run-only` works.
"""

import argparse
import importlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# (artifact name, example module, build() keyword arguments). The module's
# GPU check lives in examples_gpu/<module>.py (torch only, so it runs where a
# GPU exists).
EXAMPLES = [
    ("scale_add", "scale_add", {}),
    ("softmax", "softmax", {}),
    ("rmsnorm", "rmsnorm", {}),
    # A reduction of one tile rescaling another: layout conversion inserted.
    ("row_rescale", "row_rescale", {}),
    ("gemv_2048x8192", "gemv", {"N": 8192, "K": 2048, "BLOCK_N": 16, "BLOCK_K": 256, "THREADS": 128, "STAGES": 4}),
    ("gemv_8192x2048", "gemv", {"N": 2048, "K": 8192, "BLOCK_N": 8, "BLOCK_K": 512, "THREADS": 128, "STAGES": 4}),
    # Tensor-core gemm (ldmatrix + mma.sync); the odd size needs masking.
    ("gemm_f16_nn_512", "gemm", {"M": 512, "N": 512, "K": 512, "dtype": "f16"}),
    ("gemm_bf16_nt_1024", "gemm", {"M": 1024, "N": 1024, "K": 1024, "dtype": "bf16", "transpose_b": True}),
    ("gemm_f16_nn_1000x1000x999", "gemm", {"M": 1000, "N": 1000, "K": 999, "dtype": "f16"}),
    ("gemm_bf16_nn_1024_grouped", "gemm", {"M": 1024, "N": 1024, "K": 1024, "dtype": "bf16",
                                           "block_k": 64, "num_stages": 3, "group_m": 4}),
    ("gemm_f16_tn_768x512x384", "gemm", {"M": 768, "N": 512, "K": 384, "dtype": "f16",
                                         "transpose_a": True}),
    # The Hopper path: the plain T.* GEMM, C = A @ B^T, on wgmma with each
    # k-tile's wgmma in flight into the next iteration (sm_90a's default);
    # odd sizes masked.
    ("gemm_hopper_bf16_nt_1024", "gemm_hopper", {"M": 1024, "N": 1024, "K": 1024}),
    ("gemm_hopper_bf16_nt_1000x1000x1000", "gemm_hopper", {"M": 1000, "N": 1000, "K": 1000}),
    # C through a shared tile, blocks that overhang M and N.
    ("gemm_hopper_bf16_nt_1000x1000x1000_stage_c", "gemm_hopper",
     {"M": 1000, "N": 1000, "K": 1000, "block_n": 256, "num_stages": 3, "stage_c": True}),
    # Grouped block order over a masked size (8 row tiles of 128 a group).
    ("gemm_hopper_bf16_nt_1000x1000x1000_g8", "gemm_hopper",
     {"M": 1000, "N": 1000, "K": 1000, "group_m": 8, "stage_c": True}),
    ("gemm_hopper_f16_nt_512x768x320", "gemm_hopper", {"M": 512, "N": 768, "K": 320,
                                                        "dtype": "f16", "block_n": 256,
                                                        "num_stages": 3}),
    # B as K x N (N-major) and A as K x M (M-major): wgmma reads them as
    # 64-column blocks, one TMA box each; masked sizes.
    ("gemm_hopper_bf16_nn_1000x1000x1000", "gemm_hopper",
     {"M": 1000, "N": 1000, "K": 1000, "transpose_b": False}),
    ("gemm_hopper_bf16_nn_1000x1000x1000_stage_c", "gemm_hopper",
     {"M": 1000, "N": 1000, "K": 1000, "transpose_b": False, "block_n": 256,
      "num_stages": 3, "stage_c": True}),
    ("gemm_hopper_bf16_tn_1000x1000x1000", "gemm_hopper",
     {"M": 1000, "N": 1000, "K": 1000, "transpose_a": True, "transpose_b": False}),
    ("gemm_hopper_f16_tt_512x768x320", "gemm_hopper",
     {"M": 512, "N": 768, "K": 320, "dtype": "f16", "transpose_a": True, "block_n": 256,
      "num_stages": 3}),
    # K = 999: A's rows (1998 bytes) are no TMA stride, so cp.async stages
    # write the column-blocked tiles.
    ("gemm_hopper_f16_nn_1000x1000x999", "gemm_hopper",
     {"M": 1000, "N": 1000, "K": 999, "dtype": "f16", "transpose_b": False}),
    # Warp-specialised: a producer warpgroup issues the TMA copies on full /
    # empty mbarriers (3 stages over 5 k-tiles wrap the phases around).
    ("gemm_hopper_bf16_nt_1000x1000x1000_ws", "gemm_hopper",
     {"M": 1000, "N": 1000, "K": 1000, "block_n": 256, "stage_c": True,
      "warp_specialize": True}),
    ("gemm_hopper_bf16_nn_1000x1000x1000_ws", "gemm_hopper",
     {"M": 1000, "N": 1000, "K": 1000, "transpose_b": False, "group_m": 8,
      "stage_c": True, "warp_specialize": True}),
    ("gemm_hopper_f16_nt_512x768x320_ws", "gemm_hopper",
     {"M": 512, "N": 768, "K": 320, "dtype": "f16", "num_stages": 3,
      "warp_specialize": True}),
    ("gemm_hopper_bf16_nt_512x512x256_ws_no_in_flight", "gemm_hopper",
     {"M": 512, "N": 512, "K": 256, "num_stages": 2, "warp_specialize": True}),
    # Persistent: fewer blocks than tiles, each walking its tiles with the
    # warp-specialised K loop inside (the pipeline's phases run on across
    # tiles; 7 blocks over 32 tiles, 5 over 12 of 5 k-tiles each).
    ("gemm_hopper_bf16_nt_1000x1000x1000_persistent", "gemm_hopper",
     {"M": 1000, "N": 1000, "K": 1000, "block_n": 256, "num_stages": 3, "stage_c": True,
      "warp_specialize": True, "persistent": 16}),
    ("gemm_hopper_bf16_nn_1000x1000x1000_persistent_g8", "gemm_hopper",
     {"M": 1000, "N": 1000, "K": 1000, "transpose_b": False, "group_m": 8,
      "stage_c": True, "warp_specialize": True, "persistent": 7}),
    ("gemm_hopper_f16_tn_512x768x320_persistent", "gemm_hopper",
     {"M": 512, "N": 768, "K": 320, "dtype": "f16", "transpose_a": True,
      "transpose_b": False, "num_stages": 3, "warp_specialize": True, "persistent": 5}),
    # Four consumer warpgroups (256-row blocks) and the producer: 640
    # threads, whose setmaxnreg split must stay within their launch's
    # registers (104 a consumer thread; 112 hung).
    ("gemm_hopper_bf16_nn_1024_bm256_ws", "gemm_hopper",
     {"M": 1024, "N": 1024, "K": 1024, "block_m": 256, "block_n": 128, "num_stages": 4,
      "stage_c": True, "transpose_b": False, "warp_specialize": True}),
    # Persistent clusters of 2 (B multicast) on a resident grid: at most 8
    # clusters, as many as the device co-schedules, walk 16 tiles of 2 row
    # tiles in panels of 4; the check also runs it as one cluster.
    ("gemm_hopper_bf16_tn_1000x1000x1000_persistent_c2", "gemm_hopper",
     {"M": 1000, "N": 1000, "K": 1000, "transpose_a": True, "transpose_b": False,
      "block_n": 256, "num_stages": 3, "stage_c": True, "group_m": 4,
      "warp_specialize": True, "persistent": 16, "cluster": 2}),
    # C stored by TMA (a box per 64-column block of C's shared tile; masked
    # edges not written), one tile a block and persistent.
    ("gemm_hopper_bf16_nt_1000x1000x1000_tma_store", "gemm_hopper",
     {"M": 1000, "N": 1000, "K": 1000, "block_n": 256, "num_stages": 3, "stage_c": True,
      "tma_store": True}),
    ("gemm_hopper_bf16_nn_1000x1000x1000_persistent_tma_store", "gemm_hopper",
     {"M": 1000, "N": 1000, "K": 1000, "transpose_b": False, "block_n": 256,
      "num_stages": 3, "stage_c": True, "warp_specialize": True, "persistent": 16,
      "tma_store": True}),
    # 8-bit float inputs (wgmma k32, K-major), per-tensor scales, bf16 out;
    # masked M and N.
    ("gemm_fp8_e4m3_1024", "gemm_fp8", {"M": 1024, "N": 1024, "K": 1024}),
    ("gemm_fp8_e4m3_1000x1000x1024_bn128", "gemm_fp8",
     {"M": 1000, "N": 1000, "K": 1024, "block_n": 128, "group_m": 0}),
    ("gemm_fp8_e5m2_512x768x384", "gemm_fp8",
     {"M": 512, "N": 768, "K": 384, "dtype": "e5m2"}),
    ("gemm_fp8_e4m3_1024_ws", "gemm_fp8",
     {"M": 1024, "N": 1024, "K": 1024, "warp_specialize": True}),
    # Fused epilogues: bias + ReLU / GELU on the accumulator before the store.
    ("gemm_bf16_bias_relu", "gemm", {"M": 1024, "N": 1000, "K": 512, "dtype": "bf16",
                                     "epilogue": "bias_relu"}),
    ("gemm_f16_bias_gelu", "gemm", {"M": 512, "N": 768, "K": 1024, "dtype": "f16",
                                    "epilogue": "bias_gelu"}),
    # Software pipelining (tile.pipelined -> cp.async stages); K = 1000 is not
    # a multiple of the 32-wide K tiles. Stage counts 1-4, a single-iteration
    # loop, and sibling loops with different stage counts.
    ("pipelined_sum", "pipelined_sum", {}),
    ("pipelined_sum_1_stage", "pipelined_sum", {"STAGES": 1}),
    ("pipelined_sum_2_stages", "pipelined_sum", {"STAGES": 2}),
    ("pipelined_sum_4_stages", "pipelined_sum", {"STAGES": 4}),
    ("pipelined_sum_single_tile", "pipelined_sum", {"K": 20}),
    ("pipelined_sum_siblings", "pipelined_sum", {"SECOND_STAGES": 2}),
    # FlashAttention forward (prefill) on wgmma, Q K^T and P V (V as stored,
    # N-major) in shared memory, K/V by TMA through views of [B * H * S, D]:
    # head_dim 128 and 64, causal and not, GQA groups of 4 and 7, 64-row
    # query blocks (the default) and 128-row ones (two warpgroups).
    ("flash_attention_d128", "flash_attention", {"heads": 4, "kv_heads": 4, "seq": 1024}),
    ("flash_attention_d128_bm128", "flash_attention",
     {"heads": 4, "kv_heads": 4, "seq": 1024, "block_m": 128}),
    ("flash_attention_d128_causal_gqa4", "flash_attention",
     {"batch": 2, "heads": 8, "kv_heads": 2, "seq": 512, "causal": True}),
    ("flash_attention_d64_causal_gqa7", "flash_attention",
     {"heads": 14, "kv_heads": 2, "seq": 1024, "head_dim": 64, "causal": True}),
    ("flash_attention_d64_bm64_s3", "flash_attention",
     {"heads": 4, "kv_heads": 4, "seq": 768, "head_dim": 64, "block_m": 64, "num_stages": 3}),
    # P @ V with P from registers (wgmma's register-A form,
    # tile.wgmma_register_a): head_dim 128 and 64, causal, GQA, 128-row blocks.
    ("flash_attention_d128_rp", "flash_attention",
     {"heads": 4, "kv_heads": 4, "seq": 1024, "register_p": True}),
    ("flash_attention_d128_bm128_rp", "flash_attention",
     {"heads": 4, "kv_heads": 4, "seq": 1024, "block_m": 128, "register_p": True}),
    ("flash_attention_d128_causal_gqa4_rp", "flash_attention",
     {"batch": 2, "heads": 8, "kv_heads": 2, "seq": 512, "causal": True, "register_p": True}),
    ("flash_attention_d64_causal_gqa7_rp", "flash_attention",
     {"heads": 14, "kv_heads": 2, "seq": 1024, "head_dim": 64, "causal": True,
      "register_p": True}),
    # FlashAttention-3's overlap inside a warpgroup (`overlap`: asynchronous
    # gemms, softmax of S_{t+1} under P_t V_t): head_dim 128 and 64, causal,
    # GQA.
    ("flash_attention_d128_ov", "flash_attention",
     {"heads": 4, "kv_heads": 4, "seq": 1024, "overlap": True}),
    ("flash_attention_d128_causal_gqa4_ov", "flash_attention",
     {"batch": 2, "heads": 8, "kv_heads": 2, "seq": 512, "causal": True, "overlap": True}),
    ("flash_attention_d64_causal_gqa7_ov", "flash_attention",
     {"heads": 14, "kv_heads": 2, "seq": 1024, "head_dim": 64, "causal": True,
      "overlap": True}),
    # Whole head_dim-wide tiles (whole_d: one gemm each for Q K^T and P V,
    # K-major wgmma operands of 128 elements in 64-column blocks), with and
    # without the overlap.
    ("flash_attention_d128_wd", "flash_attention",
     {"heads": 4, "kv_heads": 4, "seq": 1024, "whole_d": True}),
    ("flash_attention_d128_causal_gqa4_wd_ov", "flash_attention",
     {"batch": 2, "heads": 8, "kv_heads": 2, "seq": 512, "causal": True, "whole_d": True,
      "overlap": True}),
    # GQA decode attention, 32 query heads over 8 KV heads of 64, 1024 keys:
    # flash-decoding (a split kernel over 8 x 16 blocks + a combine kernel in
    # one artifact), and the single-kernel form (one block per KV head, 16
    # steps of the online softmax).
    ("decode_attention", "decode_attention", {}),
    ("decode_attention_single_kernel", "decode_attention", {"splits": 1, "block_n": 64}),
    # A split reduction whose last block (T.block_atomic_add) adds the
    # partials and resets its counter: 128 blocks over 2^20 floats.
    ("split_sum", "split_sum", {}),
    # Mega-kernel task bodies (tilemega.mega.bodies) at the Llama-3.2-1B
    # decode shapes, each as a standalone kernel over all its units.
    ("mega_rmsnorm_2048", "mega_bodies", {"body": "rmsnorm", "H": 2048}),
    ("mega_gemv_qkv", "mega_bodies", {"body": "gemv", "N": 3072, "K": 2048, "rows_per_unit": 24}),
    ("mega_gemv_wo_res", "mega_bodies", {"body": "gemv", "N": 2048, "K": 2048, "rows_per_unit": 16,
                                         "residual": True}),
    ("mega_gemv_wgu", "mega_bodies", {"body": "gemv", "N": 16384, "K": 2048, "rows_per_unit": 128}),
    ("mega_gemv_wd_res", "mega_bodies", {"body": "gemv", "N": 2048, "K": 8192, "rows_per_unit": 16,
                                         "residual": True}),
    ("mega_rope", "mega_bodies", {"body": "rope", "Hq": 32, "Hkv": 8, "D": 64}),
    ("mega_kv_append", "mega_bodies", {"body": "kv_append", "Hq": 32, "Hkv": 8, "D": 64,
                                       "S": 1024, "pos": 1023}),
    ("mega_attn_split", "mega_bodies", {"body": "attention_split", "Hq": 32, "Hkv": 8, "D": 64,
                                        "S_len": 1024, "S_max": 1024, "splits": 8}),
    # A partly filled cache: keys < 512 of 1024.
    ("mega_attn_split_partial", "mega_bodies", {"body": "attention_split", "Hq": 32, "Hkv": 8,
                                                "D": 64, "S_len": 512, "S_max": 1024,
                                                "splits": 8}),
    ("mega_attn_combine", "mega_bodies", {"body": "attention_combine", "Hq": 32, "Hkv": 8,
                                          "D": 64, "splits": 8}),
    ("mega_silu_mul", "mega_bodies", {"body": "silu_mul", "I": 8192, "chunk": 2048}),
    ("mega_add", "mega_bodies", {"body": "residual_add", "H": 2048, "chunk": 512}),
    # Fused bodies of decode_graph(fuse=True): rmsnorm into the qkv and
    # gate/up GEMVs, silu_mul into the down GEMV, RoPE with the KV append.
    ("mega_gemv_rms_qkv", "mega_bodies", {"body": "gemv_rmsnorm", "N": 3072, "K": 2048,
                                          "rows_per_unit": 24}),
    ("mega_gemv_rms_wgu", "mega_bodies", {"body": "gemv_rmsnorm", "N": 16384, "K": 2048,
                                          "rows_per_unit": 128}),
    ("mega_gemv_silu_wd_res", "mega_bodies", {"body": "gemv_silu", "N": 2048, "K": 8192,
                                              "rows_per_unit": 16}),
    ("mega_gemv_silu_wd", "mega_bodies", {"body": "gemv_silu", "N": 2048, "K": 8192,
                                          "rows_per_unit": 16, "residual": False}),
    ("mega_rope_kv_append", "mega_bodies", {"body": "rope_kv_append", "Hq": 32, "Hkv": 8,
                                            "D": 64, "S": 1024, "pos": 1023}),
    # A middle position: rows on both sides of pos must stay untouched.
    ("mega_rope_kv_append_p517", "mega_bodies", {"body": "rope_kv_append", "Hq": 32, "Hkv": 8,
                                                 "D": 64, "S": 1024, "pos": 517}),
]


def example_module(name):
    """The example module examples/<name>.py. By path: bench/ has same-named
    scripts (bench/gemm.py), and whichever folder is first on sys.path, or
    was imported first, would otherwise win."""
    path = os.path.join(HERE, name + ".py")
    loaded = sys.modules.get(name)
    if loaded is not None and os.path.abspath(getattr(loaded, "__file__", None) or "") != path:
        del sys.modules[name]            # a same-named module from elsewhere
    if sys.path[:1] != [HERE]:
        sys.path.insert(0, HERE)
    module = importlib.import_module(name)
    if os.path.abspath(module.__file__) != path:
        raise ImportError(f"example {name!r} resolved to {module.__file__}, not {path}")
    return module


def entry_config(artifact_name, module):
    """The full configuration (the module's config() of the entry's
    overrides) of the EXAMPLES entry `artifact_name` built by `module`;
    KeyError when there is none."""
    for name, entry_module, overrides in EXAMPLES:
        if name == artifact_name and entry_module == module:
            return example_module(module).config(**overrides)
    raise KeyError(f"{artifact_name} is not a {module} entry of run_examples.EXAMPLES")


def compile_entry(name, module, config):
    """The CompiledModule of one EXAMPLES entry: its module's build(**config),
    named after the entry even when the module holds several kernels."""
    import tilemega
    from tilemega.ir import Context, Location

    example = example_module(module)
    with Context(), Location.unknown():
        return tilemega.compile(example.build(**config, name=name), chip="sm_90a", name=name)


def compile_all(out_dir):

    paths = {}
    for name, module, config in EXAMPLES:
        result = compile_entry(name, module, config)
        paths[name] = result.save(out_dir)
        for k in result.kernels:
            regs = k.get("registers", "?")
            print(f"compiled {name}: kernel {k['name']} grid {k['grid']} "
                  f"block {k['block']} smem {k['dynamic_shared_bytes']} B "
                  f"registers {regs}")
        print(f"  {paths[name]}  (PTX {len(result.ptx)} chars, cubin "
              f"{'%d bytes' % len(result.cubin) if result.cubin else 'not built: no ptxas'})")
    return paths


def gpu_available():
    try:
        import torch
    except ImportError:
        return False, "torch is not installed"
    if not torch.cuda.is_available():
        return False, "no CUDA GPU"
    try:
        import cuda.bindings  # noqa: F401
    except ImportError:
        return False, "cuda-python is not installed"
    return True, ""


def run_all(out_dir):
    import torch
    from tilemega.runtime import load_artifact

    ok = True
    results = {}
    for name, module, _ in EXAMPLES:
        example = importlib.import_module("examples_gpu." + module)
        art = load_artifact(os.path.join(out_dir, f"{name}.json"))
        err = example.check(art, torch)
        # A check module may set the tolerance per artifact.
        tol = (example.tolerance(art) if hasattr(example, "tolerance")
               else example.TOLERANCE)
        passed = err <= tol
        ok &= passed
        results[name] = {"rel_error": err, "passed": passed}
        print(f"ran {name} on {torch.cuda.get_device_name()}: relative error "
              f"{err:.3g} ({'ok' if passed else 'FAILED'}, tolerance {tol})")
    return ok, results


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="out")
    parser.add_argument("--run-only", action="store_true",
                        help="use existing artifacts in --out (no compiler needed)")
    parser.add_argument("--json", help="write the run results here")
    args = parser.parse_args()
    if not args.run_only:
        compile_all(args.out)
    available, why = gpu_available()
    if not available:
        print(f"not running the kernels: {why}")
        return 0
    ok, results = run_all(args.out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
