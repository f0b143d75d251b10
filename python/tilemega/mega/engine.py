"""`Engine`: a Hugging Face checkpoint in, tokens out of the persistent
generation kernel (models.generation_graph).

    from tilemega.mega import Engine
    engine = Engine.from_pretrained("llama-dir", max_seq_len=4096)
    ids = engine.generate([128000, 791, 6460], max_new_tokens=64)
    for token in engine.stream(prompt, max_new_tokens=64): ...

One launch of the kernel is one decode step at the position its device
state holds (generation_state.py); the step appends the greedy pick and
advances the state itself, so a generation is a sequence of launches with
no host work between them. The engine captures `chunk` launches in a CUDA
graph once and replays it: the host's work per generation is a few replays
and one 32-byte read of the state per replay (to stream and to stop at
EOS), nothing per token.

The prompt is processed by the same decode step, one position per launch
(positions whose next token is given only advance): correct, but a
512-token prompt costs 511 decode steps; prefill with tile GEMMs is not
built yet.

Compilation: on a machine with the compiler, from_pretrained compiles the
graph of the checkpoint's config once (tilemega.cache, on disk). On a GPU
machine with only the runtime, pass artifact= a generation artifact built
elsewhere; its tensors must be those of the checkpoint's config.
"""

import json
import os
import time
from typing import Iterator, List, Sequence

from . import generation_state as gs
from .checkpoint import from_transformers, load_tensors, read_config


def compile_generation(cfg, progress=None):
    """The artifact JSON path of cfg's generation graph, compiled or from the
    disk cache (needs the compiler)."""
    from .. import cache
    from .models import generation_graph

    start = time.perf_counter()
    if progress:
        progress(f"building the generation graph ({cfg.layers} layers)")
    text = generation_graph(cfg).to_mlir()
    if progress:
        progress("compiling (cached on disk after the first time)")
    entry = cache.compile_cached(text, name="generate")
    if progress:
        progress(f"compiled in {time.perf_counter() - start:.1f} s ({entry.source})")
    return os.path.join(entry.path, "generate.json")


def check_artifact(path, cfg):
    """ValueError unless the artifact at `path` takes exactly the tensors of
    cfg's generation graph (names, shapes, dtypes)."""
    from . import generation_reference as ref

    try:
        with open(path) as f:
            meta = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a readable artifact: {e}") from None
    megas = [k for k in meta.get("kernels", []) if isinstance(k, dict) and "mega" in k]
    if len(megas) != 1:
        raise ValueError(f"{path}: field 'kernels': expected one mega-kernel, found {len(megas)}")
    have = {p.get("name"): (tuple(p.get("shape") or ()), p.get("dtype"))
            for p in megas[0].get("params", [])
            if p.get("role") not in (None, "runtime", "scratch")}
    want = {n: (tuple(s), d) for n, (s, d) in ref.tensor_specs(cfg).items()}
    if have != want:
        diff = sorted(set(have.items()) ^ set(want.items()))[:6]
        raise ValueError(f"{path}: the artifact's tensors are not those of this checkpoint's "
                         f"config (max_seq_len {cfg.max_seq_len}): differing {diff}")
    # The RMSNorm epsilon is compiled into the bodies and named by them
    # (bodies.gemv_rmsnorm: "_eps<tag>" unless it is 1e-5).
    from .bodies import _tag

    tag = "" if cfg.eps == 1e-5 else f"_eps{_tag(cfg.eps)}"
    norms = {t.get("body", "") for t in megas[0]["mega"].get("tasks", [])
             if str(t.get("body", "")).startswith("gemv_rms_")}
    wrong = sorted(b for b in norms if (tag not in b if tag else "_eps" in b))
    if not norms or wrong:
        raise ValueError(f"{path}: compiled for another rms_norm_eps than {cfg.eps}: "
                         f"bodies {wrong[:3] or 'none with RMSNorm'}")


