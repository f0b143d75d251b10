"""A/B of the per-task dispatch cost of several builds of the empty-task
graphs (mega_empty_<N>.json, N = 131, 1048, 4192, as bench/decode.py's
dispatch rows), in one process, the builds alternated over 5 rounds: per
build the slope of time over N (ns per task) and, times the workers, the
cost of one task on one worker. Every launch is checked (mk.check(): no
watchdog error) before and after it is timed. For experiments on the
worker loop; bench/decode.py stays the run on record.

    PYTHONPATH=python python3 bench/dispatch_ab.py OUT.json NAME=DIR [NAME=DIR ...]

docs/results/dispatch_ab_h100.json: old (the build before the pick read
the shared records on every thread), new, red (new with
bench/patches/signal_red_release.patch: no signals in these graphs)."""
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NS = (131, 1048, 4192)


def slope_ns(points):
    """Least-squares slope of [(tasks, ms)] in ns per task."""
    mn = sum(n for n, _ in points) / len(points)
    mt = sum(t for _, t in points) / len(points)
    return (sum((n - mn) * (t - mt) for n, t in points)
            / sum((n - mn) ** 2 for n, _ in points) * 1e6)


def main(argv):
    if len(argv) < 2 or any("=" not in a for a in argv[1:]):
        raise SystemExit("usage: dispatch_ab.py OUT.json NAME=DIR [NAME=DIR ...]")
    spec = importlib.util.spec_from_file_location("common", os.path.join(HERE, "common.py"))
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    import torch
    from tilemega.runtime.mega import load_mega

    out, pairs = argv[0], [a.split("=", 1) for a in argv[1:]]
    kernels, workers = {}, {}
    for name, folder in pairs:
        for n in NS:
            path = os.path.join(folder, f"mega_empty_{n}.json")
            with open(path) as f:
                workers[name] = [k["mega"]["workers"] for k in json.load(f)["kernels"]
                                 if "mega" in k][0]
            mk = load_mega(path)
            mk.bind({})
            mk.launch()
            mk.check()
            kernels[(name, n)] = mk
    times = {k: [] for k in kernels}
    for rnd in range(5):
        order = list(kernels) if rnd % 2 == 0 else list(reversed(list(kernels)))
        for key in order:
            mk = kernels[key]
            times[key].append(common.bench_ms(mk.launch, warmup=50, rep=300))
            torch.cuda.synchronize()
            mk.check()
    res = {}
    for name, _ in pairs:
        points = [(n, sorted(times[(name, n)])[2]) for n in NS]
        ns = slope_ns(points)
        res[name] = {"points_ms": points, "ns_per_task": ns,
                     "us_per_task_per_worker": ns * workers[name] / 1e3,
                     "all_ms": {str(n): times[(name, n)] for n in NS}}
        print(name, [f"{t * 1e3:.2f}us" for _, t in points], f"{ns:.2f} ns/task",
              f"{ns * workers[name] / 1e3:.3f} us/task/worker")
    res["device"] = torch.cuda.get_device_name()
    with open(out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
