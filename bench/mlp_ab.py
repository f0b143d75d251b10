"""A/B of builds of the MLP chain (bench/decode.py's 2048 x 8192 workload:
out = wd @ (silu(gate) * up), [gate; up] = wgu @ rmsnorm(x)) in one process:
every build checked against float64 first, then timed (do_bench, L2
flushed) in two passes of opposite order. For experiments on the MLP's
structure; bench/decode.py stays the run on record.

    python bench/mlp_ab.py build DIR [VARIANT ...]          # here: the compiler
    PYTHONPATH=python python3 bench/mlp_ab.py run DIR OUT.json NAME [NAME ...]

Variants (artifacts mlp_ab_<variant>.json; `run` also takes any artifact of
the chain's tensors, e.g. bench/decode.py's mega_mlp_fused):
  glu1, glu2      gemv_rmsnorm_glu then gemv (two tasks), one / two CTAs an SM
  splitk          ONE task: each unit streams its 32 gate and up rows, then
                  the same 32 columns of wd (wd transposed, `wdT`), and adds
                  its [2048] partial of the down projection into an f32 `out`
                  with atomics (split-K; a task before it zeroes `out`); the
                  partial in chunks of 256 columns, reduced across the warps
  rows            the same, the partial kept whole in every thread (8
                  columns a thread over all 32 rows: no cross-thread
                  reduction), one atomic add a column at the end
  splitk_na, rows_na
                  timing only: plain stores instead of the atomics (wrong
                  sums; `run` does not judge them)
docs/results/mlp_split_k_h100.json holds the measured A/B.
"""
import json
import os
import sys

H, I, R = 2048, 8192, 32      # the Llama-3.2-1B MLP; 32 rows of gate and up a unit
VARIANTS = ("glu1", "glu2", "splitk", "splitk_na", "rows", "rows_na")


