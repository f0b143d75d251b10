"""The Hopper gemm path (convert-tile-to-gpu wgmma=true; tilemega.compile's
and @tilemega.jit's wgmma, by default on for sm_90a): a T.* GEMM whose tiles
satisfy tile::chooseWgmma compiles to wgmma.mma_async with no register
spills and no ptxas serialisation warnings (C7509-C7515 fail the compile),
its shared memory aligned to the 128-byte swizzle's 1024-byte period;
wgmma=False keeps mma.sync. Needs no GPU (the kernels' numbers are checked
on the H200 by examples/gemm_hopper.py's entries in test/gpu/results.json)."""

import os
import re
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import tilemega  # noqa: E402
import tilemega.language as T  # noqa: E402
from ptxas_policy import ptxas_checks_enabled  # noqa: E402

M, N, K = 512, 512, 512
BM, BN, BK = 128, 128, 64


def gemm_tn(layout="#tile.mma<warpsPerBlock = [8, 1]>", swizzled=True, wgmma=None,
            stages=3, wgmma_in_flight=None):
    """C = A @ B^T, A [M, K] and B [N, K] bf16, C f32: BM x BN tiles, the K
    loop pipelined through cp.async in `stages`; the accumulator layout and
    the 128-byte swizzle written out unless None / False (then layout
    inference picks). The config parameter `in_flight` is the loop's
    wgmma_in_flight knob (what @tilemega.autotune would vary)."""
    swizzle = T.Swizzle(bits=3, base=3, shift=3) if swizzled else None

    @tilemega.jit(cache=False, wgmma=wgmma, wgmma_in_flight=wgmma_in_flight)
    def kernel(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "bfloat16"),
               C: T.Tensor((M, N), "float32"), *, in_flight: bool = False):
        with T.Kernel(M // BM, N // BN, threads=256) as (bx, by):
            a_s = T.alloc_shared((BM, BK), "bfloat16", swizzle=swizzle)
            b_s = T.alloc_shared((BN, BK), "bfloat16", swizzle=swizzle)
            acc = T.alloc_fragment((BM, BN), "float32", layout=layout)
            T.clear(acc)
            for k in T.Pipelined(K // BK, num_stages=stages, wgmma_in_flight=in_flight):
                T.copy(A[bx * BM, k * BK], a_s)
                T.copy(B[by * BN, k * BK], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            T.copy(acc, C[bx * BM, by * BN])
    return kernel


def test_a_qualifying_gemm_compiles_to_wgmma_without_serialisation():
    art = tilemega.compile(gemm_tn().ir(), wgmma=True, wgmma_in_flight=False, tma=False,
                           assemble=ptxas_checks_enabled())
    # Two warpgroups, four k-steps of 16 per 64-wide K tile, inside the loop.
    steps = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.bf16\.bf16", art.ptx)
    assert len(steps) == 4
    assert "wgmma.fence.sync.aligned" in art.ptx
    assert "wgmma.commit_group.sync.aligned" in art.ptx
    assert re.search(r"wgmma\.wait_group\.sync\.aligned\s+0;", art.ptx)
    assert "fence.proxy.async.shared::cta" in art.ptx
    assert "mma.sync" not in art.ptx and "ldmatrix" not in art.ptx
    assert re.search(r"\.shared \.align 1024 \.b8 __dynamic_shmem__0", art.ptx)
    if art.cubin is not None:
        assert "0 bytes spill stores, 0 bytes spill loads" in art.ptxas_log
        assert not tilemega.compiler.wgmma_serialisation_warnings(art.ptxas_log)


def test_the_plain_gemm_takes_the_hopper_path_by_itself():
    """No layout, swizzle or option written: on sm_90a layout inference gives
    the accumulator 16 rows a warp and the tiles the 128-byte swizzle (what
    tile::chooseWgmma accepts); wgmma=False reaches the compile and its
    cache key."""
    hopper = gemm_tn(layout=None, swizzled=False, wgmma_in_flight=False).compile()
    assert hopper.ptx.count("wgmma.mma_async") == 4 and "mma.sync" not in hopper.ptx
    ampere = gemm_tn(layout=None, swizzled=False, wgmma=False).compile()
    assert "wgmma" not in ampere.ptx and "mma.sync" in ampere.ptx
    from tilemega.cache import key_components, make_key
    keys = {make_key(key_components("x", chip="sm_90a", opt_level=3, features="+ptx80",
                                    assemble=False, wgmma=w)) for w in (False, True)}
    assert len(keys) == 2


def test_on_by_default_on_sm_90a_and_declined_gemms_stay_on_mma_sync():
    assert tilemega.compile(gemm_tn().ir(), wgmma_in_flight=False,
                            assemble=False).ptx.count("wgmma.mma_async") == 4
    plain = tilemega.compile(gemm_tn().ir(), wgmma=False, tma=False, assemble=False)
    assert "wgmma" not in plain.ptx and "mma.sync" in plain.ptx
    assert ".align 1024" not in plain.ptx
    # Other chips have no wgmma: the default leaves them on mma.sync.
    sm90 = tilemega.compile(gemm_tn().ir(), chip="sm_90", assemble=False)
    assert "wgmma" not in sm90.ptx and "mma.sync" in sm90.ptx
    # Warps split along N: not wgmma's D fragment, so mma.sync.
    split = tilemega.compile(gemm_tn(layout="#tile.mma<warpsPerBlock = [4, 2]>").ir(),
                             wgmma=True, assemble=False)
    assert "wgmma" not in split.ptx and "mma.sync" in split.ptx


def test_wgmma_needs_hopper_and_a_bool():
    with pytest.raises(ValueError, match=r"wgmma=True needs chip='sm_90a'"):
        tilemega.compile(gemm_tn().ir(), chip="sm_90", wgmma=True)
    with pytest.raises(ValueError, match="wgmma must be a bool or None"):
        tilemega.compile(gemm_tn().ir(), wgmma="yes")
    from tilemega.compiler import resolve_wgmma
    assert resolve_wgmma(None, "sm_90a") and not resolve_wgmma(None, "sm_80")


def test_ptxas_serialisation_warnings_are_found():
    log = ("ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
           "ptxas warning : (C7515) Potential Performance Loss: wgmma.mma_async "
           "instructions are serialized due to non wgmma instructions defining "
           "accumulator registers of a wgmma between start and end of the pipeline "
           "stage in the function 'k'\n"
           "ptxas info    : Used 92 registers\n")
    (line,) = tilemega.compiler.wgmma_serialisation_warnings(log)
    assert "C7515" in line
    assert not tilemega.compiler.wgmma_serialisation_warnings(
        "ptxas warning : (C7520) something else\n")


def test_wgmma_in_flight_waits_for_one_group_in_the_loop_and_all_after_it():
    """tilemega.compile(wgmma_in_flight=True): in a 3-stage loop the wgmma of
    each k-tile stays pending into the next iteration (wait_group 1), the
    copies run one iteration ahead instead of two (cp.async wait 0 before
    each k-tile), and the loop's end waits for every group before the
    accumulator is stored; it needs the wgmma lowering."""
    art = tilemega.compile(gemm_tn().ir(), wgmma_in_flight=True, tma=False,
                           assemble=ptxas_checks_enabled())
    waits = re.findall(r"wgmma\.wait_group\.sync\.aligned\s+(\d+);", art.ptx)
    assert "1" in waits and waits[-1] == "0"
    tail = art.ptx[art.ptx.rindex("wgmma.wait_group.sync.aligned"):]
    assert "st.global" in tail and "wgmma.mma_async" not in tail
    assert set(re.findall(r"cp\.async\.wait_group\s+(\d+);", art.ptx)) == {"0"}
    if art.cubin is not None:
        assert "0 bytes spill stores, 0 bytes spill loads" in art.ptxas_log
    # On by default wherever the gemms take wgmma (resolve_wgmma_in_flight).
    assert tilemega.compile(gemm_tn().ir(), tma=False, assemble=False).ptx == art.ptx
    plain = tilemega.compile(gemm_tn().ir(), wgmma_in_flight=False, tma=False, assemble=False)
    assert re.findall(r"wgmma\.wait_group\.sync\.aligned\s+(\d+);", plain.ptx) == ["0"]
    with pytest.raises(ValueError, match="wgmma_in_flight=True needs the wgmma lowering"):
        tilemega.compile(gemm_tn().ir(), wgmma=False, wgmma_in_flight=True)
    with pytest.raises(ValueError, match="wgmma_in_flight must be a bool or None"):
        tilemega.compile(gemm_tn().ir(), wgmma_in_flight=1)
    assert tilemega.compiler.resolve_wgmma_in_flight(None, False) is False


def test_the_loop_knob_is_the_compile_option_for_its_loop():
    knob = gemm_tn(layout=None, swizzled=False)
    marked = knob.ir(config={"in_flight": True})
    assert "num_stages 3 wgmma_in_flight" in marked
    on = tilemega.compile(marked, wgmma_in_flight=False, assemble=False)
    option = tilemega.compile(knob.ir(config={"in_flight": False}), wgmma_in_flight=True,
                              assemble=False)
    assert on.ptx == option.ptx and "wgmma.wait_group.sync.aligned \t1;" in on.ptx
    off = tilemega.compile(knob.ir(config={"in_flight": False}), wgmma_in_flight=False,
                           assemble=False)
    assert "wgmma.wait_group.sync.aligned \t1;" not in off.ptx
    # Without the wgmma lowering the knob cannot apply: a warning at the loop.
    with pytest.warns(tilemega.compiler.CompileWarning, match="wgmma_in_flight has no effect"):
        tilemega.compile(marked, wgmma=False, assemble=False)


def test_the_loop_knob_needs_three_stages_and_a_bool():
    with pytest.raises(tilemega.language.TileLangError,
                       match=r"wgmma_in_flight needs num_stages >= 3 .* got 2"):
        gemm_tn(stages=2).ir(config={"in_flight": True})
    with pytest.raises(tilemega.language.TileLangError, match="must be a Python bool"):
        gemm_tn().ir(config={"in_flight": 1})


def ws_gemm(warp_specialize=True, tma=None, nested=False):
    """The TN gemm with its K loop warp-specialised (or asked to be in ways
    that cannot work)."""
    @tilemega.jit(cache=False)
    def kernel(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "bfloat16"),
               C: T.Tensor((M, N), "float32")):
        with T.Kernel(M // BM, N // BN, threads=256) as (bx, by):
            a_s = T.alloc_shared((BM, BK), "bfloat16")
            b_s = T.alloc_shared((BN, BK), "bfloat16")
            acc = T.alloc_fragment((BM, BN), "float32")
            T.clear(acc)
            for _ in (T.serial(1) if nested else [0]):
                for _ in (T.serial(1) if nested else [0]):
                    for k in T.Pipelined(K // BK, num_stages=3, tma=tma,
                                         warp_specialize=warp_specialize):
                        T.copy(A[bx * BM, k * BK], a_s)
                        T.copy(B[by * BN, k * BK], b_s)
                        T.gemm(a_s, b_s, acc, transpose_B=True)
            T.copy(acc, C[bx * BM, by * BN])
    return kernel


def test_a_warp_specialised_loop_gets_a_producer_warpgroup():
    art = tilemega.compile(ws_gemm().ir(), assemble=ptxas_checks_enabled())
    (kernel,) = art.kernels
    assert kernel["block"] == [384, 1, 1]
    assert "setmaxnreg.inc.sync.aligned.u32 \t232;" in art.ptx
    assert "setmaxnreg.dec.sync.aligned.u32 \t40;" in art.ptx
    assert re.search(r"bar\.sync\s+1, 256;", art.ptx)
    assert "mbarrier.arrive.shared" in art.ptx and "cp.async.bulk.tensor" in art.ptx
    if art.cubin is not None:
        assert "0 bytes spill stores, 0 bytes spill loads" in art.ptxas_log


def test_warp_specialize_is_checked_at_the_users_line():
    with pytest.raises(tilemega.language.TileLangError, match="must be a Python bool"):
        ws_gemm(warp_specialize=1).ir()
    with pytest.raises(tilemega.language.TileLangError, match="needs TMA .* but tma=False"):
        ws_gemm(tma=False).ir()
    # Two loops deep: neither at the top level nor in a loop that is.
    with pytest.raises(tilemega.language.TileLangError, match="kernel's top level or in a "
                                                              "loop that is"):
        ws_gemm(nested=True).ir()


def test_a_persistent_kernel_runs_the_pipeline_across_its_tiles():
    """examples/gemm_hopper.py persistent: the producer copies the loop over
    tiles, and the consumers hand back each tile's last stage after the
    wgmma wait that ends its K loop."""
    import sys
    sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
    import gemm_hopper
    ir = gemm_hopper.build(M=512, N=512, K=512, num_stages=3, warp_specialize=True,
                           persistent=3, stage_c=True)
    art = tilemega.compile(ir, assemble=ptxas_checks_enabled())
    (kernel,) = art.kernels
    assert kernel["grid"] == [3, 1, 1] and kernel["block"] == [384, 1, 1]
    assert art.ptx.count("setmaxnreg.dec") == 1 and "cp.async.bulk.tensor" in art.ptx
    # A resident grid: at most 3 blocks, striding by the launched count.
    assert kernel["resident"] is True and "%nctaid.x" in art.ptx
    with pytest.raises(ValueError, match="persistent needs warp_specialize"):
        gemm_hopper.config(persistent=4)


def test_persistent_clusters_stride_by_the_clusters_launched():
    """A persistent kernel in clusters of 2 on a resident grid: the clusters
    the device co-schedules (at most 8) walk the tiles by the launched
    count's clusters, and B is still multicast (T.num_blocks() is the same
    in every block of a cluster)."""
    import sys
    sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
    import gemm_hopper
    art = tilemega.compile(gemm_hopper.build(
        M=1000, N=1000, K=1000, transpose_a=True, transpose_b=False, block_n=256,
        num_stages=3, stage_c=True, group_m=4, warp_specialize=True, persistent=16,
        cluster=2), assemble=ptxas_checks_enabled())
    (kernel,) = art.kernels
    assert (kernel["grid"], kernel["cluster"], kernel["resident"]) == ([16, 1, 1], 2, True)
    assert "%nctaid.x" in art.ptx and ".multicast::cluster" in art.ptx
    if art.cubin is not None:
        assert "0 bytes spill stores, 0 bytes spill loads" in art.ptxas_log


def test_a_cluster_multicasts_the_shared_operand():
    """examples/gemm_hopper.py cluster=2 (T.Kernel(cluster=2)): launched in
    clusters of two row tiles; B's box is the same in both blocks, so each
    producer copies half of it into both (multicast), A's is not; the
    consumers hand each stage back to both blocks at CTA scope (at cluster
    scope it ran 2.3x slower); without a warp-specialised loop nothing can
    be multicast and the kernel's line says so."""
    import sys
    sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
    import gemm_hopper
    cfg = dict(M=1024, N=1024, K=512, block_n=256, num_stages=4, stage_c=True, group_m=4)
    art = tilemega.compile(gemm_hopper.build(warp_specialize=True, cluster=2, **cfg),
                           assemble=ptxas_checks_enabled())
    ptx = art.ptx
    assert ".reqnctapercluster 2, 1, 1" in ptx and "barrier.cluster.wait" in ptx
    copies = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\S*", ptx)
    assert any(c.endswith(".multicast::cluster") for c in copies)
    assert any(not c.endswith(".multicast::cluster") for c in copies)
    assert "mbarrier.arrive.shared::cluster.b64" in ptx
    assert "release.cluster.shared::cluster" not in ptx
    (kernel,) = art.kernels
    # B (param 1) in halves of 128 rows; A (param 0) whole.
    assert [m["box"] for m in kernel["tensor_maps"]] == [[128, 64], [128, 64]]
    if art.cubin is not None:
        assert "0 bytes spill stores, 0 bytes spill loads" in art.ptxas_log
        assert not tilemega.compiler.wgmma_serialisation_warnings(art.ptxas_log)
    with pytest.raises(ValueError, match="cluster needs warp_specialize"):
        gemm_hopper.config(cluster=2)
    with pytest.raises(ValueError, match="must divide the 3 row tiles"):
        gemm_hopper.config(M=384, warp_specialize=True, cluster=2)
    with pytest.raises(ValueError, match="cluster=4 must divide persistent=130"):
        gemm_hopper.config(warp_specialize=True, persistent=130, cluster=4)
    ir = gemm_hopper.build(**dict(cfg, warp_specialize=True, cluster=2)).replace(
        "warp_specialize", "ws_off")
    with pytest.raises(tilemega.CompileError, match="runs clusters of 2 blocks, but "
                                                    "multicasts no copy"):
        tilemega.compile(ir)


def test_spills_of_a_warp_specialised_kernel_name_its_register_split():
    """A warp-specialised kernel that spills: tilemega.compile's warning
    names the consumers' setmaxnreg budget and the producer's share (the
    limit the tiles ran into), with the bytes spilled."""
    from tilemega.compiler import spill_warnings
    ptx = (".visible .entry ws(\n.param .u64 a\n)\n.reqntid 384, 1, 1\n{\n"
           "setmaxnreg.dec.sync.aligned.u32 40;\nsetmaxnreg.inc.sync.aligned.u32 232;\n}\n"
           ".visible .entry plain(\n.param .u64 a\n)\n{\n}\n")
    log = ("ptxas info    : Compiling entry function 'ws' for 'sm_90a'\n"
           "ptxas info    : Function properties for ws\n"
           "    96 bytes stack frame, 96 bytes spill stores, 96 bytes spill loads\n"
           "ptxas info    : Used 168 registers, used 2 barriers\n"
           "ptxas info    : Compiling entry function 'plain' for 'sm_90a'\n"
           "ptxas info    : Function properties for plain\n"
           "    8 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
           "ptxas info    : Used 255 registers, used 1 barriers\n")
    assert spill_warnings(ptx, log) == [
        "kernel 'ws': ptxas spilled 96 bytes of registers to local memory (168 registers a "
        "thread; a warp-specialised kernel's consumer warpgroups run with 232 registers a "
        "thread after setmaxnreg (the producer warpgroup keeps 40): smaller tiles or fewer "
        "fragments fit it)",
        "kernel 'plain': ptxas spilled 8 bytes of registers to local memory (255 registers "
        "a thread)"]


def test_tma_store_is_checked_at_the_users_line():
    """examples/gemm_hopper.py tma_store: C by TMA bulk stores on sm_90a; on a
    chip without TMA the compile names the copy; T.copy checks its flag."""
    import sys
    sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
    import gemm_hopper
    ir = gemm_hopper.build(M=512, N=512, K=512, stage_c=True, tma_store=True)
    art = tilemega.compile(ir, assemble=False)
    assert art.ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == 2
    assert "cp.async.bulk.wait_group.read" in art.ptx
    with pytest.raises(tilemega.compiler.CompileError, match="asks for a TMA store"):
        tilemega.compile(ir, chip="sm_90", assemble=False)
    with pytest.raises(ValueError, match="tma_store needs stage_c"):
        gemm_hopper.config(tma_store=True)

    @tilemega.jit(cache=False)
    def bad(C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128):
            acc = T.alloc_fragment((128, 128), "float32")
            T.clear(acc)
            T.copy(acc, C, tma_store=True)
    with pytest.raises(tilemega.language.TileLangError, match="tma_store copies a shared tile"):
        bad.ir()


def p_times_v(dtype="bfloat16"):
    """O = P @ V with P a fragment (softmax's output in FlashAttention):
    wgmma's register-A form. One warpgroup, P 64 x 64 computed from a
    fragment of scores, V 64 x 64 as stored (K x N)."""
    @tilemega.jit(cache=False)
    def kernel(S: T.Tensor((64, 64), "float32"), V: T.Tensor((64, 64), dtype),
               O: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            sc = T.alloc_fragment((64, 64), "float32")
            p = T.alloc_fragment((64, 64), dtype)
            v_s = T.alloc_shared((64, 64), dtype)
            o = T.alloc_fragment((64, 64), "float32")
            T.copy(S[0, 0], sc)
            T.copy(V[0, 0], v_s)
            for i, j in T.Parallel(64, 64):
                p[i, j] = T.cast(sc[i, j], dtype)
            T.gemm(p, v_s, o, clear_accum=True)
            T.copy(o, O[0, 0])
    return kernel


def test_a_fragment_a_takes_wgmmas_register_form():
    """Four k-steps of m64n64k16 with four A registers each, packed before
    the fence they pass through; no shared tile of P."""
    art = tilemega.compile(p_times_v().ir(), chip="sm_90a", assemble=ptxas_checks_enabled())
    steps = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n64k16\.f32\.bf16\.bf16 \{[^}]*\}, "
                       r"\{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, p, 1, 1, 1;", art.ptx)
    assert len(steps) == 4, art.ptx[-3000:]
    fence = art.ptx.index("wgmma.fence.sync.aligned")
    assert fence < art.ptx.index("wgmma.mma_async")
    # No packing (shift into the high half) between the fence and the last step.
    assert not re.search(r"shl\.b32", art.ptx[fence:art.ptx.rindex("wgmma.mma_async")])


def test_a_fragment_a_wgmma_cannot_take_is_an_error_at_the_users_line():
    """f32 has no register-A form, and nothing else multiplies a fragment A:
    the error names why, at the gemm's line in the T.* source."""
    from tilemega.compiler import CompileError

    with pytest.raises(CompileError, match=r"test_wgmma\.py\":\d+:\d+: .tile\.gemm. op "
                                           r"takes A from registers "
                                           r"\(a fragment\), which only wgmma's register "
                                           r"form does, and cannot: wgmma takes A from "
                                           r"registers for bf16 and f16 inputs only"):
        p_times_v("float32").compile()


def test_a_fragment_a_without_wgmma_is_an_error_that_says_so():
    """On a chip without wgmma (sm_90) nothing multiplies a fragment A."""
    from tilemega.compiler import CompileError

    with pytest.raises(CompileError, match=r"reads A from registers \(a fragment\), which "
                                           r"only wgmma's register form multiplies \(sm_90a "
                                           r"with wgmma.*: the wgmma lowering is off"):
        tilemega.compile(p_times_v().ir(), chip="sm_90", assemble=False)


def test_five_warpgroups_split_only_the_registers_their_launch_holds():
    """A 256-row warp-specialised GEMM launches 640 threads, 96 registers
    each (the SM's 65536 over 640, a multiple of 8): the consumers may rise
    to 104 (that pool less the producer's 40), not 112 (the whole SM less
    the producer's), which left consumer warps in setmaxnreg.inc forever
    (a hang on an H100). The 384-thread split stays 232 / 40."""
    import sys
    sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
    import gemm_hopper
    art = tilemega.compile(gemm_hopper.build(
        M=1024, N=1024, K=1024, block_m=256, block_n=128, num_stages=4, stage_c=True,
        transpose_b=False, warp_specialize=True), assemble=ptxas_checks_enabled())
    (kernel,) = art.kernels
    assert kernel["block"] == [640, 1, 1]
    assert re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+);", art.ptx) == [
        ("inc", "104"), ("dec", "40")]
    if art.cubin is not None:
        assert "Used 96 registers" in art.ptxas_log
    two = tilemega.compile(gemm_hopper.build(
        M=1024, N=1024, K=1024, block_n=128, num_stages=4, stage_c=True, transpose_b=False,
        warp_specialize=True), assemble=False)
    assert re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+);", two.ptx) == [
        ("inc", "232"), ("dec", "40")]
