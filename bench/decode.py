"""Decode-step benchmark: our mega-kernel vs PyTorch eager and CUDA graph.

    PYTHONPATH=python python bench/decode.py --artifacts out --out $OUT

One run on the Llama-3.2-1B shape (16 layers, hidden 2048, MLP 8192, 32 q /
8 kv heads of 64, KV length 1024, bf16, batch 1, no LM head) measures:

  decode step  torch eager `LlamaDecodeStep`, the same replayed from a CUDA
               graph, our mega-kernel (launched, and replayed from a CUDA
               graph) and the same tile kernels launched one per operator
  MLP chain    rmsnorm -> gate/up -> silu * up -> down: the same four
  dispatch     graphs of N empty tasks: ns per task = slope of time over N
               (= (t(N) - t(0)) / N with the two points 0 and N)

Times are medians of do_bench (bench/common.py: CUDA events, L2 flushed
between calls); eager rows include the host launch cost, which is what eager
pays. Bandwidth = bytes read per call (weights + KV cache) / time, also as a
fraction of the device copy rate measured in the same run. Correctness: rel
L2 against the float64 reference, for torch eager too (the bf16 yardstick).
Writes decode.json and decode.png; a missing artifact or runtime skips its
rows with the reason printed.

Artifacts read from --artifacts (built on the compiler machine):
  mega_decode.json, mega_mlp.json, mega_empty_<N>.json
      mega artifacts (docs/mega.md). Graph arguments are bound by name to the
      tensors of tilemega/mega/reference.py (l0.wqkv, ..., x, rope_cos);
      "scratch" ones are the runtime's, outputs are allocated here (zeros).
      The result is the one "output" argument (else the one named `out`).
  ops_decode.launches.json, ops_mlp.launches.json
      per-operator launch lists: {"artifact": "ops_decode.json",
      "tensors": {scratch name: {"dtype": "bfloat16", "shape": [3072]}},
      "launches": [{"kernel": NAME, "args": [tensor name or number, ...]}],
      "output": "out"}
"""

import argparse
import importlib.util
import json
import os
import re
import sys
import traceback
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))

STEP, MLP = "mega_decode.json", "mega_mlp.json"
STEP_OPS, MLP_OPS = "ops_decode.launches.json", "ops_mlp.launches.json"
EMPTY = re.compile(r"mega_empty_(\d+)\.json$")
RUNTIME_BUFFERS = ("mega_tables", "mega_events", "mega_state", "mega_timeline")
LLAMA_1B = dict(layers=16, hidden=2048, intermediate=8192, heads=32, kv_heads=8,
                head_dim=64, kv_len=1024, eps=1e-5, rope_theta=500000.0, dtype="bfloat16")
EAGER, GRAPH = "torch eager", "torch CUDA graph"


class Skip(Exception):
    """A row that cannot run here; the message says why."""


def _positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--artifacts", default="out", help="folder of prebuilt artifacts")
    p.add_argument("--out", default="bench_out", help="folder for decode.json/.png")
    p.add_argument("--layers", type=_positive, default=LLAMA_1B["layers"],
                   help="layers of the decode step (the artifact must match)")
    p.add_argument("--rep-ms", type=float, default=1000.0, help="do_bench time per figure")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def config(args):
    return SimpleNamespace(**dict(LLAMA_1B, layers=args.layers))


