"""Where the time of a generation step goes: the engine's persistent kernel
(Llama-3.2-1B configuration, the shipped options: two CTAs an SM, early
loads, per-body thread ids) compiled with per-entry %globaltimer stamps.

    python bench/generate_timeline.py build DIR [VARIANT ...]        # compiler machine
    PYTHONPATH=python python3 bench/generate_timeline.py run DIR --out OUT [OPTION ...]   # GPU machine
    python bench/generate_timeline.py entries ENTRIES.json [--layer L]   # anywhere
    python bench/generate_timeline.py placement ENTRIES.json             # anywhere
    python bench/generate_timeline.py balance ENTRIES.json               # anywhere

`build` compiles DIR/gen_llama1b_timeline.* (the graph of
examples/generation.py's gen_llama1b with mega_timeline) and, beside it,
the same graph without stamps (DIR/gen_llama1b.*, what examples/shipped.py
ships) and the prompt's prefill kernels. `run` generates 128 tokens after
a 512-token prompt with both, in one process: each one's tokens are judged
as bench/generate.py judges its rows (transformers-float32's greedy tokens
until a bf16 near tie) before anything is timed, ms/token of both (the
stamps' cost), then the timeline of the last decode step (every entry
writes its stamps at each step; the last step's remain). Writes
OUT/generate_timeline.json: per task of that step (graph order) its
instances, first start, last end and mean instance time; per role of a
layer (qkv, attention, merge, wo, wgu, wd) the mean over the layers of its
span (first start to last end) and period (first start to the next
task's first start, the boundary included); OUT/generate_timeline.png
(CTA x time); and OUT/generate_timeline_entries.json, every entry of that
step (task, start, end, CTA, SM): where a stage's tail comes from
(generate_timeline_entries_<variant>.json: each variant's, '+' written
_and_, a name the device tool returns). `entries` prints a layer's tasks
from such a file (layer_entries: start spreads, durations, end
percentiles, and when each task's instances started after the previous
task's last end, by what their CTA ran before);
`placement` counts the CTAs that ran on the SM their worker index stands
for (workers_by_sm) and the streaming entries whose loads overlapped an
attention entry of another CTA on their SM; `balance` what the spread of
the CTAs' speeds costs each task of many instances (balance: its slowest
entry against the time had its units been divided in proportion to each
CTA's measured rate) and how alike a CTA's speed is from task to task.

OPTIONs (bench/generate_ab.py's ENGINE_OPTIONS, e.g. l2_caches) add an
engine of the stamped build with that option, its tables under
"variants" as "@OPTION".
VARIANTs (VARIANTS below: compile options) add timeline builds of the same
graph, DIR/gen_llama1b_timeline_<variant>.*, judged and timed in the same
process; their tables go under "variants" in the JSON (e.g. no_early_loads:
whether a stage's early prologue delays its own wait, the gap from the
last producer's end to the first consumer's start)."""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import generate_ab  # noqa: E402  (the A/B's prompt, judge and timing)

PROMPT, NEW = generate_ab.PROMPT, generate_ab.NEW
TIMELINE = "gen_llama1b_timeline"
#: variant -> tilemega.compile options of an extra timeline build ("graph":
#: keywords of models.generation_graph).
VARIANTS = {"no_early_loads": dict(mega_early_loads=False),
            "workers_by_sm": dict(graph=dict(workers_by_sm=True)),
            # No merge task: each kv group's last split merges.
            "merge_in_split": dict(graph=dict(merge_in_split=True)),
            # Paired entries: wgu's weights load under the wo before it.
            "pair_entries": dict(mega_pair_entries=True),
            # The attention's products on mma.sync (the default since
            # 2026-12-07) or on CUDA cores (the default before).
            "attention_tensor_cores": dict(graph=dict(attention_tensor_cores=True)),
            "cuda_core_attention": dict(graph=dict(attention_tensor_cores=False)),
            # ... with the attention's tasks on SMs of their own, so that
            # those loads do not share its SMs.
            "pair_entries+workers_by_sm": dict(mega_pair_entries=True,
                                               graph=dict(workers_by_sm=True)),
            # Claimed units: the LM head's units beyond each instance's own
            # claimed at run time (generate_ab's variants of the same name).
            "claim_units": dict(mega_claim_units=True),
            # The down projection with 6 stages of W in flight (shipped 4):
            # on the H200 its stage streamed at ~72 % of the copy rate.
            "wd_stages6": dict(graph=dict(gemv_stages=dict(wd=6))),
            "claim_units+head_rows_32": dict(mega_claim_units=True,
                                             graph=dict(rows_per_unit=dict(lm_head=32)))}
