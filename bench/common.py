"""What every benchmark shares: timing, the run's provenance, checking each
row against a reference before it is timed, and the JSON + plot it writes.

A benchmark makes one `Report`, adds its workloads (with the bytes or FLOPs
that set their hardware floor) and for every implementation calls
`Report.row`: the row's output is compared with the reference first; a row
over tolerance (or whose run raises) is printed and recorded as FAILED with
its error and is never timed, so it cannot enter a ratio. `Report.finish`
computes the ratios among the passing rows, writes docs/results-style
`<script>.json` and `<script>.png` (each implementation's time beside the
floor) and returns the exit status: 1 if any row failed.

Every figure is the median of `triton.testing.do_bench` (CUDA events, L2
flushed between repetitions), measured in the same process as the peers it
is compared with. torch, triton and matplotlib are imported only when used,
so `--help` and the CPU tests work without them.
"""

import datetime
import json
import math
import os
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FORMAT = "tilemega.bench-results"
PASS, FAILED, SKIPPED = "pass", "FAILED", "skipped"

# Dense bf16/f16 tensor-core peak of the H200 (SXM), TFLOP/s: NVIDIA H200
# datasheet (1,979 TFLOP/s is quoted with 2:4 sparsity; dense is half).
H200_DENSE_TENSOR_TFLOPS = 989.4

# Relative L2 tolerances for outputs rounded to 16 bits (the GPU check of
# examples/gpu_check.py uses the same): bf16 keeps 8 mantissa bits, f16 11.
TOLERANCE = {"bfloat16": 1e-2, "float16": 5e-3}


# ------------------------------------------------------------------ timing


# How the L2 is emptied before each timed repetition (bench_ms's `flush`):
# "zero" is do_bench's own (256 MB written: the timed work starts with the
# L2 full of dirty lines, which its first reads must write back), "read"
# reads 256 MB instead (the L2 left clean, as a decode step finds it after
# the previous step's weight reads), "none" times back-to-back repetitions.
FLUSH_MODES = ("zero", "read", "none")


def bench_ms(fn, warmup=25, rep=100, flush="zero"):
    """Median milliseconds of `fn()` (asynchronous GPU work). flush="zero"
    is triton's do_bench itself; the other FLUSH_MODES repeat its loop
    (warm-up and repetitions by an estimate, an event pair around each
    call) with the other flush."""
    if flush == "zero":
        import triton.testing

        return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep,
                                             return_mode="median"))
    if flush not in FLUSH_MODES:
        raise ValueError(f"bench_ms: flush must be one of {FLUSH_MODES}, got {flush!r}")
    import statistics

    import torch

    buffer = torch.empty(256 * 2**20 // 4, dtype=torch.int32, device="cuda").fill_(1)
    sink = torch.empty((), dtype=torch.int64, device="cuda")

    def empty_l2():
        if flush == "read":
            torch.sum(buffer, dim=0, out=sink)

    fn()
    torch.cuda.synchronize()
    first, last = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    first.record()
    for _ in range(5):
        empty_l2()
        fn()
    last.record()
    torch.cuda.synchronize()
    estimate = max(first.elapsed_time(last) / 5, 1e-3)
    for _ in range(max(1, int(warmup / estimate))):
        fn()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(max(1, int(rep / estimate)))]
    for start, end in pairs:
        empty_l2()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return float(statistics.median(s.elapsed_time(e) for s, e in pairs))


def graphed_us_two_orders(fns):
    """{name: [us, us]}: each of `fns` ({name: fn}) captured in a CUDA graph
    and timed (median of bench_ms) twice, the second pass in the opposite
    order, so that drift over the run does not rank the candidates (the
    screens of bench/gemm_tn_screen.py and bench/prefill/screen.py)."""
    g = {name: graphed(fn) for name, fn in fns.items()}
    us = {name: [] for name in g}
    for order in (list(g), list(g)[::-1]):
        for name in order:
            us[name].append(bench_ms(g[name]) * 1000)
    return us


