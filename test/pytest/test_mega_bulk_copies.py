"""The persistent kernel's tiles by 1-D bulk copies on mbarriers
(tilemega.compile(..., mega_bulk_copies=True); tile-pipeline linear-bulk,
docs/mega.md "Bulk copies"): the GEMV bodies' weight and activation tiles
leave cp.async for cp.async.bulk, the early loads still start before the
task's wait, and the kernel assembles without spills. What runs on a GPU
(the float64 checks, the timing) is bench/generate_ab.py's variant
`bulk_copies`; here: the artifacts and the option's checks."""

import re
import warnings

import pytest

pytest.importorskip("tilemega.ir", reason="the compiler package is not built")

import tilemega  # noqa: E402
from tilemega import mega  # noqa: E402

from conftest import shipped_config  # noqa: E402

SMALL = shipped_config("gen_small")


@pytest.fixture(scope="module")
def builds():
    text = mega.generation_graph(SMALL).to_mlir()
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # compile warns on spills
        on = tilemega.compile(text, chip="sm_90a", mega_bulk_copies=True)
    off = tilemega.compile(text, chip="sm_90a")
    return text, on, off


def test_bulk_copies_replace_the_bodies_cp_async(builds):
    _, on, off = builds
    assert "cp.async.bulk.shared::cluster.global" not in off.ptx
    bulk = on.ptx.count("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes")
    assert bulk > 0
    # Every bulk copy's bytes are expected on its barrier first, and each
    # stage arrives once its copies are issued.
    assert on.ptx.count("mbarrier.expect_tx") >= bulk
    assert "mbarrier.arrive" in on.ptx
    # Only loops whose copies cannot be linear (the attention's swizzled
    # key/value tiles, the sampling's logits whose last chunk overhangs the
    # vocabulary) keep cp.async.
    def thread_copies(ptx):
        return len(re.findall(r"cp\.async\.c[ag]\.shared\.global", ptx))
    assert 0 < thread_copies(on.ptx) < thread_copies(off.ptx)
    assert on.ptx.count("cp.async.commit_group") < off.ptx.count("cp.async.commit_group")


def test_bulk_copies_keep_early_loads_before_the_wait(builds):
    """A GEMV's first weight tiles are issued before the worker's
    watchdog-bounded poll of its events (ld.acquire), as cp.async early
    loads are."""
    _, on, _ = builds
    first_bulk = on.ptx.index("cp.async.bulk.shared::cluster.global")
    assert re.search(r"ld\.acquire\.gpu", on.ptx[first_bulk:]), \
        "no event poll after the first bulk copy"


def test_option_checks(builds):
    text, _, _ = builds
    with pytest.raises(ValueError, match="mega_bulk_copies must be a bool"):
        tilemega.compile(text, chip="sm_90a", mega_bulk_copies=1)
    with pytest.raises(ValueError, match="mega_bulk_copies=True needs chip='sm_90a'"):
        tilemega.compile(text, chip="sm_90", mega_bulk_copies=True)
    with pytest.raises(ValueError, match="mega_stream_units streams cp.async stages"):
        tilemega.compile(text, chip="sm_90a", mega_bulk_copies=True, mega_stream_units=True)
