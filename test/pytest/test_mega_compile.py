"""tilemega.compile on mega graphs (no GPU): the persistent kernel's artifact
metadata matches the graph (grid, params, roles, the `mega` dict and its
packed tables), ptxas assembles it with no spills (ptxas is required:
ptxas_policy.py), bad input fails with a message naming the problem, and
the simulator proves every compiled graph deadlock-free (the small model
graphs and every mega graph of the lit tests but those EXPECTED_REJECTIONS
lists, which must fail with their message) and catches corrupted tables.

Graphs are small (8 workers, hidden 256) so that the whole file compiles in
about 20 seconds."""

import copy
import glob
import os
import re

import pytest

pytest.importorskip("tilemega.ir", reason="the compiler package is not built")

import tilemega  # noqa: E402
from tilemega import mega  # noqa: E402
from tilemega.compiler import CompileError  # noqa: E402
from tilemega.runtime import mega_meta as mm  # noqa: E402
from tilemega.runtime import mega_sim as ms  # noqa: E402

from conftest import raise_trigger  # noqa: E402
from ptxas_policy import OPT_OUT, ptxas_checks_enabled  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
WORKERS = 8
# 8 query heads over 2 kv heads: the attention body spreads a group's 4 rows
# over the 8 warps with 64 columns each, which head_dim 64 and 2 splits of
# the 128 keys fit (4 query heads, 2 rows a group, would need head_dim 128).
SMALL = mega.LlamaConfig(layers=2, hidden=256, intermediate=512, heads=8, kv_heads=2,
                         head_dim=64, kv_len=128)
# The order of the sections in `tables` (docs/mega.md).
SECTIONS = ["records", "aot_records", "entry_case", "entry_task", "entry_instance",
            "wait_offsets", "waits", "signal_offsets", "signals", "triggers", "aot_offsets",
            "aot", "jit"]
RECORD = 8


def _mlp(fuse):
    return mega.mlp_graph(hidden=256, intermediate=512, workers=WORKERS, fuse=fuse)


def _decode(fuse=True):
    return mega.decode_graph(SMALL, workers=WORKERS, attention_splits=2, fuse=fuse)


# name -> (graph builder, tilemega.compile options)
CASES = {
    "mlp_fused": (lambda: _mlp(True), dict(mega_watchdog_ms=200, mega_timeline=True)),
    "mlp_unfused": (lambda: _mlp(False), {}),
    "decode_aot": (_decode, dict(mega_policy="aot")),
    "decode_auto": (_decode, dict(mega_policy="auto")),
    "decode_jit": (_decode, dict(mega_policy="jit")),
    "decode_unfused_auto": (lambda: _decode(fuse=False), dict(mega_policy="auto")),
}


@pytest.fixture(scope="module")
def compiled():
    """name -> (Graph, options, CompiledModule), each compiled once."""
    out = {}
    for name, (build, options) in CASES.items():
        graph = build()
        out[name] = (graph, options, tilemega.compile(graph.to_mlir(), chip="sm_90a", **options))
    return out


@pytest.fixture(scope="module")
def full_decode():
    """One layer of the Llama-3.2-1B decode step on 131 workers + the
    scheduler: the same persistent-kernel bodies as the 16-layer artifact."""
    graph = mega.decode_graph(mega.LlamaConfig(layers=1), workers=131)
    return tilemega.compile(graph.to_mlir(), chip="sm_90a")


def _mega_kernel(art):
    kernels = [k for k in art.kernels if "mega" in k]
    assert len(kernels) == 1, [k["name"] for k in art.kernels]
    return kernels[0]


def _sections(meta):
    """name -> the slice of `tables` it occupies (empty sections share the
    next one's offset: ties go by the documented order)."""
    at, tables = meta["table_sections"], meta["tables"]
    names = sorted(at, key=lambda n: (at[n], SECTIONS.index(n)))
    ends = [at[n] for n in names[1:]] + [len(tables)]
    return {n: tables[at[n]:end] for n, end in zip(names, ends)}