#: Tasks mega-schedule treats as latency-bound (Graph._split_and_merge).
LATENCY_BOUND = re.compile(r"_attn_(split|merge|combine)$")


def build(out, variants=()):
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import generation
    import tilemega
    from tilemega import mega
    from tilemega.mega.prefill import compile_prefill

    cfg = generation.config("gen_llama1b")
    builds = [(TIMELINE, dict(mega_timeline=True)), ("gen_llama1b", {})]
    for v in variants:
        if v not in VARIANTS:
            raise SystemExit(f"unknown variant {v!r}: one of {', '.join(VARIANTS)}")
        builds.append((f"{TIMELINE}_{v}", dict(VARIANTS[v], mega_timeline=True)))
    for name, options in builds:
        options = dict(options)
        text = mega.generation_graph(cfg, **options.pop("graph", {})).to_mlir()
        art = tilemega.compile(text, chip="sm_90a", name=name, **options)
        print("built", art.save(out), flush=True)
    print("built", compile_prefill(cfg, out, "prefill_gen_llama1b"), flush=True)


def task_table(rows, meta):
    """[(task name, instances, first start us, last end us, mean us)] in
    graph order, times from the step's first start."""
    spans = {}
    for entry, (start, end, _, _) in enumerate(rows):
        if end > 0:
            spans.setdefault(meta["entries"]["task"][entry], []).append((int(start), int(end)))
    origin = min(s for runs in spans.values() for s, _ in runs)
    table = []
    for task, runs in sorted(spans.items()):
        table.append((meta["tasks"][task]["name"], len(runs),
                      (min(s for s, _ in runs) - origin) / 1e3,
                      (max(e for _, e in runs) - origin) / 1e3,
                      sum(e - s for s, e in runs) / len(runs) / 1e3))
    return table


def layer_role(name):
    """The role of a layer's task (names t<i>_l<layer>_<role>), else None."""
    m = re.fullmatch(r"t\d+_l\d+_(\w+)", name)
    return m.group(1) if m else None


def per_role(table):
    """{role: (mean span us, mean period us, layers)} over the layers' tasks
    (names t<i>_l<layer>_<role>); the period runs to the next task's first
    start in graph order."""
    acc = {}
    for i, (name, _, start, end, _) in enumerate(table):
        role = layer_role(name)
        if role is None or i + 1 == len(table):
            continue
        spans, periods = acc.setdefault(role, ([], []))
        spans.append(end - start)
        periods.append(table[i + 1][2] - start)
    return {role: (sum(s) / len(s), sum(p) / len(p), len(s)) for role, (s, p) in acc.items()}


def entries_doc(rows, meta):
    """{"tasks": names, "entries": [[task, start ns, end ns, CTA, SM]]} of
    the entries that ran in the last step, times from its first start; with
    "units" (each entry's units, in the same order) when the metadata
    gives the tasks' units and the entries' instances (mega_meta.entry_units:
    null for a task that claims its units)."""
    from tilemega.runtime import mega_meta as mm

    ran = [(entry, row) for entry, row in enumerate(rows) if row[1] > 0]
    origin = min(int(row[0]) for _, row in ran)
    doc = {"tasks": [t["name"] for t in meta["tasks"]],
           "entries": [[meta["entries"]["task"][entry], int(start) - origin,
                        int(end) - origin, int(cta), int(sm)]
                       for entry, (start, end, cta, sm) in ran]}
    if "instance" in meta["entries"] and all("units" in t for t in meta["tasks"]):
        doc["units"] = [mm.entry_units(meta, entry) for entry, _ in ran]
    return doc


def timeline_doc(kernel):
    """The last step's stamps of a timeline build: its span, per task and
    per role (gap: the next task's first start less this one's last end)."""
    rows = kernel.timeline()
    table = task_table(rows, kernel.meta)
    doc = {"step_us": max(t[3] for t in table),
           "tasks": [dict(zip(("task", "instances", "first_start_us", "last_end_us",
                               "mean_us"), t)) for t in table],
           "roles": {role: {"span_us": s, "period_us": p, "gap_us": p - s, "layers": n}
                     for role, (s, p, n) in per_role(table).items()}}
    return rows, doc


