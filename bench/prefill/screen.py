"""Ranks the prefill's GEMM candidates (bench/prefill/build_variants.py) and
times every kernel of the shipped prefill artifact: a probe for issue 9's
time to first token, not a benchmark (bench/generate.py is the one).

    PYTHONPATH=python python3 bench/prefill/screen.py VARIANTS_DIR PREFILL_JSON [MORE_JSON ...]

Each candidate is checked against the float64 product (+ residual) first
(a failing one is not timed), then it and cuBLAS (torch.addmm / F.linear on
the same tensors) are timed: CUDA-graph replay, median of do_bench, two
passes in opposite orders. The shipped prefill's kernels are timed on
random inputs of their shapes at the last chunk of a 512-token prompt
(rows 256-510 with chunks of 256, 0-510 with chunks of 512): where a chunk's
time goes; so are the kernels of any MORE_JSON artifacts (another build of
the prefill, or build_variants.py --row-kernels' candidates). VARIANTS_DIR
"-" skips the GEMMs. Writes $OUT/prefill_screen.json.
"""
import glob
import json
import os
import re
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, ".."))
import common  # noqa: E402
from tilemega.runtime import load_artifact  # noqa: E402

NAME = re.compile(r"pl_(\d+)x(\d+)_c(\d+)(_res)?__(\w+)\.json$")
# Launches of each prefill kernel a chunk (prefill.Prefill.chunk), by role.
# ("silu": the SiLU-mul kernel of artifacts before gate_up_silu.)
PER_CHUNK = {"embed": 1, "rmsnorm": 32, "linear": 16, "rope": 16, "attention": 16,
             "gate_up_silu": 16, "silu": 16}


def gemm_inputs(N, K, C, res):
    g = torch.Generator(device="cuda").manual_seed(N * 7 + K + C)
    a = torch.randn(C, K, device="cuda", generator=g).to(torch.bfloat16)
    w = (torch.randn(N, K, device="cuda", generator=g) / K ** 0.5).to(torch.bfloat16)
    r = torch.randn(C, N, device="cuda", generator=g).to(torch.bfloat16) if res else None
    ref = a.double() @ w.double().t()
    if res:
        ref += r.double()
    return a, w, r, ref


def screen_gemms(d):
    groups = {}
    for p in sorted(glob.glob(os.path.join(d, "pl_*.json"))):
        m = NAME.search(p)
        N, K, C, res, tag = int(m[1]), int(m[2]), int(m[3]), bool(m[4]), m[5]
        groups.setdefault((N, K, C, res), []).append((tag, p))
    rows = []
    for (N, K, C, res), cands in groups.items():
        a, w, r, ref = gemm_inputs(N, K, C, res)
        y = torch.empty(C, N, device="cuda", dtype=torch.bfloat16)
        span = torch.tensor([0, C], dtype=torch.int32, device="cuda")   # every row
        impls = {}
        if res:
            impls["cublas"] = lambda: torch.addmm(r, a, w.t(), out=y)
        else:
            impls["cublas"] = lambda: torch.mm(a, w.t(), out=y)
        for tag, p in cands:
            art = load_artifact(p)
            impls[tag] = (lambda art=art: art(a, w, r, span, y)) if res else \
                (lambda art=art: art(a, w, span, y))
        ok = {}
        for tag, f in impls.items():
            y.fill_(float("nan"))
            try:
                f()
                torch.cuda.synchronize()
                err = common.rel_l2(y, ref)
            except Exception as e:            # noqa: BLE001 - reported, not timed
                print(f"  {tag}: {e}", flush=True)
                err = float("inf")
            ok[tag] = err < 0.01
            print(f"{N}x{K} c{C}{' res' if res else ''} {tag:16} err {err:.3g}"
                  f" {'pass' if ok[tag] else 'FAIL'}", flush=True)
        us = common.graphed_us_two_orders({t: f for t, f in impls.items() if ok[t]})
        cub = sum(us["cublas"]) / 2
        flops = 2.0 * N * K * C
        for t, v in sorted(us.items(), key=lambda kv: sum(kv[1])):
            mean = sum(v) / 2
            print(f"  {t:16} {v[0]:8.2f} {v[1]:8.2f} us  {flops / mean / 1e6:6.1f} TFLOP/s"
                  f"  {cub / mean:.3f}x cuBLAS", flush=True)
        rows.append(dict(N=N, K=K, C=C, residual=res, us=us, ok=ok))
    return rows


def random_arg(p, C):
    shape, dtype = p["shape"], p["dtype"]
    if p["name"] == "span":          # the last chunk of a 512-token prompt's 511 rows
        start = 510 // C * C
        return torch.tensor([start, 511 - start], dtype=torch.int32, device="cuda")
    if dtype == "int32":
        return torch.zeros(shape, dtype=torch.int32, device="cuda")
    t = torch.randn(shape, device="cuda") * 0.1
    return t.to(getattr(torch, dtype))


def time_prefill(path):
    art = load_artifact(path)
    meta = json.load(open(path))
    rows, total = [], 0.0
    for k in meta["kernels"]:
        name = k["name"]
        C = next(p["shape"][0] for p in k["params"] if p["name"] in ("x", "y", "o", "q_out",
                                                                      "qkv", "a", "gu"))
        args = [random_arg(p, C) for p in k["params"]]
        f = art[name]
        run = common.graphed(lambda f=f, args=args: f(*args))
        us = common.bench_ms(run) * 1000
        role = next(r for r in PER_CHUNK if f"prefill_{r}" in name)
        n = PER_CHUNK[role]
        total += us * n
        rows.append(dict(kernel=name, us=us, per_chunk=n, us_per_chunk=us * n))
        print(f"{name:48} {us:8.2f} us x {n:2} = {us * n:8.1f} us a chunk", flush=True)
    print(f"sum: {total:.1f} us a chunk of the shipped prefill", flush=True)
    return rows, total


def main():
    variants, prefills = sys.argv[1], sys.argv[2:]
    out = dict(run=common.run_info(), device=torch.cuda.get_device_name())
    out["prefill_kernels"], out["prefill_us_per_chunk"] = time_prefill(prefills[0])
    # More artifacts (build_variants.py --row-kernels): their kernels' times.
    out["more_kernels"] = {p: time_prefill(p)[0] for p in prefills[1:]}
    out["gemms"] = screen_gemms(variants) if variants != "-" else []
    dest = os.path.join(os.environ.get("OUT", "."), "prefill_screen.json")
    with open(dest, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