def check_tables(kernel):
    """The structure every persistent kernel's artifact must have, whatever
    the graph: grid, params, the `mega` lists and the packed tables agree."""
    meta = kernel["mega"]
    mm.validate(meta)
    n, workers, jit = len(meta["entries"]["task"]), meta["workers"], meta["jit"]
    assert (meta["num_entries"], meta["num_events"], meta["num_jit"]) == (
        n, len(meta["events"]), len(jit))
    assert kernel["grid"] == [workers + (1 if jit else 0), 1, 1]
    assert kernel["block"] == [meta["threads"], 1, 1]
    # The params are the five runtime buffers, whatever the graph: its
    # arguments are reached through the argument table.
    params = kernel["params"]
    assert [p["name"] for p in params] == list(mm.RUNTIME_PARAMS)
    assert [p.get("role") for p in params] == ["runtime"] * 5
    assert [(p["dtype"], p["shape"]) for p in params] == [
        ("int64", [max(1, len(meta["args"]) + (mm.ranks(meta) + 1 if mm.ranks(meta) > 1 else 0))]),
        ("int32", [len(meta["tables"])]), ("int32", [max(1, len(meta["events"]))]),
        ("int32", [mm.state_words(meta)]), ("int64", [max(1, 4 * n)])]
    # Every entry in exactly one list: one worker's AOT list or the JIT list.
    placed = [e for lst in meta["aot"] for e in lst] + list(jit)
    assert sorted(placed) == list(range(n))
    # Every task instance is one entry; a task with an instance in the JIT
    # list is a "jit" task (a hand-scheduled graph may put only some there).
    in_jit = set(jit)
    seen = {}
    for e, (t, i) in enumerate(zip(meta["entries"]["task"], meta["entries"]["instance"])):
        seen.setdefault(t, []).append(i)
        if e in in_jit:
            assert meta["tasks"][t]["queue"] == "jit", (e, meta["tasks"][t])
    for t, task in enumerate(meta["tasks"]):
        assert sorted(seen.get(t, [])) == list(range(task["count"])), task["name"]
        assert task["count"] * task["units_per_task"] >= task["units"] > \
            (task["count"] - 1) * task["units_per_task"]
    # Trigger counts: every event fires once per launch, when its last signaller ends.
    senders = mm.signallers(meta)
    assert [ev["trigger"] for ev in meta["events"]] == [len(s) for s in senders]
    # The packed tables, which the kernel reads (the lists above are decoded from them).
    at = meta["table_sections"]
    assert sorted(at) == sorted(SECTIONS)
    assert [at[n] for n in SECTIONS] == sorted(at.values())     # in the documented order
    sec = _sections(meta)
    assert len(sec["records"]) == RECORD * n
    assert sec["triggers"] == [ev["trigger"] for ev in meta["events"]]

    # A paired entry (mega-pair-entries) names its pair case, numbered
    # after the body cases: the pair of its case and its successor's.
    case = list(sec["entry_case"])
    after = mm.next_aot_entries(meta)
    for e in meta.get("paired_entries", []):
        pair = [sec["entry_case"][e], sec["entry_case"][after[e]]]
        case[e] = max(sec["entry_case"]) + 1 + meta["pair_cases"].index(pair)

    def record(e):
        waits, signals = meta["waits"][e], meta["signals"][e]
        first = waits[0] if waits else -1
        return [case[e] | (meta["entries"]["task"][e] << 16),
                meta["entries"]["instance"][e], len(waits), first,
                meta["events"][first]["trigger"] if waits else 0, len(signals),
                signals[0] if signals else -1, e]

    assert sec["records"] == [w for e in range(n) for w in record(e)]
    assert sec["aot_records"] == [w for lst in meta["aot"] for e in lst for w in record(e)]
    return meta


# ---------------------------------------------------------------- the model graphs


