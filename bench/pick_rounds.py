"""What the generation step's pick costs per sampling mode, and why: the
standalone argmax_partial + pick_advance kernels (generation_bodies) at a
Llama-3 vocabulary, built with several FILTER_ROUNDS bounds, each pick
checked against generation_reference.filtered_pick and timed per mode.

    PYTHONPATH=build/python_packages python3 bench/pick_rounds.py build --out out/pick
    PYTHONPATH=python python3 bench/pick_rounds.py run --artifacts out/pick --out docs/results

If the rounds' loop leaves once the candidate is kept, a mode's time
follows the rounds filtered_pick takes, not the FILTER_ROUNDS bound
(measured 2026-12-02 on the H200 with the loop then shipped, a nest of two
data-dependent trip counts 8 x 8: every whole-vocabulary mode took 216 us,
8 rounds, while 8 x 1 took 34 / 84 / 211 us for 1 / 3 / 8 rounds: a ptxas
13.0 miscompile, docs/toolchain.md).
"""

import argparse
import json
import os
import sys

V, S = 128256, 64
THREADS = 256
# Bounds of sample_filtered's rounds (FILTER_ROUNDS); 64 ships.
BOUNDS = (1, 8, 64)
MODES = {"greedy": dict(temperature=None),
         "top_p_0.9": dict(temperature=0.8, top_p=0.9),
         "top_p_0.02": dict(temperature=0.8, top_p=0.02),
         "top_k_300": dict(temperature=0.8, top_k=300),
         "top_k_50": dict(temperature=0.8, top_k=50)}


def _name(kind, bound=None):
    return f"probe_{kind}" + (f"_r{bound}" if bound else "")


def build(out):
    import tilemega
    from tilemega.language.function import KernelSignature, trace
    from tilemega.mega import generation_bodies as gb

    os.makedirs(out, exist_ok=True)

    def save(body, name):
        text = trace(KernelSignature(body.kernel), {}, {}, name=name).text
        print(tilemega.compile(text, chip="sm_90a", name=name).save(out))

    partial = gb.argmax_partial(V, threads=THREADS, emit=False)
    save(partial, _name("partial"))
    shipped = gb.FILTER_ROUNDS
    try:
        for bound in BOUNDS:
            gb.FILTER_ROUNDS = bound
            save(gb.pick_advance(V, S, partial.units, threads=THREADS, emit=False),
                 _name("pick", bound))
    finally:
        gb.FILTER_ROUNDS = shipped
    with open(os.path.join(out, "probe_units.json"), "w") as f:
        json.dump({"units": partial.units}, f)


def run(artifacts, out):
    import numpy as np
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import common
    from tilemega.mega import generation_reference as ref
    from tilemega.mega import generation_state as gs
    from tilemega.mega.generation_bodies import MAX_TOP_K, SAMPLING_WORDS
    from tilemega.runtime import load_artifact

    with open(os.path.join(artifacts, "probe_units.json")) as f:
        units = json.load(f)["units"]
    partial = load_artifact(os.path.join(artifacts, _name("partial") + ".json"))
    torch.manual_seed(0)
    # A random-weight model's logits: near-flat, as the engine benchmark's.
    logits = (torch.randn(V, device="cuda") * 2.0).to(torch.bfloat16)
    t = {"gen": torch.zeros(gs.GEN_WORDS, device="cuda", dtype=torch.int32),
         "sampling": torch.zeros(SAMPLING_WORDS, device="cuda", dtype=torch.float32)}
    best = torch.zeros(2 * units, device="cuda")
    cand = torch.zeros(units * MAX_TOP_K * 2, device="cuda")
    scores = torch.zeros(V, device="cuda")
    tokens = torch.zeros(S, device="cuda", dtype=torch.int32)
    results = {"vocab": V, "units": units, "rows": []}
    for bound in BOUNDS:
        pick = load_artifact(os.path.join(artifacts, _name("pick", bound) + ".json"))
        for mode, kw in MODES.items():
            words = ref.set_state(t, pos=5, given=1, end=S, seed=1234, **kw)
            fresh = torch.tensor(words, dtype=torch.int32, device="cuda")

            def step():
                t["gen"].copy_(fresh)
                partial(logits, t["gen"], t["sampling"], best, cand, scores)
                pick(best, cand, t["sampling"], tokens, t["gen"], logits, scores)

            step()
            torch.cuda.synchronize()
            got = int(tokens[6].item())
            lg = logits.double().cpu().numpy()
            if kw.get("temperature"):
                inv_t = 1.0 / kw["temperature"]
                noisy = lg * inv_t + ref.gumbel_of(words, V)
                k, p = kw.get("top_k", 0), kw.get("top_p", 1.0)
                if k and k <= MAX_TOP_K:
                    keep = ref.sampled_set(lg, inv_t, k, p)
                    want, rounds = int(np.argmax(np.where(keep, noisy, -np.inf))), 0
                else:
                    want, rounds = ref.filtered_pick(lg, noisy, inv_t, k, p,
                                                     rounds=bound)
            else:
                want, rounds = int(np.argmax(lg)), 0
            pick_only = common.bench_ms(common.graphed(
                lambda: pick(best, cand, t["sampling"], tokens, t["gen"], logits, scores)))
            both = common.bench_ms(common.graphed(step))
            row = {"bound": bound, "mode": mode, "pick": got, "expected": want,
                   "passed": got == want, "reference_rounds": rounds,
                   "pick_us": pick_only * 1e3, "partial_and_pick_us": both * 1e3}
            results["rows"].append(row)
            print(json.dumps(row))
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "pick_rounds.json"), "w") as f:
        json.dump(results, f, indent=2)
    return 0 if all(r["passed"] for r in results["rows"]) else 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="what", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", default="out/pick")
    r = sub.add_parser("run")
    r.add_argument("--artifacts", default="out/pick")
    r.add_argument("--out", default="docs/results")
    args = parser.parse_args(argv)
    if args.what == "build":
        build(args.out)
        return 0
    return run(args.artifacts, args.out)


if __name__ == "__main__":
    sys.exit(main())