def split_k_body(atomic=True, by_rows=False, threads=256, eps=1e-5):
    """The MLP as one task's body (see the module doc): args (W [2I, H],
    x [H], norm_w [H], wdT [I, H], acc [H] f32)."""
    from tilemega import language as T
    from tilemega.mega.bodies import (Access, _gemv_blocks, _rmsnorm_to_shared, _silu,
                                      gemv_config, t_body)

    BK, STAGES = gemv_config(2 * R, H, threads)
    BH = 16384 // (2 * R)          # 16 KB stages of wdT: [R, BH] or [RK, H]
    RK = 16384 // (2 * H)
    foot = (Access("read", 0, R * H, 0, R * H), Access("read", 0, R * H, I * H, R * H),
            Access("read", 1, 0, 0, H), Access("read", 2, 0, 0, H),
            Access("read", 3, R * H, 0, R * H),
            Access("write", 4, 0, 0, H))          # every unit adds into all of acc

    def add(acc_region, part):
        if atomic:
            T.atomic_add(acc_region, part)
        else:                                     # timing only
            T.copy(part, acc_region)

    def kernel(W: T.Tensor((2 * I, H), "bfloat16"), X: T.Tensor((H,), "bfloat16"),
               NW: T.Tensor((H,), "bfloat16"), WdT: T.Tensor((I, H), "bfloat16"),
               ACC: T.Tensor((H,), "float32")):
        with T.Kernel(I // R, threads=threads) as u:
            row = u * R
            xn_s = _rmsnorm_to_shared(X, NW, H, eps)
            gate, up = _gemv_blocks([row, row + I], W, H, R, BK, STAGES,
                                    lambda: (lambda kk, xc: T.copy(xn_s[kk], xc), None))
            act_s = T.alloc_shared((R,), "float32")
            for i in T.Parallel(R):
                g = T.cast(T.cast(gate[i], "bfloat16"), "float32")
                upv = T.cast(T.cast(up[i], "bfloat16"), "float32")
                act_s[i] = T.cast(T.cast(_silu(g) * upv, "bfloat16"), "float32")
            # Only the adds need the zeroed acc: x is an input of the graph.
            T.task_wait()
            if by_rows:
                lay = T.Blocked([RK, H // threads], [1, 32], [1, threads // 32])
                wd_s = T.alloc_shared((RK, H), "bfloat16")
                wf = T.alloc_fragment((RK, H), "float32", layout=lay)
                acc = T.alloc_fragment((RK, H), "float32", layout=lay)
                part = T.alloc_fragment((H,), "float32")
                T.clear(acc)
                for kk in T.Pipelined(0, R, RK, num_stages=2):
                    T.copy(WdT[row + kk, 0], wd_s)
                    T.copy(wd_s, wf)
                    for k, j in T.Parallel(RK, H):
                        acc[k, j] = acc[k, j] + wf[k, j] * act_s[kk + k]
                T.reduce_sum(acc, part, dim=0, clear=True)
                add(ACC, part)
            else:
                wd_s = T.alloc_shared((R, BH), "bfloat16")
                wf = T.alloc_fragment((R, BH), "float32")
                part = T.alloc_fragment((BH,), "float32")
                # Through shared memory: each column added once (a reduced
                # fragment's columns may sit in several threads).
                part_s = T.alloc_shared((BH,), "float32")
                for hc in T.Pipelined(0, H, BH, num_stages=2):
                    T.copy(WdT[row, hc], wd_s)
                    T.copy(wd_s, wf)
                    for k, j in T.Parallel(R, BH):
                        wf[k, j] = wf[k, j] * act_s[k]
                    T.reduce_sum(wf, part, dim=0, clear=True)
                    T.copy(part, part_s)
                    add(ACC[hc], part_s)

    name = "mlp_split_k" + ("_rows" if by_rows else "") + ("" if atomic else "_na")
    return t_body(name, kernel, I // R, foot, threads, False)


def zero_body(threads=256):
    from tilemega import language as T
    from tilemega.mega.bodies import Access, t_body

    def kernel(ACC: T.Tensor((H,), "float32")):
        with T.Kernel(1, threads=threads):
            z = T.alloc_fragment((H,), "float32")
            T.clear(z)
            T.copy(z, ACC)
    return t_body(f"zero_f32_{H}", kernel, 1, (Access("write", 0, 0, 0, H),), threads, False)


def graph(variant):
    from tilemega import mega
    from tilemega.mega.graph import Graph

    if variant in ("glu1", "glu2"):
        return mega.mlp_graph(H, I, fused_glu=True, ctas_per_sm=int(variant[-1]))
    g = Graph("mlp", threads=256, ctas_per_sm=2)
    x = g.input("x", [H])
    norm_w = g.weight("norm_w", [H])
    wgu = g.weight("wgu", [2 * I, H])
    wdT = g.weight("wdT", [I, H])
    out = g.output("out", [H], "float32")
    g._task("zero", "zero", zero_body(), [("acc", out)])
    g._task("mlp", "mlp", split_k_body(atomic=not variant.endswith("_na"),
                                       by_rows=variant.startswith("rows")),
            [("W", wgu), ("x", x), ("norm_w", norm_w), ("wdT", wdT), ("acc", out)])
    return g


def build(folder, variants):
    from tilemega.mega.artifacts import compile_graph

    for v in variants or VARIANTS:
        if v not in VARIANTS:
            raise SystemExit(f"unknown variant {v!r}: one of {', '.join(VARIANTS)}")
        print(compile_graph(graph(v), folder, name=f"mlp_ab_{v}", mega_policy="aot"))


def run(folder, out_json, names):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import common
    import torch
    from tilemega.mega import reference as ref
    from tilemega.runtime.mega import load_mega

    w = ref.make_mlp_weights(H, I, seed=0)
    expected = ref.mlp_reference_float64(w, 1e-5)
    res = {"device": torch.cuda.get_device_name(), "copy_gbs": common.copy_bandwidth_gbs(),
           "floor_us": None, "rows": {}}
    launch = {}
    for n in names:
        path = os.path.join(folder, n + ".json")
        with open(path) as f:
            params = {p["name"]: p for k in json.load(f)["kernels"] if "mega" in k
                      for p in k["mega"]["args"]}
        timing_only = n.endswith("_na")
        dtype = getattr(torch, params["out"]["dtype"])
        out = torch.full((H,), float("nan"), dtype=dtype, device="cuda")
        t = {"x": w["x"], "norm_w": w["norm_w"], "wgu": w["wgu"], "out": out}
        if "wdT" in params:
            t["wdT"] = w["wd"].t().contiguous()
        else:
            t["wd"] = w["wd"]
        mk = load_mega(path)
        mk.bind(t)
        for _ in range(3):
            mk.launch()
        mk.check()
        err = ref.compare(out.float(), expected)["rel_l2"]
        ok = timing_only or err < 0.02
        res["rows"][n] = {"rel_l2": err, "judged": not timing_only, "pass": ok, "us": []}
        print(f"{n}: rel_l2 {err:.3g}" + (" (timing only)" if timing_only else
                                          " pass" if ok else " FAILED"))
        if ok:
            launch[n] = mk
    for order in (list(launch), list(launch)[::-1]):
        for n in order:
            ms = common.bench_ms(launch[n].launch, warmup=100, rep=300)
            launch[n].check()
            res["rows"][n]["us"].append(ms * 1e3)
            print(f"{n}: {ms * 1e3:.2f} us")
    res["floor_us"] = 3 * I * H * 2 / (res["copy_gbs"] * 1e9) * 1e6
    with open(out_json, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "build":
        build(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) >= 5 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        raise SystemExit(__doc__)
