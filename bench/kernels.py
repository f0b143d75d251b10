"""Single-kernel benchmark: TileMega artifacts vs PyTorch (cuBLAS) and Triton.

    PYTHONPATH=python python bench/kernels.py --artifacts out --out $OUT

Memory-bound kernels (softmax, RMSNorm, GEMV) are also reported as a fraction
of the measured device-to-device copy bandwidth. Prints a table and writes
kernels.json + kernels.png.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (bench_ms, copy_bandwidth_gbs, device_info, graphed,  # noqa: E402
                    launch_overhead_us, write_report)

from tilemega.runtime import load_artifact  # noqa: E402

EPS = 1e-6


def softmax_case(art):
    m, n = art.kernels["softmax"].spec.params[0].shape
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    return {
        "workload": f"softmax {m}x{n} bf16",
        "bytes": 2 * x.numel() * 2,
        "ours": lambda: art(x, y),
        "peers": {"torch": lambda: torch.softmax(x, dim=1)},
    }


def rmsnorm_case(art):
    m, h = art.kernels["rmsnorm"].spec.params[0].shape
    x = torch.randn(m, h, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(h, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)

    def torch_rmsnorm():
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(x.dtype)

    peers = {"torch eager": torch_rmsnorm}
    if hasattr(torch.nn.functional, "rms_norm"):
        peers["torch F.rms_norm"] = lambda: torch.nn.functional.rms_norm(x, (h,), w, EPS)
    return {
        "workload": f"rmsnorm {m}x{h} bf16",
        "bytes": 2 * x.numel() * 2 + h * 2,
        "ours": lambda: art(x, w, y),
        "peers": peers,
    }


def gemv_case(art, name):
    n, k = art.kernels[name].spec.params[0].shape
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(k, device="cuda", dtype=torch.bfloat16)
    y = torch.empty(n, device="cuda", dtype=torch.bfloat16)
    return {
        "workload": f"gemv {k}->{n} bf16",
        "bytes": w.numel() * 2 + k * 2 + n * 2,
        "ours": lambda: art(w, x, y),
        "peers": {"torch (cuBLAS)": lambda: torch.mv(w, x)},
    }


def decode_attention_case(art, name):
    """GQA decode attention: one token, q [32, 64] over k, v [8, 1024, 64]."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "examples"))
    import decode_attention

    kernels = list(art.kernels.values())
    attention = next(k for k in kernels if not k.name.endswith("_combine"))
    heads, d = attention.spec.params[0].shape
    kv_heads, seq, _ = attention.spec.params[1].shape
    q = torch.randn(heads, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(kv_heads, seq, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(kv_heads, seq, d, device="cuda", dtype=torch.bfloat16)
    o = torch.empty_like(q)
    workspace = None
    if len(kernels) > 1:   # flash-decoding: allocate the workspace outside the timing
        workspace = decode_attention.make_workspace(q, attention.spec.params[3].shape[0])
    # torch's layout: batch 1, heads, one query token; KV heads shared by GQA.
    q4, k4, v4 = q[None, :, None, :], k[None], v[None]
    sdpa = torch.nn.functional.scaled_dot_product_attention
    try:
        sdpa(q4, k4, v4, enable_gqa=True)
        peer = lambda: sdpa(q4, k4, v4, enable_gqa=True)  # noqa: E731
    except TypeError:  # torch < 2.5: no enable_gqa, expand the KV heads
        group = heads // kv_heads
        peer = lambda: sdpa(q4, k4.repeat_interleave(group, dim=1),  # noqa: E731
                            v4.repeat_interleave(group, dim=1))
    form = "split" if len(kernels) > 1 else "1 kernel"
    return {
        # heads/kv_heads x seq x head_dim; "split": split + combine kernels.
        "workload": f"decode attn {heads}/{kv_heads}x{seq}x{d} {form}",
        "bytes": (q.numel() + k.numel() + v.numel() + o.numel()) * 2,
        "ours": lambda: decode_attention.run(art, q, k, v, o, workspace),
        "peers": {"torch SDPA (GQA)": peer},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--artifacts", default="out")
    parser.add_argument("--out", default="bench_out")
    args = parser.parse_args()

    def artifact(name):
        return load_artifact(os.path.join(args.artifacts, f"{name}.json"))

    cases = []
    for name, make in [("softmax", softmax_case), ("rmsnorm", rmsnorm_case)]:
        if os.path.exists(os.path.join(args.artifacts, f"{name}.json")):
            cases.append(make(artifact(name)))
    for name in ("gemv_2048x8192", "gemv_8192x2048"):
        if os.path.exists(os.path.join(args.artifacts, f"{name}.json")):
            cases.append(gemv_case(artifact(name), name))
    for name in ("decode_attention", "decode_attention_single_kernel"):
        if os.path.exists(os.path.join(args.artifacts, f"{name}.json")):
            cases.append(decode_attention_case(artifact(name), name))

    copy_gbs = copy_bandwidth_gbs()
    results = {"device": device_info(), "copy_bandwidth_gbs": copy_gbs,
               "timing": "CUDA-graph replay (GPU time only), median of do_bench",
               "results": [], "launch_overhead_us": {}}
    print(f"copy bandwidth: {copy_gbs:.0f} GB/s; times are CUDA-graph replays")
    print(f"{'workload':32} {'peer':18} {'ours ms':>9} {'peer ms':>9} {'ratio':>6} {'ours GB/s':>10} {'of copy':>8}")
    for case in cases:
        ours = bench_ms(graphed(case["ours"]))
        gbs = case["bytes"] / (ours * 1e-3) / 1e9
        results["launch_overhead_us"][case["workload"]] = launch_overhead_us(case["ours"])
        for peer, fn in case["peers"].items():
            theirs = bench_ms(graphed(fn))
            row = {"workload": case["workload"], "peer": peer, "ours_ms": ours,
                   "peer_ms": theirs, "ratio": theirs / ours, "ours_gbs": gbs,
                   "fraction_of_copy": gbs / copy_gbs}
            results["results"].append(row)
            print(f"{case['workload']:32} {peer:18} {ours:9.4f} {theirs:9.4f} "
                  f"{theirs / ours:6.2f} {gbs:10.0f} {gbs / copy_gbs:8.2f}")
    for name, us in results["launch_overhead_us"].items():
        print(f"host launch path, tilemega.runtime: {name}: {us:.1f} us/call")
    write_report(results, args.out, "kernels")


if __name__ == "__main__":
    main()
