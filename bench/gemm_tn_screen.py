"""Screens TN 3000x5000x1234 GEMM candidates (issue 10's odd shape), a
probe rather than the benchmark: every artifact in DIR is checked against
the float64 product first (a failing one is not timed), then each and
cuBLAS are timed (CUDA-graph replay, median of do_bench) in two passes in
opposite orders, in one process. Writes DIR's name + .json to $OUT.

    PYTHONPATH=python python3 bench/gemm_tn_screen.py DIR

bench/gemm.py is the benchmark (Triton too, floors, plot); this only
ranks candidates fast (docs/benchmarks.md, "Resident grids").
"""
import glob, json, os, sys
import torch
sys.path.insert(0, "python"); sys.path.insert(0, "bench")
import common
from tilemega.runtime import load_artifact

d = sys.argv[1]
M, N, K = 3000, 5000, 1234
a = torch.randn(K, M, device="cuda", dtype=torch.bfloat16)
b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
at = a.t()
ref = at.double() @ b.double()
pre = "bench_gemm_hopper_bf16_tn_3000x5000x1234_"
impls = {}
c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
impls["cublas"] = lambda: torch.matmul(at, b, out=c)
for p in sorted(glob.glob(os.path.join(d, "*.json"))):
    art = load_artifact(p)
    impls[os.path.basename(p)[len(pre):-5]] = (lambda art=art: art(a, b, c))
ok = {}
for k, f in impls.items():
    c.fill_(float("nan")); f(); torch.cuda.synchronize()
    err = common.rel_l2(c, ref)
    ok[k] = err < 0.01
    print(f"{k:40} err {err:.4g} {'pass' if ok[k] else 'FAIL'}", flush=True)
res = common.graphed_us_two_orders({k: f for k, f in impls.items() if ok[k]})
cub = sum(res["cublas"]) / 2
for k, v in sorted(res.items(), key=lambda kv: sum(kv[1])):
    print(f"{k:40} {v[0]:7.2f} {v[1]:7.2f} us  {cub / (sum(v) / 2):.3f}x cuBLAS")
out = os.environ.get("OUT", ".")
json.dump({"run": common.run_info(), "device": torch.cuda.get_device_name(), "us": res,
           "errors_ok": ok}, open(os.path.join(out, os.path.basename(d.rstrip('/')) + ".json"), "w"), indent=1)