@pytest.mark.parametrize("name", sorted(CASES))
def test_artifact_metadata(compiled, name):
    graph, options, art = compiled[name]
    (kernel,) = art.kernels        # the bodies live on inside the persistent kernel only
    assert kernel["name"] == graph.name and "mega" in kernel
    meta = check_tables(kernel)
    policy = options.get("mega_policy", "auto")
    jit_tasks = [t.variable for t in graph.tasks] if policy == "auto" else \
        [policy == "jit"] * len(graph.tasks)
    assert kernel["grid"] == [WORKERS + (1 if any(jit_tasks) else 0), 1, 1]
    assert kernel["block"] == [graph.threads, 1, 1]
    # The graph's tensors in creation order, with their roles, in the
    # argument table; the params are the five runtime buffers.
    args = meta["args"]
    assert [(p["name"], p.get("role"), p["dtype"], tuple(p["shape"])) for p in args] == \
        [(t.name, t.role, t.dtype, t.shape) for t in graph.tensors]
    assert len(kernel["params"]) == 5
    assert (meta["graph"], meta["workers"], meta["threads"]) == (graph.name, WORKERS,
                                                                 graph.threads)
    assert [(t["name"], t["body"], t["units"]) for t in meta["tasks"]] == \
        [(t.name, t.body.name, t.body.units) for t in graph.tasks]
    assert [t["queue"] == "jit" for t in meta["tasks"]] == jit_tasks
    # The schedule puts all instances of a task in one kind of queue.
    in_jit = set(meta["jit"])
    assert [e in in_jit for e in range(meta["num_entries"])] == \
        [jit_tasks[t] for t in meta["entries"]["task"]]
    assert all(t["cost_ns"] > 0 for t in meta["tasks"])
    assert meta["timeline"] is bool(options.get("mega_timeline", False))
    assert meta["watchdog_ns"] == options.get("mega_watchdog_ms", 2000) * 1_000_000
    if policy == "jit":
        assert meta["aot"] == [[]] * WORKERS


# Every persistent kernel keeps its fragments in registers: no spills and no
# stack at all. Before tile-scalarize-fragments the merged tails of the task
# bodies kept GEMV accumulators on the stack (288 bytes in the generation
# kernel), and before nvvm.minctasm = 1 ptxas capped the small decode
# kernels at 128 registers and spilled 16-52 bytes.
@pytest.mark.parametrize("name", sorted(CASES) + ["decode_full_1layer"])
def test_ptxas_no_spills(compiled, full_decode, name):
    if not ptxas_checks_enabled():     # ptxas required; TILEMEGA_NO_PTXAS=1 opts out
        pytest.skip(f"{OPT_OUT}=1: ptxas checks turned off")
    art = full_decode if name == "decode_full_1layer" else compiled[name][2]
    stats = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", art.ptxas_log)
    assert len(stats) == 1 and art.cubin, art.ptxas_log
    assert stats[0] == ("0", "0"), art.ptxas_log
    assert re.search(r"\b0 bytes stack frame", art.ptxas_log), art.ptxas_log
    assert 0 < art.kernels[0]["registers"] <= 255


def test_full_size_decode_layer(full_decode):
    (kernel,) = full_decode.kernels
    meta = check_tables(kernel)
    assert kernel["grid"] == [132, 1, 1] and meta["workers"] == 131
    # The attention's partials (RoPE inside) on the JIT queue, the rest AOT.
    assert [t["queue"] for t in meta["tasks"]] == ["aot", "jit", "aot", "aot", "aot", "aot"]
    ms.check_deadlock_free(meta, runs=5)


