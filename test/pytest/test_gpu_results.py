"""The GPU verdicts in test/gpu/results.json, bound to the PTX they judged.

Compiles every shipped artifact (examples/shipped.py) and, for each, looks up
its verdict by the sha256 of its PTX: a failing verdict (or sanitizer errors)
for a current PTX fails here; a current PTX with no verdict is "stale" and
listed at the end of the run (scripts/tilemega.sh gpu-check on the GPU
machine refreshes them; docs/gpu.md says how).
"""

import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "examples"))

pytest.importorskip("tilemega.ir", reason="the compiler package is not built")

import gpu_check  # noqa: E402
import shipped  # noqa: E402

#: Filled by the tests, printed by conftest.pytest_terminal_summary.
REPORT = {"ran": False, "stale": [], "orphaned": []}


@pytest.fixture(scope="module")
def current(tmp_path_factory):
    """{name: (json path, ptx sha256)} of a fresh compile of everything."""
    out = tmp_path_factory.mktemp("shipped")
    paths = shipped.compile_all(str(out))
    return {name: (path, gpu_check.ptx_sha256(path)) for name, path in paths.items()}


@pytest.fixture(scope="module")
def results():
    return gpu_check.load_results()


def test_every_artifact_has_a_kind(current):
    import json

    for name, (path, _) in current.items():
        with open(path) as f:
            assert shipped.kind_of(name, json.load(f)) in gpu_check.CHECKS, name


def test_no_failing_verdict_for_a_current_ptx(current, results):
    failing = []
    REPORT["ran"] = True
    for name, (_, sha) in sorted(current.items()):
        entry = results["artifacts"].get(name)
        if entry is None or entry["ptx_sha256"] != sha:
            REPORT["stale"].append(name)
            continue
        if entry["verdict"] != "pass":
            failing.append(f"{name}: verdict {entry['verdict']} (error {entry.get('error')}, "
                           f"tolerance {entry.get('tolerance')}, {entry.get('details', '')})")
    REPORT["orphaned"] = sorted(set(results["artifacts"]) - set(current))
    assert not failing, "failing GPU verdicts for current PTX:\n" + "\n".join(failing)


def test_no_sanitizer_errors_for_a_current_ptx(current, results):
    bad = []
    for name, (_, sha) in sorted(current.items()):
        for tool, got in results["artifacts"].get(name, {}).get("sanitizers", {}).items():
            if got.get("ptx_sha256") != sha:
                continue          # judged another PTX: stale, not failing
            if not got.get("finished", False) or got.get("errors", 0) or \
                    not got.get("checks_passed", False):
                bad.append(f"{name}: {tool} {got}")
    assert not bad, "sanitizer problems for current PTX:\n" + "\n".join(bad)


def test_the_check_fails_on_a_failing_verdict(tmp_path, current):
    """The file format and the lookup are what the tests above rely on: a
    failing verdict for the current PTX of one artifact is found."""
    name, (_, sha) = next(iter(sorted(current.items())))
    doc = gpu_check.empty_results()
    doc["artifacts"][name] = {"ptx_sha256": sha, "verdict": "fail", "error": 1.0}
    path = tmp_path / "results.json"
    gpu_check.save_results(doc, str(path))
    loaded = gpu_check.load_results(str(path))
    assert loaded["artifacts"][name]["verdict"] == "fail"
    assert loaded["artifacts"][name]["ptx_sha256"] == sha


@pytest.mark.parametrize("doc, field", [
    ({"format": "x", "version": 1, "artifacts": {}}, "format"),
    ({"format": gpu_check.FORMAT, "version": 2, "artifacts": {}}, "version"),
    ({"format": gpu_check.FORMAT, "version": 1, "artifacts": {"a": {"verdict": "pass"}}},
     "artifacts.a.ptx_sha256"),
    ({"format": gpu_check.FORMAT, "version": 1,
      "artifacts": {"a": {"verdict": "ok", "ptx_sha256": "0"}}}, "artifacts.a.verdict"),
])
def test_a_malformed_results_file_names_the_field(tmp_path, doc, field):
    import json

    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=f"field '{field}'"):
        gpu_check.load_results(str(path))
