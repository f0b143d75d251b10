"""The mega-kernel part of the main job: builds the persistent kernels of
the MLP chain and the Llama-3.2-1B-shaped decode step (examples/mega_decode.py)
and, where a GPU is present, checks every mega artifact in the folder once
against the float64 reference (check_graph; check_per_operator for the same
bodies launched one per operator).

    python examples/run_mega.py --out out              # build, run if a GPU is here
    python examples/run_mega.py --out out --run-only   # GPU machine, no compiler

check_graph is also what examples/gpu_check.py records in test/gpu/results.json.
Every check binds fresh tensors: new weights, caches whose position the step
writes holds random values (not the reference's row), and a NaN-filled output,
so a missing write of either cannot pass.
"""

import argparse
import functools
import importlib.util
import json
import os
import re
import sys
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))

# Artifacts built to be wrong (mega_decode.build_test_artifacts): their
# verdict must be "fail"; run() reports a pass of one as a failure.
EXPECTED_TO_FAIL = {
    "test_mega_misplaced_kv": "writes every layer's new k/v one row early (position "
                              "kv_len - 2): the cache-row check must fail it",
}
# Names of the graph tensors that tell the workload apart.
_DECODE_MARK, _MLP_PARAMS = "l0.k_cache", {"x", "norm_w", "wgu", "wd", "out"}
# Compiled into the bodies, not recorded in the artifact: LlamaConfig's and
# mlp_graph's defaults, which every artifact of mega_decode.py uses.
EPS, ROPE_THETA = 1e-5, 500000.0


class NoNumericCheck(Exception):
    """The artifact computes nothing to compare with a reference (a graph of
    empty tasks, e.g. mega_empty_* or test_mega_too_wide); the message says
    why. gpu_check.py judges those by their launch instead."""


