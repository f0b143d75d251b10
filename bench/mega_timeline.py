"""Timeline of a mega-kernel run on the GPU: where the time of a decode step
goes, task by task.

    PYTHONPATH=python python3 bench/mega_timeline.py --artifacts out --out docs/results

Loads ARTIFACTS/mega_decode_timeline.json (the decode step compiled with
per-task %globaltimer stamps) and binds the reference weights. The first
step runs from the pristine caches and its output is checked against the
float64 reference (a step over tolerance is FAILED, its timeline is not
recorded, and the script exits 1); then a few steps run and, for the last
one, it writes mega_timeline.json (the run's provenance, the step's span
and per task in graph order its first start, last end and mean instance
duration, so that bubbles between stages show), mega_timeline.png (the span
beside the bytes / copy-rate floor), mega_timeline-tasks.png (CTA x time)
and mega_timeline.txt (a text summary).

With ARTIFACTS/ops_decode.launches.json (the same bodies as tile kernels,
one launch per operator), it also writes the per-body table: each body's
stage in the persistent kernel (mean over the layers of its span, first
start to last end, and of its period, first start to the next stage's
first start) beside the same kernel standalone (a CUDA graph of its 16
launches, one a layer, each on its own layer's weights: the time per
launch, the gap between graph nodes included, as the period includes the
boundary).
"""

import argparse
import importlib.util
import os
import sys
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))