def reference_module():
    """tilemega/mega/reference.py, loaded by file: the package's __init__ may
    import the graph builder, which needs the compiler this machine lacks."""
    import tilemega

    path = os.path.join(os.path.dirname(tilemega.__file__), "mega", "reference.py")
    spec = importlib.util.spec_from_file_location("tilemega_mega_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------ artifacts (no torch needed)


def graph_params(meta, source):
    """[(name, dtype, shape, role)] of the mega kernel's tensor graph arguments
    (its params without the runtime buffers; role None if not recorded)."""
    kernels = [k for k in meta.get("kernels", []) if "mega" in k]
    if len(kernels) != 1:
        raise Skip(f"{source}: expected one kernel with 'mega' metadata, found {len(kernels)}")
    return [(p["name"], p["dtype"], tuple(p["shape"]), p.get("role"))
            for p in kernels[0]["params"]
            if p.get("kind") == "tensor" and p["name"] not in RUNTIME_BUFFERS]


def plan_tensors(params, given, source, strict=True):
    """-> (take, allocate): the graph arguments to bind from `given` (name ->
    (dtype, shape)) and [(name, dtype, shape)] to bind as new zeros. Scratch
    is left to the runtime. Skip if a given tensor differs from the
    artifact's, or (strict) an input, weight or cache is not given: a name
    that reference.py does not produce would otherwise run on zeros."""
    take, allocate = [], []
    for name, dtype, shape, role in params:
        if role == "scratch":
            continue
        if name in given:
            have = tuple(given[name])
            if have != (dtype, shape):
                raise Skip(f"{source} was built for another shape: {name} is "
                           f"{dtype}{list(shape)} there, {have[0]}{list(have[1])} here")
            take.append(name)
        elif strict and role in ("input", "weight", "cache"):
            raise Skip(f"{source}: no tensor for {role} {name!r} here")
        else:
            allocate.append((name, dtype, shape))
    return take, allocate


def output_name(params, source):
    """The graph's result: its one "output" argument, else the one named out."""
    outputs = ([p[0] for p in params if p[3] == "output"]
               or [p[0] for p in params if p[0] == "out"])
    if len(outputs) != 1:
        raise Skip(f"{source}: cannot tell the output among {outputs or 'no arguments'}")
    return outputs[0]


def resolve_launches(spec, kernels, tensors, source):
    """[(kernel, args)] of a per-operator launch list, checking that every
    kernel is in `kernels` and every tensor name in `tensors`."""
    calls = []
    for i, launch in enumerate(spec.get("launches", [])):
        if launch.get("kernel") not in kernels:
            raise Skip(f"{source}: launches[{i}]: no kernel {launch.get('kernel')!r}")
        for arg in launch.get("args", []):
            if isinstance(arg, str) and arg not in tensors:
                raise Skip(f"{source}: launches[{i}]: no tensor {arg!r}")
        calls.append((launch["kernel"], list(launch.get("args", []))))
    if not calls:
        raise Skip(f"{source}: no launches")
    return calls


def empty_artifacts(folder):
    """[(N, file name)] of the mega_empty_<N>.json artifacts, by N."""
    names = os.listdir(folder) if os.path.isdir(folder) else []
    return sorted((int(m.group(1)), n) for n in names for m in [EMPTY.match(n)] if m)


def mlp_shape(folder, default):
    """(hidden, intermediate) of mega_mlp.json's wgu [2I, H], else `default`."""
    path = os.path.join(folder, MLP)
    if os.path.isfile(path):
        with open(path) as f:
            meta = json.load(f)
        try:
            for name, _, shape, _ in graph_params(meta, path):
                if name == "wgu":
                    return shape[1], shape[0] // 2
        except Skip:
            pass   # the mega row reports why
    return default


def empty_workers(artifacts_dir):
    """Workers of the empty-task graphs (all are built alike)."""
    for _, name in empty_artifacts(artifacts_dir):
        with open(os.path.join(artifacts_dir, name)) as f:
            for kernel in json.load(f)["kernels"]:
                if "mega" in kernel:
                    return kernel["mega"]["workers"]
    return None


def per_task_ns(points):
    """Least-squares slope of time over task count, in ns per task, from
    [(tasks, ms)]; None without two distinct counts."""
    if len({n for n, _ in points}) < 2:
        return None
    mean_n = sum(n for n, _ in points) / len(points)
    mean_t = sum(t for _, t in points) / len(points)
    cov = sum((n - mean_n) * (t - mean_t) for n, t in points)
    var = sum((n - mean_n) ** 2 for n, _ in points)
    return cov / var * 1e6


def summarize(times, nbytes, copy_gbs):
    """Per implementation: ms, speed vs eager and vs graph (their time / this
    time: > 1 is faster), GB/s read and its fraction of the copy rate."""
    eager, graph = times.get(EAGER), times.get(GRAPH)
    rows = []
    for impl, ms in times.items():
        gbs = nbytes / (ms * 1e-3) / 1e9
        rows.append({"impl": impl, "ms": ms,
                     "vs_eager": eager / ms if eager else None,
                     "vs_graph": graph / ms if graph else None,
                     "gbs": gbs, "fraction_of_copy": gbs / copy_gbs})
    return rows


def chart_rows(workload, times):
    """Rows for common.write_report: each of ours against each torch peer."""
    return [{"workload": f"{workload}: {impl}", "peer": peer, "ours_ms": ms,
             "peer_ms": times[peer], "ratio": times[peer] / ms}
            for impl, ms in times.items() if impl not in (EAGER, GRAPH)
            for peer in (EAGER, GRAPH) if peer in times]


# ------------------------------------------------ ours (GPU)


def _spec(t):
    return str(t.dtype).replace("torch.", ""), tuple(t.shape)


def _allocate(allocate, bound):
    import torch

    for name, dtype, shape in allocate:
        bound[name] = torch.zeros(shape, dtype=getattr(torch, dtype), device="cuda")
    return bound


def load_ours(artifacts_dir, tensors, name=STEP, strict=True):
    """Our mega-kernel ARTIFACTS/name bound to `tensors` -> (mk, output).

    The one place that knows the mega runtime's API: load_mega(json path) ->
    mk; mk.bind({graph argument name: tensor}) for every argument but the
    "scratch" ones, which the runtime allocates; mk.launch() (asynchronous,
    on torch's current stream); mk.check() synchronises and raises if the
    watchdog recorded an error. `output` is the result tensor (None when not
    strict); see plan_tensors for `strict`.
    """
    path = os.path.join(artifacts_dir, name)
    if not os.path.isfile(path):
        raise Skip(f"no artifact {path}")
    with open(path) as f:
        params = graph_params(json.load(f), path)
    take, allocate = plan_tensors(params, {n: _spec(t) for n, t in tensors.items()}, path,
                                  strict)
    out = output_name(params, path) if strict else None
    try:
        from tilemega.runtime.mega import load_mega
    except ImportError as exc:
        raise Skip(f"tilemega.runtime.mega is not importable: {exc}") from None
    bound = _allocate(allocate, {n: tensors[n] for n in take})
    mk = load_mega(path)
    mk.bind(bound)
    return mk, bound.get(out)


def load_per_operator(artifacts_dir, tensors, name):
    """The tile kernels launched one per operator from ARTIFACTS/name (format
    in the module docstring) -> (run, output tensor)."""
    path = os.path.join(artifacts_dir, name)
    if not os.path.isfile(path):
        raise Skip(f"no launch list {path}")
    with open(path) as f:
        spec = json.load(f)
    from tilemega.runtime import load_artifact

    art = load_artifact(os.path.join(artifacts_dir, spec["artifact"]))
    scratch = [(n, s["dtype"], tuple(s["shape"])) for n, s in spec.get("tensors", {}).items()
               if n not in tensors]
    bound = _allocate(scratch, dict(tensors))
    calls = [(art[k], [bound[a] if isinstance(a, str) else a for a in args])
             for k, args in resolve_launches(spec, art.kernels, bound, path)]

    def run():
        for kernel, args in calls:
            kernel(*args)

    run.calls = calls   # for per-kernel timing
    return run, bound[spec.get("output", "out")]


# ------------------------------------------------ the run


def main(argv=None):
    args = parse_args(argv)
    sys.path.insert(0, HERE)   # bench/common.py; not at import, which tests do
    import torch
    from common import (bench_ms, copy_bandwidth_gbs, device_info, graphed,
                        launch_overhead_us, write_report)

    ref = reference_module()
    cfg = config(args)
    copy_gbs = copy_bandwidth_gbs()
    results = {"device": device_info(), "config": vars(cfg), "copy_bandwidth_gbs": copy_gbs,
               "timing": "median of do_bench (CUDA events, L2 flushed); eager includes host "
                         "launch cost", "workloads": {}, "skipped": [], "results": [],
                         "launch_overhead_us": {}}

    def bench(fn):
        return bench_ms(fn, warmup=100, rep=args.rep_ms)

    def skip(what, reason):
        print(f"skipped {what}: {reason}")
        results["skipped"].append({"what": what, "reason": reason})

    def attempt(what, fn):
        """fn(), or None with the reason recorded (missing artifact, failure)."""
        try:
            return fn()
        except Skip as exc:
            skip(what, str(exc))
        except Exception as exc:   # a failing row must not lose the others
            traceback.print_exc()
            skip(what, f"{type(exc).__name__}: {exc}")
        return None

    def measure_ours(label, load, ref_out, times, errors):
        launch, out, check = load()
        launch()
        torch.cuda.synchronize()
        check()
        errors[label] = ref.compare(out, ref_out)
        times[label] = bench(launch)
        results["launch_overhead_us"][label] = launch_overhead_us(launch)
        torch.cuda.synchronize()
        check()
        # Optional: needs launches on torch's current stream (capturable).
        ms = attempt(f"{label} CUDA graph", lambda: bench(graphed(launch)))
        if ms is not None:
            times[f"{label} CUDA graph"] = ms
            torch.cuda.synchronize()
            check()

    def mega(tensors, name):
        mk, out = load_ours(args.artifacts, tensors, name)
        return mk.launch, out, mk.check

    def per_op(tensors, name):
        run, out = load_per_operator(args.artifacts, tensors, name)
        return run, out, lambda: None

    def workload(key, nbytes, peer_fn, ref_out, fresh, mega_name, ops_name):
        """fresh() -> the tensors for one of ours, with its own copies of those
        that a kernel writes (caches, out), so each is checked from the same state."""
        times, errors = {}, {EAGER: ref.compare(peer_fn(), ref_out)}
        times[EAGER] = bench(peer_fn)
        times[GRAPH] = bench(graphed(peer_fn))
        attempt(f"{key} mega", lambda: measure_ours(
            "mega", lambda: mega(fresh(), mega_name), ref_out, times, errors))
        # Variants of the same graph (mega_decode_<variant>.json: the JIT
        # queue for attention, other splits, ...), timeline builds excepted.
        stem = mega_name[:-len(".json")]
        for variant in sorted(os.listdir(args.artifacts)):
            m = re.fullmatch(re.escape(stem) + r"_(\w+)\.json", variant)
            if not m or m.group(1) == "timeline":
                continue
            attempt(f"{key} mega {m.group(1)}", lambda variant=variant, label=m.group(1):
                    measure_ours(f"mega ({label})", lambda: mega(fresh(), variant),
                                 ref_out, times, errors))
        attempt(f"{key} per-operator", lambda: measure_ours(
            "per-operator", lambda: per_op(fresh(), ops_name), ref_out, times, errors))
        rows = summarize(times, nbytes, copy_gbs)
        for row in rows:   # graph replays of a checked launch are not re-checked
            row.update(errors.get(row["impl"], {}))
        results["workloads"][key] = {"bytes": nbytes, "rows": rows}
        results["results"] += chart_rows(key, times)
        print(f"\n{key}: {nbytes / 1e9:.3f} GB read per call; copy rate {copy_gbs:.0f} GB/s")
        print(f"{'impl':26} {'ms':>9} {'vs eager':>9} {'vs graph':>9} {'GB/s':>7} "
              f"{'of copy':>8} {'rel L2':>9}")
        for r in rows:
            err = f"{r['rel_l2']:9.2e}" if "rel_l2" in r else f"{'-':>9}"
            print(f"{r['impl']:26} {r['ms']:9.4f} {r['vs_eager']:9.2f} {r['vs_graph']:9.2f} "
                  f"{r['gbs']:7.0f} {r['fraction_of_copy']:8.2f} {err}")

    def decode():
        w = ref.make_weights(cfg, seed=args.seed)
        step = ref.LlamaDecodeStep(cfg, w)
        workload(f"decode step {cfg.layers} layers", ref.bytes_per_step(cfg),
                 lambda: step(w["x"], w["rope_cos"], w["rope_sin"]),
                 ref.reference_float64(cfg, w),
                 lambda: {n: t.clone() if n == "x" or n.endswith("_cache") else t
                          for n, t in w.items()}, STEP, STEP_OPS)

    def layer_kernels():
        """Each per-operator kernel of layer 0 timed alone (median of CUDA
        events), against which the mega-kernel's timeline can be read."""
        w = ref.make_weights(cfg, seed=args.seed)
        run, _ = load_per_operator(args.artifacts, dict(w), STEP_OPS)
        per_layer = len(run.calls) // cfg.layers
        rows = []
        for kernel, kargs in run.calls[:per_layer]:
            ms = bench(lambda: kernel(*kargs))
            rows.append({"kernel": kernel.name, "us": ms * 1e3})
            print(f"layer-0 kernel {kernel.name:40} {ms * 1e3:8.2f} us")
        results["layer_kernels"] = rows

    def mlp():   # at the shape of mega_mlp.json, else the 1B model's
        hidden, inter = mlp_shape(args.artifacts, (cfg.hidden, cfg.intermediate))
        mw = ref.make_mlp_weights(hidden, inter, seed=args.seed)
        chain = ref.MlpChain(mw, cfg.eps)
        workload(f"MLP chain {hidden}x{inter}", ref.mlp_bytes(hidden, inter),
                 lambda: chain(mw["x"]), ref.mlp_reference_float64(mw, cfg.eps),
                 lambda: {n: t.clone() if n in ("x", "out") else t for n, t in mw.items()},
                 MLP, MLP_OPS)

    def dispatch():   # cost per task, from graphs of N empty tasks
        points = []
        for n, name in empty_artifacts(args.artifacts):
            def empty(name=name):
                mk, _ = load_ours(args.artifacts, {}, name, strict=False)
                ms = bench(mk.launch)
                torch.cuda.synchronize()
                mk.check()
                return ms
            ms = attempt(f"dispatch {name}", empty)
            if ms is not None:
                points.append((n, ms))
                print(f"dispatch: {n:6d} empty tasks {ms * 1e3:9.1f} us")
        if not points:
            skip("dispatch", f"no usable mega_empty_<N>.json in {args.artifacts}")
        ns = per_task_ns(points)
        results["dispatch"] = {"points_tasks_ms": points, "ns_per_task": ns}
        if ns is not None:
            # Tasks spread over all workers: one worker pays `workers` times
            # the slope per task it runs.
            workers = empty_workers(args.artifacts)
            results["dispatch"]["workers"] = workers
            results["dispatch"]["ns_per_task_per_worker"] = ns * workers if workers else None
            print(f"dispatch: {ns:.1f} ns per task (slope); "
                  f"{ns * workers / 1e3:.2f} us per task on one of {workers} workers")

    try:   # whatever was measured is written, even if a later part fails
        for part in (decode, layer_kernels, mlp, dispatch):
            attempt(part.__name__, part)
    finally:
        write_report(results, args.out, "decode")


if __name__ == "__main__":
    main()