@functools.lru_cache(maxsize=None)
def reference():
    """tilemega/mega/reference.py (numpy, torch when used), loaded by file:
    the GPU machine needs none of the compiler side of tilemega.mega."""
    import tilemega

    path = os.path.join(os.path.dirname(tilemega.__file__), "mega", "reference.py")
    spec = importlib.util.spec_from_file_location("tilemega_mega_reference_run_mega", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- workloads


def decode_config(shapes, source="artifact"):
    """The decode step's config (reference.py's fields) from the graph's
    tensor shapes {name: shape}; ValueError naming `source` if they are not
    the shapes of one."""
    ref = reference()
    try:
        kv_heads, kv_len, head_dim = shapes["l0.k_cache"]
        cfg = SimpleNamespace(
            layers=sum(1 for n in shapes if re.fullmatch(r"l\d+\.wqkv", n)),
            hidden=shapes["x"][0], intermediate=shapes["l0.wgu"][0] // 2,
            heads=shapes["l0.wo"][1] // head_dim, kv_heads=kv_heads, head_dim=head_dim,
            kv_len=kv_len, eps=EPS, rope_theta=ROPE_THETA, dtype="bfloat16")
    except (KeyError, ValueError, IndexError) as exc:
        raise ValueError(f"{source}: not a decode step's tensors ({exc})") from None
    for name, shape in ref.weight_shapes(cfg).items():
        if tuple(shapes.get(name, ())) != tuple(shape):
            raise ValueError(f"{source}: tensor {name!r} is {shapes.get(name)}, a decode "
                             f"step of {vars(cfg)} has {list(shape)}")
    return cfg


def workload(shapes, source="artifact"):
    """"decode" or "mlp" from the graph's tensor shapes; NoNumericCheck for
    anything else (no reference computes it)."""
    if _DECODE_MARK in shapes:
        return "decode"
    if set(shapes) >= _MLP_PARAMS:
        return "mlp"
    raise NoNumericCheck(f"{source}: tensors {sorted(shapes) or 'none'} are neither a decode "
                         f"step's nor the MLP chain's: no float64 reference for it")


def fresh_decode(cfg, torch, seed=0):
    """New tensors of a decode step: weights, caches (random at the written
    position too, reference.make_weights), x, rope tables, and out filled
    with NaN."""
    tensors = reference().make_weights(cfg, seed=seed)
    tensors["out"] = torch.full((cfg.hidden,), float("nan"), dtype=torch.bfloat16,
                                device="cuda")
    return tensors


def fresh_mlp(hidden, intermediate, torch, seed=0):
    """New tensors of the MLP chain; out filled with NaN."""
    tensors = reference().make_mlp_weights(hidden, intermediate, seed=seed)
    tensors["out"].fill_(float("nan"))
    return tensors


def expected_decode(cfg, tensors):
    """(out, rows) of reference_step_float64 for these tensors."""
    return reference().reference_step_float64(cfg, tensors)


def judge_decode(cfg, tensors, before, expected):
    """reference.check_decode_step on tensors after a step; `before` is
    reference.snapshot_caches taken before it, `expected` expected_decode."""
    ref = reference()
    return ref.check_decode_step(cfg, tensors, before, tensors["out"], *expected)


def judge_mlp(tensors):
    ref = reference()
    error = ref.compare(tensors["out"], ref.mlp_reference_float64(tensors, EPS))["rel_l2"]
    passed = error <= ref.MLP_TOLERANCE    # NaN (an element not written) fails
    return {"error": error, "tolerance": ref.MLP_TOLERANCE, "passed": passed,
            "details": {"out": error}}


def _run_checked(shapes, source, torch, launch, seed):
    """Fresh tensors for the workload of `shapes`, launch(tensors) once, the
    verdict dict (check_graph's)."""
    kind = workload(shapes, source)
    if kind == "mlp":
        intermediate2, hidden = shapes["wgu"]
        tensors = fresh_mlp(hidden, intermediate2 // 2, torch, seed)
        launch(tensors)
        torch.cuda.synchronize()
        return judge_mlp(tensors)
    cfg = decode_config(shapes, source)
    tensors = fresh_decode(cfg, torch, seed)
    expected = expected_decode(cfg, tensors)
    before = reference().snapshot_caches(cfg, tensors)
    launch(tensors)
    torch.cuda.synchronize()
    return judge_decode(cfg, tensors, before, expected)


# ---------------------------------------------------------------- the checks


def graph_shapes(mk):
    """{name: shape} of a loaded MegaKernel's graph tensors."""
    return {p.name: tuple(p.shape) for p in mk.graph_params}


def check_graph(path, torch, seed=0):
    """Loads the mega artifact at `path`, binds fresh tensors for the
    workload its params describe, launches it once and judges it against
    float64: {"error": the output's relative L2, "tolerance", "passed",
    "details": {"out", and for a decode step "l<i>.k_row" / "l<i>.v_row" of
    every layer, "kv_row_tolerance", "untouched_rows_ok", "failed"}}.
    NoNumericCheck for a graph no reference computes (empty tasks)."""
    from tilemega.runtime.mega import load_mega

    mk = load_mega(path)
    shapes = graph_shapes(mk)
    if not shapes:
        raise NoNumericCheck(f"{path}: a graph without tensors (empty tasks) computes "
                             "nothing to compare")

    def launch(tensors):
        mk.bind({p.name: tensors[p.name] for p in mk.user_params})
        mk.launch()
        mk.check()

    return _run_checked(shapes, path, torch, launch, seed)


def launch_list_path(path):
    """The per-operator launch list next to artifact `path` (<name>.json)."""
    if not path.endswith(".json"):
        raise ValueError(f"{path}: expected an artifact's .json")
    return path[:-len(".json")] + ".launches.json"


def check_per_operator(path, torch, seed=0):
    """check_graph for a per-operator artifact (artifacts.compile_per_operator):
    the graph's bodies launched one kernel per task, in graph order, on
    fresh tensors (scratch and output from the launch list)."""
    from tilemega.runtime import load_artifact

    list_path = launch_list_path(path)
    with open(list_path) as f:
        spec = json.load(f)
    art = load_artifact(path)
    shapes, calls = {}, []
    for i, launch in enumerate(spec.get("launches", [])):
        name = launch.get("kernel")
        if name not in art:
            raise ValueError(f"{list_path}: launches[{i}].kernel: no kernel {name!r} in {path}")
        args = launch.get("args", [])
        params = art[name].spec.params
        if len(args) != len(params):
            raise ValueError(f"{list_path}: launches[{i}].args: {len(args)} for the "
                             f"{len(params)} params of {name}")
        for arg, p in zip(args, params):
            if p.kind == "tensor":
                shapes.setdefault(arg, tuple(p.shape))
        calls.append((art[name], args))
    if not calls:
        raise ValueError(f"{list_path}: field 'launches': empty")
    scratch = {n: s for n, s in spec.get("tensors", {}).items() if n != spec.get("output")}

    def launch(tensors):
        for n, s in scratch.items():   # intermediates: not judged, zeros as in bench/decode.py
            tensors[n] = torch.zeros(tuple(s["shape"]), dtype=getattr(torch, s["dtype"]),
                                     device="cuda")
        for kernel, args in calls:
            kernel(*[tensors[a] if isinstance(a, str) else a for a in args])

    # The graph's user tensors only: workload() and decode_config look at those.
    user = {n: s for n, s in shapes.items() if n not in scratch}
    return _run_checked(user, path, torch, launch, seed)


# ---------------------------------------------------------------- the main job


def mega_artifacts(out):
    """{name: (json path, checker)} of the mega and per-operator artifacts in `out`."""
    found = {}
    for entry in sorted(os.listdir(out)):
        if not entry.endswith(".json") or entry.endswith(".launches.json"):
            continue
        path = os.path.join(out, entry)
        with open(path) as f:
            meta = json.load(f)
        if not isinstance(meta, dict) or meta.get("format") != "tilemega.artifact":
            continue
        name = entry[:-len(".json")]
        if any("mega" in k for k in meta.get("kernels", [])):
            found[name] = (path, check_graph)
        elif os.path.isfile(launch_list_path(path)):
            found[name] = (path, check_per_operator)
    return found


def run(out):
    import torch

    found = mega_artifacts(out)
    if not found:
        print(f"no mega artifacts in {out}: build them with examples/mega_decode.py")
        return False
    ok = True
    device = torch.cuda.get_device_name()
    for name, (path, checker) in found.items():
        try:
            got = checker(path, torch)
        except NoNumericCheck as exc:
            print(f"{name}: no numeric check ({exc})")
            continue
        passed = got["passed"]
        details = got.get("details", {})
        rows = [v for k, v in details.items() if k.endswith("_row")]
        summary = (f"relative L2 error {got['error']:.3g} (tolerance {got['tolerance']:g})"
                   + (f", worst k/v cache row {max(rows):.3g} (tolerance "
                      f"{details['kv_row_tolerance']:g}), other positions "
                      f"{'untouched' if details['untouched_rows_ok'] else 'CHANGED'}"
                      if rows else ""))
        if name in EXPECTED_TO_FAIL:
            verdict = "FAILED (expected)" if not passed else \
                "PASSED, but it is built to fail: the check is blind"
            ok &= not passed
        else:
            verdict = "ok" if passed else "FAILED " + ", ".join(details.get("failed", ["out"]))
            ok &= passed
        print(f"{name} on {device}: {summary}: {verdict}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="out")
    parser.add_argument("--run-only", action="store_true")
    args = parser.parse_args()
    if not args.run_only:
        sys.path.insert(0, HERE)
        from mega_decode import build_all
        for path in build_all(args.out):
            print(f"built {path}")
    try:
        import torch
        if not torch.cuda.is_available():
            raise ImportError("no CUDA device")
    except ImportError as exc:
        print(f"not running the mega-kernels: {exc}")
        return 0
    return 0 if run(args.out) else 1


if __name__ == "__main__":
    sys.exit(main())
