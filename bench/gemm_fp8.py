"""fp8 GEMM benchmark: TileMega artifacts vs torch._scaled_mm (cuBLASLt) vs
Triton (autotuned), one run.

    PYTHONPATH=python python3 bench/gemm_fp8.py --artifacts out --out docs/results

Benchmarks every artifact whose name starts with `bench_fp8_gemm_` (built by
bench/build_artifacts.py from examples/gemm_fp8.py): C = scale_a * scale_b *
(A @ B^T) with A M x K and B N x K in float8_e4m3fn, per-tensor float32
scales in one-element device tensors, C M x N bfloat16. Every
implementation writes its own NaN-poisoned C, checked against the float64
product of the same 8-bit inputs before it is timed; a row over tolerance is
FAILED, not timed, and the script exits 1. Times are CUDA-graph replays
(median of do_bench). The floor is the FLOPs at the H200's dense fp8 tensor
peak (1978.9 TFLOP/s, NVIDIA's datasheet) or the bytes at the copy rate of
the same run, whichever is larger. Writes gemm_fp8.json and gemm_fp8.png.
"""

import argparse
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
H200_DENSE_FP8_TFLOPS = 1978.9
TOLERANCE = 1e-2


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--artifacts", default="out", help="folder of bench_fp8_gemm_*.json")
    parser.add_argument("--out", default="docs/results", help="folder for gemm_fp8.json/.png")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import torch

    import build_artifacts
    import common
    import gemm_fp8
    import triton_matmul
    from tilemega.runtime import load_artifact

    paths = sorted(glob.glob(os.path.join(args.artifacts, "bench_fp8_gemm_*.json")))
    if not paths:
        print(f"no bench_fp8_gemm_*.json in {args.artifacts}: build them with "
              f"bench/build_artifacts.py", file=sys.stderr)
        return 2
    report = common.Report("gemm_fp8", args.out, copy_gbs=common.copy_bandwidth_gbs(),
                           peak_tflops=H200_DENSE_FP8_TFLOPS,
                           timing="CUDA-graph replay (GPU time only), median of do_bench")
    for path in paths:
        art = load_artifact(path)
        (kernel,) = art.kernels.values()
        cfg = gemm_fp8.config(**build_artifacts.FP8_GEMMS[kernel.name])
        m, n, k = cfg["M"], cfg["N"], cfg["K"]
        dtype = getattr(torch, gemm_fp8.DTYPES[cfg["dtype"]])
        a = torch.randn(m, k, device="cuda").to(dtype)
        b = torch.randn(n, k, device="cuda").to(dtype)
        scale_a = torch.rand(1, device="cuda") * 1.75 + 0.25
        scale_b = torch.rand(1, device="cuda") * 1.75 + 0.25
        ref = gemm_fp8.reference(a, b, scale_a, scale_b)
        workload = f"{dtype} {m}x{n}x{k} [{kernel.name[len('bench_fp8_gemm_'):]}]"
        report.workload(workload, flops=2 * m * n * k, bytes=m * k + n * k + 2 * m * n,
                        artifact=kernel.name)
        c_ours = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        c_triton = torch.empty_like(c_ours)
        triton_matmul.matmul(a, b, True, out=c_triton, scale_a=scale_a, scale_b=scale_b)
        bt = b.t()      # K x N column-major, the layout _scaled_mm takes

        def cublas(out=[None]):
            out[0] = torch._scaled_mm(a, bt, scale_a=scale_a, scale_b=scale_b,
                                      out_dtype=torch.bfloat16)
            return out[0]
        impls = [("TileMega", "ours", lambda: art(a, b, scale_a, scale_b, c_ours), c_ours),
                 ("torch._scaled_mm (cuBLASLt)", "peer", cublas, None),
                 ("Triton", "peer",
                  lambda: triton_matmul.matmul(a, b, True, out=c_triton, scale_a=scale_a,
                                               scale_b=scale_b), c_triton)]
        for name, role, launch, c in impls:
            def check(launch=launch, c=c):
                if c is not None:
                    c.fill_(float("nan"))
                got = launch()
                torch.cuda.synchronize()
                return {"C": common.rel_l2(c if c is not None else got, ref)}
            ms = report.row(workload, name, check, role=role, tolerance=TOLERANCE,
                            time=lambda launch=launch: common.bench_ms(common.graphed(launch)))
            print(f"{workload:44} {name:28} "
                  + (f"{ms:9.4f} ms" if ms is not None else "   (not timed)"))
        del ref
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