def run(folder, out, options=()):
    """options: engine options (generate_ab.ENGINE_OPTIONS, e.g. "l2_caches"),
    each one more engine of the stamped build, "<timeline>@<option>", its
    tables under "variants" as "@<option>"."""
    sys.path.insert(0, os.path.join(ROOT, "test", "pytest"))
    sys.path.insert(0, HERE)
    import common
    import test_generation_gpu as tg
    from generate import timed
    from tilemega.mega.engine import Engine
    from tilemega.runtime import mega_timeline

    import torch

    model = tg.hf_model("llama")
    judge = generate_ab.float32_judge(model, tg, torch)
    prefill = os.path.join(folder, "prefill_gen_llama1b.json")
    variants = sorted(f[len(TIMELINE) + 1:-len(".json")] for f in os.listdir(folder)
                      if f.startswith(TIMELINE + "_") and f.endswith(".json"))
    names = [TIMELINE, "gen_llama1b"] + [f"{TIMELINE}_{v}" for v in variants]
    names += [f"{TIMELINE}@{option}" for option in options]
    engines = {name: Engine.from_model(model, max_seq_len=4096, prefill=prefill,
                                       artifact=os.path.join(folder, name.split("@")[0] + ".json"),
                                       **generate_ab.engine_options(name))
               for name in names}
    doc = {"run": common.run_info(), "prompt": len(PROMPT), "new_tokens": NEW, "engines": {}}
    failed = False
    for name, engine in engines.items():
        found, verdict = judge(engine.generate(PROMPT, max_new_tokens=NEW, eos_token_id=[]))
        failed |= verdict != "pass"
        doc["engines"][name] = {"verdict": verdict, "vs_float32": found}
        print(name, verdict, found, flush=True)
    if failed:
        print(json.dumps(doc, indent=1))
        raise SystemExit("a build's tokens part from transformers-float32's beyond a near "
                         "tie: nothing timed")
    for name, (per_token, _, _) in generate_ab.timed_generations(engines, timed).items():
        doc["engines"][name]["ms_per_token"] = per_token
    # The last generate() was one of NEW tokens: its last step's stamps.
    kernel = engines[TIMELINE].kernel
    rows, main_doc = timeline_doc(kernel)
    doc.update(main_doc)
    doc["variants"] = {v: timeline_doc(engines[f"{TIMELINE}_{v}"].kernel)[1] for v in variants}
    doc["variants"].update({f"@{o}": timeline_doc(engines[f"{TIMELINE}@{o}"].kernel)[1]
                            for o in options})
    summary = mega_timeline.summarize(rows, kernel.meta)
    doc["summary"] = mega_timeline.format_summary(summary, kernel.meta)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "generate_timeline.json"), "w") as f:
        json.dump(doc, f, indent=1, default=float)
    # Every entry of the last step (task name, instance's start and end ns
    # from the step's first start, CTA, SM): where a stage's tail comes from.
    with open(os.path.join(out, "generate_timeline_entries.json"), "w") as f:
        json.dump(entries_doc(rows, kernel.meta), f)
    for v in variants:                        # and each variant's (placement)
        k = engines[f"{TIMELINE}_{v}"].kernel
        name = f"generate_timeline_entries_{v.replace('+', '_and_')}.json"
        with open(os.path.join(out, name), "w") as f:
            json.dump(entries_doc(k.timeline(), k.meta), f)
    try:
        mega_timeline.render(rows, kernel.meta, os.path.join(out, "generate_timeline.png"),
                             title="Llama-3.2-1B generation step (timeline build)")
    except ImportError as exc:                   # no matplotlib: the JSON stands
        print("no picture:", exc)
    print(doc["summary"])
    for label, d in [("shipped", doc)] + list(doc["variants"].items()):
        print(label, f"step {d['step_us']:.1f} us")
        for role, v in d["roles"].items():
            print(f"  {role:12s} span {v['span_us']:7.2f} us  period {v['period_us']:7.2f} us"
                  f"  gap {v['gap_us']:6.2f} us")
    for name, e in doc["engines"].items():
        print(f"{name}: {e['ms_per_token']:.4f} ms/token")