def test_decode_graph_shapes(compiled):
    """The fused layer is 6 tasks, the unfused one 11; every stage boundary an event."""
    for name, per_layer in (("decode_aot", 6), ("decode_unfused_auto", 11)):
        meta = compiled[name][2].kernels[0]["mega"]
        assert len(meta["tasks"]) == per_layer * SMALL.layers
        assert len(meta["events"]) > len(meta["tasks"])     # per-instance events too
    assert [t["name"] for t in compiled["mlp_fused"][2].kernels[0]["mega"]["tasks"]] == \
        ["t0_wgu", "t1_wd"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_simulator_proves_compiled_graph_deadlock_free(compiled, name):
    meta = compiled[name][2].kernels[0]["mega"]
    report = ms.check_deadlock_free(meta, runs=20)
    assert report.proven and report.runs >= 20
    assert report.nominal.deadlock is None
    assert all(s is not None for s in report.nominal.start_ns)
    # More workers than the schedule was made for run it too (the extra ones
    # have empty AOT lists and only run JIT entries).
    assert ms.simulate(meta, workers=WORKERS + 3, seed=1).deadlock is None


def test_misplaced_kv_graph_differs_only_in_the_row_it_writes():
    """The GPU test's broken artifact (test_mega_misplaced_kv) is the small
    decode step (RoPE and the cache row a task of their own) with each
    layer's k/v written at kv_len - 2, nothing else."""
    import sys
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import mega_decode

    good = mega.decode_graph(SMALL, workers=WORKERS, attention_splits=2,
                             rope_in_attention=False, fused_glu=False)
    bad = mega_decode.misplaced_kv_graph(SMALL, workers=WORKERS, attention_splits=2)
    pos = SMALL.kv_len - 1
    changed = [(g.body.name, b.body.name) for g, b in zip(good.tasks, bad.tasks)
               if g.body != b.body]
    assert len(good.tasks) == len(bad.tasks) and len(changed) == SMALL.layers
    assert all(g.endswith(f"_p{pos}") and b == g[:-len(str(pos))] + str(pos - 1)
               for g, b in changed), changed

    def wiring(graph):   # task names and the tensors they get, by name
        return [(t.name, [a.name for a in t.args], t.variable) for t in graph.tasks]

    assert wiring(good) == wiring(bad)
    assert [(t.name, t.shape, t.role) for t in good.tensors] == \
        [(t.name, t.shape, t.role) for t in bad.tensors]
    tilemega.compile(bad.to_mlir(), chip="sm_90a", mega_policy="aot")   # it builds


# ---------------------------------------------------------------- corrupted tables


def test_simulator_catches_a_consumer_before_its_producer(compiled):
    meta = copy.deepcopy(compiled["mlp_fused"][2].kernels[0]["mega"])
    wgu, wd = meta["aot"][0]                    # t0_wgu#i, then t1_wd#j, on every worker
    assert meta["entries"]["task"][wgu] == 0 and meta["entries"]["task"][wd] == 1
    meta["aot"][0] = [wd, wgu]                  # wd waits on ev0, which wgu signals
    with pytest.raises(ms.ScheduleError) as exc:
        ms.check_deadlock_free(meta, runs=5)
    text = str(exc.value)
    assert "dependency cycle" in text
    assert f"runs before {mm.entry_label(meta, wgu)} on worker 0" in text
    with pytest.raises(ms.ScheduleError, match=r"(?s)deadlocked in the simulated nominal.*"
                                               r"worker 0 waits on event 'ev0' \(counter 7 of 8"):
        ms.check_deadlock_free(meta, runs=5, static=False)


def test_simulator_catches_a_raised_trigger(compiled):
    meta = copy.deepcopy(compiled["decode_auto"][2].kernels[0]["mega"])
    # An event a JIT entry (attention split) waits on: the scheduler blocks.
    v = next(ev for e in meta["jit"] for ev in meta["waits"][e])
    old = meta["events"][v]["trigger"]
    raise_trigger(meta, v)
    assert meta["events"][v]["trigger"] == old + 1
    sec = _sections(meta)
    assert sec["triggers"][v] == old + 1
    firsts = [sec["records"][RECORD * e + 3: RECORD * e + 5] for e in range(len(meta["waits"]))]
    assert all(trigger == sec["triggers"][ev] for ev, trigger in firsts if ev >= 0)
    name = meta["events"][v]["name"]
    with pytest.raises(ms.ScheduleError, match=rf"event '{name}' has trigger {old + 1} but "
                                               rf"{old} entries signal it"):
        ms.check_deadlock_free(meta, runs=5)
    d = ms.simulate(meta).deadlock
    assert d is not None and d.scheduler is not None
    assert d.scheduler.waits == [(v, old, old + 1)]
    assert f"the scheduler waits on event '{name}' (counter {old} of {old + 1}" in d.describe(meta)


def test_simulator_catches_a_jit_order_against_the_dependencies(compiled):
    meta = copy.deepcopy(compiled["decode_jit"][2].kernels[0]["mega"])
    jit, senders = meta["jit"], mm.signallers(meta)
    # The first JIT entry that waits directly on an earlier one, moved before it.
    i, j = next((i, j) for j, b in enumerate(jit) for v in meta["waits"][b]
                for i, a in enumerate(jit[:j]) if a in senders[v])
    jit[i], jit[j] = jit[j], jit[i]
    with pytest.raises(ms.ScheduleError, match=r"is published before .* \(JIT order\)"):
        ms.check_deadlock_free(meta, runs=5)
    d = ms.simulate(meta).deadlock
    assert d is not None and d.scheduler.entry == jit[i] and d.jit_published == i


# ---------------------------------------------------------------- the lit tests' graphs


def _lit_files():
    patterns = ["test/Dialect/Mega/*.mlir", "test/Conversion/MegaToGPU/*.mlir",
                "test/Pipelines/mega*.mlir"]
    # Names starting with "_" are scratch files, not tests.
    return sorted({os.path.normpath(p) for pat in patterns
                   for p in glob.glob(os.path.join(ROOT, pat))
                   if not os.path.basename(p).startswith("_")})


_LOC = re.compile(r'loc\("[^"]*":(\d+):\d+\)')


def _lit_graphs():
    """(id, module text) for every mega.graph with tile bodies in a lit test
    chunk without expected errors: the chunk's other ops (the bodies) plus
    that one graph, cut from the source text at the ops' locations (one graph
    per module, so that a graph the pipeline rejects does not hide the
    others). A chunk that does not parse is one item (its compile fails)."""
    from tilemega.ir import Context, MLIRError, Module

    found = []
    for path in _lit_files():
        rel = os.path.relpath(path, ROOT)
        with open(path) as f:
            chunks = f.read().split("// -----")
        for c, chunk in enumerate(chunks):
            if "expected-error" in chunk or "mega.graph" not in chunk \
                    or "tile.kernel" not in chunk:
                continue
            try:
                with Context():
                    ops = [(op.operation.name, str(op.operation.location),
                            str(op.operation.attributes["sym_name"]).strip('"')
                            if "sym_name" in op.operation.attributes else "")
                           for op in Module.parse(chunk).body.operations]
            except MLIRError:
                found.append((f"{rel}#{c}", chunk))
                continue
            starts = [_LOC.search(loc) for _, loc, _ in ops]
            if re.search(r"^\s*module\b", chunk, re.M) or not all(starts):
                found.append((f"{rel}#{c}", chunk))       # cannot cut it: the whole chunk
                continue
            lines = chunk.split("\n")
            starts = [int(m.group(1)) - 1 for m in starts]
            texts = ["\n".join(lines[a:b]) for a, b in zip(starts, starts[1:] + [len(lines)])]
            others = [t for (kind, _, _), t in zip(ops, texts) if kind != "mega.graph"]
            for (kind, _, sym), text in zip(ops, texts):
                if kind == "mega.graph":
                    found.append((f"{rel}#{c}@{sym}", "\n".join(others + [text]) + "\n"))
    return found


LIT_GRAPHS = _lit_graphs()


def test_lit_tests_hold_mega_graphs():
    assert len(LIT_GRAPHS) >= 3, [g for g, _ in LIT_GRAPHS]


@pytest.fixture(scope="module")
def lit_compiled():
    """id -> the mega kernels compiled from it, or why the pipeline rejects it."""
    out = {}
    for gid, text in LIT_GRAPHS:
        try:
            art = tilemega.compile(text, chip="sm_90a")
        except CompileError as exc:
            out[gid] = str(exc).split("\n")[2] if str(exc).count("\n") > 2 else str(exc)
            continue
        out[gid] = [k for k in art.kernels if "mega" in k]
    return out


# The lit graphs the full pipeline rejects on purpose, with the message it
# must give: id ("<lit file>#<chunk>@<graph>") -> regex of the first error.
# Every other lit graph must compile; a listed one that compiles, fails with
# another message or no longer exists fails the tests below.
EXPECTED_REJECTIONS = {
    # A convert-mega-to-gpu test: its body's 64-element fragment is never
    # lowered there, and no layout spreads it over 128 threads.
    "test/Conversion/MegaToGPU/convert-mega-to-gpu.mlir#1@two":
        r"'tile\.alloc_fragment' op cannot spread a fragment of shape \[64\] evenly over "
        r"128 threads",
    # ops.mlir round-trips the syntax: its hand-written trigger counts are per
    # task count, not per instance after mega-decompose.
    "test/Dialect/Mega/ops.mlir#0@layer":
        r"'mega\.event' op event @normed has trigger count 32 but is signalled by 4 task "
        r"instances: a wait on it can never be satisfied",
    "test/Dialect/Mega/ops.mlir#0@diamond":
        r"'mega\.event' op event @both has trigger count 64 but is signalled by 4 task "
        r"instances: a wait on it can never be satisfied",
    # The IR allows an empty graph; there is no kernel to make of it.
    "test/Dialect/Mega/ops.mlir#0@empty": r"'mega\.graph' op has no tasks to run",
}


def test_some_lit_graphs_compile(lit_compiled):
    ok = [g for g, k in lit_compiled.items() if isinstance(k, list) and k]
    assert len(ok) >= 3, lit_compiled


def test_expected_rejections_name_existing_lit_graphs():
    ids = {g for g, _ in LIT_GRAPHS}
    stale = sorted(set(EXPECTED_REJECTIONS) - ids)
    assert not stale, (f"EXPECTED_REJECTIONS lists graphs no lit test holds any more: {stale}; "
                       f"the lit graphs are {sorted(ids)}")


@pytest.mark.parametrize("gid", [g for g, _ in LIT_GRAPHS])
def test_lit_graph_compiles_or_is_rejected_as_listed(lit_compiled, gid):
    """A listed graph fails with its message; every other one compiles to
    persistent kernels whose tables hold and whose schedule the simulator
    proves deadlock-free."""
    kernels = lit_compiled[gid]
    if gid in EXPECTED_REJECTIONS:
        assert isinstance(kernels, str), f"{gid} is listed in EXPECTED_REJECTIONS but compiles"
        assert re.search(EXPECTED_REJECTIONS[gid], kernels), (
            f"{gid} is rejected with another message than EXPECTED_REJECTIONS says: {kernels}")
        return
    assert not isinstance(kernels, str), (
        f"the pipeline rejects {gid}: {kernels} (if that is intended, list it in "
        "EXPECTED_REJECTIONS with its message)")
    assert kernels, "no persistent kernel came out of a mega.graph"
    for kernel in kernels:
        meta = check_tables(kernel)
        report = ms.check_deadlock_free(meta, runs=20)
        assert report.proven and report.nominal.deadlock is None


# ---------------------------------------------------------------- bad input


def test_more_workers_than_resident_ctas():
    text = _mlp(True).to_mlir()
    with pytest.raises(CompileError, match=r"needs 8 CTAs \(8 workers\) but only 4 can be "
                                           r"resident at once .* use at most 4 workers"):
        tilemega.compile(text, chip="sm_90a", mega_max_ctas=4)
    # With a JIT queue the scheduler CTA counts too.
    text = mega.decode_graph(SMALL, workers=132, attention_splits=2).to_mlir()
    with pytest.raises(CompileError, match=r"needs 133 CTAs \(132 workers \+ 1 scheduler CTA\) "
                                           r"but only 132 can be resident at once .* use at "
                                           r"most 131 workers"):
        tilemega.compile(text, chip="sm_90a", mega_policy="auto")


def test_builder_shape_mismatch_names_the_argument():
    g = mega.Graph("g", workers=WORKERS)
    x = g.input("x", [256])
    w = g.weight("w", [512, 256])
    short = g.input("short", [128])
    y = g.output("y", [512])
    with pytest.raises(ValueError, match=r"linear: x \(short\) is \[128\] bfloat16, "
                                         r"expected \[256\] bfloat16"):
        g.linear(w, short, y)
    with pytest.raises(ValueError, match=r"linear: y \(x\) is \[256\] bfloat16, "
                                         r"expected \[512\] bfloat16"):
        g.linear(w, x, x)
    with pytest.raises(ValueError, match=r"rmsnorm: w \(short\) is \[128\] bfloat16, "
                                         r"expected \[256\] bfloat16"):
        g.rmsnorm(x, short, g.scratch("h", [256]))
    with pytest.raises(ValueError, match=r"linear: x \(y\) is read before any task writes it"):
        g.linear(g.weight("w2", [256, 512]), y, g.scratch("z", [256]))
    assert g.tasks == []            # a failed call adds no task
    g.linear(w, x, y)
    assert [t.name for t in g.tasks] == ["t0_linear"]


def test_invalid_policy_and_watchdog():
    text = _mlp(True).to_mlir()
    with pytest.raises(ValueError, match=r"mega_policy must be auto, aot or jit, got 'fifo'"):
        tilemega.compile(text, chip="sm_90a", mega_policy="fifo")
    with pytest.raises(ValueError, match=r"mega_watchdog_ms must be >= 1, got 0"):
        tilemega.compile(text, chip="sm_90a", mega_watchdog_ms=0)


CYCLE = """
func.func @f(%a: memref<16xf32>) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}
mega.graph @g(%a: memref<16xf32>) workers 2 {
  mega.event @ea trigger 4
  mega.event @eb trigger 4
  mega.task @a body @f(%a : memref<16xf32>) count 4 waits [@eb] signals [@ea]
  mega.task @b body @f(%a : memref<16xf32>) count 4 waits [@ea] signals [@eb]
}
"""


def test_cycle_between_tasks_names_them():
    with pytest.raises(CompileError, match=r"dependency cycle: @a -> @b -> @a"):
        tilemega.compile(CYCLE, chip="sm_90a")
