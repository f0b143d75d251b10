"""Tensor-parallel generation graphs (models.generation_graph(cfg, world=W),
issue 12) and their loopback check: the W ranks' persistent kernels side by
side on one GPU, each bound to its shard (tensor_parallel.shard), its rank
word, its inboxes and the other ranks' inboxes (tensor_parallel.bind_ranks),
synchronised by peer events through that GPU's memory as they would be over
NVLink.

    python examples/generation_tp.py out              # build (compiler machine)
    python examples/generation_tp.py out --run-only   # check on a GPU machine
    python examples/generation_tp.py out --run-only --devices 0,1   # one rank a GPU

Artifacts:
  gen_small_tp2   examples/generation.py's gen_small over 2 ranks: each
                  rank 2 q / 1 kv heads, MLP 256, vocabulary rows 500
  gen_llama8b     a Llama-3.1-8B shape (32 layers, hidden 4096, MLP 14336,
                  32 q / 8 kv heads of 128, vocab 128256, untied LM head,
                  max_seq_len 2048) on one GPU, and
  gen_llama8b_tp2 the same over 2 ranks: bench/generate_tp.py's rows

gen_small_tp2 (CHECKED) has its kind in examples/shipped.py ("ranks",
gpu_check.py judges it with check_artifact below) but is not in its
compile_all until a verdict of its current PTX is on record: its loopback
check passed on the H200 except the dead-peer message, fixed since.

check_artifact(path, torch): for each position of generation.positions(cfg)
one launch of every rank from random weights and caches (greedy), then
sampled steps (temperature, top-k), judged as one GPU's step is
(generation_reference.check_step on the ranks' logits rows and cache heads
put together, against the unsharded float64 step), every rank's tokens and
state equal; one launch of several steps equal, bit for bit, to as many
single-step launches on every rank; and a rank that never launches: the
other's watchdog must stop it naming a peer event and the missing sender.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

LLAMA8B = dict(layers=32, hidden=4096, intermediate=14336, heads=32, kv_heads=8,
               head_dim=128, vocab=128256, max_seq_len=2048, tie_embeddings=False,
               rope_theta=500000.0,
               rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 8192})

# name -> (generation.CONFIGS entry or ModelConfig fields, ranks, workers a
# rank (None: every SM))
GRAPHS = {"gen_small_tp2": ("gen_small", 2, 8),
          "gen_llama8b": (LLAMA8B, 1, None),
          "gen_llama8b_tp2": (LLAMA8B, 2, None)}
# What check_artifact covers (the 8B ones are bench/generate_tp.py's).
CHECKED = ("gen_small_tp2",)
WATCHDOG_MS = 500


def config(name):
    import generation
    from tilemega.mega.models import ModelConfig

    of = GRAPHS[name][0]
    return generation.config(of) if isinstance(of, str) else ModelConfig(**of)


def build_all(out, names=None):
    import tilemega
    from tilemega.mega.models import generation_graph

    paths = []
    for name in names or GRAPHS:
        _, world, workers = GRAPHS[name]
        graph = generation_graph(config(name), workers=workers, world=world)
        art = tilemega.compile(graph.to_mlir(), chip="sm_90a", name=name,
                               mega_watchdog_ms=WATCHDOG_MS)
        paths.append(art.save(out))
    return paths


class Ranks:
    """The ranks of one run: `full` (the unsharded tensors, the float64
    reference's input, on the first rank's GPU), `tensors` (each rank's
    bindings, on its GPU) and `kernels` (each rank's MegaKernel, peers
    bound, prepared). devices: each rank's GPU (None: all on the current
    one, the loopback); a rank reaches another GPU's inboxes through peer
    access (MegaKernel.bind_remote)."""

    def __init__(self, path, torch, seed=0, devices=None, full=None):
        from tilemega.mega import generation_reference as ref
        from tilemega.mega import tensor_parallel as tp
        from tilemega.mega.tp_engine import bind_rank_kernels

        name = os.path.basename(path)[:-len(".json")]
        self.cfg, self.world = config(name), GRAPHS[name][1]
        self.torch = torch
        if devices is None:
            devices = [torch.cuda.current_device()] * self.world
        if len(devices) != self.world:
            raise ValueError(f"{name}: {len(devices)} devices for {self.world} ranks")
        self.devices = [torch.device("cuda", d) for d in devices]
        self.full = full if full is not None else \
            ref.make_tensors(self.cfg, seed=seed, device=self.devices[0])
        shards = [{n: t.to(self.devices[r]) for n, t in
                   tp.shard(self.full, self.cfg, self.world, r).items()}
                  for r in range(self.world)]
        self.kernels, self.tensors = bind_rank_kernels(path, shards, self.world, self.devices,
                                                       torch)
        self.streams = [torch.cuda.Stream(device=d) for d in self.devices]
        self.synchronize()

    def synchronize(self):
        for d in sorted(set(self.devices), key=str):
            self.torch.cuda.synchronize(d)

    def set_state(self, pos, **sampling):
        """The same state and sampling words on every rank, the full tensors'
        tokens and caches copied into every rank's (its kv heads)."""
        from tilemega.mega import generation_reference as ref

        ref.set_state(self.full, pos, given=pos + 1, end=self.cfg.max_seq_len, eos=None,
                      seed=0x1234_5678_9ABC_DEF0, **sampling)
        hkv = self.cfg.kv_heads // self.world
        for r, mine in enumerate(self.tensors):
            mine["gen"].copy_(self.full["gen"])
            mine["sampling"].copy_(self.full["sampling"])
            mine["tokens"].copy_(self.full["tokens"])
            mine["logits"].fill_(float("nan"))
            for c in ref.cache_names(self.cfg):
                mine[c].copy_(self.full[c][r * hkv:(r + 1) * hkv])

    def check_step(self, pos, **sampling):
        """One launch of every rank at `pos` judged against the unsharded
        float64 step (generation_reference.check_step on the joined
        tensors); the details name the state tensors the ranks disagree on."""
        from tilemega.mega import generation_reference as ref

        self.set_state(pos, **sampling)
        before = ref.snapshot(self.cfg, self.full)
        expected = ref.step_float64(self.cfg, self.full)
        self.launch()
        got = ref.check_step(self.cfg, self.joined(), before, expected)
        got["details"]["ranks_differ"] = differ = self.agree()
        got["passed"] = got["passed"] and not differ
        return got

    def launch(self, steps=1):
        for mk in self.kernels:
            mk.set_step_limit(steps)
        for mk, s in zip(self.kernels, self.streams):
            mk.launch(stream=s)
        self.synchronize()
        for mk in self.kernels:
            mk.check()

    def joined(self):
        """The full tensors with the ranks' logits rows and cache heads put
        together, rank 0's tokens and state."""
        from tilemega.mega import generation_reference as ref

        torch = self.torch
        home = self.devices[0]
        view = dict(self.full)
        view["logits"] = torch.cat([m["logits"].to(home) for m in self.tensors])
        for c in ref.cache_names(self.cfg):
            view[c] = torch.cat([m[c].to(home) for m in self.tensors])
        view["tokens"], view["gen"] = self.tensors[0]["tokens"], self.tensors[0]["gen"]
        return view

    def agree(self):
        """Names of the state tensors some rank holds differently from rank 0."""
        first = self.tensors[0]
        return sorted({n for m in self.tensors[1:] for n in ("tokens", "gen")
                       if not self.torch.equal(m[n].to(first[n].device), first[n])})