def layer_entries(doc, layer):
    """Per task of `layer` (graph order) in an entries document
    (entries_doc): its instances' start spread, durations (min, median,
    max) and ends (0, 10, 50, 90, 100th percentiles), in us from the
    task's first start; and, per task, when its instances started after
    the previous task's last end, by what each one's CTA ran before it."""
    import statistics

    names = doc["tasks"]
    runs = {}
    for task, start, end, cta, _ in doc["entries"]:
        runs.setdefault(task, []).append((start, end, cta))
    by_cta = {}
    for task, start, end, cta, _ in doc["entries"]:
        by_cta.setdefault(cta, []).append((start, end, task))
    for entries in by_cta.values():
        entries.sort()
    tasks = [t for t in sorted(runs) if re.fullmatch(rf"t\d+_l{layer}_\w+", names[t])]
    out, previous_end = [], None
    for task in tasks:
        r = runs[task]
        first = min(s for s, _, _ in r)
        durations = sorted((e - s) / 1e3 for s, e, _ in r)
        ends = sorted((e - first) / 1e3 for _, e, _ in r)
        pick = lambda xs, q: xs[round(q * (len(xs) - 1))]      # noqa: E731
        row = {"task": names[task], "instances": len(r),
               "start_spread_us": (max(s for s, _, _ in r) - first) / 1e3,
               "duration_us": [durations[0], statistics.median(durations), durations[-1]],
               "end_us": [pick(ends, q) for q in (0, 0.1, 0.5, 0.9, 1)]}
        if previous_end is not None:
            # Each instance's start after the previous task's last end,
            # grouped by the task its CTA ran just before it.
            after = {}
            for s, _, cta in r:
                entries = by_cta[cta]
                i = next(k for k, x in enumerate(entries) if x[0] == s and x[2] == task)
                before = names[entries[i - 1][2]] if i else "nothing"
                after.setdefault(re.sub(r"^t\d+_", "", before), []).append(
                    (s - previous_end) / 1e3)
            row["start_after_previous_end_us"] = {
                k: [min(v), statistics.median(v), max(v), len(v)] for k, v in after.items()}
        previous_end = max(e for _, e, _ in r)
        out.append(row)
    return out


