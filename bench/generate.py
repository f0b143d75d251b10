"""Generation benchmark: our engine against transformers, one run on the GPU.

    PYTHONPATH=python python3 bench/generate.py --artifacts out --out docs/results

Llama-3.2-1B configuration (16 layers, hidden 2048, MLP 8192, 32 q / 8 kv
heads of 64, vocab 128256, tied embeddings, llama3 rope scaling), random
weights, bf16, batch 1, a prompt of 512 random tokens, 128 new tokens,
greedy. Rows (ms per generated token after the first; time to first token
and tokens/s beside it):

  transformers eager        model.generate, dynamic cache
  transformers static+compile
                            cache_implementation="static" with model.forward
                            under torch.compile(mode="reduce-overhead"),
                            i.e. CUDA graphs; compiled before timing
  tilemega engine           tilemega.mega.Engine on gen_llama1b.json: the
                            prompt's cache rows from our prefill kernels
                            (prefill_gen_llama1b.json, chunks of 512 rows
                            replayed from a CUDA graph), then one
                            persistent-kernel launch per generation (the
                            decode step repeats on the device; the launch
                            is captured once in a CUDA graph and replayed:
                            the JSON has its host time in generate (in the
                            order run: 1 token, 128 tokens, three times),
                            with the device idle, and of the direct launch
                            back to back; and the host time from
                            generate()'s call to the launch's return: the
                            prompt's checks, its staging, the launch)
  our per-operator kernels  the same T.* bodies as one kernel per operator
                            (ops_gen_llama1b.json), one step's 116 launches
                            captured in a CUDA graph, replayed per position
  torch step, CUDA graph    torch_generation_step.py: the step in plain
                            torch (position on the device, masked attention
                            over the whole static cache), captured once,
                            replayed per position
                            (these two rows walk the prompt with the same
                            replayed step: their time to first token is 512
                            steps, their ms/token is the point)

Every row is checked before it is timed: its 128 greedy tokens must equal
transformers-float32's until the first step where float32's own top two
logits are within bf16 noise - error 1 and
FAILED otherwise. The noise of a step is 3 x the largest difference of
transformers-bf16's logits from float32's there, teacher-forced on the
float32 tokens (test_generation_gpu.first_difference_is_a_near_tie).
ms/token of every row is (generate(128) - generate(1)) / 127, time to
first token generate(1). The floor is the bytes one step
reads (weights, the LM head, the KV cache at the mean position) over the
copy rate measured in the same run.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# A script, not imported by tests: bench/ (common.py) and examples/ go on
# the path as gpu_check.py puts them there.
for _path in (HERE, os.path.join(ROOT, "examples")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import common  # noqa: E402

WORKLOAD = "Llama-3.2-1B generate, prompt 512 + 128 tokens, batch 1"
PROMPT, NEW = 512, 128


def _tests():
    """test/pytest/test_generation_gpu.py: the model and the comparisons the
    GPU tests use."""
    sys.path.insert(0, os.path.join(ROOT, "test", "pytest"))
    import test_generation_gpu
    return test_generation_gpu


def timed(fn):
    import torch

    torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3, out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifacts", default=os.path.join(ROOT, "out"))
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "results"))
    args = parser.parse_args(argv)

    import copy

    import torch

    from tilemega.mega import generation_reference as ref
    from tilemega.mega.engine import Engine

    report = common.Report("generate", args.out, copy_gbs=common.copy_bandwidth_gbs(),
                           timing="wall clock around synchronised calls; ms/token after "
                                  "the first token; median of 3")
    tests = _tests()
    model = tests.hf_model("llama")
    cfg_bytes = sum(p.numel() for p in model.parameters()) * 2
    kv = 2 * model.config.num_hidden_layers * model.config.num_key_value_heads * 64 * 2
    report.workload(WORKLOAD, bytes=cfg_bytes + kv * (PROMPT + NEW // 2))
    gen = torch.Generator(device="cpu").manual_seed(7)
    prompt = torch.randint(0, model.config.vocab_size, (PROMPT,), generator=gen).tolist()
    ids = torch.tensor([prompt], device="cuda")
    with torch.no_grad():
        ref_out = model.generate(ids, do_sample=False, max_new_tokens=NEW, min_new_tokens=NEW,
                                 output_scores=True, return_dict_in_generate=True,
                                 pad_token_id=0, eos_token_id=None)
    ref_tokens = ref_out.sequences[0, PROMPT:].tolist()
    scores = ref_out.scores
    bf16 = tests.bf16_copy(model)
    _, noise = tests.bf16_noise(model, bf16, prompt + ref_tokens)
    del model
    extra = report.data["extra"]

    def agreement(out):
        """0 when `out` follows float32's greedy tokens up to a bf16 near-tie."""
        found = tests.first_difference_is_a_near_tie(
            out, ref_tokens, lambda i: tests.top2_gap(scores[i][0]),
            lambda i: noise[PROMPT - 1 + i])
        extra.setdefault("first_difference", []).append(found)
        return 0.0 if found is None or found[3] else 1.0

    def hf_row(name, m, **kw):
        state = {}

        def run(n):
            with torch.no_grad():
                return m.generate(ids, do_sample=False, max_new_tokens=n, min_new_tokens=n,
                                  pad_token_id=0, eos_token_id=None, **kw)

        def check():
            run(NEW)                                      # warm-up (compiles)
            out = run(NEW)[0, PROMPT:].tolist()
            return {"tokens vs float32": agreement(out)}

        def time_it():
            ttft = sorted(timed(lambda: run(1))[0] for _ in range(3))[1]
            total = sorted(timed(lambda: run(NEW))[0] for _ in range(3))[1]
            state.update(ttft_ms=ttft, ms_per_token=(total - ttft) / (NEW - 1))
            return state["ms_per_token"]

        report.row(WORKLOAD, name, check, time_it, 0.0, role="peer", metric="tokens")
        report.data["rows"][-1].update(state)

    hf_row("transformers eager", bf16)
    # A static cache makes generate compile the forward itself (its
    # compile_config); asked for explicitly where transformers has one,
    # else the forward is compiled by hand.
    compiled = copy.deepcopy(bf16)
    try:
        from transformers import CompileConfig
        kw = dict(cache_implementation="static",
                  compile_config=CompileConfig(fullgraph=True, mode="reduce-overhead"))
        extra["torch_compile"] = "transformers CompileConfig(fullgraph, reduce-overhead)"
    except ImportError:
        compiled.forward = torch.compile(compiled.forward, mode="reduce-overhead",
                                         fullgraph=True)
        kw = dict(cache_implementation="static")
        extra["torch_compile"] = "model.forward = torch.compile(reduce-overhead, fullgraph)"
    start = time.perf_counter()
    hf_row("transformers static cache + torch.compile (CUDA graphs)", compiled, **kw)
    extra["torch_compile_check_and_time_s"] = time.perf_counter() - start
    del compiled

    artifact = os.path.join(args.artifacts, "gen_llama1b.json")
    prefill = os.path.join(args.artifacts, "prefill_gen_llama1b.json")
    state = {}
    engine = {}

    def check_ours():
        engine["e"] = e = Engine.from_model(bf16, max_seq_len=4096, artifact=artifact,
                                            prefill=prefill)
        out = e.generate(prompt, max_new_tokens=NEW, eos_token_id=[])
        streamed = list(e.stream(prompt, max_new_tokens=NEW, eos_token_id=[]))
        return {"tokens vs float32": agreement(out),
                "streamed differ from generated": float(streamed != out)}

    def time_ours():
        # As transformers' rows: time to first token = a generation of one
        # token (the prompt walked by the decode step, then the pick); ms
        # per token = (generate(128) - generate(1)) / 127. One launch each.
        e = engine["e"]
        firsts, alls, host, start, prepare = [], [], [], [], []
        for _ in range(3):
            ms1, _ = timed(lambda: e.generate(prompt, max_new_tokens=1, eos_token_id=[]))
            host.append(e.last_launch_host_s * 1e6)
            start.append(e.last_start_host_s * 1e6)
            prepare.append(e.last_prepare_host_s * 1e6)
            msn, _ = timed(lambda: e.generate(prompt, max_new_tokens=NEW, eos_token_id=[]))
            host.append(e.last_launch_host_s * 1e6)
            start.append(e.last_start_host_s * 1e6)
            prepare.append(e.last_prepare_host_s * 1e6)
            firsts.append(ms1)
            alls.append(msn)
        ttft, total = sorted(firsts)[1], sorted(alls)[1]
        # The launch with the device idle (the prompt's prefill finished
        # first): what the launch costs when it does not queue behind work.
        idle = []
        for _ in range(5):
            e.start(prompt, max_new_tokens=1, eos_token_id=[])
            torch.cuda.synchronize()
            e._launch_generation()
            idle.append(e.last_launch_host_s * 1e6)
            torch.cuda.synchronize()
            e._check_kernel(len(prompt))
        # A diagnostic of the launch's host time in generate: the same
        # generations of one token with Python's collector off (the process
        # holds transformers' and torch.compile's objects).
        import gc
        gc_off = []
        for _ in range(6):
            gc.disable()
            try:
                timed(lambda: e.generate(prompt, max_new_tokens=1, eos_token_id=[]))
            finally:
                gc.enable()
            gc_off.append(e.last_launch_host_s * 1e6)
        # The launch alone, back to back on the current stream (the state
        # is DONE: each launch runs one step and stops).
        alone = []
        for _ in range(41):
            began = time.perf_counter()
            e.kernel.launch(stream=torch.cuda.current_stream())
            alone.append((time.perf_counter() - began) * 1e6)
        torch.cuda.synchronize()
        e.kernel.check()
        state.update(ttft_ms=ttft, ms_per_token=(total - ttft) / (NEW - 1),
                     launches_per_generation=1, launch_captured=e._graph is not None,
                     launch_capture_error=e.launch_capture_error,
                     host_us_launch_in_generate=sorted(host)[2],
                     host_us_launch_in_generate_all=host,
                     host_us_start_in_generate=sorted(start)[2],
                     host_us_start_in_generate_all=start,
                     host_us_prepare_in_generate_all=prepare,
                     host_us_launch_in_generate_gc_off_all=gc_off,
                     host_us_launch_device_idle=sorted(idle)[2],
                     host_us_launch_back_to_back=sorted(alone)[20])
        return state["ms_per_token"]

    report.row(WORKLOAD, "tilemega engine (prefill kernels, then one persistent-kernel launch)",
               check_ours,
               time_ours, 0.0, metric="tokens")
    report.data["rows"][-1].update(state)

    def sampled_row(label, **kw):
        """The engine sampling at T = 0.8: what the pick's mode costs per
        token (top-k <= 64 from each chunk's candidates; top-p alone or a
        larger top-k filters the whole vocabulary, generation_bodies.
        sample_filtered). Checked first: a seed reproduces its 128 tokens
        and another seed changes them (each step's draw is checked against
        float64 by examples/gpu_check.py)."""
        kw.update(max_new_tokens=NEW, eos_token_id=[], temperature=0.8)
        got = {}

        def check():
            e = engine["e"]
            a = e.generate(prompt, seed=5, **kw)
            return {"seed 5 twice differ": float(a != e.generate(prompt, seed=5, **kw)),
                    "seeds 5 and 6 agree": float(a == e.generate(prompt, seed=6, **kw))}

        def time_it():
            e = engine["e"]
            one = dict(kw, max_new_tokens=1)
            ttft = sorted(timed(lambda: e.generate(prompt, seed=5, **one))[0] for _ in range(3))[1]
            total = sorted(timed(lambda: e.generate(prompt, seed=5, **kw))[0] for _ in range(3))[1]
            got.update(ttft_ms=ttft, ms_per_token=(total - ttft) / (NEW - 1))
            return got["ms_per_token"]

        report.row(WORKLOAD, label, check, time_it, 0.0, metric="tokens")
        report.data["rows"][-1].update(got)

    sampled_row("tilemega engine sampling, top-k 50 top-p 0.9", top_k=50, top_p=0.9)
    sampled_row("tilemega engine sampling, top-p 0.9 (whole vocabulary)", top_p=0.9)
    sampled_row("tilemega engine sampling, top-k 200 (whole vocabulary)", top_k=200)
    sampled_row("tilemega engine sampling, top-k 200 top-p 0.9 (whole vocabulary)", top_k=200,
                top_p=0.9)

    def graph_row(name, make_step, role):
        """A step captured once into a CUDA graph, replayed once per
        position (the prompt walked as our engine walks it)."""
        graph = {}

        def generate(n):
            e = engine["e"]
            # The prompt walked by the replayed step (no prefill: the row
            # times one step, whatever its prompt handling).
            pre, e.prefill = e.prefill, None
            e.start(prompt, max_new_tokens=n, eos_token_id=[])
            e.prefill = pre
            for _ in range(PROMPT + n - 1):
                graph["g"].replay()
            torch.cuda.synchronize()
            return e.tensors["tokens"][PROMPT:PROMPT + n].tolist()

        def check():
            e = engine["e"]
            step = make_step(e)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                step()                                    # warm-up outside the capture
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                step()
            graph["g"] = g
            return {"tokens vs float32": agreement(generate(NEW))}

        def time_it():
            ttft = sorted(timed(lambda: generate(1))[0] for _ in range(3))[1]
            total = sorted(timed(lambda: generate(NEW))[0] for _ in range(3))[1]
            state = dict(ttft_ms=ttft, ms_per_token=(total - ttft) / (NEW - 1),
                         launches_per_generation=PROMPT + NEW - 1)
            graph["state"] = state
            return state["ms_per_token"]

        report.row(WORKLOAD, name, check, time_it, 0.0, role=role, metric="tokens")
        report.data["rows"][-1].update(graph.get("state", {}))

    import generation
    import torch_generation_step

    ops = os.path.join(args.artifacts, "ops_gen_llama1b.json")
    graph_row("our per-operator kernels, one step replayed from a CUDA graph",
              lambda e: generation.per_operator_step(ops, dict(e.tensors), torch), "ours")
    graph_row("torch eager step replayed from a CUDA graph",
              lambda e: torch_generation_step.make_step(e.cfg, e.tensors), "peer")
    for row in report.data["rows"]:
        if row.get("ms_per_token"):
            row["tokens_per_s"] = 1e3 / row["ms_per_token"]
    extra.update(prompt=PROMPT, new_tokens=NEW, reference="transformers float32 greedy",
                 logits_tolerance=ref.logits_tolerance(engine["e"].cfg) if "e" in engine
                 else None)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