def graphed(fn, with_output=False):
    """`fn` captured in a CUDA graph: replaying it times the GPU work alone,
    without the host-side launch cost (which for kernels of tens of
    microseconds would otherwise be what is measured). Returns the replay
    function, or (replay, what the captured fn returned) with_output: the
    graph rewrites that tensor on every replay."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    torch.cuda.synchronize()
    return (graph.replay, out) if with_output else graph.replay


def launch_overhead_us(fn, n=200):
    """Host microseconds per call of `fn` (launch path, no synchronisation)."""
    import time

    import torch

    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / n * 1e6


def copy_bandwidth_gbs(gib=2):
    """Device-to-device copy rate (read + write bytes): the practical HBM
    ceiling that memory-bound kernels are compared with."""
    import torch

    n = gib * (1 << 30) // 2
    src = torch.empty(n, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src))
    return 2 * src.numel() * src.element_size() / (ms * 1e-3) / 1e9


# ------------------------------------------------------------------ checks


def rel_l2(out, ref):
    """||out - ref|| / ||ref|| in float64 (torch tensors, any device); inf
    for a non-finite output or a shape mismatch, so that it fails."""
    import torch

    a = out.detach().to(dtype=torch.float64).flatten()
    b = ref.detach().to(device=a.device, dtype=torch.float64).flatten()
    if a.shape != b.shape or not torch.isfinite(a).all():
        return math.inf
    return float((a - b).norm() / b.norm())


def within(error, tolerance):
    """True for a finite error at or under the tolerance (NaN fails)."""
    return error is not None and math.isfinite(error) and error <= tolerance


# ------------------------------------------------------------------ the run


def commit():
    """The commit of the code that runs: env TILEMEGA_COMMIT when set (the
    GPU machine gets a copy of the work tree, whose .git, if any, is not
    this tree's), else HEAD of the repository (+dirty when bench/, python/
    or examples/ have changes), else "unknown". examples/gpu_check.py
    records the same."""
    if os.environ.get("TILEMEGA_COMMIT"):
        return os.environ["TILEMEGA_COMMIT"]
    try:
        sha = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        if sha.returncode == 0 and sha.stdout.strip():
            dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "bench",
                                    "python", "examples"], capture_output=True, text=True,
                                   timeout=30).stdout.strip()
            return sha.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def driver_version():
    """The NVIDIA driver version (nvidia-smi), else the CUDA driver API's."""
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30)
        if smi.returncode == 0 and smi.stdout.strip():
            return smi.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        from cuda.bindings import driver

        err, version = driver.cuDriverGetVersion()
        return f"CUDA driver API {version // 1000}.{version % 1000 // 10}"
    except Exception:   # no cuda-python: say so rather than fail the run
        return "unknown"


def run_info(argv=None):
    """Date, commit, device, driver, versions and the exact command line."""
    import torch
    import triton

    props = torch.cuda.get_device_properties(0)
    argv = sys.argv if argv is None else argv
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": commit(), "device": props.name, "sms": props.multi_processor_count,
            "driver": driver_version(), "torch": torch.__version__,
            "triton": triton.__version__, "python": sys.version.split()[0],
            "command": command_line(argv)}


def command_line(argv):
    """The command as typed from the repository root (PYTHONPATH included)."""
    env = f"PYTHONPATH={os.environ['PYTHONPATH']} " if os.environ.get("PYTHONPATH") else ""
    script = os.path.relpath(os.path.abspath(argv[0]), ROOT) if argv else "?"
    return env + "python3 " + " ".join(shlex.quote(a) for a in [script, *argv[1:]])


class Report:
    """The rows of one benchmark run; see the module docstring.

    `copy_gbs` (measured in the same run) sets the floor of memory-bound
    workloads, `peak_tflops` that of FLOP-bound ones."""

    def __init__(self, script, out_dir, timing, copy_gbs=None,
                 peak_tflops=H200_DENSE_TENSOR_TFLOPS, argv=None):
        self.script, self.out_dir = script, out_dir
        self.copy_gbs, self.peak_tflops = copy_gbs, peak_tflops
        self.data = {"format": FORMAT, "version": 1, "script": f"bench/{script}.py",
                     "run": run_info(argv), "timing": timing, "copy_bandwidth_gbs": copy_gbs,
                     "peak_tflops": peak_tflops, "workloads": {}, "rows": [], "extra": {}}

    def workload(self, name, bytes=None, flops=None, **extra):
        """Declares a workload; its floor is the larger of bytes / copy rate
        and flops / tensor peak (what is given)."""
        floors = {}
        if bytes and self.copy_gbs:
            floors["memory"] = bytes / (self.copy_gbs * 1e9) * 1e3
        if flops and self.peak_tflops:
            floors["compute"] = flops / (self.peak_tflops * 1e12) * 1e3
        basis = max(floors, key=floors.get) if floors else None
        self.data["workloads"][name] = dict(
            bytes=bytes, flops=flops, floor_ms=floors.get(basis), floor_basis=basis, **extra)

    def row(self, workload, implementation, check, time, tolerance, role="ours",
            metric="rel_l2", **extra):
        """Checks, then times, one implementation of `workload`.

        check() runs the implementation once from pristine inputs and returns
        {check name: error} (one entry, or several such as out and cache
        rows); the row's error is the largest. time() -> milliseconds, called
        only when every error is within `tolerance`. `role` is "ours" or
        "peer": ratios are peer time / our time. Returns the time or None."""
        if workload not in self.data["workloads"]:
            raise ValueError(f"{self.script}: row {implementation!r} names undeclared "
                             f"workload {workload!r}")
        row = {"workload": workload, "implementation": implementation, "role": role,
               "metric": metric, "tolerance": tolerance, "error": None, "details": {},
               "verdict": FAILED, "ms": None, **extra}
        self.data["rows"].append(row)
        try:
            errors = {name: float(e) for name, e in check().items()}
            if not errors:
                raise ValueError("the check returned no error to judge")
            row["details"] = errors
            row["error"] = max(errors.values(), key=lambda e: e if e == e else math.inf)
            failed = [n for n, e in errors.items() if not within(e, tolerance)]
            if failed:
                row["reason"] = "over tolerance: " + ", ".join(
                    f"{n} {errors[n]:.3g}" for n in failed)
            else:
                row["ms"] = float(time())
                row["verdict"] = PASS
        except Skip as exc:
            row.update(verdict=SKIPPED, reason=str(exc))
        except Exception as exc:   # a crashing row fails; the others still run
            row["reason"] = f"{type(exc).__name__}: {exc}"
        if row["verdict"] != PASS:
            print(f"{row['verdict']}: {workload} / {implementation}: {row['reason']}")
        return row["ms"]

    def skip(self, workload, implementation, reason, role="ours"):
        """Records a row that could not run here (a missing artifact)."""
        self.data["rows"].append({"workload": workload, "implementation": implementation,
                                  "role": role, "verdict": SKIPPED, "reason": reason,
                                  "ms": None, "error": None, "tolerance": None})
        print(f"skipped: {workload} / {implementation}: {reason}")

    def failed(self):
        return [r for r in self.data["rows"] if r["verdict"] == FAILED]

    def finish(self):
        """Ratios and floors into the rows, then JSON + plot; the exit status."""
        finish_rows(self.data)
        os.makedirs(self.out_dir, exist_ok=True)
        path = os.path.join(self.out_dir, f"{self.script}.json")
        with open(path, "w") as f:
            json.dump(_finite(self.data), f, indent=1, allow_nan=False, default=_jsonable)
            f.write("\n")
        print(f"wrote {path}")
        plot(self.data, os.path.join(self.out_dir, f"{self.script}.png"))
        failed = self.failed()
        for r in failed:
            print(f"FAILED: {r['workload']} / {r['implementation']}: {r.get('reason')}")
        print(f"{len(failed)} FAILED row(s) of {len(self.data['rows'])}" if failed
              else f"all {len(self.data['rows'])} rows checked; none failed")
        return 1 if failed else 0


