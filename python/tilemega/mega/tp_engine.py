"""`TensorParallelEngine`: a Hugging Face checkpoint over `world` GPUs of one
process (issue 12), Megatron-style (tensor_parallel.py): every rank runs the
rank generation graph (models.generation_graph(cfg, world=W)) on its shard,
the output and down projections' partial sums and the pick's partials
exchanged inside the persistent kernels through peer memory.

    from tilemega.mega.tp_engine import TensorParallelEngine
    engine = TensorParallelEngine.from_pretrained("llama-dir", world=2)
    ids = engine.generate(prompt_ids, max_new_tokens=64)

One launch of every rank per generation, each on its GPU's stream; the
decode steps walk the prompt one position a step (no prefill kernels over
ranks yet), then generate until max_new_tokens, an EOS id or the end of the
cache; every rank must end with the same tokens (checked). Sampling: greedy,
temperature, top-k up to 64 (with any top-p); the settings that filter the
whole vocabulary are refused (tensor_parallel.check_sampling).

bind_rank_kernels is the one binding of a rank artifact's kernels (also
examples/generation_tp.py's). Written without a GPU: it has not run yet.
"""

from typing import List

from . import generation_state as gs
from . import tensor_parallel as tp
from .checkpoint import load_tensors, read_config
from .engine import Engine, _artifact_path, _eos_of, stopped_generation


def compile_rank_generation(cfg, world, progress=None):
    """The artifact JSON path of generation_graph(cfg, world=world), compiled
    or from the disk cache (needs the compiler)."""
    from .. import cache
    from .models import generation_graph

    if progress:
        progress(f"building the rank graph ({cfg.layers} layers, {world} ranks)")
    entry = cache.compile_cached(generation_graph(cfg, world=world).to_mlir(),
                                 name=f"generate_tp{world}")
    return _artifact_path(entry)


def bind_rank_kernels(artifact, shards, world, devices, torch):
    """(kernels, tensors): a MegaKernel of the rank artifact for each rank,
    bound to its shard (shards[r], on devices[r]), its rank word, its
    inboxes and the other ranks' (tensor_parallel.bind_ranks; another GPU's
    through MegaKernel.bind_remote), peers bound, prepared."""
    from ..runtime import load_mega

    kernels = [load_mega(artifact) for _ in range(world)]
    if kernels[0].ranks != world:
        raise ValueError(f"{artifact}: a graph of {kernels[0].ranks} ranks, not {world}")
    params = {p.name: (tuple(p.shape), p.dtype) for p in kernels[0].user_params}

    def zeros(shape, dtype, rank):
        return torch.zeros(shape, dtype=getattr(torch, dtype), device=devices[rank])

    tensors = tp.bind_ranks(params, shards, world, zeros)
    peers = tp.peer_names(params, world)
    for r, (mk, mine) in enumerate(zip(kernels, tensors)):
        remote = {n: t for n, t in mine.items()
                  if n in peers and devices[peers[n][0]] != devices[r]}
        mk.bind({n: t for n, t in mine.items() if n not in remote})
        if remote:
            mk.bind_remote(remote)
        mk.set_step_limit(1)
    if world > 1:
        events = [mk.events_address for mk in kernels]
        for r, mk in enumerate(kernels):
            mk.bind_peers(r, events)
    # A first launch's synchronous setup would wait for the rank launched
    # before it: every rank is prepared before any launch.
    for mk in kernels:
        mk.prepare()
    return kernels, tensors


class TensorParallelEngine:
    """Generation over `world` GPUs of one process (see the module)."""

    def __init__(self, cfg, tensors, artifact, world, devices=None, eos_token_id=None):
        import torch

        tp.check_world(cfg, world)
        devices = list(range(world)) if devices is None else list(devices)
        if len(devices) != world:
            raise ValueError(f"devices: {len(devices)} GPUs for {world} ranks")
        self.cfg, self.world, self._torch = cfg, world, torch
        self.devices = [torch.device("cuda", d) for d in devices]
        self.eos_token_id = gs.eos_ids(eos_token_id)
        shards = [{n: t.to(self.devices[r])
                   for n, t in tp.shard(tensors, cfg, world, r).items()}
                  for r in range(world)]
        self.kernels, self.tensors = bind_rank_kernels(artifact, shards, world,
                                                       self.devices, torch)
        self.streams = [torch.cuda.Stream(device=d) for d in self.devices]
        self._failed = False
        self._synchronize()

    @classmethod
    def from_pretrained(cls, path, world=2, devices=None, max_seq_len=4096, artifact=None,
                        eos_token_id=None, progress=None):
        """From a checkpoint folder; a world size its config cannot split is
        a ValueError naming the field before anything is loaded. artifact:
        a prebuilt rank artifact (else compiled here, cached)."""
        cfg = read_config(path, max_seq_len)
        tp.check_world(cfg, world, source=f"{path}/config.json")
        if artifact is None:
            artifact = compile_rank_generation(cfg, world, progress)
        if progress:
            progress(f"loading {path}")
        tensors = load_tensors(path, cfg, "cpu")
        if eos_token_id is None:
            eos_token_id = _eos_of(path)
        return cls(cfg, tensors, artifact, world, devices, eos_token_id)

    def _synchronize(self):
        for d in self.devices:
            self._torch.cuda.synchronize(d)

    def generate(self, prompt_ids, max_new_tokens=64, eos_token_id=None, temperature=None,
                 top_k=None, top_p=None, seed=0) -> List[int]:
        """The generated ids (without the prompt): one launch of every rank."""
        from ..runtime import MegaKernelError
        from ..runtime import mega_meta as mm

        torch = self._torch
        ids = Engine._check_prompt(self, prompt_ids, max_new_tokens)
        sampling = Engine._sampling(temperature, top_k, top_p)
        tp.check_sampling(temperature, 0 if top_k is None else top_k,
                          1.0 if top_p is None else top_p)
        if self._failed:     # a watchdog stop left events and state half-way
            for mk in self.kernels:
                mk.reset()
            self._failed = False
        eos = self.eos_token_id if eos_token_id is None else gs.eos_ids(eos_token_id)
        given, S = len(ids), self.cfg.max_seq_len
        end = min(S, given + max_new_tokens)
        words = gs.initial(0, given, end, eos, seed)
        for mine in self.tensors:
            mine["tokens"][:given].copy_(torch.tensor(ids.tolist(), dtype=torch.int32))
            mine["gen"].copy_(torch.tensor(words, dtype=torch.int32))
            mine["sampling"].copy_(torch.tensor(sampling, dtype=torch.float32))
        for mk in self.kernels:
            mk.set_step_limit(S)
        self._synchronize()
        for mk, s in zip(self.kernels, self.streams):
            mk.launch(stream=s)
        self._synchronize()
        try:
            for mk in self.kernels:
                mk.check()
        except MegaKernelError as e:
            self._failed = True
            state = [int(v) for v in self.tensors[0]["gen"].tolist()]
            note = stopped_generation(state, self.kernels[0].state()[mm.STEPS_DONE_WORD], given)
            raise MegaKernelError(f"{e}; {note}", e.code, e.kind, e.cta, e.entry, e.event,
                                  e.seen, e.expected) from None
        finally:
            for mk in self.kernels:
                mk.set_step_limit(1)
        produced = int(self.tensors[0]["gen"][gs.GENERATED])
        out = [[int(t) for t in m["tokens"][given:given + produced].tolist()]
               for m in self.tensors]
        if any(o != out[0] for o in out[1:]):
            raise RuntimeError(f"the ranks generated different tokens: {[o[:8] for o in out]}")
        return out[0]
