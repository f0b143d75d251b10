"""Host cost of one kernel launch through tilemega.runtime (needs a GPU).

    PYTHONPATH=python python3 bench/launch_overhead.py --out docs/results

Loads the hand-written scale2 PTX of test/pytest/test_runtime_gpu.py (y = 2x
on 1000 floats; no compiler needed) from a temporary folder and prints host
microseconds per call, each the median (and minimum) over repetitions of a
loop of asynchronous launches, for:

  Kernel.launch        the general path, which is what Kernel.__call__ ran
                       before the fast path existed (the "before" figure)
  Kernel.__call__      the fast path (the "after" figure); also for fill_affine
                       (one tensor, two float and one int scalar)
  Artifact.__call__    art(x, y, n), one more Python call on top
  __call__, stream=s   the fast path with an explicit torch stream
  __call__, numpy int  a numpy scalar: the fast path defers to the general path
  torch y.copy_(x)     one PyTorch kernel launch, for reference
  graph replay         a CUDA graph holding one of our launches, replayed
  floor pieces         cuda.bindings cuLaunchKernel alone (params prebuilt),
                       cuCtxGetCurrent, torch._C._cuda_getCurrentRawStream

The kernel runs for ~2 us on the GPU, less than any host path here, so the
loops measure the host and never wait on a full launch queue. Every path is
first checked exactly (y zeroed, one call, y == 2x, or a * i + b for
fill_affine); a wrong path is FAILED, not timed, and the script exits 1.
Writes launch_overhead.json and .png (each path beside the floor: the bare
cuLaunchKernel call of the same run).
"""

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKLOAD = "host launch cost of one kernel (scale2, 1000 floats)"


def _gpu_test_module():
    """test/pytest/test_runtime_gpu.py, for its PTX and metadata (needs pytest)."""
    tests = os.path.join(ROOT, "test", "pytest")
    spec = importlib.util.spec_from_file_location("_tilemega_test_runtime_gpu",
                                                  os.path.join(tests, "test_runtime_gpu.py"))
    module = importlib.util.module_from_spec(spec)
    # It imports its conftest (the GPU skip reason) as pytest would find it.
    sys.path.insert(0, tests)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(tests)
    return module


def per_call_us(fn, n=1000, reps=15):
    """(median, min) host microseconds per call of `fn`, over `reps` loops of `n`."""
    import torch

    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - start) / n * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples), min(samples)