def placement(doc, ctas_per_sm=2):
    """How the last step's entries sat on the SMs (an entries document):
    the CTAs whose worker index w ran on SM w mod G (G = ceil(workers /
    ctas_per_sm): what a workers_by_sm kernel claims), and the streaming
    entries whose loads (from their CTA's previous entry's end, when an
    early prologue is issued, to their own end) overlapped a latency-bound
    entry (the attention's) of another CTA on their SM."""
    names = doc["tasks"]
    workers = max(cta for *_, cta, _ in doc["entries"]) + 1
    sms = -(-workers // ctas_per_sm)
    sm_of = {cta: sm for *_, cta, sm in doc["entries"]}
    by_cta, by_sm = {}, {}
    for task, start, end, cta, sm in doc["entries"]:
        by_cta.setdefault(cta, []).append((start, end, task))
        by_sm.setdefault(sm, []).append((start, end, task, cta))
    loads_from = {}
    for cta, entries in by_cta.items():
        entries.sort()
        for i, (start, end, task) in enumerate(entries):
            loads_from[(cta, start)] = entries[i - 1][1] if i else start
    bound = lambda task: bool(LATENCY_BOUND.search(names[task]))   # noqa: E731
    streaming = shared = 0
    for entries in by_sm.values():
        alone = [(s, e, c) for s, e, t, c in entries if bound(t)]
        for start, end, task, cta in entries:
            if bound(task):
                continue
            streaming += 1
            begin = loads_from[(cta, start)]
            shared += any(c != cta and begin < e and s < end for s, e, c in alone)
    return {"workers": workers, "sms": sms,
            "workers_on_their_sm": sum(sm_of[c] == c % sms for c in sm_of),
            "streaming_entries": streaming,
            "streaming_loads_under_attention_on_their_sm": shared}


def balance(doc, min_ctas=8):
    """What the spread of the CTAs' speeds costs the step (an entries
    document). Per task run by at least `min_ctas` CTAs (a CTA's
    entries of one task count as one, their units and times summed): durations
    (min, median, max, us), `balanced_us` = units / sum(units_i / d_i),
    the duration had its units been divided in proportion to each CTA's
    measured rate (every entry one unit when the document has no "units":
    a task's one short remainder instance then counts as a full one), and
    `excess_us` = max - balanced, what a proportional division could save
    on that task (a bound: it assumes each CTA keeps its rate); a task
    whose units are claimed at run time (units null) has no such bound:
    its row gives `end_spread_us`, its last CTA's end less its first's,
    and stays out of the sums. Per layer
    role the mean excess; the step's sum; and, against the task of the
    largest total time, the Pearson correlation over their common CTAs of
    a CTA's duration in it and in each other task (mean per role): near 1,
    the same CTAs are slow in every stage."""
    import statistics

    names = doc["tasks"]
    units = doc.get("units") or [1] * len(doc["entries"])
    runs = {}      # task -> CTA -> [units, us] over its entries of the task
    ends, claimed = {}, set()
    for (task, start, end, cta, _), u in zip(doc["entries"], units):
        if end > start:
            acc = runs.setdefault(task, {}).setdefault(cta, [0, 0.0])
            if u is None:
                claimed.add(task)
            else:
                acc[0] += u
            acc[1] += (end - start) / 1e3
            ends.setdefault(task, []).append(end)
    tasks = {t: r for t, r in runs.items() if len(r) >= min_ctas}
    rows, roles = [], {}
    for task in sorted(tasks):
        r = tasks[task]
        durations = sorted(d for _, d in r.values())
        if task in claimed:
            rows.append({"task": names[task], "ctas": len(r), "claims_units": True,
                         "duration_us": [durations[0], statistics.median(durations),
                                         durations[-1]],
                         "end_spread_us": (max(ends[task]) - min(ends[task])) / 1e3})
            continue
        balanced = sum(u for u, _ in r.values()) / sum(u / d for u, d in r.values())
        excess = durations[-1] - balanced
        rows.append({"task": names[task], "ctas": len(r),
                     "duration_us": [durations[0], statistics.median(durations), durations[-1]],
                     "balanced_us": balanced, "excess_us": excess})
        roles.setdefault(layer_role(names[task]) or names[task], []).append(excess)
    out = {"tasks": rows, "roles": {k: sum(v) / len(v) for k, v in roles.items()},
           "excess_us": sum(row.get("excess_us", 0.0) for row in rows)}
    if tasks:
        ref = max(tasks, key=lambda t: sum(d for _, d in tasks[t].values()))
        corr = {}
        for task in sorted(tasks):
            common = sorted(set(tasks[ref]) & set(tasks[task]))
            if task == ref or len(common) < 3:
                continue
            x = [tasks[ref][c][1] for c in common]
            y = [tasks[task][c][1] for c in common]
            if len(set(x)) > 1 and len(set(y)) > 1:
                corr.setdefault(layer_role(names[task]) or names[task], []).append(
                    statistics.correlation(x, y))
        out["correlation_with"] = names[ref]
        out["correlation"] = {k: sum(v) / len(v) for k, v in corr.items()}
    return out


def read_entries(path):
    """An entries document (entries_doc) from `path`, checked: a file that
    is not one exits naming the file and what is wrong."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"{path}: not a readable JSON document ({e})")
    tasks, entries = (doc.get("tasks"), doc.get("entries")) if isinstance(doc, dict) else (None, None)
    if not isinstance(tasks, list) or not isinstance(entries, list):
        raise SystemExit(f"{path}: no 'tasks' and 'entries' lists (not an entries document)")
    for i, e in enumerate(entries):
        if (not isinstance(e, list) or len(e) != 5 or not all(isinstance(x, int) for x in e)
                or not 0 <= e[0] < len(tasks)):
            raise SystemExit(f"{path}: entries[{i}] is not [task, start ns, end ns, CTA, SM] "
                             f"with a task index below {len(tasks)}")
    if "units" in doc and (not isinstance(doc["units"], list) or len(doc["units"]) != len(entries)
                           or not all(u is None or (isinstance(u, int) and u >= 0)
                                      for u in doc["units"])):
        raise SystemExit(f"{path}: 'units' does not give one count (or null: claimed) per entry")
    return doc


def main(argv):
    if argv[:1] == ["build"] and len(argv) >= 2:
        return build(argv[1], argv[2:])
    if argv[:1] == ["entries"] and len(argv) in (2, 4):
        layer = int(argv[3]) if len(argv) == 4 and argv[2] == "--layer" else 5
        print(json.dumps(layer_entries(read_entries(argv[1]), layer), indent=1))
        return None
    if argv[:1] == ["placement"] and len(argv) == 2:
        print(json.dumps(placement(read_entries(argv[1])), indent=1))
        return None
    if argv[:1] == ["balance"] and len(argv) == 2:
        print(json.dumps(balance(read_entries(argv[1])), indent=1))
        return None
    if argv[:1] == ["run"] and len(argv) >= 4 and argv[2] == "--out":
        for option in argv[4:]:
            generate_ab.split_label("@" + option)   # an unknown one exits, naming it
        return run(argv[1], argv[3], argv[4:])
    raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
