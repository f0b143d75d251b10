"""Timeline of a mega-kernel run on the GPU: where the time of a decode step
goes, task by task.

    PYTHONPATH=python python bench/mega_timeline.py --artifacts out --out $OUT

Loads ARTIFACTS/mega_decode_timeline.json (the decode step compiled with
per-task %globaltimer stamps), binds the reference weights, runs a few
steps and writes, for the last one: timeline.png (CTA x time), a text
summary, and per task (graph order) its first start, last end and mean
instance duration, so that bubbles between stages show.
"""

import argparse
import importlib.util
import json
import os
import sys

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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifacts", default="out")
    parser.add_argument("--out", default=".")
    parser.add_argument("--name", default="mega_decode_timeline.json")
    args = parser.parse_args()
    import torch
    from types import SimpleNamespace
    from tilemega.runtime.mega import load_mega
    from tilemega.runtime import mega_timeline

    path = os.path.join(args.artifacts, args.name)
    ref = _reference()
    cfg = SimpleNamespace(layers=16, hidden=2048, intermediate=8192, heads=32, kv_heads=8,
                          head_dim=64, kv_len=1024, eps=1e-5, rope_theta=500000.0,
                          dtype="bfloat16")
    weights = ref.make_weights(cfg, seed=0)
    mk = load_mega(path)
    bound = {p.name: weights[p.name] for p in mk.user_params if p.name in weights}
    for p in mk.user_params:
        if p.name not in bound:
            bound[p.name] = torch.zeros(p.shape, dtype=torch.bfloat16, device="cuda")
    mk.bind(bound)
    for _ in range(3):
        mk.launch()
        mk.check()
    rows = mk.timeline()
    meta = mk.meta
    os.makedirs(args.out, exist_ok=True)
    summary = mega_timeline.format_summary(mega_timeline.summarize(rows, meta), meta)
    table = stage_table(rows, meta)
    lines = [summary, "", f"{'task':<28}{'n':>5}{'start us':>10}{'end us':>10}{'mean us':>9}"]
    lines += [f"{n:<28}{c:>5}{s:>10.1f}{e:>10.1f}{m:>9.2f}" for n, c, s, e, m in table]
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(args.out, "timeline.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "timeline.json"), "w") as f:
        json.dump({"rows": rows.tolist(), "stages": table}, f)
    try:
        mega_timeline.render(rows, meta, os.path.join(args.out, "timeline.png"))
    except ImportError as exc:
        print(f"no PNG: {exc}", file=sys.stderr)


if __name__ == "__main__":
    main()
