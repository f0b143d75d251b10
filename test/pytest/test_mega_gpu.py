"""Persistent mega-kernels on a real GPU, from artifacts compiled elsewhere.

The artifacts come from the compiler machine, in out/ or $TILEMEGA_ARTIFACTS:

  mega_mlp, mega_mlp_fused, mega_decode, mega_decode_jit, mega_decode_timeline
      examples/mega_decode.py build_all (scripts/tilemega.sh main builds them)
  test_mega_small_{aot,auto,jit}, test_mega_watchdog{,_jit}, test_mega_too_wide,
  test_mega_misplaced_kv
      examples/mega_decode.py build_test_artifacts (build_all builds them too;
      `python examples/mega_decode.py --tests-only out` builds only these)

so this file needs only the runtime, torch and cuda-python. Where the
compiler is importable too, missing test_mega_* artifacts are built into a
temporary folder. Every test makes its own tensors (examples/run_mega.py:
fresh weights, caches holding random values at the position a step writes,
a NaN output) and judges a decode step by its output, every layer's written
k/v cache row and the positions it must not write (reference.check_decode_step);
test_mega_misplaced_kv, built to write the wrong row, must fail that check.
Also: repeated launches with no host work between them (epochs, CUDA graph
replays), the watchdog on a wait that can never be satisfied (in a
subprocess with a timeout: it must raise, never hang), the runtime's
residency check, and the measured timeline.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import gpu_skip_reason, raise_trigger

import tilemega
from tilemega.runtime import LaunchError, load_mega
from tilemega.runtime import mega_meta as mm
from tilemega.runtime import mega_sim as ms
from tilemega.runtime import mega_timeline as mt

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
ARTIFACTS = os.environ.get("TILEMEGA_ARTIFACTS", os.path.join(ROOT, "out"))
BUILD_HINT = ("build them with `python examples/mega_decode.py out` on the compiler machine "
              "(--tests-only: just the test_mega_* ones) or point TILEMEGA_ARTIFACTS at them")

_REASON = gpu_skip_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]


# ---------------------------------------------------------------- artifacts


_built = {}


def _built_here():
    """A temporary folder with the test_mega_* artifacts, built here once
    (only where the compiler is importable)."""
    if "dir" not in _built:
        sys.path.insert(0, os.path.join(ROOT, "examples"))
        import mega_decode

        folder = tempfile.mkdtemp(prefix="tilemega-mega-tests-")
        mega_decode.build_test_artifacts(folder)
        _built["dir"] = folder
    return _built["dir"]


def artifact(name):
    """The path of artifact `name` (without .json)."""
    path = os.path.join(ARTIFACTS, name + ".json")
    if not os.path.isfile(path) and name.startswith("test_mega_") \
            and importlib.util.find_spec("tilemega.ir") is not None:
        path = os.path.join(_built_here(), name + ".json")
    assert os.path.isfile(path), f"{path} is missing: {BUILD_HINT}"
    return path


def _load(name):
    """load_mega(artifact(name)), after the simulator's static proof of its schedule."""
    mk = load_mega(artifact(name))
    assert ms.static_problems(mk.meta) == [], name
    return mk


