"""FlashAttention forward benchmark: TileMega artifacts vs PyTorch's
scaled_dot_product_attention (flash and cuDNN backends) and a Triton
FlashAttention-2 kernel autotuned per shape (bench/triton_attention.py), one
run.

    PYTHONPATH=python python3 bench/attention.py --artifacts out --out docs/results

Benchmarks every artifact whose name starts with `bench_attention_` (built
by bench/build_artifacts.py from examples/flash_attention.py): q, k, v, o
[B, H, S, D] bf16. Every implementation's output is checked against the
float64 attention of the same inputs before it is timed (ours writes a
NaN-poisoned output); a row over tolerance is FAILED, not timed, and the
script exits 1. Times are CUDA-graph replays (median of do_bench). FLOPs
follow FlashAttention's convention (4 B H S^2 D, half of it causal); the
floor is those FLOPs at the H200's dense tensor peak. Writes attention.json
and attention.png.
"""

import argparse
import glob
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--artifacts", default="out", help="folder of bench_attention_*.json")
    parser.add_argument("--out", default="docs/results", help="folder for attention.json/.png")
    return parser.parse_args(argv)


def reference(torch, q, k, v, causal):
    """float64 attention, one (batch, head) at a time so 16k keys fit."""
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)
    G = q.shape[1] // k.shape[1]
    S = q.shape[2]
    mask = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1) if causal else None
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            s = q[b, h].double() @ k[b, h // G].double().t() / math.sqrt(q.shape[-1])
            if mask is not None:
                s.masked_fill_(mask, float("-inf"))
            out[b, h] = torch.softmax(s, dim=-1) @ v[b, h // G].double()
            del s
    return out


def sdpa(torch, backend, q, k, v, causal):
    """The peer's launch, returning its own (fresh) output."""
    from torch.nn.attention import sdpa_kernel

    def run():
        with sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=causal, enable_gqa=q.shape[1] != k.shape[1])
    return run


def main(argv=None):
    args = parse_args(argv)
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import torch
    from torch.nn.attention import SDPBackend

    import build_artifacts
    import common
    from tilemega.runtime import load_artifact

    paths = sorted(glob.glob(os.path.join(args.artifacts, "bench_attention_*.json")))
    if not paths:
        print(f"no bench_attention_*.json in {args.artifacts}: build them with "
              f"bench/build_artifacts.py", file=sys.stderr)
        return 2
    import flash_attention
    import triton_attention

    report = common.Report("attention", args.out,
                           timing="CUDA-graph replay (GPU time only), median of do_bench")
    for path in paths:
        art = load_artifact(path)
        (kernel,) = art.kernels.values()
        cfg = flash_attention.config(**build_artifacts.example_of(kernel.name)[1])
        B, H, Hkv, S, D = (cfg[k] for k in ("batch", "heads", "kv_heads", "seq", "head_dim"))
        causal = cfg["causal"]
        q = torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(B, Hkv, S, D, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(B, Hkv, S, D, device="cuda", dtype=torch.bfloat16)
        ref = reference(torch, q, k, v, causal)
        workload = (f"bf16 B{B} H{H}/{Hkv} S{S} D{D}{' causal' if causal else ''} "
                    f"[{kernel.name[len('bench_attention_'):]}]")
        report.workload(workload, flops=flash_attention.flops(cfg), artifact=kernel.name)
        o = torch.empty_like(q)

        def ours():
            o.fill_(float("nan"))   # outside the timing: check() runs it, graphs do not
            art(q, k, v, o)
            return o
        impls = [("TileMega", "ours", ours, lambda: art(q, k, v, o))]
        for label, backend in (("SDPA flash", SDPBackend.FLASH_ATTENTION),
                               ("SDPA cuDNN", SDPBackend.CUDNN_ATTENTION)):
            run = sdpa(torch, backend, q, k, v, causal)
            impls.append((label, "peer", run, run))
        # Autotuned by the check's call, outside the timed graphs.
        o_triton = torch.empty_like(q)
        impls.append(("Triton (autotuned)", "peer",
                      lambda: triton_attention.attention(q, k, v, causal, out=o_triton),
                      lambda: triton_attention.attention(q, k, v, causal, out=o_triton)))
        for name, role, checked, launch in impls:
            def check(checked=checked):
                out = checked()
                torch.cuda.synchronize()
                return {"O": common.rel_l2(out, ref)}
            ms = report.row(workload, name, check, role=role,
                            tolerance=common.TOLERANCE["bfloat16"],
                            time=lambda launch=launch: common.bench_ms(common.graphed(launch)))
            tflops = flash_attention.flops(cfg) / (ms * 1e-3) / 1e12 if ms else None
            print(f"{workload:48} {name:12} "
                  + (f"{ms:9.4f} ms {tflops:6.0f} TFLOP/s" if ms else "   (not timed)"))
        del ref
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
