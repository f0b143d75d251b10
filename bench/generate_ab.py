"""A/B of generation artifacts of the Llama-3.2-1B configuration in one
process: ms/token of each (prompt 512 + 128 greedy tokens, as
bench/generate.py times its engine row: (generate(128) - generate(1)) / 127,
median of 5, the artifacts alternated), whether their tokens equal the
first one's, and each one's verdict as bench/generate.py judges its rows
(transformers-float32's greedy tokens until a bf16 near tie; artifacts
that sum in another order, e.g. more workers, may part at a near tie). For experiments on the persistent kernel; bench/generate.py
stays the run on record.

    python bench/generate_ab.py build DIR [VARIANT ...]   # compiler machine: DIR/<variant>/gen_llama1b.*
    PYTHONPATH=python python3 bench/generate_ab.py run DIR [VARIANT[@OPTION] ...]   # GPU machine
    PYTHONPATH=python python3 bench/generate_ab.py A.json B.json ... --prefill PREFILL.json

A run's VARIANT@OPTION is the variant's artifact with an engine option
(ENGINE_OPTIONS: `l2_caches`, the k/v caches persisting in L2).
`build` compiles gen_llama1b once per VARIANTS entry (compile options of
the persistent kernel) under the artifact's own name, so a variant's PTX is
the one a build with those options as defaults ships, and the prompt's
prefill kernels once (DIR/prefill_gen_llama1b.*). Writes
$OUT/generate_ab.json, keyed by variant (or artifact file) name."""
import json, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPT = list(range(1, 513))
NEW = 128