class Skip(Exception):
    """A row that cannot run here (a missing artifact); the message says why."""


def _jsonable(value):
    """json.dump fallback: numpy scalars and tuples of them."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _finite(value):
    """A copy with NaN and infinities as the strings "nan", "inf", "-inf"
    (strict JSON has no such numbers; a failed row's error may be one)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def finish_rows(data):
    """Adds to every passing row its floor, fraction of the floor and ratios
    (peer ms / this row's ms, for every passing peer of its workload)."""
    for row in data["rows"]:
        w = data["workloads"][row["workload"]]
        row["ratios"] = {}
        if row["verdict"] != PASS:
            continue
        if w.get("floor_ms"):
            row["floor_ms"] = w["floor_ms"]
            row["of_floor"] = w["floor_ms"] / row["ms"]
        if w.get("bytes"):
            row["gbs"] = w["bytes"] / (row["ms"] * 1e-3) / 1e9
        if w.get("flops"):
            row["tflops"] = w["flops"] / (row["ms"] * 1e-3) / 1e12
        for peer in data["rows"]:
            if (peer["workload"] == row["workload"] and peer["role"] == "peer"
                    and peer["verdict"] == PASS and peer is not row):
                row["ratios"][peer["implementation"]] = peer["ms"] / row["ms"]


# ------------------------------------------------------------------ plot


def plot(data, path):
    """Per workload, each passing implementation's time beside the workload's
    hardware floor (FAILED and skipped rows are named, not drawn)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"no plot {path}: matplotlib is not installed")
        return
    names = list(data["workloads"])
    if not names:
        return
    sizes = [1 + sum(r["workload"] == n for r in data["rows"]) for n in names]
    fig, axes = plt.subplots(len(names), 1, squeeze=False,
                             figsize=(10, 0.32 * sum(sizes) + 0.9 * len(names) + 1))
    colors = {"ours": "tab:green", "peer": "tab:blue"}
    for ax, name in zip(axes[:, 0], names):
        w = data["workloads"][name]
        labels, times, bar_colors = [], [], []
        if w.get("floor_ms"):
            labels.append(f"hardware floor ({w['floor_basis']})")
            times.append(w["floor_ms"])
            bar_colors.append("lightgray")
        for r in (r for r in data["rows"] if r["workload"] == name):
            if r["verdict"] == PASS:
                labels.append(r["implementation"])
                times.append(r["ms"])
                bar_colors.append(colors.get(r["role"], "tab:gray"))
            else:
                labels.append(f"{r['implementation']} ({r['verdict']}, not timed)")
                times.append(0.0)
                bar_colors.append("tab:red")
        ax.barh(labels, times, color=bar_colors)
        ax.invert_yaxis()
        for y, t in enumerate(times):
            if t:
                ax.text(t, y, f" {t:.4g}", va="center", fontsize=7)
        ax.set_title(name, fontsize=9, loc="left")
        ax.tick_params(labelsize=7)
        ax.set_xlabel("ms (lower is better)", fontsize=7)
    run = data["run"]
    fig.suptitle(f"{data['script']} on {run['device']}, {run['date']}, {run['commit'][:12]}",
                 fontsize=9)
    # Room above the first panel for the run's title.
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / fig.get_figheight()))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")