def per_token_ms(run, settle, start=1024, steps=64):
    """ms a token of the device loop: (a launch of `steps` steps - one of
    1) / (steps - 1), median of 5, from position `start`; settle() before
    each launch (a device sync, or a barrier of the processes). run: Ranks
    or generation_tp_dist.DistRank."""
    import time

    def once(n):
        run.set_state(start)
        settle()
        t = time.perf_counter()
        run.launch(n)
        return (time.perf_counter() - t) * 1e3

    return sorted(once(steps) - once(1) for _ in range(5))[2] / (steps - 1)


def check_artifact(path, torch, seed=0, devices=None):
    """{"error": worst logits error, "tolerance", "passed", "details"}: the
    steps, the device loop and the dead peer (module docstring); devices as
    Ranks takes them."""
    from tilemega.mega import generation_reference as ref
    from tilemega.runtime import MegaKernelError

    import generation

    run = Ranks(path, torch, seed=seed, devices=devices)
    cfg, S = run.cfg, run.cfg.max_seq_len
    worst, passed, details = 0.0, True, {"ranks": run.world,
                                         "devices": [str(d) for d in run.devices]}
    steps = [(str(p), p, {}) for p in generation.positions(cfg)] + [
        ("sampled", S // 2 + 3, dict(temperature=0.8)),
        ("sampled top-k 50", S // 2 + 3, dict(temperature=0.8, top_k=50)),
        ("sampled top-k 64 top-p 0.6", 1, dict(temperature=1.5, top_k=64, top_p=0.6))]
    for key, pos, sampling in steps:
        got = run.check_step(pos, **sampling)
        worst = max(worst, got["error"])
        passed &= got["passed"]
        details[key] = {k: v for k, v in got["details"].items()
                        if not k.endswith("_row") or v > 1e-2 or k.startswith("l0.")}
    loop = check_loop(run)
    passed &= loop["passed"]
    details["loop"] = loop
    # A rank that never launches: rank 0 alone stops on its watchdog,
    # naming a peer event's word of the missing sender.
    lonely = Ranks(path, torch, seed=seed, devices=devices)
    lonely.set_state(2)
    try:
        lonely.kernels[0].launch()
        lonely.kernels[0].check()
        details["dead_peer"] = "no error: rank 0 finished without rank 1"
        named = False
    except MegaKernelError as exc:
        details["dead_peer"] = str(exc)[:400]
        named = "from rank 1" in str(exc)
    lonely.synchronize()
    passed &= named
    return {"error": worst, "tolerance": ref.logits_tolerance(cfg), "passed": passed,
            "details": details}


def check_loop(run, steps=6):
    """Greedy from position 2 and sampled (top-k) from the middle: `steps`
    single-step launches and one launch of `steps` steps leave every rank's
    tokens, state, caches and logits the same, bit for bit, and the ranks
    agree."""
    from tilemega.mega import generation_reference as ref

    torch = run.torch
    names = ref.cache_names(run.cfg) + ["tokens", "gen", "logits"]
    out = {"passed": True, "steps": steps}
    for start, sampling in ((2, {}), (run.cfg.max_seq_len // 2, dict(temperature=1.1, top_k=20))):
        run.set_state(start, **sampling)
        for mine in run.tensors:
            mine["logits"].zero_()
        for _ in range(steps):
            run.launch(1)
        single = [{n: m[n].clone() for n in names} for m in run.tensors]
        run.set_state(start, **sampling)
        for mine in run.tensors:
            mine["logits"].zero_()
        run.launch(steps)
        differ = sorted({n for m, s in zip(run.tensors, single) for n in names
                         if not torch.equal(m[n], s[n])})
        done = [mk.steps_done() for mk in run.kernels]
        key = f"from {start}" + (f" {sampling}" if sampling else "")
        out[key] = {"steps_done": done, "differ": differ[:6], "ranks_differ": run.agree()}
        out["passed"] &= not differ and not run.agree() and done == [steps] * run.world
    for mk in run.kernels:
        mk.set_step_limit(1)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="out")
    parser.add_argument("--run-only", action="store_true")
    parser.add_argument("--devices", default=None,
                        help="each rank's GPU, e.g. 0,1 (default: all on the current one)")
    args = parser.parse_args()
    if not args.run_only:
        for path in build_all(args.out):
            print(f"built {path}")
        return 0
    import torch

    ok = True
    for name in CHECKED:
        devices = [int(d) for d in args.devices.split(",")] if args.devices else None
        got = check_artifact(os.path.join(args.out, name + ".json"), torch, devices=devices)
        ok &= got["passed"]
        print(f"{name}: worst logits error {got['error']:.3g}: "
              f"{'ok' if got['passed'] else 'FAILED'} {got['details']}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
