"""Where the standalone MLP chain's time goes: bench/decode.py's 2048 x 8192
chain in the persistent kernel's generation form (mlp_graph(fused_glu=True,
ctas_per_sm=2), `mega (fused)` there), compiled with per-entry
%globaltimer stamps, beside the same build without them.

    python bench/mlp_timeline.py build DIR                             # compiler machine
    PYTHONPATH=python python3 bench/mlp_timeline.py run DIR --out OUT  # GPU machine

`build` writes DIR/mega_mlp_fused.* (what examples/mega_decode.py ships)
and DIR/mega_mlp_fused_timeline.*. `run` checks both against the float64
reference (a build over bench/decode.py's tolerance is FAILED, nothing of
it is timed, and the script exits 1), times both as bench/decode.py does
(do_bench, L2 flushed: the launch's whole time, start and exit included),
then launches the timeline build once more and writes OUT/mlp_timeline.json:
per task its instances, first start, last end, mean instance time and the
spread of its starts and ends; the kernel's span (first start to last end)
beside the launch's time, whose difference is what the launch, the CTAs'
start and the kernel's exit cost.
"""
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PLAIN, STAMPED = "mega_mlp_fused", "mega_mlp_fused_timeline"


def _decode_bench():
    """bench/decode.py by file (its artifact binding, reference and tolerance)."""
    spec = importlib.util.spec_from_file_location("tilemega_bench_decode",
                                                  os.path.join(HERE, "decode.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(out):
    from tilemega import mega
    from tilemega.mega.artifacts import compile_graph

    # examples/mega_decode.py's mega_mlp_fused, with and without stamps.
    graph = mega.mlp_graph(fused_glu=True, ctas_per_sm=2)
    for name, stamps in ((PLAIN, False), (STAMPED, True)):
        print("built", compile_graph(graph, out, name=name, mega_timeline=stamps))


def _spread(values):
    ordered = sorted(values)

    def at(q):
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    return {"p10": at(0.1), "p50": at(0.5), "p90": at(0.9), "max": ordered[-1]}


def summarize(meta, rows):
    """Per task (graph order) of one launch's timeline rows (start_ns,
    end_ns, cta, sm), times in us from the first start."""
    names = [t["name"] for t in meta["tasks"]]
    task_of = meta["entries"]["task"]
    t0 = min(int(r[0]) for r in rows)
    per = {}
    for e, r in enumerate(rows):
        per.setdefault(task_of[e], []).append(((int(r[0]) - t0) / 1e3, (int(r[1]) - t0) / 1e3))
    tasks = []
    for t in sorted(per):
        starts, ends = [s for s, _ in per[t]], [e for _, e in per[t]]
        tasks.append({"task": names[t], "instances": len(per[t]),
                      "first_start_us": min(starts), "last_end_us": max(ends),
                      "mean_us": sum(e - s for s, e in per[t]) / len(per[t]),
                      "start_us": _spread(starts), "end_us": _spread(ends)})
    span = max(int(r[1]) for r in rows) - t0
    return {"span_us": span / 1e3, "tasks": tasks}


def run(folder, out):
    import torch

    dec = _decode_bench()
    common = dec.common
    ref = dec.reference_module()
    weights = ref.make_mlp_weights(2048, 8192, seed=0)
    expected = ref.mlp_reference_float64(weights, 1e-5)
    doc = {"run": common.run_info(), "tolerance": dec.MLP_TOLERANCE, "builds": {}}
    kernels = {}
    for name in (PLAIN, STAMPED):
        tensors = {k: v.clone() for k, v in weights.items()}
        mk, result = dec.load_ours(folder, tensors, name + ".json")
        mk.launch()
        mk.check()
        error = ref.compare(result, expected)["rel_l2"]
        verdict = "pass" if error <= dec.MLP_TOLERANCE else "FAILED"
        doc["builds"][name] = {"error": error, "verdict": verdict}
        if verdict != "pass":
            continue
        ms = common.bench_ms(mk.launch, warmup=100, rep=1000)
        mk.check()
        doc["builds"][name]["us"] = ms * 1e3
        kernels[name] = mk
        print(f"{name}: {ms * 1e3:.2f} us (error {error:.3g})")
    if STAMPED in kernels:
        mk = kernels[STAMPED]
        mk.launch()
        table = summarize(mk.meta, mk.timeline())
        table["launch_us"] = doc["builds"][STAMPED]["us"]
        table["outside_span_us"] = table["launch_us"] - table["span_us"]
        doc["timeline"] = table
        print(f"span {table['span_us']:.2f} us of a {table['launch_us']:.2f} us launch")
        for t in table["tasks"]:
            print(f"  {t['task']:12} n={t['instances']:4} start {t['first_start_us']:7.2f}"
                  f" (p50 {t['start_us']['p50']:6.2f}) end p50 {t['end_us']['p50']:7.2f}"
                  f" last {t['last_end_us']:7.2f} mean {t['mean_us']:6.2f}")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "mlp_timeline.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return 0 if all(b["verdict"] == "pass" for b in doc["builds"].values()) else 1


def main(argv):
    if len(argv) >= 2 and argv[0] == "build":
        return build(argv[1])
    if len(argv) == 4 and argv[0] == "run" and argv[2] == "--out":
        return run(argv[1], argv[3])
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]) or 0)
