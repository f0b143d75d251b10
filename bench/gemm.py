"""GEMM benchmark: TileMega artifacts vs cuBLAS (torch) vs Triton, one run.

    PYTHONPATH=python python3 bench/gemm.py --artifacts out --out docs/results

Benchmarks every artifact whose name starts with `bench_gemm_` (built by
bench/build_artifacts.py): A is M x K (K x M for `_tn_` / `_tt_`
artifacts), B is K x N (N x K for `_nt_` / `_tt_` artifacts), C is M x N in
the input dtype; the peers read the same storage (transposed views). Every implementation writes its
own NaN-poisoned C, which is checked against the float64 product of the same
inputs before it is timed; a row over tolerance is FAILED, not timed, and
the script exits 1. Times are CUDA-graph replays (median of do_bench);
inputs are random (never zeros). Writes gemm.json and gemm.png (each time
beside the floor: FLOPs at the H200's dense tensor peak, or bytes at the
copy rate of the same run, whichever is larger).
"""

import argparse
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = ("float16", "bfloat16")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--artifacts", default="out", help="folder of bench_gemm_*.json")
    parser.add_argument("--out", default="docs/results", help="folder for gemm.json/.png")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    sys.path.insert(0, HERE)
    import torch

    import common
    import triton_matmul
    from tilemega.runtime import load_artifact

    paths = sorted(glob.glob(os.path.join(args.artifacts, "bench_gemm_*.json")))
    if not paths:
        print(f"no bench_gemm_*.json in {args.artifacts}: build them with "
              f"bench/build_artifacts.py", file=sys.stderr)
        return 2
    report = common.Report("gemm", args.out, copy_gbs=common.copy_bandwidth_gbs(),
                           timing="CUDA-graph replay (GPU time only), median of do_bench")
    for path in paths:
        art = load_artifact(path)
        (kernel,) = art.kernels.values()
        pa, pb, _ = kernel.spec.params[:3]
        if pa.dtype not in DTYPES:
            raise ValueError(f"{path}: A is {pa.dtype}, expected one of {DTYPES}")
        dtype = getattr(torch, pa.dtype)
        # The layout is in the name (_nn_, _nt_, _tn_, _tt_: A, then B, "t"
        # stored transposed); square shapes cannot tell.
        trans_a = any(f"_t{x}_" in kernel.name for x in "nt")
        trans_b = any(f"_{x}t_" in kernel.name for x in "nt")
        k, m = pa.shape if trans_a else pa.shape[::-1]
        n = pb.shape[0] if trans_b else pb.shape[1]
        a = torch.randn(*pa.shape, device="cuda", dtype=dtype)
        b = torch.randn(*pb.shape, device="cuda", dtype=dtype)
        at = a.t() if trans_a else a
        bt = b.t() if trans_b else b
        ref = at.double() @ bt.double()
        form = ("T" if trans_a else "N") + ("T" if trans_b else "N")
        workload = f"{pa.dtype} {form} {m}x{n}x{k} [{kernel.name[11:]}]"
        report.workload(workload, flops=2 * m * n * k,
                        bytes=(m * k + b.numel() + m * n) * a.element_size(),
                        artifact=kernel.name)
        tolerance = common.TOLERANCE[pa.dtype]
        c_ours = torch.empty(m, n, device="cuda", dtype=dtype)
        c_cublas = torch.empty_like(c_ours)
        c_triton = torch.empty_like(c_ours)
        triton_matmul.matmul(at, b, trans_b, out=c_triton)   # autotune outside any graph
        impls = [("TileMega", "ours", lambda: art(a, b, c_ours), c_ours),
                 ("cuBLAS (torch.matmul)", "peer",
                  lambda: torch.matmul(at, bt, out=c_cublas), c_cublas),
                 ("Triton", "peer", lambda: triton_matmul.matmul(at, b, trans_b, out=c_triton),
                  c_triton)]
        for name, role, launch, c in impls:
            def check(launch=launch, c=c):
                c.fill_(float("nan"))
                launch()
                torch.cuda.synchronize()
                return {"C": common.rel_l2(c, ref)}
            ms = report.row(workload, name, check, role=role, tolerance=tolerance,
                            time=lambda launch=launch: common.bench_ms(common.graphed(launch)))
            print(f"{workload:44} {name:24} "
                  + (f"{ms:9.4f} ms" if ms is not None else "   (not timed)"))
        del ref
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
