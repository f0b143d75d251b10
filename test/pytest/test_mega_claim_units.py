"""Claimed units (compile(mega_claim_units=True), docs/mega.md "Claimed
units"): a task of several units an instance runs each instance's own unit,
then claims the rest from a counter of its task in mega_state. What runs
on a GPU is examples/generation.py's gen_small_claimed (its float64 check,
the device loop and the sanitizers in test/gpu/results.json) and
bench/generate_ab.py's claim_units variants; here: the artifact, its
metadata, its PTX's one claim loop (the first form, two copies, hung on
the GPU: docs/mega.md), the tables and the schedule."""
import re

import pytest

pytest.importorskip("tilemega.ir", reason="the compiler package is not built")

import tilemega  # noqa: E402
from tilemega import mega  # noqa: E402
from tilemega.runtime import mega_meta as mm  # noqa: E402
from tilemega.runtime import mega_sim as ms  # noqa: E402

from test_mega_compile import check_tables  # noqa: E402

from conftest import shipped_config  # noqa: E402

SMALL = shipped_config("gen_small")
# The LM head of gen_small in 2-row units: 500 units, two an instance.
ROWS = dict(rows_per_unit={"lm_head": 2})


@pytest.fixture(scope="module")
def builds():
    """claim -> (artifact, mega kernel) of gen_small with 2-row head units."""
    out = {}
    for claim in (False, True):
        text = mega.generation_graph(SMALL, **ROWS).to_mlir()
        art = tilemega.compile(text, chip="sm_90a", mega_claim_units=claim)
        (kernel,) = [k for k in art.kernels if "mega" in k]
        out[claim] = (art, kernel)
    return out


def test_only_tasks_of_several_units_an_instance_claim(builds):
    for claim, (_, kernel) in builds.items():
        check_tables(kernel)
        meta = kernel["mega"]
        claimed = [t["name"] for t in meta["tasks"] if t.get("claims_units")]
        several = [t["name"] for t in meta["tasks"] if t["units_per_task"] > 1]
        assert several == ["t13_lm_head"]
        assert claimed == (several if claim else [])
        # One counter word a task after the 16 fixed words.
        assert mm.state_words(meta) == mm.STATE_WORDS + (len(meta["tasks"]) if claim else 0)
        assert meta.get("unit_counters", 0) == (len(meta["tasks"]) if claim else 0)


def test_claims_keep_the_instances_and_the_shared_memory(builds):
    (_, fixed), (art, claimed) = builds[False], builds[True]
    for field in ("grid", "block"):
        assert fixed[field] == claimed[field], field
    # One copy of the body runs every unit, in the case's tiles: only the
    # word a claim reaches the CTA in is added, 128 bytes with its alignment.
    assert claimed["dynamic_shared_bytes"] - fixed["dynamic_shared_bytes"] == 128
    assert [t["count"] for t in fixed["mega"]["tasks"]] == \
        [t["count"] for t in claimed["mega"]["tasks"]]
    # The claims are atomic adds on the state buffer (besides the step
    # barrier's arrival, which both builds have; LLVM may give the first
    # claim and the loop's one block), and the claim loop reads the thread
    # index in each region (mega-fresh-thread-ids).
    fixed_ptx, claimed_ptx = builds[False][0].ptx, art.ptx
    assert claimed_ptx.count("atom.global.add") >= fixed_ptx.count("atom.global.add") + 1
    assert claimed_ptx.count("%tid.x") >= fixed_ptx.count("%tid.x") + 2
    # ... so that LLVM keeps one copy of the loop: the CTA reads the claimed
    # word in one place. Two copies (one for thread 0, one for the others,
    # each with its own aligned barriers) hung on the GPU.
    assert claimed_word_reads(claimed_ptx) == 1


# Without per-case reads the kernel spills (docs/mega.md, "Per-body thread
# index"): expected here, where only the claim loop's form is checked.
@pytest.mark.filterwarnings("ignore:kernel 'generate'. ptxas spilled")
def test_the_claim_loop_reads_its_thread_index_without_per_case_reads():
    # mega_fresh_thread_ids=False keeps the kernel's one read for the cases;
    # the claim loop still reads its own (the pass runs with cases=false),
    # and LLVM keeps one copy of it.
    text = mega.generation_graph(SMALL, **ROWS).to_mlir()
    art = tilemega.compile(text, chip="sm_90a", mega_claim_units=True,
                           mega_fresh_thread_ids=False)
    assert art.ptx.count("%tid.x") >= 3
    assert claimed_word_reads(art.ptx) == 1


def claimed_word_reads(ptx):
    """How many loads of the shared word thread 0 stores a claim's unit in
    (the first st.shared after the claim's atomic add)."""
    lines = ptx.splitlines()
    claim = next(i for i, line in enumerate(lines)
                 if "atom.global.add" in line and "+12]" not in line)
    store = next((line for line in lines[claim:claim + 4] if "st.shared.b32" in line), None)
    if store is None:    # the claim is handed out as a value (the old loop's form)
        return 0
    word = re.search(r"\[([^\]]+)\]", store).group(1)
    return sum(1 for line in lines if "ld.shared" in line and f"[{word}]" in line)


def test_consumers_of_claimed_units_wait_for_every_instance(builds):
    meta = builds[True][1]["mega"]
    names = [t["name"] for t in meta["tasks"]]
    head, pick = names.index("t13_lm_head"), names.index("t14_pick_partial")
    entries = meta["entries"]
    head_entries = [e for e, t in enumerate(entries["task"]) if t == head]
    pick_entries = [e for e, t in enumerate(entries["task"]) if t == pick]
    signalled = {ev for e in head_entries for ev in meta["signals"][e]}
    for p in pick_entries:
        waits = [ev for ev in meta["waits"][p] if ev in signalled]
        senders = {e for e in head_entries for ev in waits if ev in meta["signals"][e]}
        assert senders == set(head_entries), p


def test_claimed_schedule_is_deadlock_free(builds):
    ms.check_deadlock_free(builds[True][1]["mega"], runs=20)


def test_simulated_claims_run_every_unit_once_and_balance_slow_workers(builds):
    """The simulator runs a claiming task as the kernel does: every unit
    once, the entries on slow workers fewer, the step shorter than the
    same units split statically."""
    (_, fixed), (_, claimed) = builds[False], builds[True]
    meta = claimed["mega"]
    head = [t["name"] for t in meta["tasks"]].index("t13_lm_head")
    mine = [e for e, t in enumerate(meta["entries"]["task"]) if t == head]
    # One worker in five at half speed.
    slow = {w: 2.0 for w in range(0, meta["workers"], 5)}
    runs = {name: ms.simulate(k["mega"], worker_speed=slow)
            for name, k in (("fixed", fixed), ("claimed", claimed))}
    for r in runs.values():
        assert r.deadlock is None
    got = runs["claimed"]
    assert sum(got.units[e] for e in mine) == meta["tasks"][head]["units"]
    assert all(got.units[e] >= 1 for e in mine)
    on_slow = [got.units[e] for e in mine if got.worker[e] in slow]
    on_fast = [got.units[e] for e in mine if got.worker[e] not in slow]
    assert max(on_slow) <= min(on_fast) and sum(on_slow) / len(on_slow) < sum(on_fast) / len(on_fast)
    # Fixed: every head entry runs its 2 units, the slow ones twice as long.
    assert {runs["fixed"].units[e] for e in mine} == {2}
    span = {name: max(r.end_ns[e] for e in mine) - min(r.start_ns[e] for e in mine)
            for name, r in runs.items()}
    assert span["claimed"] < span["fixed"]
