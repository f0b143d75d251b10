"""Timing and reporting shared by the benchmarks (runs on the GPU machine).

Every figure is the median of `triton.testing.do_bench` (CUDA events, L2
flushed between repetitions), measured in the same process as the peers it
is compared with. Needs torch, triton and the tilemega runtime (PYTHONPATH=python).
"""

import datetime
import json
import os

import torch
import triton.testing


def bench_ms(fn, warmup=25, rep=100):
    """Median milliseconds of `fn()` (asynchronous GPU work)."""
    return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep,
                                         return_mode="median"))


def graphed(fn):
    """`fn` captured in a CUDA graph: replaying it times the GPU work alone,
    without the host-side launch cost (which for kernels of tens of
    microseconds would otherwise be what is measured)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph.replay


def launch_overhead_us(fn, n=200):
    """Host microseconds per call of `fn` (launch path, no synchronisation)."""
    import time
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / n * 1e6


def copy_bandwidth_gbs(gib=2):
    """Device-to-device copy rate (read + write bytes): the practical HBM
    ceiling that memory-bound kernels are compared with."""
    n = gib * (1 << 30) // 2
    src = torch.empty(n, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src))
    return 2 * src.numel() * src.element_size() / (ms * 1e-3) / 1e9


def device_info():
    props = torch.cuda.get_device_properties(0)
    return {"name": props.name, "sms": props.multi_processor_count,
            "torch": torch.__version__, "triton": triton.__version__,
            "date": datetime.date.today().isoformat()}


def write_report(results, out_dir, stem):
    """Writes STEM.json and a ratio bar chart STEM.png into out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{stem}.json"), "w") as f:
        json.dump(results, f, indent=2)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    rows = [r for r in results["results"] if r.get("ratio") is not None]
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(rows) + 1.5))
    labels = [f"{r['workload']} vs {r['peer']}" for r in rows]
    ratios = [r["ratio"] for r in rows]
    ax.barh(labels, ratios, color=["tab:green" if x >= 1 else "tab:orange" for x in ratios])
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("speed relative to peer (peer time / TileMega time; >1 is faster)")
    ax.set_title(f"TileMega on {results['device']['name']}, {results['device']['date']}")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, f"{stem}.png"), dpi=120)