class Engine:
    """Greedy generation with one persistent kernel per step (see the module)."""

    def __init__(self, cfg, tensors, artifact, eos_token_id=None, chunk=16):
        import torch

        from ..runtime import load_mega

        check_artifact(artifact, cfg)
        self.cfg, self.tensors = cfg, tensors
        self.eos_token_id = eos_token_id
        self.kernel = load_mega(artifact)
        self.kernel.bind({p.name: tensors[p.name] for p in self.kernel.user_params})
        if not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"chunk must be a positive int, got {chunk!r}")
        self.chunk = chunk
        self._graph = None
        self._torch = torch
        # Buffers allocated and the grid's residency checked now, not inside
        # the first CUDA-graph capture (which may not copy from the host).
        self.kernel.prepare()
        self._host_gen = torch.zeros(gs.GEN_WORDS, dtype=torch.int32).pin_memory()

    # -- construction ---------------------------------------------------------------

    @classmethod
    def from_pretrained(cls, path, max_seq_len=4096, artifact=None, device="cuda",
                        eos_token_id=None, progress=None, **options):
        """From a checkpoint folder (config.json + safetensors). artifact:
        a prebuilt generation artifact (else compiled here, cached)."""
        cfg = read_config(path, max_seq_len)
        if artifact is None:
            artifact = compile_generation(cfg, progress)
        else:
            check_artifact(artifact, cfg)
        if progress:
            progress(f"loading {path}")
        tensors = load_tensors(path, cfg, device)
        if eos_token_id is None:
            eos_token_id = _eos_of(path)
        return cls(cfg, tensors, artifact, eos_token_id, **options)

    @classmethod
    def from_model(cls, model, max_seq_len=4096, artifact=None, device="cuda",
                   eos_token_id=None, **options):
        """From an in-memory transformers LlamaForCausalLM / Qwen2ForCausalLM."""
        cfg, tensors = from_transformers(model, max_seq_len, device)
        if artifact is None:
            artifact = compile_generation(cfg)
        return cls(cfg, tensors, artifact, eos_token_id, **options)

    # -- generation -----------------------------------------------------------------

    def _check_prompt(self, prompt_ids, max_new_tokens, room=1):
        if isinstance(prompt_ids, (str, bytes)) or not isinstance(prompt_ids, Sequence):
            raise ValueError(f"prompt_ids must be a sequence of token ids, got "
                             f"{type(prompt_ids).__name__}")
        ids = list(prompt_ids)
        if not ids:
            raise ValueError("prompt_ids is empty: a generation needs at least one token")
        S, V = self.cfg.max_seq_len, self.cfg.vocab
        for i, t in enumerate(ids):
            if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < V:
                raise ValueError(f"prompt_ids[{i}] = {t!r} is not a token id in [0, {V})")
        if len(ids) > S - room:
            raise ValueError(f"the prompt has {len(ids)} tokens; max_seq_len {S} leaves room "
                             f"for at most {S - room}")
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or \
                max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be a positive int, got {max_new_tokens!r}")
        return ids

    def start(self, prompt_ids, max_new_tokens, eos_token_id=None, teacher_forced=False):
        """Writes the prompt and a fresh state: the next launch processes
        position 0. Teacher-forced, every position of prompt_ids (up to
        max_seq_len of them) keeps its token and the launches only walk them
        (the logits of each step are the prediction of the next); else the
        steps after the prompt generate. Returns the state words."""
        torch = self._torch
        ids = self._check_prompt(prompt_ids, max_new_tokens, room=0 if teacher_forced else 1)
        eos = self.eos_token_id if eos_token_id is None else eos_token_id
        given = len(ids)
        if teacher_forced:
            max_new_tokens = 0
        end = min(self.cfg.max_seq_len, given + max_new_tokens)
        self.tensors["tokens"][:len(ids)].copy_(torch.tensor(ids, dtype=torch.int32))
        words = gs.initial(0, given, end, eos)
        self.tensors["gen"].copy_(torch.tensor(words, dtype=torch.int32))
        return words

    def step(self):
        """One launch: one decode step (single-step mode)."""
        self.kernel.launch()

    def state(self) -> List[int]:
        """The state words (synchronises)."""
        self._host_gen.copy_(self.tensors["gen"])
        self._torch.cuda.synchronize()
        return [int(v) for v in self._host_gen.tolist()]

    def _replay(self, launches):
        torch = self._torch
        if launches == self.chunk:
            if self._graph is None:
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    for _ in range(self.chunk):
                        self.kernel.launch()
                self._graph = graph
            self._graph.replay()
        else:
            for _ in range(launches):
                self.kernel.launch()

    def stream(self, prompt_ids, max_new_tokens=64, eos_token_id=None) -> Iterator[int]:
        """Yields the generated ids as the kernel produces them (a chunk of
        launches at a time); stops at max_new_tokens, EOS (yielded) or the
        end of the cache. A watchdog stop raises MegaKernelError."""
        words = self.start(prompt_ids, max_new_tokens, eos_token_id)
        given, end = words[gs.GIVEN], words[gs.END]
        # Launches to reach the last position: pos walks 0 .. end - 1.
        remaining, seen = end - 1, 0
        while remaining > 0:
            launches = min(self.chunk, remaining)
            self._replay(launches)
            remaining -= launches
            words = self.state()
            produced = words[gs.GENERATED]
            if produced > seen:
                new = self.tensors["tokens"][given + seen:given + produced].tolist()
                seen = produced
                yield from (int(t) for t in new)
            if words[gs.DONE]:
                break
        self.kernel.check()

    def generate(self, prompt_ids, max_new_tokens=64, eos_token_id=None) -> List[int]:
        """The generated ids (without the prompt)."""
        return list(self.stream(prompt_ids, max_new_tokens, eos_token_id))


def _eos_of(path):
    """eos_token_id of generation_config.json or config.json (the first of a
    list), else None."""
    for name in ("generation_config.json", "config.json"):
        try:
            with open(os.path.join(path, name)) as f:
                value = json.load(f).get("eos_token_id")
        except (OSError, json.JSONDecodeError, AttributeError):
            continue
        if isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None