# variant -> tilemega.compile options (docs/mega.md names each); "ctas_per_sm"
# (not a compile option): that many worker CTAs an SM (the graph's workers,
# the kernel's max-ctas; ptxas then caps the registers to fit); "graph":
# keywords of models.generation_graph.
EF = dict(mega_early_loads=True, mega_fresh_thread_ids=True)
VARIANTS = {
    "default": {},
    "early_loads": dict(mega_early_loads=True),
    "fresh_thread_ids": dict(mega_fresh_thread_ids=True),
    "stream_units": dict(mega_stream_units=True),
    "early_loads+fresh_thread_ids": EF,
    "all": dict(EF, mega_stream_units=True),
    "fresh_thread_ids+2cta": dict(mega_fresh_thread_ids=True, ctas_per_sm=2),
    "early_loads+fresh_thread_ids+2cta": dict(EF, ctas_per_sm=2),
    # The shipped build with a shallower early prologue (mega_early_depth).
    "early_depth_1": dict(EF, ctas_per_sm=2, mega_early_depth=1),
    "early_depth_2": dict(EF, ctas_per_sm=2, mega_early_depth=2),
    # The shipped graph (examples/generation.py's gen_llama1b) and graph
    # options of it ("graph": models.generation_graph keywords).
    "shipped": dict(ctas_per_sm=None),
    "key_block_128": dict(ctas_per_sm=None, graph=dict(key_block=128)),
    # Worker indices claimed by SM, the attention's tasks on SMs of their own.
    "workers_by_sm": dict(ctas_per_sm=None, graph=dict(workers_by_sm=True)),
    # ... and the next two entries' weights (64 KB a tensor) into L2 while a
    # worker waits: the gate/up units' during the attention, now from SMs
    # that run none of it (the same prefetch shared SMs with it before:
    # docs/mega.md, "Prefetch (off)").
    "workers_by_sm+l2_next2": dict(ctas_per_sm=None, graph=dict(workers_by_sm=True),
                                   mega_prefetch_bytes=65536, mega_prefetch_depth=2),
    # ... with 16 splits a kv head: 136 attention instances on 68 SMs of
    # their own (16 splits measured no faster when they shared SMs).
    "workers_by_sm+splits16": dict(ctas_per_sm=None,
                                   graph=dict(workers_by_sm=True, attention_splits=16)),
    # The bodies' weight (and activation) tiles by 1-D bulk copies on
    # mbarriers (the TMA unit) instead of cp.async (the threads' loads).
    "bulk_copies": dict(ctas_per_sm=None, mega_bulk_copies=True),
    "bulk_copies+workers_by_sm": dict(ctas_per_sm=None, graph=dict(workers_by_sm=True),
                                      mega_bulk_copies=True),
    # No attention merge task: each kv group's last split merges
    # (T.block_atomic_add), a stage and its boundary fewer a layer.
    "merge_in_split": dict(ctas_per_sm=None, graph=dict(merge_in_split=True)),
    "merge_in_split+workers_by_sm": dict(ctas_per_sm=None,
                                         graph=dict(merge_in_split=True, workers_by_sm=True)),
    # With bench/patches/prefetch_after_wait.patch: the head of the next
    # entry's read-only ranges into L2 (32 / 64 KB a range) once this
    # entry's events fired (10-12 % slower, measured). Without the patch:
    # the shipped prefetch before the wait, of ranges that fit whole.
    "l2_next_32k": dict(ctas_per_sm=None, mega_prefetch_bytes=32768),
    "l2_next_64k": dict(ctas_per_sm=None, mega_prefetch_bytes=65536),
    # ... with 16 splits a kv head (no merge to pay for the extra splits).
    "merge_in_split+splits16": dict(ctas_per_sm=None,
                                    graph=dict(merge_in_split=True, attention_splits=16)),
    # The attention's two products a chunk on mma.sync (16-row tiles), not
    # on CUDA cores (the shipped default since 2026-12-07: the same build
    # as "shipped"; "cuda_core_attention" is the one it replaced).
    "attention_tensor_cores": dict(ctas_per_sm=None, graph=dict(attention_tensor_cores=True)),
    "cuda_core_attention": dict(ctas_per_sm=None, graph=dict(attention_tensor_cores=False)),
    "attention_tensor_cores+key_block_128": dict(
        ctas_per_sm=None, graph=dict(attention_tensor_cores=True, key_block=128)),
    # Other split counts a kv head with the tensor-core attention (the 8
    # shipped were chosen on CUDA cores, where a 64-key chunk took 1.7 us).
    "splits4": dict(ctas_per_sm=None, graph=dict(attention_splits=4)),
    "splits16": dict(ctas_per_sm=None, graph=dict(attention_splits=16)),
    # Paired entries (mega-pair-entries): the gate/up unit after each
    # output-projection unit shares its case, its weights' first stages
    # loading while the output projection waits for the attention.
    "pair_entries": dict(ctas_per_sm=None, mega_pair_entries=True),
    # ... with the attention's tasks on SMs of their own, so that the
    # gate/up loads issued during it do not share the attention's SMs.
    "pair_entries+workers_by_sm": dict(ctas_per_sm=None, graph=dict(workers_by_sm=True),
                                       mega_pair_entries=True),
    # No attention merge task: every output-projection unit merges the
    # partials itself after its wait (merged_projection.gemv_merge), its
    # weights loaded early.
    "merge_in_projection": dict(ctas_per_sm=None, graph=dict(merge_in_projection=True)),
    "merge_in_projection+splits16": dict(
        ctas_per_sm=None, graph=dict(merge_in_projection=True, attention_splits=16)),
    # A shallower early prologue in the shipped build: only each loop's
    # first d iterations before the wait (measured slower on an H100 in the
    # 2-CTA build of before; the H200's faster DRAM streams the down
    # projection at ~72 % of its copy rate, the H100's at ~100 %).
    "shipped+early_depth_2": dict(ctas_per_sm=None, mega_early_depth=2),
    "shipped+early_depth_3": dict(ctas_per_sm=None, mega_early_depth=3),
    # Units of another size (generation_graph's rows_per_unit; shipped:
    # qkv 16, wo 8, gate/up 32, down 8 rows): smaller units, two an entry
    # of each worker, end a stage more evenly; larger ones pay fewer fills.
    "wd_rows4": dict(ctas_per_sm=None, graph=dict(rows_per_unit=dict(wd=4))),
    "wgu_rows16": dict(ctas_per_sm=None, graph=dict(rows_per_unit=dict(wgu=16))),
    "mlp_rows_half": dict(ctas_per_sm=None, graph=dict(rows_per_unit=dict(wgu=16, wd=4))),
    "qkv_rows8": dict(ctas_per_sm=None, graph=dict(rows_per_unit=dict(qkv=8))),
    # Stages of W in flight a unit (generation_graph's gemv_stages; shipped
    # 4 of ~16 KB): 3 everywhere (measured -1.2 / -0.4 % on the H200 in
    # 2026-12-05's build), 6 in the down projection (on the H200 its stage
    # streams at ~72 % of the copy rate).
    "stages3": dict(ctas_per_sm=None, graph=dict(gemv_stages=dict(
        qkv=3, wo=3, wgu=3, wd=3, lm_head=3))),
    "wd_stages6": dict(ctas_per_sm=None, graph=dict(gemv_stages=dict(wd=6))),
    "stages3+wd_stages6": dict(ctas_per_sm=None, graph=dict(gemv_stages=dict(
        qkv=3, wo=3, wgu=3, wd=6, lm_head=3))),
    "early_depth_2+wd_stages6": dict(ctas_per_sm=None, mega_early_depth=2,
                                     graph=dict(gemv_stages=dict(wd=6))),
    # Claimed units (mega_claim_units): a task of several units an instance
    # (the LM head's 4) runs each instance's own unit, then claims the
    # rest at run time, so faster CTAs take more (docs/mega.md "Claimed
    # units"); with smaller units the last claims end closer together.
    "claim_units": dict(ctas_per_sm=None, mega_claim_units=True),
    "claim_units+head_rows_64": dict(ctas_per_sm=None, mega_claim_units=True,
                                     graph=dict(rows_per_unit=dict(lm_head=64))),
    "claim_units+head_rows_32": dict(ctas_per_sm=None, mega_claim_units=True,
                                     graph=dict(rows_per_unit=dict(lm_head=32))),
    "claim_units+head_rows_16": dict(ctas_per_sm=None, mega_claim_units=True,
                                     graph=dict(rows_per_unit=dict(lm_head=16))),
    # The same units without claims (16 or 32 an instance, fixed): what
    # the smaller units cost by themselves.
    "head_rows_32": dict(ctas_per_sm=None, graph=dict(rows_per_unit=dict(lm_head=32))),
    "head_rows_16": dict(ctas_per_sm=None, graph=dict(rows_per_unit=dict(lm_head=16))),
    # ... and the MLP's units halved (two an instance, one of them claimed).
    "claim_units+mlp_rows_half": dict(ctas_per_sm=None, mega_claim_units=True,
                                      graph=dict(rows_per_unit=dict(wgu=16, wd=4))),
}


