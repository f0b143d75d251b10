"""bench/mlp_ab.py's builds of the MLP chain compile as the benchmark
describes them: the two-task forms, and the one-task split-K form whose
units add their down-projection partials with f32 atomics after a task
that zeroes the output (its measured A/B: docs/benchmarks.md, "The MLP as
one task"). Their numbers on a GPU: `bench/mlp_ab.py run`."""

import importlib.util
import os
import re

import pytest

pytest.importorskip("tilemega.ir", reason="the compiler package is not built")

import tilemega  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _mlp_ab():
    spec = importlib.util.spec_from_file_location(
        "mlp_ab", os.path.join(ROOT, "bench", "mlp_ab.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MLP_AB = _mlp_ab()


def test_split_k_is_one_task_after_the_zeroing():
    g = MLP_AB.graph("splitk")
    assert [t.body.name for t in g.tasks] == ["zero_f32_2048", "mlp_split_k"]
    assert [t.name for t in g.tensors if t.role == "weight"] == ["norm_w", "wgu", "wdT"]
    out = next(t for t in g.tensors if t.role == "output")
    assert out.dtype == "float32" and out.shape == (2048,)
    # 256 units of 32 gate/up rows each cover the intermediate size once.
    assert g.tasks[1].body.units == MLP_AB.I // MLP_AB.R


@pytest.mark.parametrize("variant,adds", [("splitk", True), ("splitk_na", False),
                                          ("rows", True)])
def test_split_k_builds_add_with_atomics(variant, adds):
    art = tilemega.compile(MLP_AB.graph(variant).to_mlir(), chip="sm_90a", mega_policy="aot")
    (kernel,) = art.kernels
    assert kernel["mega"]["workers"] == kernel["grid"][0]      # no scheduler CTA
    f32_adds = re.findall(r"\b(?:atom|red)(?:\.global)?\.add\.f32\b", art.ptx)
    assert bool(f32_adds) == adds, variant


def test_two_task_builds_are_the_mlp_graph():
    # Twice the workers at two CTAs an SM: units of half the rows.
    for variant, ctas, glu, down in (("glu1", 1, 64, 16), ("glu2", 2, 32, 8)):
        g = MLP_AB.graph(variant)
        assert [t.body.name for t in g.tasks] == [f"gemv_rms_glu_8192x2048_r{glu}",
                                                  f"gemv_2048x8192_r{down}"]
        assert g.ctas_per_sm == ctas


def test_unknown_variant_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="unknown variant 'nope'"):
        MLP_AB.build(str(tmp_path), ["nope"])
