"""Single-kernel benchmark: TileMega artifacts vs PyTorch (cuBLAS) and Triton.

    PYTHONPATH=python python3 bench/kernels.py --artifacts out --out docs/results

Softmax, RMSNorm, the two GEMVs and GQA decode attention, each ours and its
PyTorch peers. Every implementation's output is checked against a float64
torch reference of the same inputs before it is timed (ours writes a
NaN-poisoned output); a row over tolerance is FAILED, not timed, and the
script exits 1. Times are CUDA-graph replays (median of do_bench). These
kernels are memory-bound: the floor is bytes / the device-to-device copy
rate measured in the same run. Writes kernels.json and kernels.png.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EPS = 1e-6   # examples/rmsnorm.py CONFIG["EPS"]


def softmax_case(torch, art, name):
    m, n = art.kernels[name].spec.params[0].shape
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    return {"workload": f"softmax {m}x{n} bf16", "bytes": 2 * x.numel() * 2,
            "ours": (lambda: art(x, y), y),
            "peers": {"torch.softmax": lambda: torch.softmax(x, dim=1)},
            "reference": torch.softmax(x.double(), dim=1)}


def rmsnorm_case(torch, art, name):
    m, h = art.kernels[name].spec.params[0].shape
    x = torch.randn(m, h, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(h, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)

    def torch_rmsnorm():
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(x.dtype)

    peers = {"torch eager (5 ops)": torch_rmsnorm}
    if hasattr(torch.nn.functional, "rms_norm"):
        peers["torch F.rms_norm"] = lambda: torch.nn.functional.rms_norm(x, (h,), w, EPS)
    xd = x.double()
    return {"workload": f"rmsnorm {m}x{h} bf16", "bytes": 2 * x.numel() * 2 + h * 2,
            "ours": (lambda: art(x, w, y), y), "peers": peers,
            "reference": xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + EPS) * w.double()}


def gemv_case(torch, art, name):
    n, k = art.kernels[name].spec.params[0].shape
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(k, device="cuda", dtype=torch.bfloat16)
    y = torch.empty(n, device="cuda", dtype=torch.bfloat16)
    return {"workload": f"gemv {k}->{n} bf16", "bytes": w.numel() * 2 + k * 2 + n * 2,
            "ours": (lambda: art(w, x, y), y),
            "peers": {"torch.mv (cuBLAS)": lambda: torch.mv(w, x)},
            "reference": w.double() @ x.double()}


def decode_attention_case(torch, art, name):
    """GQA decode attention: one token, q [32, 64] over k, v [8, 1024, 64]."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
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
        peer = lambda: sdpa(q4, k4, v4, enable_gqa=True)[0, :, 0]  # noqa: E731
    except TypeError:  # torch < 2.5: no enable_gqa, expand the KV heads
        group = heads // kv_heads
        peer = lambda: sdpa(q4, k4.repeat_interleave(group, dim=1),  # noqa: E731
                            v4.repeat_interleave(group, dim=1))[0, :, 0]
    form = "split + combine" if len(kernels) > 1 else "1 kernel"
    return {"workload": f"decode attention {heads}/{kv_heads} heads x {seq} x {d}, {form}",
            "bytes": (q.numel() + k.numel() + v.numel() + o.numel()) * 2,
            "ours": (lambda: decode_attention.run(art, q, k, v, o, workspace), o),
            "peers": {"torch SDPA (GQA)": peer},
            "reference": decode_attention.reference(q, k, v, torch)}


CASES = [("softmax", softmax_case), ("rmsnorm", rmsnorm_case),
         ("gemv_2048x8192", gemv_case), ("gemv_8192x2048", gemv_case),
         ("decode_attention", decode_attention_case),
         ("decode_attention_single_kernel", decode_attention_case)]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--artifacts", default="out", help="folder of the example artifacts")
    parser.add_argument("--out", default="docs/results", help="folder for kernels.json/.png")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    sys.path.insert(0, HERE)
    import torch

    import common
    from tilemega.runtime import load_artifact

    report = common.Report("kernels", args.out, copy_gbs=common.copy_bandwidth_gbs(),
                           timing="CUDA-graph replay (GPU time only), median of do_bench")
    print(f"copy bandwidth: {report.copy_gbs:.0f} GB/s; times are CUDA-graph replays")
    overhead = report.data["extra"]["launch_overhead_us"] = {}
    for name, make in CASES:
        path = os.path.join(args.artifacts, f"{name}.json")
        if not os.path.exists(path):
            report.workload(name)
            report.skip(name, "TileMega", f"no artifact {path}")
            continue
        art = load_artifact(path)
        case = make(torch, art, name)
        workload, ref = case["workload"], case["reference"]
        report.workload(workload, bytes=case["bytes"], artifact=name)
        launch, out = case["ours"]

        def check_ours(launch=launch, out=out):
            out.fill_(float("nan"))
            launch()
            torch.cuda.synchronize()
            return {"out": common.rel_l2(out, ref)}

        def time_ours(launch=launch, workload=workload):
            ms = common.bench_ms(common.graphed(launch))
            overhead[workload] = common.launch_overhead_us(launch)
            return ms

        rows = [("TileMega", "ours", check_ours, time_ours)]
        for peer, fn in case["peers"].items():
            def check_peer(fn=fn):
                got = fn()
                torch.cuda.synchronize()
                return {"out": common.rel_l2(got, ref)}
            rows.append((peer, "peer", check_peer,
                         lambda fn=fn: common.bench_ms(common.graphed(fn))))
        for impl, role, check, timer in rows:
            ms = report.row(workload, impl, check, timer, role=role,
                            tolerance=common.TOLERANCE["bfloat16"])
            print(f"{workload:52} {impl:22} "
                  + (f"{ms * 1e3:9.2f} us" if ms is not None else "  (not timed)"))
    for name, us in overhead.items():
        print(f"host launch path, tilemega.runtime: {name}: {us:.1f} us/call")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
