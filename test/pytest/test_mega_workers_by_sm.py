"""Workers placed by SM (mega.graph workers_by_sm, docs/mega.md): the
kernel claims worker indices from %smid, its state holds a claim word a
CTA, and mega-schedule keeps latency-bound tasks (the attention) on SMs
that run no streaming task meanwhile. What runs on a GPU (the claims, the
timing) is bench/generate_ab.py's variant `workers_by_sm`; here: the
artifacts, the schedule and the metadata checks."""

import pytest

pytest.importorskip("tilemega.ir", reason="the compiler package is not built")

import tilemega  # noqa: E402
from tilemega import mega  # noqa: E402
from tilemega.runtime import mega_meta as mm  # noqa: E402
from tilemega.runtime import mega_sim as ms  # noqa: E402
from tilemega.runtime.mega import decode_error  # noqa: E402

from test_mega_compile import check_tables  # noqa: E402

from conftest import shipped_config  # noqa: E402

# examples/generation.py's gen_small on 2 CTAs an SM of 132 SMs.
SMALL = shipped_config("gen_small")
ATTENTION = ("attn_split", "attn_merge")


@pytest.fixture(scope="module")
def builds():
    """workers_by_sm -> the generation kernel's (artifact, mega kernel)."""
    out = {}
    for by_sm in (False, True):
        text = mega.generation_graph(SMALL, workers_by_sm=by_sm).to_mlir()
        art = tilemega.compile(text, chip="sm_90a")
        (kernel,) = [k for k in art.kernels if "mega" in k]
        out[by_sm] = (art, kernel)
    return out


def test_graph_marks_the_attention_latency_bound():
    text = mega.generation_graph(SMALL, workers_by_sm=True).graph_mlir()
    assert "workers_by_sm" in text.splitlines()[0]
    tasks = [line for line in text.splitlines() if "mega.task" in line]
    for line in tasks:
        assert ("latency_bound" in line) == any(a in line.split()[1] for a in ATTENTION), line
    assert "workers_by_sm" not in mega.generation_graph(SMALL).graph_mlir().splitlines()[0]


def test_state_holds_a_claim_word_a_cta(builds):
    for by_sm, (art, kernel) in builds.items():
        check_tables(kernel)
        meta = kernel["mega"]
        ctas = kernel["grid"][0]
        assert mm.state_words(meta) == (mm.STATE_WORDS + ctas if by_sm else mm.STATE_WORDS)
        assert ("state_words" in meta) == by_sm
        # The claim: an unsigned max on the state words, from the SM id.
        assert ("atom.global.max.u32" in art.ptx) == by_sm
        assert ("%smid" in art.ptx) == by_sm


def _overlaps(kernel):
    """Streaming entries whose loads overlap another CTA's attention entry
    on their SM (bench/generate_timeline.py placement) in the simulator's
    nominal run, worker w on SM w mod G as workers_by_sm lays them out."""
    meta = kernel["mega"]
    sms = -(-meta["workers"] // 2)
    run = ms.simulate(meta)
    doc = {"tasks": [t["name"] for t in meta["tasks"]],
           "entries": [[t, run.start_ns[e], run.end_ns[e], run.worker[e], run.worker[e] % sms]
                       for e, t in enumerate(meta["entries"]["task"])]}
    return _timeline().placement(doc)["streaming_loads_under_attention_on_their_sm"]


def _timeline():
    """bench/generate_timeline.py as a module."""
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    import generate_timeline
    return generate_timeline


def test_attention_gets_sms_of_its_own(builds):
    # Laid out by block index, most attention SMs host streaming loads; by
    # SM, a few stragglers at most (gen_llama1b: 8 of 16828 entries, on
    # one SM, against 1136 on 80 SMs; docs/mega.md).
    assert _overlaps(builds[False][1]) > 20
    assert _overlaps(builds[True][1]) <= 8


def test_schedule_by_sm_is_deadlock_free(builds):
    ms.check_deadlock_free(builds[True][1]["mega"], runs=20)


def test_state_words_are_checked():
    meta = {"workers": 3, "tasks": [], "events": [], "entries": {"task": [], "instance": []},
            "waits": [], "signals": [], "aot": [[], [], []], "jit": [], "state_words": 20}
    with pytest.raises(ValueError, match=r"field 'mega.state_words': 20: 16 words, .* \(3 CTAs\)"):
        mm.validate(meta)
    meta["state_words"] = 19
    mm.validate(meta)
    meta["state_words"] = 8
    with pytest.raises(ValueError, match=r"field 'mega.state_words': expected an integer >= 16"):
        mm.validate(meta)
    # Tasks that claim units: one counter word a task after the rest.
    task = {"name": "t", "claims_units": True}
    claims = dict(meta, tasks=[task, {"name": "u"}], state_words=21, unit_counters=2)
    mm.validate(claims)
    claims["state_words"] = 18
    mm.validate(claims)          # workers not placed by SM
    claims["state_words"] = 20
    with pytest.raises(ValueError, match=r"'mega.state_words': 20: .* \+ 2 unit counters"):
        mm.validate(claims)
    claims["unit_counters"] = 1
    with pytest.raises(ValueError, match=r"'mega.unit_counters': 1: .* one counter a task \(2\)"):
        mm.validate(claims)
    del claims["state_words"]
    claims["unit_counters"] = 2
    with pytest.raises(ValueError, match=r"'mega.state_words': missing: .* 2 unit counters"):
        mm.validate(claims)


def test_unclaimed_index_is_decoded():
    meta = {"workers": 4, "graph": "g", "tasks": [], "events": []}
    words = [3, 0, 0, 0, 5, -1, -1, 2, 140, 4, 1, 0, 0, 0, 0, 0]
    err = decode_error(words, meta)
    assert err.code == 5 and err.kind == "no worker index left to claim"
    assert "CTA 2 (on SM 140) found every worker index claimed for launch tag 4" in str(err)


def test_timeline_placement_counts_workers_on_their_sm_and_shared_loads():
    """bench/generate_timeline.py placement: of a step's entries (task,
    start, end, CTA, SM), the CTAs on the SM their index stands for, and
    the streaming entries whose loads overlap another CTA's attention on
    their SM."""
    gt = _timeline()
    doc = {"tasks": ["t0_l0_qkv", "t1_l0_attn_split", "t2_l0_wo"],
           # 4 workers on 2 SMs: workers 0, 2 on SM 0 and 1, 3 on SM 1 as
           # claimed, but worker 3 landed on SM 0.
           "entries": [[0, 0, 10, 0, 0], [1, 10, 30, 0, 0],    # SM 0: attention 10-30
                       [0, 0, 12, 2, 0], [2, 31, 40, 2, 0],    # qkv ends under it, wo
                                                               # loads from 12: both count
                       [0, 0, 5, 1, 1], [2, 32, 40, 1, 1],     # SM 1: no attention
                       [0, 0, 8, 3, 0], [2, 35, 45, 3, 0]]}    # qkv before it; wo from 8
    got = gt.placement(doc)
    assert got == {"workers": 4, "sms": 2, "workers_on_their_sm": 3,
                   "streaming_entries": 7, "streaming_loads_under_attention_on_their_sm": 3}
