"""Aligned CTA barriers that LLVM's optimiser copies into code only some
threads run (tilemega-record-aligned-barriers, tilemega.ptx_barriers,
compiler.check_aligned_barriers; docs/mega.md "Claimed units": the first
form of the claim loop, split by LLVM between thread 0 and the others, hung
on the GPU outside every watchdog)."""
import pytest

pytest.importorskip("tilemega.ir", reason="the compiler package is not built")

import tilemega  # noqa: E402
from tilemega import mega  # noqa: E402
from tilemega._mlir_libs import _site_initialize_0 as extension  # noqa: E402
from tilemega.compiler import CompileError, check_aligned_barriers  # noqa: E402
from tilemega.ptx_barriers import misplaced_barriers  # noqa: E402

from conftest import shipped_config  # noqa: E402

HEADER = """
.version 8.7
.target sm_90a
.address_size 64

.visible .entry k(
	.param .u64 k_param_0
)
{
	.reg .pred 	%p<8>;
	.reg .b32 	%r<40>;
	.reg .b64 	%rd<8>;
"""

# What LLVM made of the claim loop: one copy for thread 0, one for the
# others, each with its own bar.sync.
SPLIT_LOOP = HEADER + """
	mov.u32 	%r1, %tid.x;
	ld.param.u64 	%rd1, [k_param_0];
	setp.eq.s32 	%p1, %r1, 0;
	mov.b32 	%r2, 0;
	@%p1 bra 	$L__BB0_3;
$L__BB0_1:
	bar.sync 	0;
	add.s32 	%r2, %r2, 1;
	setp.lt.s32 	%p2, %r2, 8;
	@%p2 bra 	$L__BB0_1;
	bra.uni 	$L__BB0_5;
$L__BB0_3:
	atom.global.add.u32 	%r3, [%rd1], 1;
	bar.sync 	0;
	add.s32 	%r2, %r2, 1;
	setp.lt.s32 	%p3, %r2, 8;
	@%p3 bra 	$L__BB0_3;
$L__BB0_5:
	ret;
}
"""

# A loop whose last iteration LLVM peeled (both copies run by every
# thread), thread 0 alone issuing a copy inside it, a switch on a value
# the CTA shares (its table spanning lines), and a named barrier of the
# consumer warps under a per-warp branch.
HARMLESS = HEADER + """
	mov.u32 	%r1, %tid.x;
	ld.param.u64 	%rd1, [k_param_0];
	setp.ne.s32 	%p1, %r1, 0;
	mov.b32 	%r2, 0;
$L__BB0_1:
	bar.sync 	0;
	@%p1 bra 	$L__BB0_2;
	st.global.u32 	[%rd1], %r2;
$L__BB0_2:
	add.s32 	%r2, %r2, 1;
	setp.lt.s32 	%p2, %r2, 7;
	@%p2 bra 	$L__BB0_1;
	bar.sync 	0;
	ld.global.u32 	%r4, [%rd1+4];
	$L_brx_0: .branchtargets
		$L__BB0_6,
		$L__BB0_7;
	brx.idx 	%r4, $L_brx_0;
$L__BB0_6:
	bar.sync 	0;
	bra.uni 	$L__BB0_8;
$L__BB0_7:
	// begin inline asm
	{
	.reg .pred P1;
	LAB_WAIT:
	mbarrier.try_wait.parity.shared.b64 P1, [%r4], %r2, 1000;
	@P1 bra.uni DONE;
	bra.uni LAB_WAIT;
	DONE:
	}
	// end inline asm
	bar.sync 	0;
$L__BB0_8:
	shr.u32 	%r5, %r1, 7;
	setp.eq.s32 	%p3, %r5, 0;
	@%p3 bra 	$L__BB0_10;
	bar.sync 	1, 256;
$L__BB0_10:
	ret;
}
"""


def test_the_count_is_one_rule_for_inline_asm_and_ptx():
    ptx = ("@%p1 bar.sync 0; // bar.sync\n barrier.sync 1; barrier.sync.aligned 2, 64;\n"
           "{ bar.red.popc.u32 %r1, 0, %p2; }\nbar.warp.sync -1; mbarrier.arrive.b64 _, [x];\n"
           "barrier.cluster.arrive.aligned; bar.cta.arrive 1, 64;")
    # bar.sync, barrier.sync.aligned, bar.red, bar.cta.arrive; not the
    # comment, the unaligned barrier.sync, bar.warp.sync, mbarrier or the
    # cluster barrier.
    assert extension.count_aligned_barriers(ptx) == 4
    assert extension.count_aligned_barriers(SPLIT_LOOP) == 2


def test_a_loop_split_between_threads_is_found():
    found = misplaced_barriers(SPLIT_LOOP)
    assert len(found) == 2
    assert all("under the per-thread branch" in f and "@%p1 bra" in f for f in found)


def test_peeled_copies_shared_switches_and_named_barriers_are_not():
    assert misplaced_barriers(HARMLESS) == []


def test_a_barrier_guarded_by_a_per_thread_predicate_is_found():
    ptx = HEADER + """
	mov.u32 	%r1, %tid.x;
	setp.eq.s32 	%p1, %r1, 0;
	@%p1 bar.sync 	0;
	ret;
}
"""
    (found,) = misplaced_barriers(ptx)
    assert "its guard is per-thread" in found


def test_compile_refuses_copies_under_per_thread_branches_only():
    # One barrier handed to LLVM, two in the PTX, each under tid == 0 or not.
    with pytest.raises(CompileError, match=r"holds 1, the PTX 2.*would hang"):
        check_aligned_barriers(SPLIT_LOOP, 1)
    # A persistent kernel is judged whatever the counts.
    with pytest.raises(CompileError, match=r"only some threads run"):
        check_aligned_barriers(SPLIT_LOOP, 2, persistent=True)
    with pytest.raises(CompileError, match=r"the PTX holds 2"):
        check_aligned_barriers(SPLIT_LOOP, None, persistent=True)
    # Other kernels with as many as handed: nothing to decide; copies every
    # thread runs: fine.
    check_aligned_barriers(SPLIT_LOOP, 2)
    check_aligned_barriers(HARMLESS, 1)
    check_aligned_barriers(HARMLESS, 1, persistent=True)
    check_aligned_barriers(SPLIT_LOOP, None)


def test_the_claim_loop_compiles_with_every_barrier_in_the_whole_cta():
    # gen_small with claimed head units (the graph whose first form hung):
    # compile's check passes, and no barrier of the PTX depends on a
    # per-thread branch.
    text = mega.generation_graph(shipped_config("gen_small"),
                                 rows_per_unit={"lm_head": 2}).to_mlir()
    art = tilemega.compile(text, chip="sm_90a", mega_claim_units=True)
    assert extension.count_aligned_barriers(art.ptx) > 100
    assert misplaced_barriers(art.ptx) == []
