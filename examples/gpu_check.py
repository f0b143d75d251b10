"""GPU verdicts bound to the PTX they judged: runs every shipped artifact
(examples/shipped.py) in a folder against its float64 reference and records,
per artifact, the sha256 of its PTX, the verdict, the error and tolerance,
the device, driver, date and commit in test/gpu/results.json. CI
(test/pytest/test_gpu_results.py) compiles everything again and fails on a
failing verdict for a current PTX; a current PTX with no verdict is "stale".

On the GPU machine (runtime only, no compiler):

    scripts/tilemega.sh gpu-check            # = python3 examples/gpu_check.py --artifacts out
    scripts/tilemega.sh sanitize             # + compute-sanitizer memcheck, racecheck,
                                             #   synccheck, initcheck (examples_sanitize.py)

Exit status 1 when a verdict fails. The commit is `git rev-parse HEAD`, or
$TILEMEGA_COMMIT where the tree is a copy without .git.
"""

import argparse
import datetime
import hashlib
import importlib
import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import shipped  # noqa: E402

RESULTS = os.path.join(ROOT, "test", "gpu", "results.json")
FORMAT, VERSION = "tilemega.gpu-results", 1
BENCH_TOLERANCES = {"bf16": 1e-2, "f16": 5e-3,
                    # fp8 inputs, bf16 out (examples_gpu/gemm_fp8.py).
                    "e4m3": 1e-2, "e5m2": 1e-2}


# ---------------------------------------------------------------- the file


def empty_results():
    return {"format": FORMAT, "version": VERSION, "artifacts": {}}


def load_results(path=RESULTS):
    """The results file as a dict; ValueError naming the file and field if
    it is not one."""
    if not os.path.exists(path):
        return empty_results()
    with open(path) as f:
        try:
            doc = json.load(f)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"{path}: field 'format': expected {FORMAT!r}")
    if doc.get("version") != VERSION:
        raise ValueError(f"{path}: field 'version': expected {VERSION}, got {doc.get('version')!r}")
    if not isinstance(doc.get("artifacts"), dict):
        raise ValueError(f"{path}: field 'artifacts': expected an object")
    for name, entry in doc["artifacts"].items():
        for key in ("ptx_sha256", "verdict"):
            if not isinstance(entry, dict) or not isinstance(entry.get(key), str):
                raise ValueError(f"{path}: field 'artifacts.{name}.{key}': missing or not a string")
        if entry["verdict"] not in ("pass", "fail"):
            raise ValueError(f"{path}: field 'artifacts.{name}.verdict': {entry['verdict']!r} "
                             "is not 'pass' or 'fail'")
    return doc


def save_results(doc, path=RESULTS):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    doc["artifacts"] = dict(sorted(doc["artifacts"].items()))
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


