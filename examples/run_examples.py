"""The main job: compile every example kernel to an artifact, and run it where
a GPU exists.

    python examples/run_examples.py --out out

Compiling needs the built tilemega package (build/python_packages on
PYTHONPATH, as scripts/tilemega.sh sets it); running needs only the artifacts,
tilemega.runtime, cuda-python and torch, so on a GPU machine without the
compiler `PYTHONPATH=python python examples/run_examples.py --run-only` works.
"""

import argparse
import importlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# Example module name -> (inputs maker, reference, tolerance); the makers and
# references take torch so they only run where a GPU exists.
EXAMPLES = ["scale_add"]


def compile_all(out_dir):
    import tilemega
    from tilemega.ir import Context, Location

    paths = {}
    for name in EXAMPLES:
        example = importlib.import_module(name)
        with Context(), Location.unknown():
            result = tilemega.compile(example.build(), chip="sm_90a")
        paths[name] = result.save(out_dir)
        for k in result.kernels:
            regs = k.get("registers", "?")
            print(f"compiled {name}: kernel {k['name']} grid {k['grid']} "
                  f"block {k['block']} smem {k['dynamic_shared_bytes']} B "
                  f"registers {regs}")
        print(f"  {paths[name]}  (PTX {len(result.ptx)} chars, cubin "
              f"{'%d bytes' % len(result.cubin) if result.cubin else 'not built: no ptxas'})")
    return paths


def gpu_available():
    try:
        import torch
    except ImportError:
        return False, "torch is not installed"
    if not torch.cuda.is_available():
        return False, "no CUDA GPU"
    try:
        import cuda.bindings  # noqa: F401
    except ImportError:
        return False, "cuda-python is not installed"
    return True, ""


def run_all(out_dir):
    import torch
    from tilemega.runtime import load_artifact

    ok = True
    results = {}
    for name in EXAMPLES:
        example = importlib.import_module("examples_gpu." + name)
        art = load_artifact(os.path.join(out_dir, f"{name}.json"))
        err = example.check(art, torch)
        passed = err <= example.TOLERANCE
        ok &= passed
        results[name] = {"rel_error": err, "passed": passed}
        print(f"ran {name} on {torch.cuda.get_device_name()}: relative error "
              f"{err:.3g} ({'ok' if passed else 'FAILED'}, tolerance {example.TOLERANCE})")
    return ok, results


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="out")
    parser.add_argument("--run-only", action="store_true",
                        help="use existing artifacts in --out (no compiler needed)")
    parser.add_argument("--json", help="write the run results here")
    args = parser.parse_args()
    if not args.run_only:
        compile_all(args.out)
    available, why = gpu_available()
    if not available:
        print(f"not running the kernels: {why}")
        return 0
    ok, results = run_all(args.out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
