"""Decode-step benchmark: our mega-kernel vs PyTorch eager and CUDA graph.

    PYTHONPATH=python python3 bench/decode.py --artifacts out --out docs/results

One run on the Llama-3.2-1B shape (16 layers, hidden 2048, MLP 8192, 32 q /
8 kv heads of 64, KV length 1024, bf16, batch 1, no LM head) measures:

  decode step  torch eager `LlamaDecodeStep`, the same replayed from a CUDA
               graph, the same through torch.compile (max-autotune, inductor's
               autotuned kernels) replayed from a CUDA graph, our mega-kernel
               (launched, and replayed from a CUDA graph), its variants (mega_decode_<variant>.json) and the same
               tile kernels launched one per operator (and from a CUDA graph)
  MLP chain    rmsnorm -> gate/up -> silu * up -> down: the same rows
  dispatch     graphs of N empty tasks: ns per task = slope of time over N
  dispatch_waited  the same with each task waiting for one event that fired
               at the start (the least an entry of a real graph pays: its
               wait's acquire round trip)
  floor        one 1-element kernel from a CUDA graph: what the timing
               charges a kernel that does nothing (extra.launch_floor_us)

--parts picks some of them; --flush zero,read,none times every row under
each L2 flush of common.FLUSH_MODES, the first giving the rows (default
zero, do_bench's own) and the others extra.flush_us.

Every row is checked before it is timed, from a pristine state: the caches
(whose last position the step writes) and x are fresh copies of the ones
made before any row ran, so no row can pass on what another row wrote. The
check compares the output with the float64 reference and, for the decode
step, every layer's written k/v cache row with the float64 one, and that the
other cache positions are untouched. A row over tolerance is FAILED, not
timed, and the script exits 1. Times are medians of do_bench (CUDA events,
L2 flushed by writing 256 MB; see --flush); eager rows include the host launch cost, which is what eager
pays. The floor is bytes read per call (weights + KV cache) / the device
copy rate measured in the same run. Writes decode.json and decode.png; a
missing artifact skips its rows with the reason printed.

Artifacts read from --artifacts (built on the compiler machine):
  mega_decode.json, mega_mlp.json, mega_empty_<N>.json, mega_empty_waited_<N>.json
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
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_common():
    """bench/common.py by file: tests import this module, and importing it
    must not change sys.path."""
    spec = importlib.util.spec_from_file_location("tilemega_bench_common",
                                                  os.path.join(HERE, "common.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


common = _load_common()

STEP, MLP = "mega_decode.json", "mega_mlp.json"
STEP_OPS, MLP_OPS = "ops_decode.launches.json", "ops_mlp.launches.json"
EMPTY = re.compile(r"mega_empty_(\d+)\.json$")
# Empty tasks that each wait for an event fired at the start
# (artifacts.waited_empty_graph): the dispatch with one satisfied wait.
EMPTY_WAITED = re.compile(r"mega_empty_waited_(\d+)\.json$")
LLAMA_1B = dict(layers=16, hidden=2048, intermediate=8192, heads=32, kv_heads=8,
                head_dim=64, kv_len=1024, eps=1e-5, rope_theta=500000.0, dtype="bfloat16")
EAGER, GRAPH = "torch eager", "torch CUDA graph"
# The module through torch.compile(mode="max-autotune-no-cudagraphs",
# fullgraph=True), its launches captured in a CUDA graph as every graph row.
COMPILED = "torch.compile (max-autotune) CUDA graph"


Skip = common.Skip   # a row that cannot run here; the message says why
# Relative L2 tolerances against float64, as examples/run_mega.py and
# test_mega_gpu.py use: bf16 through 16 layers (torch eager in bf16 itself
# is at 1.7e-2). A missing cache write leaves a row of zeros: error 1.
STEP_TOLERANCE, MLP_TOLERANCE = 3e-2, 2e-2
def _positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--artifacts", default="out", help="folder of prebuilt artifacts")
    p.add_argument("--out", default="docs/results", help="folder for decode.json/.png")
    p.add_argument("--layers", type=_positive, default=LLAMA_1B["layers"],
                   help="layers of the decode step (the artifact must match)")
    p.add_argument("--rep-ms", type=float, default=1000.0, help="do_bench time per figure")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-torch-compile", dest="torch_compile", action="store_false",
                   help=f"skip the {COMPILED!r} rows (their compile autotunes for minutes)")
    p.add_argument("--flush", type=_flush_modes, default=["zero"],
                   help="comma-separated L2 flushes (common.FLUSH_MODES): the "
                        "first times the rows, the others go to extra's flush_us")
    p.add_argument("--parts", type=_parts, default=list(PARTS),
                   help=f"comma-separated subset of {','.join(PARTS)}")
    return p.parse_args(argv)


PARTS = ("decode", "mlp", "dispatch", "dispatch_waited", "floor")


def _choices(text, allowed, what):
    chosen = [c for c in text.split(",") if c]
    bad = [c for c in chosen if c not in allowed]
    if bad or not chosen or len(set(chosen)) != len(chosen):
        raise argparse.ArgumentTypeError(
            f"{what}: {text!r} is not a comma-separated subset of {','.join(allowed)}")
    return chosen


def _flush_modes(text):
    return _choices(text, common.FLUSH_MODES, "--flush")


def _parts(text):
    return _choices(text, PARTS, "--parts")


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
    """[(name, dtype, shape, role)] of the mega kernel's graph tensors (the
    tensors of its `mega.args`, reached through the argument table; role
    None if not recorded)."""
    kernels = [k for k in meta.get("kernels", []) if "mega" in k]
    if len(kernels) != 1:
        raise Skip(f"{source}: expected one kernel with 'mega' metadata, found {len(kernels)}")
    return [(p["name"], p["dtype"], tuple(p["shape"]), p.get("role"))
            for p in kernels[0]["mega"].get("args", [])
            if p.get("kind") == "tensor"]


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


def empty_artifacts(folder, pattern=EMPTY):
    """[(N, file name)] of the mega_empty_<N>.json artifacts (or those
    `pattern` matches, its group 1 the task count), by N."""
    names = os.listdir(folder) if os.path.isdir(folder) else []
    return sorted((int(m.group(1)), n) for n in names for m in [pattern.match(n)] if m)


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


def empty_workers(artifacts_dir, pattern=EMPTY):
    """Workers of the empty-task graphs (all are built alike)."""
    for _, name in empty_artifacts(artifacts_dir, pattern):
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


def expected_step(ref, cfg, weights):
    """float64 (final x, {"l<i>.k_cache": row, "l<i>.v_cache": row}): the rows
    a step writes at position kv_len - 1, numpy [kv_heads, head_dim].

    The same layer loop as ref.reference_float64, which keeps the rows it
    writes to itself; main() checks that both give the same x, so the two
    cannot drift apart unnoticed."""
    import math

    import numpy as np

    hq, hkv, d = cfg.heads, cfg.kv_heads, cfg.head_dim
    pos = cfg.kv_len - 1
    x = ref._f64(weights["x"])
    cos, sin = ref._f64(weights["rope_cos"]), ref._f64(weights["rope_sin"])
    rows = {}
    for layer in range(cfg.layers):
        def w(name, prefix=f"l{layer}."):
            return ref._f64(weights[prefix + name])

        qkv = w("wqkv") @ ref._rmsnorm64(x, w("attn_norm"), cfg.eps)
        q, k, v = np.split(qkv, [hq * d, (hq + hkv) * d])
        q = ref._rope64(q.reshape(hq, d), cos, sin)
        kc, vc = w("k_cache"), w("v_cache")
        kc[:, pos] = rows[f"l{layer}.k_cache"] = ref._rope64(k.reshape(hkv, d), cos, sin)
        vc[:, pos] = rows[f"l{layer}.v_cache"] = v.reshape(hkv, d)
        scores = np.einsum("kgd,kld->kgl", q.reshape(hkv, hq // hkv, d), kc) / math.sqrt(d)
        p = np.exp(scores - scores.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        x = x + w("wo") @ np.einsum("kgl,kld->kgd", p, vc).reshape(hq * d)
        x = x + w("wd") @ ref._silu_mul64(w("wgu") @ ref._rmsnorm64(x, w("mlp_norm"), cfg.eps))
    return x, rows


class State:
    """The tensors of one workload and the pristine copies of those a step
    writes (`written`), taken before any row runs."""

    def __init__(self, tensors, written):
        self.tensors, self.written = tensors, written
        self.pristine = {n: tensors[n].clone() for n in written}

    def fresh(self):
        """The tensors, with new copies of the pristine written ones."""
        return {n: self.pristine[n].clone() if n in self.pristine else t
                for n, t in self.tensors.items()}

    def reset(self, tensors):
        """Restores the written tensors of `tensors` in place (a captured
        CUDA graph keeps reading the same storage)."""
        for n in self.written:
            tensors[n].copy_(self.pristine[n])


def decode_judge(ref, cfg, state, expected_out, expected_rows):
    """judge(tensors, out) -> {check: rel L2}: the output, the worst layer's
    written k and v rows, and the worst change to the positions not written."""
    pos = cfg.kv_len - 1

    def judge(tensors, out):
        errors = {"out": ref.compare(out, expected_out)["rel_l2"]}
        for kind in ("k_cache", "v_cache"):
            written, kept = 0.0, 0.0
            for layer in range(cfg.layers):
                name = f"l{layer}.{kind}"
                written = max(written, ref.compare(tensors[name][:, pos],
                                                   expected_rows[name])["rel_l2"],
                              key=_nan_high)
                kept = max(kept, ref.compare(tensors[name][:, :pos],
                                             state.pristine[name][:, :pos])["rel_l2"],
                           key=_nan_high)
            errors[f"{kind}[{pos}] written (worst layer)"] = written
            errors[f"{kind}[:{pos}] untouched (worst layer)"] = kept
        return errors

    return judge


def _compiled(module):
    """`module` through torch.compile as the COMPILED rows run it (a fresh
    compile each: the tensors are the module's attributes)."""
    import torch

    return torch.compile(module, mode="max-autotune-no-cudagraphs", fullgraph=True)


def _nan_high(value):
    return float("inf") if value != value else value


def main(argv=None):
    args = parse_args(argv)
    import torch

    ref = reference_module()
    cfg = config(args)
    report = common.Report("decode", args.out, copy_gbs=common.copy_bandwidth_gbs(),
                           timing=f"median of CUDA event pairs, L2 flush {args.flush[0]!r} "
                                  "(common.FLUSH_MODES; 'zero' is do_bench); eager rows "
                                  "include the host launch cost")
    extra = report.data["extra"]
    extra.update(config=vars(cfg), launch_overhead_us={})

    def bench(fn, flush=args.flush[0]):
        return common.bench_ms(fn, warmup=100, rep=args.rep_ms, flush=flush)

    def other_flushes(label, fn):
        """fn timed under the other --flush modes, into extra's flush_us."""
        for mode in args.flush[1:]:
            extra.setdefault("flush_us", {}).setdefault(label, {})[mode] = \
                bench(fn, mode) * 1e3

    def checked(make, graph, label):
        """(check, time) of one row. make() -> (run, tensors, after): run()
        launches once from `tensors` (fresh) and returns the output; after()
        raises if the launch recorded an error (the mega watchdog)."""
        state = {}

        def check():
            run, tensors, after = make()
            if graph:
                replay, out = common.graphed(run, with_output=True)
                after()
                state["reset"](tensors)   # the warm-up runs wrote the caches
                replay()
                state["fn"] = replay
            else:
                out, state["fn"] = run(), run
            torch.cuda.synchronize()
            after()
            state["after"] = after
            return state["judge"](tensors, out)

        def time():
            ms = bench(state["fn"])
            other_flushes(label, state["fn"])
            torch.cuda.synchronize()
            state["after"]()
            return ms

        return check, time, state

    def workload(key, nbytes, state, judge, tolerance, eager, mega_name, ops_name):
        """All rows of one workload. eager(tensors, compiled=False) -> run
        (compiled: the module through torch.compile); the others come from
        the artifacts."""
        report.workload(key, bytes=nbytes)

        def row(impl, make, graph=False, role="ours", overhead=False):
            check, timer, box = checked(make, graph, f"{key}: {impl}")
            box.update(judge=judge, reset=state.reset)
            if overhead:
                def timed():
                    ms = timer()
                    extra["launch_overhead_us"][f"{key}: {impl}"] = \
                        common.launch_overhead_us(box["fn"])
                    box["after"]()
                    return ms
            else:
                timed = timer
            ms = report.row(key, impl, check, timed, tolerance=tolerance, role=role)
            print(f"{key}: {impl:32} " + (f"{ms:9.4f} ms" if ms is not None
                                          else "(not timed)"))

        def torch_make():
            tensors = state.fresh()
            return eager(tensors), tensors, lambda: None

        def compiled_make():
            import time as _time

            tensors = state.fresh()
            run = eager(tensors, compiled=True)
            start = _time.perf_counter()
            run()   # compiles (and autotunes) here, not in the capture's warm-up
            torch.cuda.synchronize()
            extra.setdefault("torch_compile_s", {})[key] = round(
                _time.perf_counter() - start, 1)
            state.reset(tensors)
            return run, tensors, lambda: None

        def mega_make(name):
            def make():
                tensors = state.fresh()
                mk, out = load_ours(args.artifacts, tensors, name)

                def run():
                    mk.launch()
                    return out
                return run, tensors, mk.check
            return make

        def ops_make():
            tensors = state.fresh()
            run, out = load_per_operator(args.artifacts, tensors, ops_name)

            def launch():
                run()
                return out
            return launch, tensors, lambda: None

        row(EAGER, torch_make, role="peer")
        row(GRAPH, torch_make, graph=True, role="peer")
        if args.torch_compile:
            row(COMPILED, compiled_make, graph=True, role="peer")
        else:
            report.skip(key, COMPILED, "--no-torch-compile", role="peer")
        row("mega", mega_make(mega_name), overhead=True)
        row("mega CUDA graph", mega_make(mega_name), graph=True)
        # Variants of the same graph (mega_decode_<variant>.json: the JIT
        # queue for attention, other splits, ...), timeline builds excepted.
        stem = mega_name[:-len(".json")]
        for variant in sorted(os.listdir(args.artifacts)) if os.path.isdir(args.artifacts) else []:
            m = re.fullmatch(re.escape(stem) + r"_(\w+)\.json", variant)
            if m and m.group(1) != "timeline":
                row(f"mega ({m.group(1)})", mega_make(variant))
        row("per-operator launches", ops_make, overhead=True)
        row("per-operator CUDA graph", ops_make, graph=True)
        times = {r["implementation"]: r["ms"] for r in report.data["rows"]
                 if r["workload"] == key and r["verdict"] == common.PASS}
        if EAGER in times and GRAPH in times:
            for r in summarize(times, nbytes, report.copy_gbs):
                print(f"  {r['impl']:32} {r['ms']:9.4f} ms  {r['vs_eager']:6.2f}x eager  "
                      f"{r['vs_graph']:6.2f}x graph  {r['gbs']:6.0f} GB/s  "
                      f"{r['fraction_of_copy']:5.2f} of copy")

    def decode():
        w = ref.make_weights(cfg, seed=args.seed)
        written = ["x"] + [n for n in w if n.endswith("_cache")]
        state = State(w, written)   # before anything runs on w
        expected = ref.reference_float64(cfg, w)
        x, rows = expected_step(ref, cfg, w)
        drift = ref.compare(x, expected)["rel_l2"]
        if drift > 1e-12:
            raise RuntimeError(f"bench/decode.py expected_step disagrees with "
                               f"reference_float64 by {drift:.3g}: update it")

        def eager(t, compiled=False):   # the module writes t's caches in place
            step = _compiled(ref.LlamaDecodeStep(cfg, t)) if compiled else \
                ref.LlamaDecodeStep(cfg, t)
            return lambda: step(t["x"], t["rope_cos"], t["rope_sin"])

        workload(f"decode step {cfg.layers} layers", ref.bytes_per_step(cfg), state,
                 decode_judge(ref, cfg, state, expected, rows), STEP_TOLERANCE, eager,
                 STEP, STEP_OPS)

    def mlp():   # at the shape of mega_mlp.json, else the 1B model's
        hidden, inter = mlp_shape(args.artifacts, (cfg.hidden, cfg.intermediate))
        mw = ref.make_mlp_weights(hidden, inter, seed=args.seed)
        state = State(mw, ["x", "out"])
        expected = ref.mlp_reference_float64(mw, cfg.eps)

        def eager(t, compiled=False):
            chain = ref.MlpChain(t, cfg.eps)
            chain = _compiled(chain) if compiled else chain
            return lambda: chain(t["x"])

        workload(f"MLP chain {hidden}x{inter}", ref.mlp_bytes(hidden, inter), state,
                 lambda tensors, out: {"out": ref.compare(out, expected)["rel_l2"]},
                 MLP_TOLERANCE, eager, MLP, MLP_OPS)

    def dispatch_rows(part, pattern, what, label):
        """Per-task cost from graphs of N empty tasks (`pattern`'s
        artifacts): one row an N, the slope in extra[part]."""
        empties = empty_artifacts(args.artifacts, pattern)
        if not empties:
            report.workload(part)
            report.skip(part, "mega", f"no {what} in {args.artifacts}")
            return
        points = []
        for n, name in empties:
            key = f"{part}: {n} {label}"
            report.workload(key, tasks=n)
            box = {}

            def check(name=name):
                # No output to compare: the check is that every task ran to
                # the end without the watchdog firing.
                mk, _ = load_ours(args.artifacts, {}, name, strict=False)
                mk.launch()
                mk.check()
                box["mk"] = mk
                return {"watchdog errors": 0.0}

            def time():
                ms = bench(box["mk"].launch)
                other_flushes(f"{key}: mega", box["mk"].launch)
                torch.cuda.synchronize()
                box["mk"].check()
                return ms

            ms = report.row(key, "mega", check, time, tolerance=0.0, metric="completion")
            if ms is not None:
                points.append((n, ms))
                print(f"{part}: {n:6d} {label} {ms * 1e3:9.1f} us")
        ns = per_task_ns(points)
        workers = empty_workers(args.artifacts, pattern)
        extra[part] = {"points_tasks_ms": points, "ns_per_task": ns, "workers": workers,
                       "us_per_task_per_worker": ns * workers / 1e3
                       if ns is not None and workers else None}
        if ns is not None and workers:
            print(f"{part}: {ns:.1f} ns per task (slope); "
                  f"{ns * workers / 1e3:.2f} us per task on one of {workers} workers")

    def dispatch():   # cost per task, from graphs of N empty tasks
        dispatch_rows("dispatch", EMPTY, "mega_empty_<N>.json", "empty tasks")

    def dispatch_waited():   # ... each waiting for an event that fired
        dispatch_rows("dispatch_waited", EMPTY_WAITED, "mega_empty_waited_<N>.json",
                      "empty tasks, one fired event each")

    def floor():   # what the timing itself costs: one 1-element kernel
        x = torch.zeros(1, device="cuda")
        replay = common.graphed(lambda: x.add_(1))
        extra["launch_floor_us"] = {mode: bench(replay, mode) * 1e3 for mode in args.flush}
        print(f"launch floor (one tiny kernel from a CUDA graph): {extra['launch_floor_us']}")

    try:   # whatever was measured is written, even if a later part fails
        for part in (decode, mlp, dispatch, dispatch_waited, floor):
            if part.__name__ not in args.parts:
                continue
            try:
                part()
            except Exception as exc:   # recorded as a failed part: exit 1
                import traceback

                traceback.print_exc()
                report.workload(part.__name__)
                report.data["rows"].append({
                    "workload": part.__name__, "implementation": "(setup)", "role": "ours",
                    "verdict": common.FAILED, "ms": None, "error": None, "tolerance": None,
                    "reason": f"{type(exc).__name__}: {exc}"})
    finally:
        status = report.finish()
    return status


if __name__ == "__main__":
    sys.exit(main())