def build(out, wanted=None):
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
    import generation
    import tilemega
    from tilemega import mega
    from tilemega.mega.prefill import compile_prefill

    cfg = generation.config("gen_llama1b")
    for variant in wanted or VARIANTS:
        if variant not in VARIANTS:
            raise SystemExit(f"unknown variant {variant!r}: one of {', '.join(VARIANTS)}")
        options = dict(VARIANTS[variant])
        per_sm = options.pop("ctas_per_sm", 1)
        graph_options = options.pop("graph", {})
        # The graph's own CTAs an SM (its workers fill them, less the JIT
        # queue's scheduler), so that the kernel admits as many; None: the
        # generation graph's default.
        text = mega.generation_graph(cfg, ctas_per_sm=per_sm, **graph_options).to_mlir()
        art = tilemega.compile(text, chip="sm_90a", name="gen_llama1b", **options)
        print("built", art.save(os.path.join(out, variant)), flush=True)
    print("built", compile_prefill(generation.config("gen_llama1b"), out,
                                   "prefill_gen_llama1b"), flush=True)


def float32_judge(model, tg, torch):
    """judge(tokens) -> (found, verdict) for a build's NEW greedy tokens after
    PROMPT, as bench/generate.py judges its rows: equal to
    transformers-float32's greedy ones up to a bf16 near tie. found is
    (index, float32's top-2 gap, 3 x bf16 noise, gap within it) or None."""
    with torch.no_grad():
        ref_out = model.generate(torch.tensor([PROMPT], device="cuda"), do_sample=False,
                                 max_new_tokens=NEW, min_new_tokens=NEW, output_scores=True,
                                 return_dict_in_generate=True, pad_token_id=0,
                                 eos_token_id=None)
    ref_tokens = ref_out.sequences[0, len(PROMPT):].tolist()
    _, noise = tg.bf16_noise(model, tg.bf16_copy(model), PROMPT + ref_tokens)

    def judge(tokens):
        found = tg.first_difference_is_a_near_tie(
            tokens, ref_tokens, lambda i: tg.top2_gap(ref_out.scores[i][0]),
            lambda i: noise[len(PROMPT) - 1 + i])
        return found, "pass" if found is None or found[3] else "FAILED"
    return judge


