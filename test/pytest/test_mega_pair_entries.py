"""Paired entries (tilemega.compile(..., mega_pair_entries=True);
mega-pair-entries, docs/mega.md "Paired entries"): consecutive AOT entries
of a worker run in one case whose tiles are apart, so the second body's
weights load while the first one waits and computes. Here: which entries
pair, the artifact's metadata and tables, their validation as untrusted
input, the schedule's proof, and that a build without the option is
unchanged. What runs on a GPU (the float64 checks, the timing) is
bench/generate_ab.py's variant `pair_entries`."""

import copy
import re
import warnings

import pytest

pytest.importorskip("tilemega.ir", reason="the compiler package is not built")

import tilemega  # noqa: E402
from tilemega import mega  # noqa: E402
from tilemega.runtime import mega_meta as mm  # noqa: E402
from tilemega.runtime import mega_sim as ms  # noqa: E402

from conftest import shipped_config  # noqa: E402

SMALL = shipped_config("gen_small")


@pytest.fixture(scope="module")
def builds():
    text = mega.generation_graph(SMALL).to_mlir()
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # compile warns on spills
        on = tilemega.compile(text, chip="sm_90a", mega_pair_entries=True)
    off = tilemega.compile(text, chip="sm_90a")
    return text, on, off


def _meta(art):
    return [k for k in art.metadata["kernels"] if "mega" in k][0]["mega"]


def _roles(meta, entries):
    names = [t["name"] for t in meta["tasks"]]
    after = mm.next_aot_entries(meta)
    return {(re.sub(r"^t\d+_(l\d+_)?", "", names[meta["entries"]["task"][e]]),
             re.sub(r"^t\d+_(l\d+_)?", "", names[meta["entries"]["task"][after[e]]]))
            for e in entries}


def test_the_gate_up_projection_pairs_with_the_output_projection(builds):
    """The output projection waits on the attention's light stage: the
    gate/up unit after it on the same worker pairs with it. No pair starts
    with a latency-bound attention task."""
    _, on, off = builds
    meta = _meta(on)
    assert "paired_entries" not in _meta(off) and "pair_cases" not in _meta(off)
    roles = _roles(meta, meta["paired_entries"])
    assert ("wo", "wgu") in roles
    assert not any(first.startswith("attn") for first, _ in roles)
    # Each pair case is a pair of body cases, each paired entry in one pair.
    assert all(len(p) == 2 for p in meta["pair_cases"])
    after = mm.next_aot_entries(meta)
    seconds = [after[e] for e in meta["paired_entries"]]
    assert not set(seconds) & set(meta["paired_entries"])


def test_pairs_validate_and_the_schedule_stays_deadlock_free(builds):
    _, on, _ = builds
    meta = _meta(on)
    mm.validate(meta)
    mm.validate_tables(meta)
    ms.check_deadlock_free(meta, runs=20)


def test_a_pair_case_holds_both_bodies_before_one_prefetch_point(builds):
    """The PTX of the kernel with pairs has more event polls between its
    prologues (each pair case waits twice) than the one without, and the
    kernel keeps its two CTAs an SM (the residency check passed)."""
    _, on, off = builds
    polls = lambda ptx: len(re.findall(r"ld\.acquire\.gpu", ptx))  # noqa: E731
    assert polls(on.ptx) > polls(off.ptx)


def _tables_case_word(meta, entry):
    return meta["tables"][meta["table_sections"]["records"] + 8 * entry]


def test_hostile_pair_metadata_is_refused(builds):
    _, on, _ = builds
    meta = _meta(on)
    first = meta["paired_entries"][0]
    after = mm.next_aot_entries(meta)
    last = next(lst[-1] for lst in meta["aot"] if lst)

    def refused(mutate, pattern):
        bad = copy.deepcopy(meta)
        mutate(bad)
        with pytest.raises(ValueError, match=pattern):
            mm.validate(bad)
            mm.validate_tables(bad)

    refused(lambda m: m.pop("pair_cases"), r"paired_entries and pair_cases come together")
    refused(lambda m: m["paired_entries"].append(last),
            rf"paired_entries\[\d+\]': entry {last} is not followed by another entry")
    refused(lambda m: m["paired_entries"].append(after[first]),
            r"or the entry after it .* is in another pair")
    refused(lambda m: m["paired_entries"].__setitem__(0, 10**9), r"entry 1000000000 out of range")
    refused(lambda m: m.__setitem__("pair_cases", [[0, 0, 1]]), r"pair_cases\[0\]': expected 2")
    # A pair case the records do not use: the paired entry's record names
    # another case than the lists give.
    refused(lambda m: m["pair_cases"].reverse() if len(m["pair_cases"]) > 1
            else m["pair_cases"].append([0, 0]) or m["pair_cases"].reverse(),
            r"section 'records' record \d+ \(entry \d+\)")
    refused(lambda m: m.__setitem__("pair_cases", []), r"has no pair of cases")
    # A record whose case field names no pair.
    refused(lambda m: m["tables"].__setitem__(
        m["table_sections"]["records"] + 8 * first,
        _tables_case_word(m, first) + 1000), rf"record {first} \(entry {first}\)")


def test_option_checks(builds):
    text, _, _ = builds
    with pytest.raises(ValueError, match="mega_pair_entries must be a bool"):
        tilemega.compile(text, chip="sm_90a", mega_pair_entries=1)
    # A pair waits inside its case: without early loads the conversion
    # refuses the graph the pass marked.
    with pytest.raises(tilemega.CompileError, match="needs early-loads"):
        tilemega.compile(text, chip="sm_90a", mega_pair_entries=True, mega_early_loads=False)
