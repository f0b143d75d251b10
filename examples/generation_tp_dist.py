"""Tensor-parallel generation over processes (issue 12's plumbing): one
process a GPU, rendezvous through torch.distributed (NCCL), every rank's
inboxes and events buffer in one symmetric-memory allocation
(torch.distributed._symmetric_memory), the other ranks' reached through its
peer views; the communication itself stays inside the persistent kernels
(peer stores and system-scope signals). NVLink multicast stays off
(NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1, set before anything starts).

    python examples/generation_tp.py out                      # build
    torchrun --nproc-per-node 2 examples/generation_tp_dist.py out
    torchrun --nproc-per-node 2 examples/generation_tp_dist.py out --name gen_llama8b_tp2 --bench

Checks (every rank from the same seeded random model): at each position of
generation.positions(cfg), greedy and sampled (temperature, top-k), the
ranks' logits rows and cache heads gathered to rank 0 and judged against the
unsharded float64 step, every rank's tokens and state equal; a launch of 6
steps bit-identical to 6 single steps on every rank. --bench times the
device loop (64 steps from position 1024) on every rank, and on rank 0 the
one-GPU artifact of the same shape (gen_llama8b) after it. Writes
$OUT/generation_tp_dist.json (or ./). Has never run: no two-GPU machine was
lent when it was written (examples/generation_tp.py's one-process ranks are
the other way to run the same artifacts).
"""

import argparse
import datetime
import json
import math
import os
import sys

for _var in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
    os.environ[_var] = "0" if _var == "NCCL_NVLS_ENABLE" else "1"

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


