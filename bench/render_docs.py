"""Rewrites the results tables of the docs from the JSON files they cite.

    python3 bench/render_docs.py           # rewrite docs/benchmarks.md, docs/gpu.md
    python3 bench/render_docs.py --check   # exit 1 if a doc differs from its JSON

A table lives between two marker lines naming its file (relative to the
repository root):

    <!-- results:docs/results/gemm.json begin -->
    ... generated, do not edit ...
    <!-- results:docs/results/gemm.json end -->

Files with "format": "tilemega.bench-results" (bench/common.py writes them)
give one row per benchmark row, with the run's date, commit, device, driver
and exact command above the table; "tilemega.gpu-results"
(test/gpu/results.json) gives the per-artifact verdict table. Needs only
the standard library.
"""

import argparse
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ("docs/benchmarks.md", "docs/gpu.md")
MARKER = re.compile(r"^<!-- results:(?P<path>\S+) (?P<edge>begin|end) -->$", re.M)


class RenderError(ValueError):
    """A marker or a results file the docs cannot be generated from."""


def _cell(value):
    return str(value).replace("|", "\\|").replace("\n", " ")


def _num(value, digits=4):
    if value is None:
        return "-"
    if isinstance(value, str):   # a non-finite number, as bench/common.py writes it
        return value
    return f"{value:.{digits}g}"


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |",
             "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _provenance(rel, run, extra=""):
    return [f"From `{rel}`: {run['date']}, commit `{run['commit']}`, {run['device']} "
            f"(driver {run['driver']}), torch {run.get('torch', '?')}, "
            f"Triton {run.get('triton', '?')}{extra}. Command:", "",
            f"```bash\n{run['command']}\n```", ""]


def render_bench(rel, data):
    """Lines of the table of one bench/common.py results file."""
    extra = ""
    if data.get("copy_bandwidth_gbs"):
        extra += f"; device copy rate in the same run {data['copy_bandwidth_gbs']:.0f} GB/s"
    lines = _provenance(rel, data["run"], extra)
    lines.append(f"Timing: {data['timing']}. Floor: bytes / copy rate (memory) or FLOPs / "
                 f"{data.get('peak_tflops')} TFLOP/s dense tensor peak (compute), the larger; "
                 f"ratios are peer time / this time (> 1: faster than that peer). Rows "
                 f"over tolerance are FAILED and not timed.")
    lines.append("")
    rows = []
    for r in data["rows"]:
        w = data["workloads"][r["workload"]]
        ratios = ", ".join(f"{_num(v, 3)}x {k}" for k, v in r.get("ratios", {}).items())
        error = ("-" if r.get("error") is None
                 else f"{_num(r['error'], 2)} (tol {_num(r.get('tolerance'), 2)})")
        rate = (f"{r['tflops']:.0f} TFLOP/s" if r.get("tflops")
                else f"{r['gbs']:.0f} GB/s" if r.get("gbs") else "-")
        verdict = r["verdict"] + (f": {r['reason']}" if r["verdict"] != "pass" and r.get("reason")
                                  else "")
        rows.append([r["workload"], r["implementation"],
                     _num(r["ms"] * 1e3 if r.get("ms") is not None else None),
                     _num(w["floor_ms"] * 1e3 if w.get("floor_ms") else None),
                     _num(r.get("of_floor"), 2), rate, ratios or "-", error, verdict])
    lines += _table(["workload", "implementation", "us", "floor us", "of floor", "rate",
                     "vs peers", "error", "verdict"], rows)
    extra = data.get("extra", {})
    for key, what in (("dispatch", "Dispatch"),
                      ("dispatch_waited", "Dispatch with one fired event a task")):
        dispatch = extra.get(key)
        if dispatch and dispatch.get("ns_per_task") is not None:
            lines += ["", f"{what}: slope {dispatch['ns_per_task']:.1f} ns per task over "
                          f"{len(dispatch['points_tasks_ms'])} graphs of empty tasks"
                      + (f", {dispatch['us_per_task_per_worker']:.2f} us per task on one of "
                         f"{dispatch['workers']} workers." if dispatch.get("workers") else ".")]
    generation = [r for r in data["rows"] if r.get("ttft_ms") is not None]
    if generation:
        lines += ["", "Per generation row: ms per token after the first (the `us` column "
                      "above / 1000), time to first token and tokens per second:", ""]
        lines += _table(["implementation", "ms/token", "time to first token ms", "tokens/s"],
                        [[r["implementation"], _num(r.get("ms_per_token")),
                          _num(r.get("ttft_ms")), _num(r.get("tokens_per_s"))]
                         for r in generation])
    if extra.get("bodies"):
        lines += ["", "Per body: its stage in the persistent kernel (mean over the layers) "
                      "beside the same kernel standalone (a CUDA graph of its launches, one "
                      "a layer; us per launch):", ""]
        lines += _table(["body", "kernel", "standalone us", "mega span us", "mega period us",
                         "period / standalone"],
                        [[b["body"], f"`{b['kernel']}`", f"{b['standalone_us']:.2f}",
                          f"{b['mega_span_us']:.2f}", _num(b["mega_period_us"]),
                          _num(b["period_vs_standalone"])]
                         for b in extra["bodies"]])
    if extra.get("stages"):
        lines += ["", "Per task of the last step (graph order):", ""]
        lines += _table(["task", "instances", "first start us", "last end us", "mean us"],
                        [[s["task"], s["instances"], f"{s['start_us']:.1f}",
                          f"{s['end_us']:.1f}", f"{s['mean_us']:.2f}"]
                         for s in extra["stages"]])
    return lines


