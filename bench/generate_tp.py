"""Tensor-parallel generation on two GPUs (issue 12): ms/token of the
Llama-3.1-8B-shaped generation step (examples/generation_tp.py's
gen_llama8b on one GPU, gen_llama8b_tp2 over GPUs 0 and 1), random weights,
bf16, batch 1, greedy, the device loop over 64 steps from position 1024.
Each row is first checked at that position against the unsharded float64
step (the ranks' logits rows and cache heads put together, every rank's
state equal) and only then timed.

    python examples/generation_tp.py out                 # build (compiler machine)
    PYTHONPATH=python python3 bench/generate_tp.py --artifacts out --out docs/results

Timing: wall clock around one launch of every rank and a synchronisation of
both GPUs, (64 steps - 1 step) / 63, median of 5. Not yet a row: the torch
tensor-parallel step (NCCL all-reduce under a CUDA graph, two processes),
which the issue names as the peer. Has never run: no two-GPU machine was
lent when it was written."""

import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))

import common  # noqa: E402

WORKLOAD = "Llama-3.1-8B shape, generation ms/token (KV ~1k)"
START, STEPS = 1024, 64


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifacts", default=os.path.join(ROOT, "out"))
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "results"))
    args = parser.parse_args(argv)

    import torch

    import generation_tp as gtp
    from tilemega.mega import generation_reference as ref

    if torch.cuda.device_count() < 2:
        print("needs two GPUs", file=sys.stderr)
        return 1
    cfg = gtp.config("gen_llama8b")
    report = common.Report("generate_tp", args.out, copy_gbs=common.copy_bandwidth_gbs(),
                           timing="wall clock around one launch of every rank and a sync of "
                                  "both GPUs; (64 steps - 1) / 63; median of 5")
    # The floor: every weight read once a token at one GPU's copy rate
    # (two GPUs each read half).
    state = ("tokens", "gen", "sampling", "logits", "rope_cos", "rope_sin")
    weights = sum(math.prod(shape) * 2 for n, (shape, _) in ref.tensor_specs(cfg).items()
                  if not n.endswith("cache") and n not in state)
    report.workload(WORKLOAD, bytes=weights)
    full = ref.make_tensors(cfg, device="cuda:0")
    # The one-GPU row is the baseline the speed-up is a ratio against (the
    # issue's target: >= 1.7x), so it takes the peer's role in the ratios.
    runs = {"tilemega 1 GPU": ("gen_llama8b", [0], "peer"),
            "tilemega 2 GPUs (tensor parallel)": ("gen_llama8b_tp2", [0, 1], "ours")}
    for label, (name, devices, role) in runs.items():
        run = gtp.Ranks(os.path.join(args.artifacts, name + ".json"), torch,
                        devices=devices, full=full)

        def check(run=run):
            got = run.check_step(START)
            return {"logits": got["error"] if got["passed"] else float("inf")}

        report.row(WORKLOAD, label, check,
                   lambda run=run: gtp.per_token_ms(run, run.synchronize, START, STEPS),
                   tolerance=ref.logits_tolerance(cfg), role=role, devices=devices)
        del run
        torch.cuda.empty_cache()
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