def _run_mega():
    """examples/run_mega.py: fresh tensors, the float64 reference and the
    checks of every workload (check_graph is what gpu_check.py records)."""
    if "run_mega" not in _built:
        spec = importlib.util.spec_from_file_location(
            "run_mega", os.path.join(ROOT, "examples", "run_mega.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _built["run_mega"] = module
    return _built["run_mega"]


def _reference():
    """tilemega/mega/reference.py, loaded by file (run_mega.reference)."""
    return _run_mega().reference()


def _shapes(mk):
    return {p.name: tuple(p.shape) for p in mk.graph_params}


class DecodeCase:
    """One decode step's tensors, new for every test (nothing is shared
    across tests): weights, x, rope tables, caches whose written position
    holds random values (a missing write is a wrong row) and an output of
    NaN (a missing element is NaN); `expected` = (out, rows) in float64,
    `before` the caches as they were before any launch."""

    def __init__(self, mk, seed=0):
        import torch

        rm = _run_mega()
        self.cfg = rm.decode_config(_shapes(mk), mk.name)
        self.tensors = rm.fresh_decode(self.cfg, torch, seed)
        self.expected = rm.expected_decode(self.cfg, self.tensors)
        self.before = _reference().snapshot_caches(self.cfg, self.tensors)
        self.out = self.tensors["out"]

    def bind(self, mk, **override):
        mk.bind({p.name: self.tensors[p.name] for p in mk.user_params}, **override)
        return self.out

    def judge(self, tensors=None, out=None, expected=None):
        """reference.check_decode_step: the output, every layer's written k
        and v row, and the positions not written (default: this case's
        tensors as they are now)."""
        tensors = dict(self.tensors) if tensors is None else tensors
        return _reference().check_decode_step(
            self.cfg, tensors, self.before, self.out if out is None else out,
            *(expected or self.expected))


def _verdict(name, got):
    d = got["details"]
    return f"{name}: failed {d.get('failed')}; {d}"


# ---------------------------------------------------------------- results


@pytest.mark.parametrize("name", ["mega_mlp", "mega_mlp_fused"])
def test_mlp_chain_matches_float64(name):
    import torch

    rm = _run_mega()
    mk = _load(name)
    intermediate2, hidden = _shapes(mk)["wgu"]
    w = rm.fresh_mlp(hidden, intermediate2 // 2, torch)   # out starts as NaN
    mk(**{p.name: w[p.name] for p in mk.user_params})      # bind, launch, check
    assert mk.epoch == 1
    got = rm.judge_mlp(w)
    assert got["passed"], f"{name}: relative L2 error {got['error']:.3g}"


@pytest.mark.parametrize("name", ["mega_decode", "mega_decode_jit", "test_mega_small_aot",
                                  "test_mega_small_auto", "test_mega_small_jit"])
def test_decode_step_matches_float64(name):
    """The output and every KV-cache row the step writes match float64;
    every other cache position is untouched."""
    mk = _load(name)
    case = DecodeCase(mk)
    case.bind(mk)
    mk.launch()
    mk.check()
    got = case.judge()
    assert got["passed"], _verdict(name, got)


def test_cache_row_check_catches_a_misplaced_write():
    """test_mega_misplaced_kv is the small decode step with every layer's
    new k/v written one row early (mega_decode.misplaced_kv_graph). The
    check must fail it on the rows, whatever the output does; the same
    check passes the correct graph (test_decode_step_matches_float64)."""
    import torch

    rm = _run_mega()
    name = "test_mega_misplaced_kv"
    assert name in rm.EXPECTED_TO_FAIL
    got = rm.check_graph(artifact(name), torch)
    d = got["details"]
    assert not got["passed"], _verdict(name, got)
    rows = [k for k in d if k.endswith("_row")]
    assert rows and all(d[k] > d["kv_row_tolerance"] for k in rows), d
    assert not d["untouched_rows_ok"], d
    # The output check alone is no safeguard here: print what it says.
    print(f"{name}: output relative L2 {got['error']:.3g} (tolerance {got['tolerance']:g}); "
          f"rows {min(d[k] for k in rows):.3g} to {max(d[k] for k in rows):.3g}")
    # check_graph gives every launch fresh tensors: the correct graph passes it.
    good = rm.check_graph(artifact("test_mega_small_aot"), torch)
    assert good["passed"], _verdict("test_mega_small_aot", good)


# ---------------------------------------------------------------- repeated launches


@pytest.mark.parametrize("name", ["mega_decode", "mega_decode_jit", "test_mega_small_jit"])
def test_repeated_launches_need_no_host_work(name):
    """Four steps back to back, only stream-ordered input copies between
    them: events are never reset, each launch waits for its own epoch. With
    x_a, x_a, x_b, x_a a launch that saw the previous launch's events fired
    would read the previous step's intermediates and get x_b's step wrong.
    The x_b step's caches are copied right after it ran and judged too."""
    import torch

    mk = _load(name)
    case = DecodeCase(mk)
    w = case.tensors
    x = w["x"].clone()
    out = case.bind(mk, x=x)
    gen = torch.Generator(device="cuda").manual_seed(1)
    x_b = torch.randn(case.cfg.hidden, generator=gen, device="cuda").to(torch.bfloat16)
    expected_b = _reference().reference_step_float64(case.cfg, w, x=x_b)
    caches = _reference().cache_names(case.cfg)
    outs = []
    for xi in (w["x"], w["x"], x_b, w["x"]):
        x.copy_(xi)
        mk.launch()
        outs.append(out.clone())
        if xi is x_b:
            after_b = {**w, **{n: w[n].clone() for n in caches}}
    torch.cuda.synchronize()
    mk.check()
    assert mk.epoch == 4
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[3])
    assert not torch.equal(outs[0], outs[2])
    got = case.judge(out=outs[3])
    assert got["passed"], _verdict(name, got)
    got = case.judge(tensors=after_b, out=outs[2], expected=expected_b)
    assert got["passed"], _verdict(name + " (x_b)", got)
    # reset() zeroes events and state: the next launch is epoch 0 again.
    mk.reset()
    assert mk.epoch == 0
    x.copy_(w["x"])
    mk.launch()
    mk.check()
    assert mk.epoch == 1 and torch.equal(out, outs[0])


@pytest.mark.parametrize("name", ["mega_decode", "test_mega_small_auto"])
def test_cuda_graph_replays_advance_the_epoch(name):
    import torch

    mk = _load(name)
    case = DecodeCase(mk)
    out = case.bind(mk)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):          # first launch: module load, buffers, checks
        mk.launch()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mk.launch()
    assert mk.epoch == 1                   # capturing ran nothing
    out.fill_(float("nan"))
    for n in _reference().cache_names(case.cfg):   # the replays must write the rows again
        case.tensors[n].copy_(case.before[n])
    torch.cuda.synchronize()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    mk.check()
    assert mk.epoch == 4
    got = case.judge()
    assert got["passed"], _verdict(name, got)


# ---------------------------------------------------------------- the watchdog


WATCHDOG_RUN = r"""
import json, sys, time
import torch
from tilemega.runtime import MegaKernelError, load_mega

mk = load_mega(sys.argv[1])
gen = torch.Generator(device="cuda").manual_seed(0)
mk.bind({p.name: (0.5 * torch.randn(tuple(p.shape), generator=gen, device="cuda"))
         .to(getattr(torch, p.dtype)) for p in mk.user_params})
mk.check_resident()             # allocates and loads the module before the clock starts
torch.cuda.synchronize()
start = time.monotonic()
result = {"raised": False}
try:
    mk.launch()
    mk.check()
except MegaKernelError as exc:
    result = dict(raised=True, message=str(exc), code=exc.code, cta=exc.cta, entry=exc.entry,
                  event=exc.event, seen=exc.seen, expected=exc.expected)
result["seconds"] = time.monotonic() - start
result["state"] = mk.state()
print("RESULT " + json.dumps(result), flush=True)
"""


def _mlp_control(name):
    """The unmodified artifact runs and matches the reference."""
    import torch

    rm = _run_mega()
    mk = _load(name)
    intermediate2, hidden = _shapes(mk)["wgu"]
    w = rm.fresh_mlp(hidden, intermediate2 // 2, torch)
    mk(**{p.name: w[p.name] for p in mk.user_params})
    got = rm.judge_mlp(w)
    assert got["passed"], f"{name}: relative L2 error {got['error']:.3g}"


@pytest.mark.parametrize("name", ["test_mega_watchdog", "test_mega_watchdog_jit"])
def test_watchdog_stops_a_wait_that_can_never_be_satisfied(name, tmp_path):
    _mlp_control(name)
    src = artifact(name)
    with open(src) as f:
        doc = json.load(f)
    (kernel,) = [k for k in doc["kernels"] if "mega" in k]
    meta = kernel["mega"]
    assert meta["watchdog_ns"] == 200_000_000
    # The first wait of the first entry that has one, in the order its queue runs.
    order = meta["jit"] + [e for lst in meta["aot"] for e in lst]
    v = next(meta["waits"][e][0] for e in order if meta["waits"][e])
    old = meta["events"][v]["trigger"]
    assert raise_trigger(meta, v) == old + 1
    for key in ("ptx", "cubin"):
        if doc.get(key):
            shutil.copy(os.path.join(os.path.dirname(src), doc[key]), tmp_path / doc[key])
    path = tmp_path / os.path.basename(src)
    path.write_text(json.dumps(doc))
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(tilemega.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [package_dir] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    # The safety net: a kernel that hangs fails here after 120 s instead of
    # hanging the test run.
    proc = subprocess.run([sys.executable, "-c", WATCHDOG_RUN, str(path)], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    r = json.loads(line[len("RESULT "):])
    assert r["raised"], r
    assert 0.2 <= r["seconds"] < 5.0, r                  # the 200 ms watchdog, not a hang
    assert r["state"][4] == r["code"] and r["state"][10] == 1, r["state"]   # the abort flag
    event = meta["events"][v]["name"]
    label = mm.entry_label(meta, r["entry"])
    assert label in r["message"], r
    workers = meta["workers"]
    if name == "test_mega_watchdog":
        # A worker waits before an AOT entry that needs the event.
        assert r["code"] == 1 and 0 <= r["cta"] < workers, r
        assert (r["event"], r["seen"], r["expected"]) == (v, old, old + 1), r
        assert v in meta["waits"][r["entry"]]
        assert f"worker {r['cta']} waited 200 ms on event '{event}' (counter {old}, expected " \
               f"{old + 1}) before {label}" in r["message"], r
    else:
        # Every entry is a JIT entry: the scheduler cannot publish the first
        # one that needs the event (or a worker gives up on its ticket first).
        assert r["code"] in (2, 3), r
        assert r["entry"] in meta["jit"] and v in meta["waits"][r["entry"]], r
        if r["code"] == 2:
            assert r["cta"] == workers
            assert (r["event"], r["seen"], r["expected"]) == (v, old, old + 1), r
            assert f"the scheduler (CTA {workers}) waited 200 ms on event '{event}' " \
                   f"(counter {old}, expected {old + 1}) before publishing {label}" \
                   in r["message"], r
        else:
            assert 0 <= r["cta"] < workers
            assert f"worker {r['cta']} waited 200 ms for the JIT queue" in r["message"], r


# ---------------------------------------------------------------- residency


def test_runtime_refuses_a_grid_that_cannot_be_resident():
    mk = load_mega(artifact("test_mega_too_wide"))
    assert mk.kernel.spec.grid[0] == 2047
    with pytest.raises(LaunchError, match=r"mega-kernel 'empty' needs all of its 2047 CTAs "
                                          r"\(2047 workers\) resident at once, but device \d+ "
                                          r"keeps at most \d+ \(\d+ SMs x \d+ CTAs of 256 "
                                          r"threads( and \d+ bytes of dynamic shared memory)? "
                                          r"per SM\): recompile with at most"):
        mk.launch()
    assert mk.state() == [0] * 16          # never launched
    # The decode step's 131 workers + the scheduler fit one CTA per SM.
    big = _load("mega_decode_jit")
    assert big.kernel.spec.grid[0] == 132
    big.check_resident()


# ---------------------------------------------------------------- the timeline


@pytest.mark.parametrize("name", ["test_mega_small_aot", "test_mega_small_auto",
                                  "test_mega_small_jit", "mega_decode_timeline"])
def test_timeline_records_every_entry_once(name):
    import numpy as np

    mk = _load(name)
    case = DecodeCase(mk)
    case.bind(mk)
    mk.launch()
    mk.check()
    got = case.judge()
    assert got["passed"], _verdict(name, got)
    meta, n, workers = mk.meta, mk.num_entries, mk.meta["workers"]
    rows = mk.timeline()
    assert rows.shape == (n, 4)
    start, end, cta, sm = (rows[:, i] for i in range(4))
    assert (start > 0).all() and (start <= end).all()
    assert ((cta >= 0) & (cta < workers)).all()          # the scheduler CTA runs no entry
    for wk, lst in enumerate(meta["aot"]):
        assert (cta[lst] == wk).all(), f"an AOT entry of worker {wk} ran elsewhere"
    for c in np.unique(cta):
        mine = np.flatnonzero(cta == c)
        mine = mine[np.argsort(start[mine], kind="stable")]
        assert (end[mine[:-1]] <= start[mine[1:]]).all(), f"CTA {c} ran two entries at once"
        assert len(np.unique(sm[mine])) == 1               # a persistent CTA stays on its SM
    # Each entry started after every signaller of every event it waits on
    # ended (%globaltimer is one clock for all SMs).
    senders = mm.signallers(meta)
    for e in range(n):
        for v in meta["waits"][e]:
            assert start[e] >= end[senders[v]].max(), (mm.entry_label(meta, e), v)
    summary = mt.summarize(rows, meta)
    assert (summary.recorded, summary.missing) == (n, 0)