def _reference():
    path = os.path.join(HERE, "..", "python", "tilemega", "mega", "reference.py")
    spec = importlib.util.spec_from_file_location("mega_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stage_table(rows, meta):
    """Per task in graph order: (name, instances, first start, last end, mean
    duration), times in us from the step's first start."""
    origin = min(int(r[0]) for r in rows if r[1] > 0)
    tasks = meta["tasks"]
    per_task = {}
    for e, (start, end, _, _) in enumerate(rows):
        if end <= 0:
            continue
        per_task.setdefault(meta["entries"]["task"][e], []).append((start - origin, end - origin))
    table = []
    for t, spans in sorted(per_task.items()):
        starts, ends = [s for s, _ in spans], [e for _, e in spans]
        mean = sum(e - s for s, e in spans) / len(spans)
        table.append((tasks[t]["name"], len(spans), min(starts) / 1e3, max(ends) / 1e3, mean / 1e3))
    return table


def stage_periods(table, per_layer):
    """{position in the layer: (mean span us, mean period us, layers)} over
    the layers: task k of a layer is position k % per_layer (graph order);
    the period runs to the next task's first start (the last task has
    none)."""
    acc = {}
    for i, (_, _, start, end, _) in enumerate(table):
        period = table[i + 1][2] - start if i + 1 < len(table) else None
        spans, periods = acc.setdefault(i % per_layer, ([], []))
        spans.append(end - start)
        if period is not None:
            periods.append(period)
    return {k: (sum(sp) / len(sp), sum(pe) / len(pe) if pe else float("nan"), len(sp))
            for k, (sp, pe) in acc.items()}


def standalone_bodies(artifacts, tensors, torch, common):
    """[(kernel, launches, us per launch)] in first-launch order: each kernel
    of ops_decode.launches.json timed as a CUDA graph of all its launches."""
    import json

    import decode
    spec_path = os.path.join(artifacts, "ops_decode.launches.json")
    if not os.path.isfile(spec_path):
        return []
    with open(spec_path) as f:
        names = [launch["kernel"] for launch in json.load(f)["launches"]]
    run, _ = decode.load_per_operator(artifacts, tensors, "ops_decode.launches.json")
    groups = {}
    for name, call in zip(names, run.calls):
        groups.setdefault(name, []).append(call)
    out = []
    for name, calls in groups.items():
        def launch_all(calls=calls):
            for kernel, kargs in calls:
                kernel(*kargs)
        replay = common.graphed(launch_all)
        out.append((name, len(calls), common.bench_ms(replay) * 1e3 / len(calls)))
    torch.cuda.synchronize()
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifacts", default="out")
    parser.add_argument("--out", default="docs/results")
    parser.add_argument("--name", default="mega_decode_timeline.json")
    args = parser.parse_args(argv)
    sys.path.insert(0, HERE)
    import torch

    import common
    from tilemega.runtime import mega_timeline
    from tilemega.runtime.mega import load_mega

    path = os.path.join(args.artifacts, args.name)
    ref = _reference()
    cfg = SimpleNamespace(layers=16, hidden=2048, intermediate=8192, heads=32, kv_heads=8,
                          head_dim=64, kv_len=1024, eps=1e-5, rope_theta=500000.0,
                          dtype="bfloat16")
    weights = ref.make_weights(cfg, seed=0)
    expected = ref.reference_float64(cfg, weights)   # before any step writes the caches
    report = common.Report("mega_timeline", args.out, copy_gbs=common.copy_bandwidth_gbs(),
                           timing="span of one step from its %globaltimer stamps (first task "
                                  "start to last task end; launch not included)")
    workload = f"decode step {cfg.layers} layers, timeline build"
    report.workload(workload, bytes=ref.bytes_per_step(cfg), artifact=args.name)
    box = {}

    def check():
        if not os.path.isfile(path):
            raise common.Skip(f"no artifact {path}")
        mk = load_mega(path)
        bound = {p.name: weights[p.name] for p in mk.user_params if p.name in weights}
        for p in mk.user_params:
            if p.name not in bound:
                bound[p.name] = torch.zeros(p.shape, dtype=torch.bfloat16, device="cuda")
        mk.bind(bound)
        mk.launch()
        mk.check()
        output = next(p.name for p in mk.user_params if p.role == "output")
        box["mk"] = mk
        return {"out": ref.compare(bound[output], expected)["rel_l2"]}

    def time():
        mk = box["mk"]
        for _ in range(3):
            mk.launch()
            mk.check()
        box["rows"] = rows = mk.timeline()
        box["summary"] = mega_timeline.summarize(rows, mk.meta)
        return box["summary"].span_ns * 1e-6

    report.row(workload, "mega (timeline)", check, time, tolerance=3e-2)
    if "rows" in box:
        rows, meta = box["rows"], box["mk"].meta
        table = stage_table(rows, meta)
        report.data["extra"]["stages"] = [
            {"task": n, "instances": c, "start_us": s, "end_us": e, "mean_us": m}
            for n, c, s, e, m in table]
        lines = [mega_timeline.format_summary(box["summary"], meta), "",
                 f"{'task':<28}{'n':>5}{'start us':>10}{'end us':>10}{'mean us':>9}"]
        lines += [f"{n:<28}{c:>5}{s:>10.1f}{e:>10.1f}{m:>9.2f}" for n, c, s, e, m in table]
        text = "\n".join(lines)
        print(text)
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "mega_timeline.txt"), "w") as f:
            f.write(text + "\n")
        try:
            mega_timeline.render(rows, meta, os.path.join(args.out, "mega_timeline-tasks.png"))
        except ImportError as exc:
            print(f"no task PNG: {exc}")
        # The per-body table (after the timeline: the kernels write the caches).
        bodies = standalone_bodies(args.artifacts, weights, torch, common)
        if bodies:
            periods = stage_periods(table, len(bodies))
            report.data["extra"]["bodies"] = [
                {"body": table[k][0].split("_", 2)[-1], "kernel": name, "launches": n,
                 "standalone_us": us, "mega_span_us": periods[k][0],
                 "mega_period_us": periods[k][1], "period_vs_standalone": periods[k][1] / us}
                for k, (name, n, us) in enumerate(bodies)]
            print(f"{'body':<14}{'kernel':<36}{'alone us':>9}{'span us':>9}{'period us':>10}")
            for b in report.data["extra"]["bodies"]:
                print(f"{b['body']:<14}{b['kernel']:<36}{b['standalone_us']:>9.2f}"
                      f"{b['mega_span_us']:>9.2f}{b['mega_period_us']:>10.2f}")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