def timed_generations(engines, timed):
    """{label: (ms/token, time to first token ms, generate(NEW) ms sorted)}:
    (generate(NEW) - generate(1)) / (NEW - 1), medians of 5, the engines
    alternated."""
    runs = {label: ([], []) for label in engines}
    # With an engine's caches persisting in L2, each generation starts with
    # no persisting lines, so that no engine runs beside another's.
    reset = any(engine_options(label) for label in engines)
    for _ in range(5):
        for label, e in engines.items():
            for kind, new in ((0, 1), (1, NEW)):
                if reset:
                    from tilemega.runtime.l2_window import reset_persisting

                    reset_persisting()
                runs[label][kind].append(timed(lambda: e.generate(
                    PROMPT, max_new_tokens=new, eos_token_id=[]))[0])
    out = {}
    for label, (ones, alls) in runs.items():
        one, whole = sorted(ones)[2], sorted(alls)[2]
        out[label] = ((whole - one) / (NEW - 1), one, sorted(alls))
    return out


# Engine options a run may add to a variant's label ("shipped@l2_caches"):
# the same artifact, the engine built with them.
ENGINE_OPTIONS = {"l2_caches": dict(l2_caches=True)}


def split_label(label):
    """(variant, engine options) of a run's label: variant[@option...]."""
    variant, *names = label.split("@")
    options = {}
    for name in names:
        if name not in ENGINE_OPTIONS:
            raise SystemExit(f"generate_ab.py: {label!r}: unknown engine option {name!r} "
                             f"(known: {', '.join(ENGINE_OPTIONS)})")
        options.update(ENGINE_OPTIONS[name])
    return variant, options


def engine_options(label):
    return split_label(label)[1]


def compare(artifacts, prefill):
    """{label: path} -> the A/B document."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "test", "pytest"))
    sys.path.insert(0, HERE)
    import test_generation_gpu as tg
    from generate import timed
    from tilemega.mega.engine import Engine

    import torch

    model = tg.hf_model("llama")
    judge = float32_judge(model, tg, torch)
    engines = {label: Engine.from_model(model, max_seq_len=4096, artifact=path,
                                        prefill=prefill, **engine_options(label))
               for label, path in artifacts.items()}
    tokens = {label: e.generate(PROMPT, max_new_tokens=NEW, eos_token_id=[])
              for label, e in engines.items()}
    first = tokens[next(iter(tokens))]
    out = {}
    for label, (per_token, one, alls) in timed_generations(engines, timed).items():
        out[label] = {"ms_per_token": per_token, "ttft_ms": one,
                      "generate_128_ms": alls,
                      "tokens_equal_first": tokens[label] == first,
                      "first_difference": next((i for i, (x, y) in
                                                enumerate(zip(tokens[label], first))
                                                if x != y), None)}
        out[label]["vs_float32"], out[label]["verdict"] = judge(tokens[label])
    return out


def main(argv):
    if argv[:1] == ["build"]:
        return build(argv[1], argv[2:])
    if argv[:1] == ["run"]:
        folder, wanted = argv[1], argv[2:] or list(VARIANTS)
        artifacts = {v: os.path.join(folder, split_label(v)[0], "gen_llama1b.json")
                     for v in wanted}
        prefill = os.path.join(folder, "prefill_gen_llama1b.json")
    else:
        if "--prefill" not in argv or argv.index("--prefill") + 1 >= len(argv):
            raise SystemExit("usage: generate_ab.py A.json B.json ... --prefill PREFILL.json")
        at = argv.index("--prefill")
        prefill = argv[at + 1]
        paths = argv[:at] + argv[at + 2:]
        artifacts = {os.path.basename(p): p for p in paths}
    out = compare(artifacts, prefill)
    print(json.dumps(out, indent=1), flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), "generate_ab.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