class DistRank:
    """This process's rank of a rank artifact: its kernel bound to its shard,
    its rank word, its inboxes and events (views of the symmetric heap) and
    the other ranks' (peer views of it)."""

    def __init__(self, path, name, torch, dist, symm_mem, seed=0):
        import generation_tp as gtp
        from tilemega.mega import generation_reference as ref
        from tilemega.mega import tensor_parallel as tp
        from tilemega.runtime import load_mega

        self.torch, self.dist = torch, dist
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.cfg = gtp.config(name)
        if gtp.GRAPHS[name][1] != self.world:
            raise ValueError(f"{name} is a graph of {gtp.GRAPHS[name][1]} ranks; "
                             f"{self.world} processes were started")
        self.device = torch.device("cuda", torch.cuda.current_device())
        # The same model on every rank (a seeded CPU generator); rank 0 keeps
        # it whole for the float64 reference.
        self.full = ref.make_tensors(self.cfg, seed=seed, device=self.device)
        shard = tp.shard(self.full, self.cfg, self.world, self.rank)
        self.mk = load_mega(path)
        params = {p.name: (tuple(p.shape), p.dtype) for p in self.mk.user_params}
        peers = tp.peer_names(params, self.world)
        events = (max(1, len(self.mk.meta["events"])),)
        shared = {n: params[n] for n in sorted({inbox for _, inbox in peers.values()})}
        shared["mega_events"] = (events, "int32")
        self.layout, total = {}, 0
        for n, (shape, dtype) in shared.items():
            total = -(-total // 256) * 256
            size = math.prod(shape) * torch.empty((), dtype=getattr(torch, dtype)).element_size()
            self.layout[n] = (total, size, shape, dtype)
            total += size
        self.heap = symm_mem.empty(total, dtype=torch.uint8, device=self.device)
        self.handle = symm_mem.rendezvous(self.heap, dist.group.WORLD)
        self.heap.zero_()
        self.total = total
        mine = {}
        for n in params:
            if n == "rank":
                mine[n] = torch.tensor([self.rank], dtype=torch.int32, device=self.device)
            elif n in peers:
                q, inbox = peers[n]
                mine[n] = self.view(q, inbox)
            elif n in self.layout:
                mine[n] = self.view(self.rank, n)
            elif n in ("tokens", "gen"):
                mine[n] = shard[n].clone()
            else:
                mine[n] = shard[n]
        self.tensors = mine
        self.mk.bind(mine)
        self.mk.use_events(self.view(self.rank, "mega_events"))
        self.mk.bind_peers(self.rank, [self.view(q, "mega_events").data_ptr()
                                       for q in range(self.world)])
        self.mk.set_step_limit(1)
        self.mk.prepare()
        torch.cuda.synchronize()
        dist.barrier()

    def view(self, q, name):
        """Tensor `name` of the symmetric heap, this rank's or rank q's."""
        torch = self.torch
        offset, size, shape, dtype = self.layout[name]
        heap = self.heap if q == self.rank else \
            self.handle.get_buffer(q, (self.total,), torch.uint8)
        return heap[offset:offset + size].view(getattr(torch, dtype)).view(shape)

    def set_state(self, pos, **sampling):
        from tilemega.mega import generation_reference as ref

        ref.set_state(self.full, pos, given=pos + 1, end=self.cfg.max_seq_len, eos=None,
                      seed=0x1234_5678_9ABC_DEF0, **sampling)
        hkv = self.cfg.kv_heads // self.world
        mine = self.tensors
        for n in ("gen", "sampling", "tokens"):
            mine[n].copy_(self.full[n])
        mine["logits"].fill_(float("nan"))
        for c in ref.cache_names(self.cfg):
            mine[c].copy_(self.full[c][self.rank * hkv:(self.rank + 1) * hkv])

    def launch(self, steps=1):
        self.mk.set_step_limit(steps)
        self.dist.barrier()
        self.mk.launch()
        self.torch.cuda.synchronize()
        self.mk.check()
        self.dist.barrier()

    def gather(self, name):
        """Every rank's `name`, in rank order (all ranks get them)."""
        t = self.tensors[name].contiguous()
        out = [self.torch.empty_like(t) for _ in range(self.world)]
        self.dist.all_gather(out, t)
        return out

    def check_step(self, pos, **sampling):
        """The step at `pos` on every rank; on rank 0 generation_reference's
        verdict (the gathered rows against float64), elsewhere None."""
        from tilemega.mega import generation_reference as ref

        self.set_state(pos, **sampling)
        before = ref.snapshot(self.cfg, self.full) if self.rank == 0 else None
        expected = ref.step_float64(self.cfg, self.full) if self.rank == 0 else None
        self.launch()
        view = dict(self.full)
        view["logits"] = self.torch.cat(self.gather("logits"))
        for c in ref.cache_names(self.cfg):
            view[c] = self.torch.cat(self.gather(c))
        states = [self.gather("tokens"), self.gather("gen")]
        differ = [n for n, all_ in zip(("tokens", "gen"), states)
                  if any(not self.torch.equal(t, all_[0]) for t in all_[1:])]
        if self.rank != 0:
            return None
        view["tokens"], view["gen"] = self.tensors["tokens"], self.tensors["gen"]
        got = ref.check_step(self.cfg, view, before, expected)
        got["details"]["ranks_differ"] = differ
        got["passed"] = got["passed"] and not differ
        return got


def check(run, steps=6):
    import generation
    from tilemega.mega import generation_reference as ref

    S = run.cfg.max_seq_len
    worst, passed, details = 0.0, True, {"ranks": run.world}
    for key, pos, sampling in [(str(p), p, {}) for p in generation.positions(run.cfg)] + [
            ("sampled", S // 2 + 3, dict(temperature=0.8)),
            ("sampled top-k 50", S // 2 + 3, dict(temperature=0.8, top_k=50))]:
        got = run.check_step(pos, **sampling)
        if got is not None:
            worst = max(worst, got["error"])
            passed &= got["passed"]
            details[key] = {k: v for k, v in got["details"].items()
                            if not k.endswith("_row") or v > 1e-2 or k.startswith("l0.")}
    # The device loop against single steps, on every rank.
    names = ref.cache_names(run.cfg) + ["tokens", "gen", "logits"]
    run.set_state(2)
    for _ in range(steps):
        run.launch(1)
    single = {n: run.tensors[n].clone() for n in names}
    run.set_state(2)
    run.launch(steps)
    differ = [n for n in names if not run.torch.equal(run.tensors[n], single[n])]
    everyone = [None] * run.world
    run.dist.all_gather_object(everyone, {"differ": differ, "steps": run.mk.steps_done()})
    details["loop"] = everyone
    passed &= all(not e["differ"] and e["steps"] == steps for e in everyone)
    run.mk.set_step_limit(1)
    return {"error": worst, "passed": passed, "details": details}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="out")
    parser.add_argument("--name", default="gen_small_tp2")
    parser.add_argument("--bench", action="store_true")
    args = parser.parse_args()

    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=120),
                            device_id=torch.device("cuda", local))
    try:
        run = DistRank(os.path.join(args.out, args.name + ".json"), args.name, torch, dist,
                       symm_mem)
        result = {"name": args.name, "world": run.world}
        if args.bench:
            from generation_tp import per_token_ms

            mine = per_token_ms(run, dist.barrier)
            everyone = [None] * run.world
            dist.all_gather_object(everyone, mine)
            result["ms_per_token_per_rank"] = everyone
            del run
            torch.cuda.empty_cache()
            if dist.get_rank() == 0:
                import generation_tp as gtp

                one = gtp.Ranks(os.path.join(args.out, "gen_llama8b.json"), torch)
                result["one_gpu_ms_per_token"] = per_token_ms(one, one.synchronize)
            dist.barrier()
        else:
            result.update(check(run))
        if dist.get_rank() == 0:
            print(json.dumps(result, default=str), flush=True)
            with open(os.path.join(os.environ.get("OUT", "."),
                                   "generation_tp_dist.json"), "w") as f:
                json.dump(result, f, indent=1, default=str)
        ok = result.get("passed", True)
    finally:
        dist.destroy_process_group()
    return 0 if ok else 1



if __name__ == "__main__":
    sys.exit(main())
