"""Host cost of one kernel launch through tilemega.runtime (needs a GPU).

    PYTHONPATH=python python3 bench/launch_overhead.py [--json PATH]

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
loops measure the host and never wait on a full launch queue.
"""

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

from tilemega.runtime import driver, load_artifact  # noqa: E402


def _gpu_test_module():
    """test/pytest/test_runtime_gpu.py, for its PTX and metadata (needs pytest)."""
    path = os.path.join(ROOT, "test", "pytest", "test_runtime_gpu.py")
    spec = importlib.util.spec_from_file_location("_tilemega_test_runtime_gpu", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def per_call_us(fn, n=1000, reps=15):
    """(median, min) host microseconds per call of `fn`, over `reps` loops of `n`."""
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument("--n", type=int, default=1000, help="calls per timed loop")
    parser.add_argument("--reps", type=int, default=15, help="timed loops per figure")
    opts = parser.parse_args()

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
    stream = torch.cuda.Stream()
    art.load(0)                                      # PTX JIT outside the timings
    single.load(0)
    problems = []

    def check(what):
        torch.cuda.synchronize()
        if not torch.equal(y, 2 * x):
            problems.append(f"{what}: wrong result")

    # Correctness of each path before timing it.
    for what, launch in (("launch", lambda: k.launch(x, y, n)), ("__call__", lambda: k(x, y, n))):
        y.zero_()
        launch()
        check(what)
    assert k._fast is not None and 0 in k._fast.devices, "the fast path was not set up"
    fallbacks = []
    k.launch = lambda *a, **kw: (fallbacks.append(a), type(k).launch(k, *a, **kw))
    k(x, y, n)                                       # must not reach the general path
    del k.launch
    if fallbacks:
        problems.append("Kernel.__call__ fell back to the general path on torch tensors")

    ref = torch.empty_like(x)
    n_np = np.int32(n)
    cases = {
        "Kernel.launch (general path = __call__ before)": lambda: k.launch(x, y, n),
        "Kernel.__call__ (fast path)": lambda: k(x, y, n),
        "Artifact.__call__": lambda: single(x, y, n),
        "Kernel.__call__, stream=torch stream": lambda: k(x, y, n, stream=stream),
        "Kernel.__call__, fill_affine (1 tensor, 3 scalars)":
            lambda: art.fill_affine(y, 0.5, 3.0, n),
        "Kernel.__call__, numpy int (general path)": lambda: k(x, y, n_np),
        "torch y.copy_(x)": lambda: ref.copy_(x),
    }
    results = {}

    def measure(name, fn):
        try:
            results[name] = per_call_us(fn, opts.n, opts.reps)
        except Exception as exc:              # report the rest all the same
            problems.append(f"{name}: {type(exc).__name__}: {exc}")

    for name, fn in cases.items():
        measure(name, fn)

    try:
        graph = graph_of(lambda: k(x, y, n))
        y.zero_()
        graph.replay()
        check("graph replay")
        measure("CUDA graph replay of Kernel.__call__", graph.replay)
    except Exception as exc:
        problems.append(f"graph capture: {type(exc).__name__}: {exc}")

    # The floor: what the fast path cannot avoid.
    drv = driver.cuda()
    fast = k._fast
    k(x, y, n)                                       # leaves x, y, n packed in fast.buffer
    function = fast.devices[0][1]
    cu_stream = drv.CUstream(torch.cuda.current_stream().cuda_stream)
    grid, block = fast.grid, fast.block
    addr = fast.params_address
    measure("floor: cuda.bindings cuLaunchKernel alone",
            lambda: drv.cuLaunchKernel(function, grid[0], grid[1], grid[2], block[0], block[1],
                                       block[2], 0, cu_stream, addr, 0))
    measure("floor: cuCtxGetCurrent", drv.cuCtxGetCurrent)
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        measure("floor: torch._C._cuda_getCurrentRawStream", lambda: raw(0))
    measure("floor: torch.cuda.current_stream()", torch.cuda.current_stream)
    check("after the floor loops")

    try:
        from cuda import bindings
        bindings_version = getattr(bindings, "__version__", "?")
    except ImportError:
        bindings_version = "?"
    info = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "cuda.bindings": bindings_version, "python": sys.version.split()[0],
            "calls_per_loop": opts.n, "loops": opts.reps}
    print("host launch cost, us/call (median / min of %d loops of %d calls)" % (opts.reps, opts.n))
    print("  " + ", ".join(f"{k_}: {v}" for k_, v in info.items()))
    width = max((len(name) for name in results), default=10)
    for name, (median, low) in results.items():
        print(f"  {name:<{width}}  {median:7.2f}  {low:7.2f}")
    before = results.get("Kernel.launch (general path = __call__ before)", (None,))[0]
    after = results.get("Kernel.__call__ (fast path)", (None,))[0]
    if before and after:
        print(f"  speed-up of Kernel.__call__: {before / after:.1f}x "
              f"({before:.1f} -> {after:.1f} us)")
    for problem in problems:
        print("PROBLEM: " + problem)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"info": info, "problems": problems,
                       "us_per_call": {name: {"median": m, "min": lo}
                                       for name, (m, lo) in results.items()}}, f, indent=2)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
