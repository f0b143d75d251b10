"""Shared pytest setup: the `gpu` marker, the source path, artifact writers."""

import copy
import json
import os
import sys

import pytest

_PYTHON_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "python"))
try:
    # The built package (build/python_packages on PYTHONPATH, as
    # scripts/tilemega.sh sets it) or an installed one: compiler and runtime.
    import tilemega  # noqa: F401
except ImportError:
    # Only the sources: the runtime tests still run (on a GPU machine, say).
    sys.path.insert(0, _PYTHON_DIR)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "gpu: needs cuda-python, torch with CUDA and a CUDA GPU (skipped otherwise)")


BASE_META = {
    "format": "tilemega.artifact",
    "version": 1,
    "name": "add_one",
    "chip": "sm_90a",
    "ptx": "add_one.ptx",
    "cubin": None,
    "toolchain": {"tilemega": "0.1.0", "mlir": "22.1.8", "ptxas": "13.0"},
    "kernels": [
        {
            "name": "add_one",
            "grid": [8, 8, 1],
            "block": [128, 1, 1],
            "dynamic_shared_bytes": 0,
            "params": [
                {"name": "A", "kind": "tensor", "dtype": "float32",
                 "shape": [1024, 1024], "strides": [1024, 1]},
                {"name": "B", "kind": "tensor", "dtype": "float32",
                 "shape": [1024, 1024], "strides": [1024, 1]},
                {"name": "alpha", "kind": "scalar", "dtype": "float32"},
                {"name": "n", "kind": "scalar", "dtype": "int32"},
            ],
        }
    ],
}


def write_artifact(folder, meta=None, ptx_text="// dummy PTX\n", stem=None):
    """Write <stem>.json (+ the PTX it names) into `folder`; return the JSON path."""
    meta = copy.deepcopy(BASE_META if meta is None else meta)
    stem = stem or (meta.get("name") if isinstance(meta, dict) else None) or "art"
    folder = str(folder)
    os.makedirs(folder, exist_ok=True)
    if isinstance(meta, dict) and isinstance(meta.get("ptx"), str) and ptx_text is not None:
        with open(os.path.join(folder, meta["ptx"]), "w") as f:
            f.write(ptx_text)
    path = os.path.join(folder, stem + ".json")
    with open(path, "w") as f:
        json.dump(meta, f, indent=1)
    return path


def raise_trigger(mega, event, by=1):
    """Raise event `event`'s trigger by `by` in a persistent kernel's `mega`
    dict, in every copy the kernel reads: the `triggers` section of `tables`,
    word 4 (the first wait's trigger) of every 8-word entry record in the
    `records` and `aot_records` sections whose first wait (word 3) is the
    event, and `events`. A wait on the event can then never be satisfied.
    Returns the new trigger."""
    tables, at = mega["tables"], mega["table_sections"]
    tables[at["triggers"] + event] += by
    records = {"records": len(mega["entries"]["task"]),
               "aot_records": sum(len(lst) for lst in mega["aot"])}
    for name, count in records.items():
        for r in range(at[name], at[name] + 8 * count, 8):
            if tables[r + 3] == event:
                tables[r + 4] += by
    mega["events"][event]["trigger"] += by
    return mega["events"][event]["trigger"]


def shipped_config(name):
    """The ModelConfig of a shipped generation artifact (examples/generation.py
    CONFIGS, e.g. "gen_small"): what the mega tests build their graphs from."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    import generation
    return generation.config(name)


@pytest.fixture
def base_meta():
    return copy.deepcopy(BASE_META)


@pytest.fixture
def artifact_path(tmp_path):
    return write_artifact(tmp_path)


def gpu_skip_reason():
    """Why GPU tests cannot run here (None: they can): cuda-python, torch and
    a CUDA device are all needed."""
    try:
        import cuda.bindings.driver  # noqa: F401
    except ImportError:
        return "no CUDA GPU / cuda-python here (cuda.bindings not importable)"
    try:
        import torch
    except ImportError:
        return "no CUDA GPU / cuda-python here (torch not installed)"
    if not torch.cuda.is_available():
        return "no CUDA GPU / cuda-python here (torch.cuda.is_available() is False)"
    return None


def pytest_terminal_summary(terminalreporter):
    """Lists the current PTX with no GPU verdict (stale) and the verdicts of
    artifacts no longer shipped, found by test_gpu_results.py."""
    module = sys.modules.get("test_gpu_results")
    if module is None or not module.REPORT["ran"]:
        return
    report = module.REPORT
    terminalreporter.section("GPU verdicts (test/gpu/results.json)")
    terminalreporter.write_line(f"stale: {len(report['stale'])} current PTX with no verdict"
                                + (": " + ", ".join(report["stale"]) if report["stale"] else ""))
    if report["orphaned"]:
        terminalreporter.write_line("verdicts of artifacts no longer shipped: "
                                    + ", ".join(report["orphaned"]))