def render_gpu_results(rel, data):
    """Lines of the per-artifact verdict table of test/gpu/results.json."""
    arts = data["artifacts"]
    runs = sorted({(a.get("date"), a.get("commit"), a.get("device"), a.get("driver"),
                    a.get("command")) for a in arts.values()}, key=str)
    lines = [f"From `{rel}` ({len(arts)} artifacts; "
             f"{sum(a.get('verdict') == 'pass' for a in arts.values())} pass). Runs:", ""]
    lines += [f"- {d}, commit `{c}`, {dev} (driver {drv}): `{cmd}`" for d, c, dev, drv, cmd in runs]
    lines.append("")
    rows = []
    for name in sorted(arts):
        a = arts[name]
        san = a.get("sanitizers") or {}
        rows.append([name, a.get("kind", "-"), a.get("verdict", "-"), _num(a.get("error"), 2),
                     _num(a.get("tolerance"), 2),
                     ", ".join(f"{k} {v.get('errors')}" for k, v in sorted(san.items())) or "-",
                     (a.get("ptx_sha256") or "-")[:12], (a.get("commit") or "-")[:12],
                     (a.get("date") or "-")[:10]])
    lines += _table(["artifact", "kind", "verdict", "error", "tolerance", "sanitizer errors",
                     "PTX sha256", "commit", "date"], rows)
    return lines


RENDERERS = {"tilemega.bench-results": render_bench,
             "tilemega.gpu-results": render_gpu_results}


def render_file(rel, root):
    """The generated lines for the results file `rel` (relative to root)."""
    path = os.path.join(root, rel)
    if not os.path.isfile(path):
        raise RenderError(f"marker names {rel}, which does not exist: run the command that "
                          f"writes it (docs/benchmarks.md, Reproduce; test/gpu/results.json: "
                          f"scripts/tilemega.sh gpu-check) and commit it")
    with open(path) as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as exc:
            raise RenderError(f"{rel}: not JSON: {exc}") from None
    render = RENDERERS.get(data.get("format"))
    if render is None:
        raise RenderError(f"{rel}: format {data.get('format')!r} is none of {sorted(RENDERERS)}")
    try:
        return render(rel, data)
    except (KeyError, TypeError) as exc:
        raise RenderError(f"{rel}: missing or malformed field {exc}") from None


def render_text(text, root, source="doc"):
    """`text` with every marked block regenerated; RenderError on unpaired
    or crossed markers and on missing or unreadable results files."""
    open_path = None
    for m in MARKER.finditer(text):   # the structure first, then the files
        if m["edge"] == "begin" and open_path is not None:
            raise RenderError(f"{source}: results:{m['path']} begins inside "
                              f"results:{open_path}")
        if m["edge"] == "end" and open_path != m["path"]:
            raise RenderError(f"{source}: results:{m['path']} ends without its begin")
        open_path = m["path"] if m["edge"] == "begin" else None
    if open_path is not None:
        raise RenderError(f"{source}: results:{open_path} has no end marker")
    out, pos = [], 0
    for m in MARKER.finditer(text):
        if m["edge"] == "begin":
            out.append(text[pos:m.end()])
            out.append("\n\n" + "\n".join(render_file(m["path"], root)) + "\n\n")
        else:
            pos = m.start()   # the old block is dropped; the end marker kept
    out.append(text[pos:])
    return "".join(out)


def markers(text):
    """The results files the begin markers of `text` name, in order."""
    return [m["path"] for m in MARKER.finditer(text) if m["edge"] == "begin"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if a doc differs from its JSON")
    parser.add_argument("--root", default=ROOT, help="repository root")
    parser.add_argument("docs", nargs="*", default=list(DOCS), help="docs, relative to root")
    args = parser.parse_args(argv)
    status = 0
    for doc in args.docs:
        path = os.path.join(args.root, doc)
        with open(path) as f:
            text = f.read()
        try:
            new = render_text(text, args.root, doc)
        except RenderError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 1
            continue
        if new == text:
            print(f"{doc}: up to date")
        elif args.check:
            print(f"{doc}: differs from its results files (run bench/render_docs.py)")
            status = 1
        else:
            with open(path, "w") as f:
                f.write(new)
            print(f"{doc}: rewritten")
    return status


if __name__ == "__main__":
    sys.exit(main())
