"""TMA from T.*: on sm_90a the plain pipelined GEMM moves its tiles with
cp.async.bulk.tensor on mbarriers by itself (tilemega.compile's `tma`, on by
default there), its artifact lists the tensor maps the runtime builds, and
ptxas assembles it with no spills or wgmma serialisation; the knob is a bool
that needs Hopper and reaches the cache key. (Bulk-copy IR: lit tests
tile-pipeline-tma.mlir and tma-gemm-to-ptx.mlir; the runtime's maps:
test_tensor_maps.py; on the GPU: the GEMM examples in the results file.)"""

import os
import re
import sys

import pytest

import tilemega
from ptxas_policy import ptxas_checks_enabled
from test_wgmma import gemm_tn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))


def test_the_plain_gemm_takes_tma_by_itself():
    art = tilemega.compile(gemm_tn(layout=None, swizzled=False).ir(),
                           assemble=ptxas_checks_enabled())
    ptx = art.ptx
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global", ptx)) >= 2
    assert "mbarrier.try_wait.parity" in ptx and "mbarrier.arrive.expect_tx" in ptx
    assert "cp.async.cg" not in ptx and "cp.async.wait_group" not in ptx
    # Only TMA writes the wgmma tiles: no generic-to-async proxy fence.
    assert "fence.proxy.async" not in ptx
    assert len(re.findall(r"\.param \.align 64 \.b8 kernel_param_\d\[128\]", ptx)) == 2
    (kernel,) = art.metadata["kernels"]
    assert kernel["tensor_maps"] == [
        {"param": 0, "box": [128, 64], "swizzle_bytes": 128},
        {"param": 1, "box": [128, 64], "swizzle_bytes": 128}]
    if art.cubin is not None:
        assert "0 bytes spill stores, 0 bytes spill loads" in art.ptxas_log
        assert not tilemega.compiler.wgmma_serialisation_warnings(art.ptxas_log)


def test_tma_off_and_other_chips_keep_cp_async():
    for art in (tilemega.compile(gemm_tn().ir(), tma=False, assemble=False),
                tilemega.compile(gemm_tn().ir(), chip="sm_90", assemble=False)):
        assert "cp.async.bulk" not in art.ptx and "cp.async.cg" in art.ptx
        assert "tensor_maps" not in art.metadata["kernels"][0]


def test_tma_needs_hopper_and_a_bool():
    with pytest.raises(ValueError, match=r"tma=True needs chip='sm_90a'"):
        tilemega.compile(gemm_tn().ir(), chip="sm_90", tma=True)
    with pytest.raises(ValueError, match=r"tma must be a bool or None"):
        tilemega.compile(gemm_tn().ir(), tma=1)


def test_tma_is_in_the_cache_key_and_a_jit_option():
    from tilemega.cache import key_components, make_key
    keys = {make_key(key_components("x", chip="sm_90a", opt_level=3, features="+ptx80",
                                    assemble=False, wgmma=True, tma=t)) for t in (False, True)}
    assert len(keys) == 2
    assert gemm_tn().options["tma"] is True


def test_c_staged_over_the_stages_bytes_fits_four_stages():
    """examples/gemm_hopper.py stage_c: the 64 KiB C tile is live only after
    the K loop, so it shares the four 48 KiB stages' bytes (TileSharedMemory.h):
    the kernel needs the stages (and their mbarriers), not 256 KiB."""
    import run_examples
    from tilemega.ir import Context, Location
    example = run_examples.example_module("gemm_hopper")
    with Context(), Location.unknown():
        art = tilemega.compile(example.build(name="staged", M=4096, N=4096, K=4096,
                                             block_n=256, num_stages=4, stage_c=True),
                               assemble=False)
    (kernel,) = art.metadata["kernels"]
    assert 4 * 48 * 1024 <= kernel["dynamic_shared_bytes"] < 4 * 48 * 1024 + 1024
    # The C tile's first store waits for the stages' last readers.
    tail = art.ptx[art.ptx.rindex("wgmma.wait_group.sync.aligned"):]
    assert re.search(r"fence\.proxy\.async\.shared::cta;\s*bar\.sync\s+0;", tail)
    assert "st.global.v4.b32" in tail


def test_the_loop_knob_requires_or_refuses_tma():
    """T.Pipelined(..., tma=True) requires TMA for its loop: a copy that
    cannot be one TMA box is an error at the user's line naming the rule;
    tma=False keeps cp.async under the compile's default."""
    import tilemega.language as T

    def kernel_with(tma, cols):
        @tilemega.jit(cache=False)
        def kernel(A: T.Tensor((64, cols), "float16"), F: T.Tensor((64, 8), "float16")):
            with T.Kernel(1, threads=128) as bx:
                a_s = T.alloc_shared((64, 8), "float16")
                f = T.alloc_fragment((64, 8), "float16")
                for k in T.Pipelined(2, num_stages=2, tma=tma):
                    T.copy(A[0, k * 8], a_s)
                    T.copy(a_s, f)
                T.copy(f, F[0, 0])
        return kernel

    fine = kernel_with(True, 32).compile()
    assert "cp.async.bulk.tensor" in fine.ptx
    off = kernel_with(False, 32).compile()
    assert "cp.async.bulk" not in off.ptx and "cp.async" in off.ptx
    with pytest.raises(tilemega.compiler.CompileError,
                       match=r"asks for TMA \(tma = true\), but the copy at .* cannot be one TMA "
                             r"box: the tensor's rows are 40 bytes, not a multiple of 16"):
        kernel_with(True, 20).compile()
    with pytest.raises(Exception, match=r"tma must be None or a Python bool"):
        kernel_with(1, 32).compile()