def ptx_sha256(json_path):
    """sha256 of the PTX file an artifact's JSON names."""
    with open(json_path) as f:
        meta = json.load(f)
    with open(os.path.join(os.path.dirname(json_path), meta["ptx"]), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def artifacts_in(folder):
    """{name: json path} of the artifacts in `folder` (not launch lists)."""
    found = {}
    for entry in sorted(os.listdir(folder)):
        if not entry.endswith(".json") or entry.endswith(".launches.json"):
            continue
        path = os.path.join(folder, entry)
        with open(path) as f:
            meta = json.load(f)
        if isinstance(meta, dict) and meta.get("format") == "tilemega.artifact":
            found[entry[:-len(".json")]] = path
    return found


def run_info(command):
    import torch

    import common   # bench/common.py (shipped.py puts bench/ on the path)

    return {
        "device": torch.cuda.get_device_name(),
        "driver": common.driver_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": common.commit(),
        "command": command,
    }


# ---------------------------------------------------------------- the checks


def _check_example(name, path, torch):
    import run_examples
    from tilemega.runtime import load_artifact

    module = next(m for n, m, _ in run_examples.EXAMPLES if n == name)
    example = importlib.import_module("examples_gpu." + module)
    art = load_artifact(path)
    error = float(example.check(art, torch))
    tolerance = float(example.tolerance(art) if hasattr(example, "tolerance")
                      else example.TOLERANCE)
    return {"error": error, "tolerance": tolerance}


def _check_bench(name, path, torch):
    import build_artifacts
    import run_examples
    from tilemega.runtime import load_artifact

    module_name, config = build_artifacts.example_of(name)
    check = importlib.import_module("examples_gpu." + module_name)
    cfg = run_examples.example_module(module_name).config(**config)
    error = float(check.check_config(load_artifact(path), torch, cfg))
    return {"error": error, "tolerance": BENCH_TOLERANCES[cfg["dtype"]]}


def _check_mega(name, path, torch):
    """check_graph; for an artifact built to be wrong
    (run_mega.EXPECTED_TO_FAIL) the verdict is "pass" when the check
    catches it and "fail" when it lets it through (the check is blind)."""
    import run_mega
    got = run_mega.check_graph(path, torch)
    if name not in run_mega.EXPECTED_TO_FAIL:
        return got
    caught = not got["passed"]
    return dict(got, passed=caught,
                details=dict(got.get("details", {}), built_to_fail=run_mega.EXPECTED_TO_FAIL[name],
                             caught=caught))


def _check_ops(name, path, torch):
    import run_mega
    return run_mega.check_per_operator(path, torch)


def _check_empty(name, path, torch):
    """Graphs of empty tasks have no numbers: the check is that the launch
    completes (every task ran, no watchdog) or, for a grid no GPU keeps
    resident, that the runtime refuses it before launching."""
    from tilemega.runtime import LaunchError, load_mega

    mk = load_mega(path)
    try:
        mk.launch()
        mk.check()
    except LaunchError as exc:
        if name == "test_mega_too_wide":
            return {"error": 0.0, "tolerance": 0.0, "details": {"refused": str(exc)[:200]}}
        raise
    if name == "test_mega_too_wide":
        return {"error": 1.0, "tolerance": 0.0,
                "details": {"refused": "no: a grid that cannot be resident was launched"}}
    return {"error": 0.0, "tolerance": 0.0, "details": {"epoch": mk.epoch}}


def _check_generation(name, path, torch):
    import generation
    if name in generation.PREFILL:
        return generation.check_prefill_artifact(path, torch)
    return generation.check_artifact(path, torch)


def _check_peers(name, path, torch):
    import mega_peers
    return mega_peers.check_artifact(path, torch)


def _check_ranks(name, path, torch):
    import generation_tp
    return generation_tp.check_artifact(path, torch)


CHECKS = {shipped.EXAMPLE: _check_example, shipped.BENCH: _check_bench,
          shipped.MEGA: _check_mega, shipped.OPS: _check_ops, shipped.EMPTY: _check_empty,
          shipped.GENERATION: _check_generation, shipped.PEERS: _check_peers,
          shipped.RANKS: _check_ranks}


def check_one(name, path, torch):
    """One artifact's verdict entry (without run info)."""
    with open(path) as f:
        meta = json.load(f)
    kind = shipped.kind_of(name, meta)
    entry = {"kind": kind, "ptx_sha256": ptx_sha256(path), "metric": "rel_l2"}
    # What ran is the cubin: which ptxas made it, and its hash (the verdict
    # stays bound to the PTX; docs/toolchain.md says why both matter).
    ptxas = (meta.get("toolchain") or {}).get("ptxas")
    if ptxas:
        entry["ptxas"] = ptxas
    if meta.get("cubin"):
        cubin = os.path.join(os.path.dirname(path), meta["cubin"])
        if os.path.exists(cubin):
            with open(cubin, "rb") as f:
                entry["cubin_sha256"] = hashlib.sha256(f.read()).hexdigest()
    try:
        got = CHECKS[kind](name, path, torch)
        torch.cuda.synchronize()
        error, tolerance = float(got["error"]), float(got["tolerance"])
        passed = got.get("passed", error <= tolerance) and error == error
        entry.update(error=error, tolerance=tolerance, verdict="pass" if passed else "fail")
        if got.get("details"):
            entry["details"] = got["details"]
    except Exception as exc:  # a crash of the check is a failing verdict, with its reason
        entry.update(error=None, tolerance=None, verdict="fail",
                     details={"exception": f"{type(exc).__name__}: {exc}"[:2000]})
        traceback.print_exc()
    return entry


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifacts", default=os.path.join(ROOT, "out"))
    parser.add_argument("--results", default=RESULTS)
    parser.add_argument("--only", nargs="*", help="check only these artifact names")
    parser.add_argument("--no-write", action="store_true",
                        help="print the verdicts, leave the results file alone")
    args = parser.parse_args(argv)

    import torch

    found = artifacts_in(args.artifacts)
    if args.only:
        missing = sorted(set(args.only) - set(found))
        if missing:
            parser.error(f"no artifact {missing} in {args.artifacts}")
        found = {n: found[n] for n in args.only}
    command = "python3 examples/gpu_check.py " + " ".join(argv if argv is not None else sys.argv[1:])
    info = run_info(command.strip())
    doc = load_results(args.results)
    failed = []
    for name, path in found.items():
        entry = check_one(name, path, torch)
        entry.update(info)
        # Sanitizer results stay when they judged this PTX (each records the
        # hash it ran on; gpu_sanitize.py may have run before any verdict).
        kept = {tool: got for tool, got in
                doc["artifacts"].get(name, {}).get("sanitizers", {}).items()
                if got.get("ptx_sha256") == entry["ptx_sha256"]}
        if kept:
            entry["sanitizers"] = kept
        doc["artifacts"][name] = entry
        if not args.no_write:
            # After each verdict: a run cut short keeps the ones it reached.
            save_results(doc, args.results)
        if entry["verdict"] != "pass":
            failed.append(name)
        err = entry["error"]
        print(f"{entry['verdict'].upper():4} {name} ({entry['kind']}): "
              f"{'error %.3g' % err if err is not None else entry['details']['exception']}"
              f"{' tolerance %g' % entry['tolerance'] if entry['tolerance'] is not None else ''}",
              flush=True)
    if not args.no_write:
        print(f"wrote {len(found)} verdicts to {args.results}")
    print(f"{len(found) - len(failed)} passed, {len(failed)} failed")
    if failed:
        print("FAILED: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
