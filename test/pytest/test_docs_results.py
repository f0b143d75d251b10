"""The results tables of docs/benchmarks.md and docs/gpu.md are what their
JSON files give (bench/render_docs.py), and the benchmarks' shared row
logic (bench/common.py) refuses to time a wrong row. CPU only."""

import importlib.util
import json
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _load(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}",
                                                  os.path.join(ROOT, "bench", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


render = _load("render_docs")
common = _load("common")

RUN = {"date": "2026-12-01T15:00:00Z", "commit": "abc123", "device": "NVIDIA H200",
       "sms": 132, "driver": "580.1", "torch": "2.11", "triton": "3.6",
       "command": "PYTHONPATH=python python3 bench/gemm.py --artifacts out --out docs/results"}


@pytest.fixture
def fake_run(monkeypatch):
    monkeypatch.setattr(common, "run_info", lambda argv=None: dict(RUN))


def _report(tmp_path):
    report = common.Report("gemm", str(tmp_path / "docs" / "results"), timing="graph replay",
                           copy_gbs=4000.0)
    report.workload("bf16 NN 4096", flops=2 * 4096 ** 3, bytes=3 * 4096 * 4096 * 2)
    timed = []
    report.row("bf16 NN 4096", "TileMega", lambda: {"C": 1e-3},
               lambda: timed.append("ours") or 0.5, tolerance=1e-2)
    report.row("bf16 NN 4096", "cuBLAS", lambda: {"C": 1e-3},
               lambda: timed.append("cuBLAS") or 0.25, tolerance=1e-2, role="peer")
    report.row("bf16 NN 4096", "Triton", lambda: {"C": 0.5},
               lambda: timed.append("Triton") or 0.1, tolerance=1e-2, role="peer")
    report.row("bf16 NN 4096", "broken", lambda: {"C": float("nan")},
               lambda: timed.append("broken") or 0.1, tolerance=1e-2)
    return report, timed


def test_rows_over_tolerance_are_failed_not_timed_and_fail_the_run(tmp_path, fake_run):
    report, timed = _report(tmp_path)
    assert timed == ["ours", "cuBLAS"]
    assert report.finish() == 1
    data = json.loads((tmp_path / "docs" / "results" / "gemm.json").read_text())
    rows = {r["implementation"]: r for r in data["rows"]}
    assert rows["Triton"]["verdict"] == "FAILED" and rows["Triton"]["ms"] is None
    assert rows["Triton"]["error"] == 0.5 and "over tolerance" in rows["Triton"]["reason"]
    assert rows["broken"]["verdict"] == "FAILED"
    # Ratios only against passing peers; the floor is the compute one here.
    assert rows["TileMega"]["ratios"] == {"cuBLAS": 0.5}
    w = data["workloads"]["bf16 NN 4096"]
    assert w["floor_basis"] == "compute"
    assert w["floor_ms"] == pytest.approx(2 * 4096 ** 3 / 989.4e12 * 1e3)
    assert data["run"] == RUN


def test_a_crashing_check_fails_and_an_all_passing_run_exits_zero(tmp_path, fake_run):
    report = common.Report("kernels", str(tmp_path), timing="t", copy_gbs=1000.0)
    report.workload("softmax", bytes=1e9)
    report.row("softmax", "ours", lambda: {"out": 1e-3}, lambda: 2.0, tolerance=1e-2)
    assert report.finish() == 0
    assert report.data["rows"][0]["of_floor"] == pytest.approx(0.5)

    def crash():
        raise RuntimeError("watchdog")
    report.row("softmax", "mega", crash, lambda: 1.0, tolerance=1e-2)
    assert report.data["rows"][-1]["reason"] == "RuntimeError: watchdog"
    assert report.finish() == 1
    with pytest.raises(ValueError, match="undeclared workload 'nope'"):
        report.row("nope", "ours", lambda: {}, lambda: 1.0, tolerance=1.0)


def _doc(tmp_path, body):
    (tmp_path / "doc.md").write_text(body)
    return body


def test_render_fills_the_marked_block_from_its_json(tmp_path, fake_run):
    report, _ = _report(tmp_path)
    report.finish()
    rel = "docs/results/gemm.json"
    text = _doc(tmp_path, f"# Title\n\nbefore\n<!-- results:{rel} begin -->\nstale 1.0\n"
                          f"<!-- results:{rel} end -->\nafter\n")
    out = render.render_text(text, str(tmp_path))
    assert "stale" not in out and out.startswith("# Title\n\nbefore\n") and out.endswith(
        f"<!-- results:{rel} end -->\nafter\n")
    assert "commit `abc123`" in out and RUN["command"] in out and "driver 580.1" in out
    assert "| bf16 NN 4096 | TileMega | 500 | " in out and "0.5x cuBLAS" in out
    assert "| bf16 NN 4096 | Triton | - |" in out and "FAILED: over tolerance: C 0.5" in out
    assert render.render_text(out, str(tmp_path)) == out   # idempotent


def test_render_refuses_missing_files_and_unpaired_markers(tmp_path):
    with pytest.raises(render.RenderError, match="docs/results/none.json, which does not exist"):
        render.render_text("<!-- results:docs/results/none.json begin -->\n"
                           "<!-- results:docs/results/none.json end -->\n", str(tmp_path))
    (tmp_path / "a.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(render.RenderError, match="a.json: format 'other'"):
        render.render_text("<!-- results:a.json begin -->\n<!-- results:a.json end -->\n",
                           str(tmp_path))
    with pytest.raises(render.RenderError, match="has no end marker"):
        render.render_text("<!-- results:a.json begin -->\n", str(tmp_path))
    with pytest.raises(render.RenderError, match="ends without its begin"):
        render.render_text("<!-- results:a.json end -->\n", str(tmp_path))


def test_render_gpu_results(tmp_path):
    entry = {"kind": "example", "ptx_sha256": "f" * 64, "verdict": "pass", "metric": "rel_l2",
             "error": 3.06e-8, "tolerance": 1e-6, "device": "NVIDIA H200", "driver": "580.1",
             "date": "2026-12-01", "commit": "abc123", "command": "scripts/tilemega.sh gpu-check",
             "sanitizers": {"memcheck": {"errors": 0}}}
    (tmp_path / "results.json").write_text(json.dumps(
        {"format": "tilemega.gpu-results", "version": 1, "artifacts": {"scale_add": entry}}))
    out = render.render_text("<!-- results:results.json begin -->\n"
                             "<!-- results:results.json end -->\n", str(tmp_path))
    assert "| scale_add | example | pass | 3.1e-08 | 1e-06 | memcheck 0 | ffffffffffff |" in out
    assert "`scripts/tilemega.sh gpu-check`" in out and "1 pass" in out


@pytest.mark.parametrize("doc", render.DOCS)
def test_docs_tables_are_what_their_json_gives(doc):
    with open(os.path.join(ROOT, doc)) as f:
        text = f.read()
    assert render.markers(text), f"{doc} has no results markers"
    missing = [p for p in render.markers(text) if not os.path.isfile(os.path.join(ROOT, p))]
    assert not missing, (f"{doc} names results files that do not exist: {missing}; run the "
                         f"benchmarks (docs/benchmarks.md, Reproduce) and commit their JSON")
    assert render.render_text(text, ROOT, doc) == text, (
        f"{doc} differs from its results files: run python3 bench/render_docs.py")


def test_decode_bench_check_catches_a_missing_or_stray_cache_write():
    import numpy as np
    from types import SimpleNamespace

    decode = _load("decode")
    ref = decode.reference_module()
    cfg = SimpleNamespace(layers=2, hidden=64, intermediate=96, heads=4, kv_heads=2,
                          head_dim=16, kv_len=9, eps=1e-5, rope_theta=1e4, dtype="bfloat16")
    rng = np.random.default_rng(0)
    w = {n: rng.standard_normal(s) / 8 for n, s in ref.weight_shapes(cfg).items()}
    for n in w:
        if n.endswith("_cache"):
            w[n][:, -1] = 0.0
    x, rows = decode.expected_step(ref, cfg, w)
    assert ref.compare(x, ref.reference_float64(cfg, w))["rel_l2"] == 0.0
    state = SimpleNamespace(pristine={n: t.copy() for n, t in w.items()})
    judge = decode.decode_judge(ref, cfg, state, x, rows)
    written = {n: t.copy() for n, t in w.items()}
    for n, row in rows.items():
        written[n][:, -1] = row
    assert max(judge(written, x).values()) == 0.0
    written["l1.v_cache"][:, -1] = 0.0                  # the step forgot one write
    assert judge(written, x)["v_cache[8] written (worst layer)"] == 1.0
    written["l1.v_cache"][:, -1] = rows["l1.v_cache"]
    written["l0.k_cache"][:, 3] += 1.0                  # ... or wrote a wrong position
    assert judge(written, x)["k_cache[:8] untouched (worst layer)"] > decode.STEP_TOLERANCE
