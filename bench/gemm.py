"""GEMM benchmark: TileMega artifacts vs cuBLAS (torch) vs Triton, one run.

    PYTHONPATH=python python bench/gemm.py --artifacts out --out $OUT

Benchmarks every artifact whose name starts with `bench_gemm_` (built by
bench/build_artifacts.py): A is M x K, B is K x N (N x K for `_nt_`
artifacts), C is M x N in the input dtype. Times are
CUDA-graph replays (median of do_bench); inputs are random (never zeros).
"""

import argparse
import glob
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import bench_ms, device_info, graphed, write_report  # noqa: E402
import triton_matmul  # noqa: E402

from tilemega.runtime import load_artifact  # noqa: E402

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--artifacts", default="out")
    parser.add_argument("--out", default="bench_out")
    args = parser.parse_args()

    results = {"device": device_info(), "results": [],
               "timing": "CUDA-graph replay (GPU time only), median of do_bench"}
    print(f"{'workload':36} {'ours ms':>8} {'TFLOP/s':>8} {'cuBLAS':>8} {'Triton':>8} "
          f"{'vs cuBLAS':>9} {'vs Triton':>9}")
    for path in sorted(glob.glob(os.path.join(args.artifacts, "bench_gemm_*.json"))):
        art = load_artifact(path)
        (kernel,) = art.kernels.values()
        pa, pb, pc = kernel.spec.params[:3]
        dtype = DTYPES[pa.dtype]
        m, k = pa.shape
        # NT artifacts are named so (B is N x K); square shapes cannot tell.
        trans_b = "_nt_" in kernel.name
        n = pb.shape[0] if trans_b else pb.shape[1]
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(*pb.shape, device="cuda", dtype=dtype)
        c = torch.empty(m, n, device="cuda", dtype=dtype)
        flops = 2 * m * n * k
        # Correctness of the exact launch being timed.
        art(a, b, c)
        ref = (a.double() @ (b.double().t() if trans_b else b.double()))
        err = ((c.double() - ref).norm() / ref.norm()).item()
        bt = b.t() if trans_b else b
        ours = bench_ms(graphed(lambda: art(a, b, c)))
        cublas = bench_ms(graphed(lambda: torch.matmul(a, bt, out=c)))
        triton_matmul.matmul(a, b, trans_b)  # autotune outside the graph
        trit = bench_ms(graphed(lambda: triton_matmul.matmul(a, b, trans_b, out=c)))
        workload = f"{pa.dtype} {'NT' if trans_b else 'NN'} {m}x{n}x{k} [{kernel.name[11:]}]"
        tflops = flops / (ours * 1e-3) / 1e12
        for peer, t in (("cuBLAS", cublas), ("Triton", trit)):
            results["results"].append({
                "workload": workload, "artifact": kernel.name, "peer": peer,
                "ours_ms": ours, "peer_ms": t, "ratio": t / ours,
                "ours_tflops": tflops, "peer_tflops": flops / (t * 1e-3) / 1e12,
                "rel_error": err})
        print(f"{workload:36} {ours:8.4f} {tflops:8.1f} {cublas:8.4f} {trit:8.4f} "
              f"{cublas / ours:9.2f} {trit / ours:9.2f}   err {err:.1e}")
    write_report(results, args.out, "gemm")


if __name__ == "__main__":
    main()
