"""The generation graphs we ship (models.generation_graph) and their GPU check.

    python examples/generation.py out              # build (compiler machine)
    python examples/generation.py out --run-only   # check on the GPU machine

Artifacts:
  gen_llama1b     Llama-3.2-1B shape: 16 layers, hidden 2048, MLP 8192,
                  32 q / 8 kv heads of 64, vocab 128256, tied embeddings,
                  max_seq_len 4096 (the benchmark's prompt 512 + 128 fit)
  gen_qwen2       Qwen2-0.5B shape with q/k/v biases and a GQA group of 7:
                  24 layers, hidden 896, MLP 4864, 14 q / 2 kv heads of 64,
                  vocab 151936, untied LM head, max_seq_len 2048 (128 threads)
  gen_small       2 layers, hidden 256, vocab 1000, max_seq_len 256: the
                  quick one (tests, sanitizers)
  gen_small_claimed  gen_small with its LM head's units claimed at run time
                  (mega_claim_units, 2-row units)
  prefill_<name>  the prompt's prefill kernels of each config
                  (tilemega.mega.prefill), checked by check_prefill_artifact
  ops_gen_llama1b gen_llama1b's bodies as one kernel per operator, with
                  ops_gen_llama1b.launches.json (bench/generate.py's
                  per-operator row); checked by the same step checks

check_artifact(path, torch) is what gpu_check.py records: for each position
of positions(cfg) (1, the middle, max_seq_len - 2 and max_seq_len - 1) one
launch from random weights and a random history in the caches and tokens,
judged against float64 (generation_reference.check_step: logits, the k/v
rows written, the rows not to touch, the pick, the state); a sampled step
(its pick against float64 scores with the seed's Philox noise); and the
device loop: one launch of several steps equal, bit for bit, to as many
single-step launches (check_loop). The positions
near the end of the cache put attention's last chunk and the last split at
the edge; the state at max_seq_len - 1 has no room for a next token.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# name -> ModelConfig fields
CONFIGS = {
    "gen_llama1b": dict(layers=16, hidden=2048, intermediate=8192, heads=32, kv_heads=8,
                        head_dim=64, vocab=128256, max_seq_len=4096, tie_embeddings=True,
                        rope_theta=500000.0,
                        rope_scaling={"rope_type": "llama3", "factor": 32.0,
                                      "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": 8192}),
    "gen_qwen2": dict(layers=24, hidden=896, intermediate=4864, heads=14, kv_heads=2,
                      head_dim=64, vocab=151936, max_seq_len=2048, qkv_bias=True,
                      tie_embeddings=False, eps=1e-6, rope_theta=1000000.0),
    "gen_small": dict(layers=2, hidden=256, intermediate=512, heads=4, kv_heads=2,
                      head_dim=64, vocab=1000, max_seq_len=256, tie_embeddings=True),
}


# Graphs of a config built with options (name -> config, generation_graph
# keywords, compile options), checked as the config's own graph is:
# gen_small_claimed runs its LM head in 2-row units, two an instance, the
# second claimed at run time (mega_claim_units; docs/mega.md "Claimed units").
OPTIONED = {"gen_small_claimed": ("gen_small", dict(rows_per_unit={"lm_head": 2}),
                                  dict(mega_claim_units=True))}
# The same bodies as one kernel per operator (artifacts.compile_per_operator):
# the baseline of bench/generate.py, checked as the persistent kernel is.
PER_OPERATOR = {"ops_gen_llama1b": "gen_llama1b"}
# The prompt's prefill kernels of each config (tilemega.mega.prefill).
PREFILL = {f"prefill_{name}": name for name in CONFIGS}


def config(name):
    from tilemega.mega.models import ModelConfig
    base = OPTIONED[name][0] if name in OPTIONED else name
    return ModelConfig(**CONFIGS[PER_OPERATOR.get(base, PREFILL.get(base, base))])


def names():
    return list(CONFIGS) + list(OPTIONED) + list(PER_OPERATOR) + list(PREFILL)


def build_all(out):
    """Compiles every CONFIGS, OPTIONED and PER_OPERATOR artifact into `out`;
    returns the JSON paths."""
    import tilemega
    from tilemega import mega
    from tilemega.mega.artifacts import compile_per_operator
    from tilemega.mega.prefill import compile_prefill

    paths = []
    for name in CONFIGS:
        graph = mega.generation_graph(config(name))
        art = tilemega.compile(graph.to_mlir(), chip="sm_90a", name=name)
        paths.append(art.save(out))
        for ops, of in PER_OPERATOR.items():
            if of == name:
                compile_per_operator(graph, out, ops)
                paths.append(os.path.join(out, ops + ".json"))
    for name, (of, graph_options, options) in OPTIONED.items():
        graph = mega.generation_graph(config(of), **graph_options)
        art = tilemega.compile(graph.to_mlir(), chip="sm_90a", name=name, **options)
        paths.append(art.save(out))
    for pre, of in PREFILL.items():
        paths.append(compile_prefill(config(of), out, pre))
    return paths


def prefill_positions(cfg):
    """Prompt rows the prefill check fills: less than a chunk, and across
    chunks up to the end of a small cache."""
    from tilemega.mega.prefill import CHUNK

    return [37, min(CHUNK + 45, cfg.max_seq_len - 1)]


def check_prefill_artifact(path, torch, seed=0):
    """Prefill of prefill_positions(cfg) prompt rows on random tensors, each
    judged against float64 (generation_reference.check_prefill: every
    layer's k/v rows, the rows past the prompt untouched); launched one
    kernel per operator and, the second time, from the chunk's CUDA graph."""
    from tilemega.mega import generation_reference as ref
    from tilemega.mega.prefill import Prefill

    cfg = config_of(path)
    tensors = ref.make_tensors(cfg, seed=seed)
    pre = Prefill(cfg, tensors, path)
    worst, passed, details = 0.0, True, {}
    for graph in (False, True):
        for positions in prefill_positions(cfg):
            before = ref.snapshot(cfg, tensors)
            expected = ref.prefill_float64(cfg, tensors, positions)
            chunks = pre.run(positions, graph=graph)
            torch.cuda.synchronize()
            got = ref.check_prefill(cfg, tensors, before, expected, positions)
            worst = max(worst, got["error"])
            passed &= got["passed"]
            key = f"{positions} rows{' (CUDA graph)' if graph else ''}"
            details[key] = dict(got["details"], chunks=chunks)
            # The next run must rewrite the rows: random ones again.
            for name in ref.cache_names(cfg):
                tensors[name].copy_(before[name])
    return {"error": worst, "tolerance": ref.kv_row_tolerance(cfg), "passed": passed,
            "details": details}


def per_operator_step(path, tensors, torch):
    """One decode step as the per-operator artifact's kernels launched in
    graph order on `tensors` (its scratch tensors added, zeros); returns the
    function that launches them (on torch's current stream)."""
    import json

    from tilemega.runtime import load_artifact

    with open(path[:-len(".json")] + ".launches.json") as f:
        spec = json.load(f)
    art = load_artifact(path)
    for n, s in spec["tensors"].items():
        if n not in tensors:
            tensors[n] = torch.zeros(tuple(s["shape"]), dtype=getattr(torch, s["dtype"]),
                                     device="cuda")
    calls = [(art[c["kernel"]], [tensors[a] if isinstance(a, str) else a for a in c["args"]])
             for c in spec["launches"]]

    def step():
        for kernel, args in calls:
            kernel(*args)
    return step


def config_of(path):
    """The ModelConfig an artifact was built for: its name's CONFIGS entry,
    checked against the tensors its kernel takes (ValueError otherwise)."""
    import json

    from tilemega.mega import generation_reference as ref

    name = os.path.basename(path)[:-len(".json")]
    if name not in names():
        raise ValueError(f"{path}: not a generation artifact of examples/generation.py")
    cfg = config(name)
    if name in PER_OPERATOR or name in PREFILL:
        return cfg
    with open(path) as f:
        meta = json.load(f)
    (kernel,) = [k for k in meta["kernels"] if "mega" in k]
    shapes = {p["name"]: (tuple(p["shape"]), p["dtype"]) for p in kernel["mega"].get("args", [])
              if p.get("role") not in (None, "scratch")}
    expected = {n: (tuple(s), d) for n, (s, d) in ref.tensor_specs(cfg).items()}
    if shapes != expected:
        raise ValueError(f"{path}: its tensors are not those of {name}'s config: "
                         f"{sorted(set(shapes.items()) ^ set(expected.items()))[:4]}")
    return cfg


def positions(cfg):
    S = cfg.max_seq_len
    return [1, S // 2 + 3, S - 2, S - 1]


def check_artifact(path, torch, seed=0):
    """Launches the artifact once per position of positions(cfg) on fresh
    random tensors (greedy), once more at the middle position with sampling
    (temperature 0.8, a fixed seed), and checks the device loop
    (check_loop); {"error": worst logits error, "tolerance", "passed",
    "details": {position: check_step details, "sampled": ..., "loop": ...}}."""
    from tilemega.mega import generation_reference as ref
    from tilemega.runtime import load_mega

    cfg = config_of(path)
    tensors = ref.make_tensors(cfg, seed=seed)
    per_operator = os.path.basename(path)[:-len(".json")] in PER_OPERATOR
    if per_operator:
        mk = None
        launch = per_operator_step(path, tensors, torch)
    else:
        mk = load_mega(path)
        mk.bind({p.name: tensors[p.name] for p in mk.user_params})
        mk.set_step_limit(1)
        launch = mk.launch
    worst, passed, details = 0.0, True, {}
    S = cfg.max_seq_len
    runs = [(str(p), p, None, 0, 1.0) for p in positions(cfg)] + [
        ("sampled", S // 2 + 3, 0.8, 0, 1.0), ("sampled top-k 50", S // 2 + 3, 0.8, 50, 1.0),
        ("sampled top-k 64 top-p 0.6", 1, 1.5, 64, 0.6),
        # The whole vocabulary filtered (generation_bodies.sample_filtered).
        ("sampled top-p 0.8", S // 2 + 3, 1.0, 0, 0.8),
        ("sampled top-p 0.02", S - 2, 0.7, 0, 0.02),
        ("sampled top-k 300", 1, 1.2, 300, 1.0),
        # Top-p within a top-k over 64 (sample_filtered's top_k_mass).
        ("sampled top-k 300 top-p 0.7", S // 2 + 3, 1.0, 300, 0.7),
        (f"sampled top-k {cfg.vocab - 1} top-p 0.95", 1, 0.8, cfg.vocab - 1, 0.95)]
    for key, pos, temperature, top_k, top_p in runs:
        # The step generates the token after pos (given = pos + 1) when
        # there is room; at max_seq_len - 1 there is none (DONE, pos stays).
        ref.set_state(tensors, pos, given=pos + 1, end=S, eos=None,
                      seed=0x1234_5678_9ABC_DEF0, temperature=temperature, top_k=top_k,
                      top_p=top_p)
        tensors["logits"].fill_(float("nan"))
        before = ref.snapshot(cfg, tensors)
        expected = ref.step_float64(cfg, tensors)
        launch()
        if mk is not None:
            mk.check()
        torch.cuda.synchronize()
        got = ref.check_step(cfg, tensors, before, expected)
        worst = max(worst, got["error"])
        passed &= got["passed"]
        details[key] = {k: v for k, v in got["details"].items()
                        if not k.endswith("_row") or v > 1e-2 or k.startswith("l0.")}
    if mk is not None:
        loop = check_loop(mk, cfg, tensors, torch)
        passed &= loop["passed"]
        details["loop"] = loop
    return {"error": worst, "tolerance": ref.logits_tolerance(cfg), "passed": passed,
            "details": details}


def check_loop(mk, cfg, tensors, torch, steps=6):
    """The device loop against the single-step mode: from one state (greedy
    at position 2, sampled near the end of the cache), `steps` launches of
    one step and one launch of up to max_seq_len steps (stopping at DONE)
    must leave the same tokens, state, caches and logits, bit for bit, and
    the loop must report `steps` steps."""
    from tilemega.mega import generation_reference as ref
    from tilemega.mega import generation_state as gs

    S = cfg.max_seq_len
    names = ref.cache_names(cfg) + ["tokens", "gen", "sampling", "logits"]
    out = {"passed": True, "steps": steps}
    for start, temperature, top_k, top_p in ((2, None, 0, 1.0), (S - steps - 1, 1.3, 0, 1.0),
                                             (40, 1.0, 20, 0.9), (60, 0.9, 0, 0.7),
                                             (80, 1.1, 200, 0.8)):
        ref.set_state(tensors, start, given=start + 1, end=start + 1 + steps, eos=None,
                      seed=99, temperature=temperature, top_k=top_k, top_p=top_p)
        tensors["logits"].zero_()
        initial = {n: tensors[n].clone() for n in names}
        mk.set_step_limit(1)
        for _ in range(steps):
            mk.launch()
        mk.check()
        single = {n: tensors[n].clone() for n in names}
        for n in names:
            tensors[n].copy_(initial[n])
        mk.set_step_limit(S)
        mk.launch()
        mk.check()
        done = mk.steps_done()
        mk.set_step_limit(1)
        differ = [n for n in names if not torch.equal(tensors[n], single[n])]
        key = f"from {start}" + (f" sampled T={temperature}" if temperature else "") + \
            (f" top-k {top_k}" if top_k else "") + (f" top-p {top_p}" if top_p < 1 else "")
        gen = [int(v) for v in tensors["gen"].tolist()]
        out[key] = {"steps_done": done, "differ": differ[:6], "generated": gen[gs.GENERATED]}
        out["passed"] &= (done == steps and not differ and gen[gs.GENERATED] == steps
                          and gen[gs.DONE] == 1)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="out")
    parser.add_argument("--run-only", action="store_true")
    args = parser.parse_args()
    if not args.run_only:
        for path in build_all(args.out):
            print(f"built {path}")
        return 0
    import torch

    ok = True
    for name in names():
        check = check_prefill_artifact if name in PREFILL else check_artifact
        got = check(os.path.join(args.out, name + ".json"), torch)
        ok &= got["passed"]
        print(f"{name}: worst logits error {got['error']:.3g}: "
              f"{'ok' if got['passed'] else 'FAILED'} {got['details']}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
