"""Every example kernel compiles to PTX and assembles for sm_90a with no
register spills (ptxas is required: ptxas_policy.py). Needs no GPU."""

import os
import re
import sys

import pytest

pytest.importorskip("tilemega.ir", reason="the compiler package is not built "
                    "(run scripts/tilemega.sh build and put build/python_packages on PYTHONPATH)")

import tilemega  # noqa: E402
from ptxas_policy import ptxas_checks_enabled  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import build_artifacts  # noqa: E402
import run_examples  # noqa: E402


@pytest.mark.parametrize("name, module, config", run_examples.EXAMPLES,
                         ids=[e[0] for e in run_examples.EXAMPLES])
def test_example_compiles_and_assembles(name, module, config):
    result = run_examples.compile_entry(name, module, config)
    assert ".target sm_90a" in result.ptx
    if module == "gemm_hopper":
        # The plain T.* GEMM took the Hopper path (compile raises on ptxas's
        # wgmma serialisation warnings).
        assert "wgmma.mma_async" in result.ptx and "mma.sync" not in result.ptx
    if module == "gemm_fp8":
        # 8-bit inputs only run on wgmma (k32, both operands K-major), fed by
        # TMA boxes under the 8-bit 128-byte swizzle.
        kind = {"e4m3": "e4m3", "e5m2": "e5m2"}[config.get("dtype", "e4m3")]
        assert re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n\d+k32\.f32\.{kind}\.{kind}",
                         result.ptx)
        assert "mma.sync" not in result.ptx and "cp.async.bulk.tensor" in result.ptx
    if module == "flash_attention":
        # Both gemms on wgmma: Q K^T with B K-major (imm-trans-b 0), P @ V
        # with V as stored, N-major (imm-trans-b 1); the K/V stages by TMA
        # through the kernel's [B * H * S, D] views.
        assert "mma.sync" not in result.ptx and "ldmatrix" not in result.ptx
        trans_b = re.findall(r"wgmma\.mma_async[^;]*,\s*(\d),\s*(\d);", result.ptx)
        assert {t for _, t in trans_b} == {"0", "1"}
        assert "cp.async.bulk.tensor" in result.ptx
        (kernel,) = result.kernels
        assert {tuple(m["shape"]) for m in kernel["tensor_maps"]} == {
            (config.get("batch", 1) * config["kv_heads"] * config["seq"],
             config.get("head_dim", 128))}
    for kernel in result.kernels:
        assert f".entry {kernel['name']}(" in result.ptx
    if ptxas_checks_enabled():
        assert result.cubin, "ptxas produced no cubin"
        spills = re.findall(r"(\d+) bytes spill stores", result.ptxas_log)
        assert spills and all(s == "0" for s in spills), result.ptxas_log


@pytest.mark.parametrize("name", sorted(build_artifacts.EXPERIMENTS))
def test_bench_experiment_compiles_without_spills(name):
    """The benchmark candidates (bench/build_artifacts.py EXPERIMENTS: the
    FlashAttention variants with asynchronous gemms and a producer
    warpgroup) assemble with no spills, so that a GPU run times them as they
    would ship."""
    result = build_artifacts.compile_one(name)
    assert "wgmma.mma_async" in result.ptx
    if ptxas_checks_enabled():
        spills = re.findall(r"(\d+) bytes spill stores", result.ptxas_log)
        assert spills and all(s == "0" for s in spills), result.ptxas_log