def graph_of(fn):
    """`fn` captured once in a CUDA graph (after warm-up on a side stream)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="docs/results",
                        help="folder for launch_overhead.json/.png")
    parser.add_argument("--n", type=int, default=1000, help="calls per timed loop")
    parser.add_argument("--reps", type=int, default=15, help="timed loops per figure")
    return parser.parse_args(argv)


def main(argv=None):
    opts = parse_args(argv)
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import numpy as np
    import torch

    import common
    from tilemega.runtime import driver, load_artifact

    gpu = _gpu_test_module()
    folder = tempfile.mkdtemp(prefix="tilemega_launch_")
    meta = gpu._meta()
    with open(os.path.join(folder, meta["ptx"]), "w") as f:
        f.write(gpu.PTX)
    with open(os.path.join(folder, meta["name"] + ".json"), "w") as f:
        json.dump(meta, f)
    only = dict(meta, name="scale2_only", kernels=meta["kernels"][:1])   # for art(...)
    with open(os.path.join(folder, "scale2_only.json"), "w") as f:
        json.dump(only, f)
    art = load_artifact(os.path.join(folder, meta["name"] + ".json"))
    single = load_artifact(os.path.join(folder, "scale2_only.json"))
    k = art.scale2
    n = gpu.N
    x = torch.arange(n, dtype=torch.float32, device="cuda")
    y = torch.zeros(n, dtype=torch.float32, device="cuda")
    doubled = 2 * x
    affine = torch.arange(n, dtype=torch.float32, device="cuda") * 0.5 + 3.0
    stream = torch.cuda.Stream()
    art.load(0)                                      # PTX JIT outside the timings
    single.load(0)

    report = common.Report("launch_overhead", opts.out,
                           timing=f"host microseconds per call: median (and min) of "
                                  f"{opts.reps} loops of {opts.n} asynchronous calls")
    report.workload(WORKLOAD)
    report.data["extra"]["us_per_call"] = figures = {}

    def row(name, fn, expected=doubled, role="ours", check_with=None):
        def check():
            y.zero_()
            (check_with or fn)()
            torch.cuda.synchronize()
            return {"y": 0.0 if torch.equal(y, expected) else 1.0}

        def time():
            median, low = per_call_us(fn, opts.n, opts.reps)
            figures[name] = {"median": median, "min": low}
            return median * 1e-3
        ms = report.row(WORKLOAD, name, check, time, tolerance=0.0, role=role,
                        metric="exact (0 equal, 1 differs)")
        if ms is not None:
            print(f"  {name:<52} {figures[name]['median']:7.2f}  {figures[name]['min']:7.2f}")

    print(f"host launch cost, us/call (median / min of {opts.reps} loops of {opts.n} calls)")
    n_np = np.int32(n)
    row("Kernel.launch (general path = __call__ before)", lambda: k.launch(x, y, n))
    row("Kernel.__call__ (fast path)", lambda: k(x, y, n))
    fallbacks = []
    k.launch = lambda *a, **kw: (fallbacks.append(a), type(k).launch(k, *a, **kw))
    k(x, y, n)                                       # must not reach the general path
    del k.launch
    report.data["extra"]["fast_path_used"] = not fallbacks and k._fast is not None
    if fallbacks or k._fast is None:
        report.data["rows"][-1].update(verdict=common.FAILED, ms=None,
                                       reason="Kernel.__call__ fell back to the general path "
                                              "on torch tensors")
    row("Artifact.__call__", lambda: single(x, y, n))
    row("Kernel.__call__, stream=torch stream", lambda: k(x, y, n, stream=stream),
        check_with=lambda: (k(x, y, n, stream=stream), stream.synchronize()))
    row("Kernel.__call__, fill_affine (1 tensor, 3 scalars)",
        lambda: art.fill_affine(y, 0.5, 3.0, n), expected=affine)
    row("Kernel.__call__, numpy int (general path)", lambda: k(x, y, n_np))
    row("torch y.copy_(x)", lambda: y.copy_(doubled), role="peer")
    try:
        graph = graph_of(lambda: k(x, y, n))
        row("CUDA graph replay of Kernel.__call__", graph.replay)
    except Exception as exc:
        report.data["rows"].append({"workload": WORKLOAD, "role": "ours", "ms": None,
                                    "implementation": "CUDA graph replay of Kernel.__call__",
                                    "verdict": common.FAILED, "error": None, "tolerance": 0.0,
                                    "reason": f"graph capture: {type(exc).__name__}: {exc}"})

    # The floor: what the fast path cannot avoid (it launches the same kernel,
    # so it is checked like the others).
    drv = driver.cuda()
    fast = k._fast
    k(x, y, n)                                       # leaves x, y, n packed in fast.buffer
    function = fast.devices[0][1]
    cu_stream = drv.CUstream(torch.cuda.current_stream().cuda_stream)
    grid, block = fast.grid, fast.block
    addr = fast.params_address
    floor = "floor: cuda.bindings cuLaunchKernel alone (parameters prebuilt)"
    row(floor, lambda: drv.cuLaunchKernel(function, grid[0], grid[1], grid[2], block[0],
                                          block[1], block[2], 0, cu_stream, addr, 0),
        role="floor")
    if floor in figures:
        report.data["workloads"][WORKLOAD].update(floor_ms=figures[floor]["median"] * 1e-3,
                                                  floor_basis="bare cuLaunchKernel")
    # Pieces of the floor: host calls with nothing on the GPU to check.
    pieces = {"cuCtxGetCurrent": drv.cuCtxGetCurrent,
              "torch.cuda.current_stream()": torch.cuda.current_stream}
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        pieces["torch._C._cuda_getCurrentRawStream"] = lambda: raw(0)
    report.data["extra"]["floor_pieces_us"] = {
        name: dict(zip(("median", "min"), per_call_us(fn, opts.n, opts.reps)))
        for name, fn in pieces.items()}
    try:
        from cuda import bindings
        report.data["run"]["cuda.bindings"] = getattr(bindings, "__version__", "?")
    except ImportError:
        report.data["run"]["cuda.bindings"] = "?"
    before = figures.get("Kernel.launch (general path = __call__ before)", {}).get("median")
    after = figures.get("Kernel.__call__ (fast path)", {}).get("median")
    if before and after:
        print(f"  speed-up of Kernel.__call__: {before / after:.1f}x "
              f"({before:.1f} -> {after:.1f} us)")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
