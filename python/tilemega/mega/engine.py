"""`Engine`: a Hugging Face checkpoint in, tokens out of the persistent
generation kernel (models.generation_graph).

    from tilemega.mega import Engine
    engine = Engine.from_pretrained("llama-dir", max_seq_len=4096)
    ids = engine.generate([128000, 791, 6460], max_new_tokens=64)
    ids = engine.generate(prompt, max_new_tokens=64, temperature=0.8, seed=7)
    for token in engine.stream(prompt, max_new_tokens=64): ...

A prompt is a list of token ids or a 1-D integer array (numpy, or a torch
tensor such as a tokenizer's `input_ids[0]`).

The kernel repeats its decode step on the device (mega.graph stop_word):
one launch runs a whole generation, each step's pick feeding the next
step's embedding, until the state's DONE (max_new_tokens, an EOS id, the end
of the cache). The host's work per generation is the prompt upload, one
launch (the arguments packed once at bind) and, when streaming, reads of
the state's GENERATED counter on a second stream while the kernel runs.
`step()` keeps the single-step mode (one step per launch) for tests and
callers that own the loop. Sampling on the device: temperature, top-k (any
k) and top-p (alone or within the top-k), drawn with a seeded Philox
generator (generation_state.py; generation_bodies.sample_top_k for k <= 64,
sample_filtered over the whole vocabulary otherwise).

The prompt: with a prefill artifact (prefill.py; compiled here when the
compiler is installed, or passed as prefill=PATH) its cache rows but the
last come from our tile kernels, a chunk of 512 positions at a time
(wgmma GEMMs, causal GQA flash attention), and the decode steps start
at its last token. generate() and stream() replay the prefill's launches
and the persistent kernel's from one CUDA graph (one per number of chunks,
captured at the first prompt that needs it): a generation is one
cuGraphLaunch; start() runs the prefill alone (for step()). Without one (prefill=False, or teacher-forced) the
decode steps walk the prompt one position a step.

Compilation: on a machine with the compiler, from_pretrained compiles the
graph of the checkpoint's config once (tilemega.cache, on disk). On a GPU
machine with only the runtime, pass artifact= a generation artifact built
elsewhere; its tensors must be those of the checkpoint's config.
"""

import array
import contextlib
import gc
import json
import os
import re
import time
from typing import Iterator, List, Sequence

from . import generation_state as gs
from .checkpoint import from_transformers, load_tensors, read_config


def compile_generation(cfg, progress=None, ctas_per_sm=None):
    """The artifact JSON path of cfg's generation graph, compiled or from the
    disk cache (needs the compiler). ctas_per_sm: CTAs sharing an SM
    (models.generation_graph; None: its default)."""
    from .. import cache
    from .models import generation_graph

    start = time.perf_counter()
    if progress:
        progress(f"building the generation graph ({cfg.layers} layers)")
    text = generation_graph(cfg, ctas_per_sm=ctas_per_sm).to_mlir()
    if progress:
        progress("compiling (cached on disk after the first time)")
    entry = cache.compile_cached(text, name="generate")
    if progress:
        progress(f"compiled in {time.perf_counter() - start:.1f} s ({entry.source})")
    return _artifact_path(entry)


def _no_compile_option(artifact, ctas_per_sm):
    """A prebuilt artifact was compiled already: ValueError for a compile
    option given with it, rather than silently ignoring it."""
    if ctas_per_sm is not None:
        raise ValueError(f"ctas_per_sm={ctas_per_sm!r} is a compile option, but artifact="
                         f"{artifact!r} is prebuilt: pass one or the other")


def _artifact_path(entry):
    """The artifact JSON of a cache entry: the disk cache's file, or (the
    disk cache off) one saved in a fresh temporary folder."""
    if entry.path is not None:
        return entry.path
    import tempfile

    return entry.compiled.save(tempfile.mkdtemp(prefix="tilemega-"))


def compile_prefill_cached(cfg, progress=None):
    """The prefill artifact JSON path of cfg (prefill.py), compiled or from
    the disk cache (needs the compiler)."""
    from .. import cache
    from .prefill import prefill_mlir

    if progress:
        progress("compiling the prefill kernels (cached on disk after the first time)")
    entry = cache.compile_cached(prefill_mlir(cfg), name="prefill")
    return _artifact_path(entry)


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
            for p in megas[0]["mega"].get("args", [])
            if isinstance(p, dict) and p.get("role") not in (None, "scratch")}
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


@contextlib.contextmanager
def collector_held_off():
    """Python's cyclic collector off inside the block (as it was after):
    a collection that falls due there runs after it. In bench/generate.py's
    process (transformers and torch.compile loaded) the launch of a
    generation took 49-66 us of host time when the collector was off for
    the launch call alone, and 16-24 us when it was off for the whole
    generate call (docs/results/generate.json, 13ec759): a collection
    earlier in the call, not one inside the launch, slowed it."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def uncollected(call, *args, **kwargs):
    """call(*args, **kwargs) inside collector_held_off()."""
    with collector_held_off():
        return call(*args, **kwargs)

class Engine:
    """Generation with one persistent-kernel launch per generation (see the
    module)."""

    def __init__(self, cfg, tensors, artifact, eos_token_id=None, poll_s=2e-4,
                 prefill=None, l2_caches=False):
        import torch

        from ..runtime import load_mega
        from .prefill import Prefill
        from .staging import HostStaging

        check_artifact(artifact, cfg)
        self.cfg, self.tensors = cfg, tensors
        self.eos_token_id = gs.eos_ids(eos_token_id)
        self.kernel = load_mega(artifact)
        if self.kernel.max_steps < cfg.max_seq_len:
            raise ValueError(f"{artifact}: the kernel repeats at most {self.kernel.max_steps} "
                             f"steps per launch; a generation needs up to {cfg.max_seq_len}")
        self.kernel.bind({p.name: tensors[p.name] for p in self.kernel.user_params})
        if l2_caches:
            # The k/v caches persisting in L2 from one step to the next
            # (runtime/l2_window.py): one window over them, so they must be
            # one pool (checkpoint.assemble allocates them so).
            from ..runtime.l2_window import L2Window

            caches = [tensors[n] for n in sorted(tensors) if n.endswith("_cache")]
            window = L2Window.covering(caches, what="Engine(l2_caches=True)")
            if window.num_bytes != sum(t.numel() * t.element_size() for t in caches):
                raise ValueError("Engine(l2_caches=True): the k/v caches are not one pool "
                                 "(allocate them as checkpoint.assemble does)")
            self.kernel.set_l2_window(window)
        self.poll_s = poll_s
        self._torch = torch
        # The launch is captured on a stream of the engine's own (capture
        # needs one) and replayed on the caller's; the host reads the state
        # on another while the kernel runs (non-blocking: it does not wait
        # for the legacy default stream).
        self._run = torch.cuda.Stream()
        self._run_handle = int(self._run.cuda_stream)
        self._poll = torch.cuda.Stream()
        self._launched_on = None      # the stream of the last generation's launch
        self._finished = torch.cuda.Event()
        # The prompt's cache rows from the prefill kernels (a prefill
        # artifact's path), else (None) by the decode steps themselves.
        self.prefill = None if prefill is None else Prefill(cfg, tensors, prefill)
        # A generation's inputs (prompt, state, sampling, prefill spans)
        # go from one pinned buffer by copies its graph holds (staging.py).
        targets = {name: tensors[name] for name in ("tokens", "gen", "sampling")}
        if self.prefill is not None:
            targets["spans"] = self.prefill.spans
        self._staging = HostStaging(targets)
        # Buffers allocated, residency checked and the launch packed now, not
        # inside the first generation.
        self.kernel.prepare()
        self.launch_capture_error = None  # why the launch runs uncaptured, if it does
        # The staged copies as the graph's memcpy nodes (True), or enqueued
        # by the launch itself just before the graph (False; a measurement
        # knob of bench/generate_launch.py: which costs the host less).
        self.copies_in_graph = True
        self._graph = self._capture_launch()
        # (prefill chunks, copies in graph) -> the graph of them + the launch
        self._graphs = {(0, True): self._graph}
        self._limit = None
        self._host_gen = torch.zeros(gs.GEN_WORDS, dtype=torch.int32).pin_memory()
        self._host_tokens = torch.zeros(cfg.max_seq_len, dtype=torch.int32).pin_memory()
        self.last_launch_host_s = None   # host time of the last generation's launch
        self.last_start_host_s = None    # from generate()/stream() to the launch's return
        self.last_prepare_host_s = None  # of it, the prompt's checks and staging
        self.last_prefill_s = None       # host-timed prefill of the last start()
        self._failed = False             # a watchdog stopped the last generation

    # -- construction ---------------------------------------------------------------

    @classmethod
    def from_pretrained(cls, path, max_seq_len=4096, artifact=None, device="cuda",
                        eos_token_id=None, progress=None, prefill=None, ctas_per_sm=None,
                        **options):
        """From a checkpoint folder (config.json + safetensors). artifact:
        a prebuilt generation artifact (else compiled here, cached);
        prefill: a prebuilt prefill artifact (else compiled here when the
        compiler is installed; False: the decode steps walk the prompt);
        ctas_per_sm: CTAs of the kernel an SM, when compiled here (None:
        models.GENERATION_CTAS_PER_SM, 2, which ran 2.8-3.5 % faster than
        1 on an H100: docs/mega.md)."""
        cfg = read_config(path, max_seq_len)
        if artifact is None:
            artifact = compile_generation(cfg, progress, ctas_per_sm)
        else:
            _no_compile_option(artifact, ctas_per_sm)
            check_artifact(artifact, cfg)
        prefill = _prefill_path(cfg, prefill, progress)
        if progress:
            progress(f"loading {path}")
        tensors = load_tensors(path, cfg, device)
        if eos_token_id is None:
            eos_token_id = _eos_of(path)
        return cls(cfg, tensors, artifact, eos_token_id, prefill=prefill, **options)

    @classmethod
    def from_model(cls, model, max_seq_len=4096, artifact=None, device="cuda",
                   eos_token_id=None, prefill=None, ctas_per_sm=None, **options):
        """From an in-memory transformers LlamaForCausalLM / Qwen2ForCausalLM
        (artifact, prefill and ctas_per_sm as from_pretrained)."""
        if artifact is not None:
            _no_compile_option(artifact, ctas_per_sm)
        cfg, tensors = from_transformers(model, max_seq_len, device)
        if artifact is None:
            artifact = compile_generation(cfg, ctas_per_sm=ctas_per_sm)
        prefill = _prefill_path(cfg, prefill, None)
        return cls(cfg, tensors, artifact, eos_token_id, prefill=prefill, **options)

    # -- generation -----------------------------------------------------------------

    def _check_prompt(self, prompt_ids, max_new_tokens, room=1):
        return checked_prompt(prompt_ids, max_new_tokens, self.cfg.max_seq_len, self.cfg.vocab,
                              room)

    @staticmethod
    def _sampling(temperature, top_k, top_p):
        """The sampling tensor's words for these settings (generation_bodies:
        1 / temperature or 0 for greedy, top-k or 0, top-p); ValueError for
        settings out of range. The device serves every setting in range
        (generation_bodies.sampling_modes); top-k over the vocabulary is
        refused by start(), which knows the vocabulary."""
        if temperature is None or temperature == 0:
            return [0.0, 0.0, 1.0]                  # greedy: top-k and top-p do not apply
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or \
                not 1e-3 <= temperature <= 1e3:
            raise ValueError(f"temperature must be 0 (greedy) or a number in [1e-3, 1e3], "
                             f"got {temperature!r}")
        k = 0 if top_k is None else top_k
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValueError(f"top_k={top_k!r}: 0 (the whole vocabulary) or a positive int")
        p = 1.0 if top_p is None else top_p
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
            raise ValueError(f"top_p={top_p!r}: a number in (0, 1]")
        return [1.0 / float(temperature), float(k), float(p)]

    def start(self, prompt_ids, max_new_tokens, eos_token_id=None, teacher_forced=False,
              temperature=None, top_k=None, top_p=None, seed=0):
        """Writes the prompt, the sampling settings and a fresh state, and
        runs the prefill kernels over the prompt's rows but its last: the
        next step processes the prompt's last position (position 0 without
        prefill kernels, or teacher-forced). Teacher-forced, every position
        of prompt_ids (up to max_seq_len of them) keeps its token and the
        steps only walk them (the logits of each step are the prediction of
        the next); else the steps after the prompt generate. Returns the
        state words."""
        words, chunks = self._prepare(prompt_ids, max_new_tokens, eos_token_id,
                                      teacher_forced, temperature, top_k, top_p, seed)
        # On the caller's stream, as step() runs.
        stream = self._torch.cuda.current_stream()
        self._staging.enqueue(int(stream.cuda_stream))
        self._staging.consumed(stream)
        self.last_prefill_s = None
        if chunks:
            # The spans travelled with the staged copies just enqueued.
            self.prefill.launch(chunks)
            self.last_prefill_s = self.prefill.last_s
        return words

    def _prepare(self, prompt_ids, max_new_tokens, eos_token_id, teacher_forced,
                 temperature, top_k, top_p, seed):
        """The inputs of a generation checked and staged (not yet copied:
        start() enqueues the copies, a generation's graph holds them): the
        state words, and the number of prefill chunks the prompt needs."""
        ids = self._check_prompt(prompt_ids, max_new_tokens, room=0 if teacher_forced else 1)
        if self._failed:               # a watchdog stop left events and state half-way
            self.kernel.reset()
            self._limit, self._failed = None, False
        eos = self.eos_token_id if eos_token_id is None else gs.eos_ids(eos_token_id)
        sampling = self._sampling(temperature, top_k, top_p)
        if sampling[1] > self.cfg.vocab:
            raise ValueError(f"top_k={top_k} is more than the vocabulary ({self.cfg.vocab})")
        given = len(ids)
        if teacher_forced:
            max_new_tokens = 0
        end = min(self.cfg.max_seq_len, given + max_new_tokens)
        # With prefill kernels, rows 0 .. given - 2 come from them (run by
        # _prefill) and the decode steps start at the prompt's last token.
        first = given - 1 if self.prefill is not None and not teacher_forced else 0
        words = gs.initial(first, given, end, eos, seed)
        staging = self._staging
        staging.write("tokens", ids)
        staging.write("gen", words)
        staging.write("sampling", sampling, "f")
        chunks = 0
        if self.prefill is not None:
            chunks, spans = self.prefill.span_rows(first)
            staging.write("spans", spans)
        return words, chunks

    def _check_kernel(self, given):
        """kernel.check(), the watchdog's error extended with what the stopped
        generation left (stopped_generation); the kernel is reset at the
        next start()."""
        from ..runtime import MegaKernelError
        from ..runtime import mega_meta as mm

        try:
            self.kernel.check()
        except MegaKernelError as e:
            self._failed = True
            note = stopped_generation(self.state(), self.kernel.state()[mm.STEPS_DONE_WORD],
                                      given)
            raise MegaKernelError(f"{e}; {note}", e.code, e.kind, e.cta, e.entry, e.event,
                                  e.seen, e.expected) from None

    def _set_limit(self, steps, stream):
        if self._limit != steps:
            self.kernel.set_step_limit(steps, stream=stream)
            self._limit = steps

    def step(self):
        """One launch of one decode step (single-step mode), on the caller's
        current stream: what the caller enqueues next there sees its
        logits and state."""
        stream = self._torch.cuda.current_stream()
        self._set_limit(1, stream)
        uncollected(self.kernel.launch, stream=stream)

    def _capture_launch(self):
        """The staged inputs' copies and the persistent kernel's launch
        captured once into a CUDA graph (the kernel's five buffers and the
        staging buffer never change), or None where the capture fails.
        Measured on the H200 inside generate (bench/generate_launch.py,
        docs/results/generate_launch_probe_h200.json): the graph's launch
        6.6 us of host time once a trivial launch before it has paid the
        driver's first submission after the stream hand-over (13.6 us for
        that one), the cooperative launch 50 us for the same Llama-3.2-1B
        artifact."""
        from ..runtime import LaunchError

        self._torch.cuda.synchronize()
        try:
            return self.kernel.capture(self._run_handle,
                                       before=lambda: self._staging.enqueue(self._run_handle))
        except LaunchError as exc:
            # Generations still run, by the direct launch; the reason stays
            # visible (benchmarks record it beside the launch's host time).
            self.launch_capture_error = str(exc)
            return None
        finally:
            self._torch.cuda.synchronize()

    def _graph_for(self, chunks):
        """The graph of `chunks` prefill chunks (spans written by _prepare)
        and the persistent kernel's launch, headed by the staged inputs'
        copies where copies_in_graph; captured the first time it is needed,
        on the engine's stream. None where the capture fails."""
        if self._graph is None:                 # the launch itself is not captured
            return None
        key = (chunks, self.copies_in_graph)
        graph = self._graphs.get(key)
        if graph is None:
            from ..runtime import LaunchError

            torch = self._torch
            if chunks:
                self.prefill.warm()

            def before():
                if self.copies_in_graph:
                    self._staging.enqueue(self._run_handle)
                if chunks:
                    with torch.cuda.stream(self._run):
                        self.prefill.enqueue(chunks)

            torch.cuda.synchronize()
            try:
                graph = self._graphs[key] = self.kernel.capture(self._run_handle, before=before)
            except LaunchError as exc:
                self.launch_capture_error = str(exc)
            finally:
                torch.cuda.synchronize()
        return graph

    def _launch_generation(self, chunks=0):
        """The generation's one launch, on the caller's current stream after
        its work there (start()'s prompt and state writes): a replay of the
        captured launch, or the launch itself; with `chunks` > 0, the prefill
        kernels of that many chunks (spans written by _prepare) run first,
        in the same graph: one cuGraphLaunch a generation. Measured on the
        H200 before they shared it (bench/generate.py, docs/benchmarks.md):
        the decode kernel's launch right after the prefill's graph cost
        17-28 us of host time, 6.6-11 us after a trivial launch or into an
        idle device. Not handed over to a stream of the engine's own: the
        driver charged the first submission after such a hand-over (an event
        wait) 14-36 us of host time, whatever it launched
        (bench/generate_launch.py's control, docs/mega.md)."""
        stream = self._torch.cuda.current_stream()
        self._launched_on = stream
        handle = int(stream.cuda_stream)
        self._set_limit(self.cfg.max_seq_len, stream)
        graph = self._graph_for(chunks)
        if graph is None:                      # no capture: call by call
            self._staging.enqueue(handle)
            if chunks:
                self.prefill.enqueue(chunks)
        began = time.perf_counter()
        if graph is not None:
            if not self.copies_in_graph:       # timed: part of the launch's cost
                self._staging.enqueue(handle)
            uncollected(graph.launch, handle)
        else:
            uncollected(self.kernel.launch, stream=handle)
        self.last_launch_host_s = time.perf_counter() - began
        self._staging.consumed(stream)

    def state(self) -> List[int]:
        """The state words (synchronises)."""
        self._torch.cuda.synchronize()
        self._host_gen.copy_(self.tensors["gen"])
        return [int(v) for v in self._host_gen.tolist()]

    def _read_state(self):
        """The state words, read on the poll stream while the kernel runs."""
        with self._torch.cuda.stream(self._poll):
            self._host_gen.copy_(self.tensors["gen"], non_blocking=True)
        self._poll.synchronize()
        return self._host_gen.tolist()

    def _read_tokens(self, begin, end):
        with self._torch.cuda.stream(self._poll):
            self._host_tokens[begin:end].copy_(self.tensors["tokens"][begin:end],
                                               non_blocking=True)
        self._poll.synchronize()
        return [int(t) for t in self._host_tokens[begin:end].tolist()]

    def _begin(self, prompt_ids, max_new_tokens, eos_token_id, temperature, top_k, top_p,
               seed):
        """A generation's inputs staged and its launch issued (timed in
        last_start_host_s); the prompt's length, or None when the cache
        leaves no room for a token (nothing launched)."""
        began = time.perf_counter()
        words, chunks = self._prepare(prompt_ids, max_new_tokens, eos_token_id, False,
                                      temperature, top_k, top_p, seed)
        self.last_prepare_host_s = time.perf_counter() - began
        if words[gs.END] - 1 <= words[gs.POS]:
            return None
        self._launch_generation(chunks)
        self.last_start_host_s = time.perf_counter() - began
        return words[gs.GIVEN]

    def stream(self, prompt_ids, max_new_tokens=64, eos_token_id=None, temperature=None,
               top_k=None, top_p=None, seed=0) -> Iterator[int]:
        """Yields the generated ids while the kernel runs: one launch runs
        the whole generation on the device (up to max_new_tokens, an EOS id
        (yielded) or the end of the cache); the host reads the state's
        GENERATED counter every poll_s. A token is yielded once a later one
        is counted (the newest one's store may not be visible yet) or the
        kernel finished. A watchdog stop raises MegaKernelError; at the end
        the streamed ids are checked against the final tokens."""
        # The collector off from the inputs to the launch (not while the
        # caller consumes the tokens).
        with collector_held_off():
            given = self._begin(prompt_ids, max_new_tokens, eos_token_id, temperature, top_k,
                                top_p, seed)
        if given is None:
            return
        self._finished.record(self._launched_on)
        streamed = []
        while True:
            finished = self._finished.query()
            produced = self._read_state()[gs.GENERATED]
            ready = produced if finished else produced - 1
            if ready > len(streamed):
                new = self._read_tokens(given + len(streamed), given + ready)
                streamed += new
                yield from new
            if finished:
                break
            time.sleep(self.poll_s)
        self._check_kernel(given)
        final = self._read_tokens(given, given + produced)
        if final != streamed:
            raise RuntimeError(f"streamed tokens {streamed[:8]}... differ from the final "
                               f"tokens {final[:8]}...: the state was read torn")

    def generate(self, prompt_ids, max_new_tokens=64, eos_token_id=None, temperature=None,
                 top_k=None, top_p=None, seed=0) -> List[int]:
        """The generated ids (without the prompt): one launch, then one read.
        The collector stays off until the ids are read (collector_held_off:
        the call allocates little while it waits for the device)."""
        with collector_held_off():
            given = self._begin(prompt_ids, max_new_tokens, eos_token_id, temperature, top_k,
                                top_p, seed)
            if given is None:
                return []
            self._launched_on.synchronize()
            self._check_kernel(given)
            produced = self._read_state()[gs.GENERATED]
            return self._read_tokens(given, given + produced)


def stopped_generation(words, steps_done, given):
    """What a generation stopped by the watchdog left, for its error: the
    state words after the stop, the steps the launch completed, the prompt
    length."""
    pos, generated = words[gs.POS], words[gs.GENERATED]
    return (f"the generation stopped in step {steps_done + 1} of its launch, at position "
            f"{pos}: tokens[{given}:{given + generated}] ({generated} generated) and the "
            f"caches' rows 0 .. {pos - 1} are complete, row {pos} and the logits may be "
            "half-written; the engine resets the kernel at the next start()")


def checked_prompt(prompt_ids, max_new_tokens, max_seq_len, vocab, room=1):
    """prompt_ids (a sequence of ints, or a 1-D integer numpy array or
    torch tensor) as an int32 array.array, checked: ints (not bools) in
    [0, vocab), at most max_seq_len - room of them; max_new_tokens a
    positive int. ValueError naming the first bad id otherwise. The common
    case runs in C loops (the array's conversion, the types' set, the range
    on numpy's view of the array): a prompt's ids are host time of every
    generation (512 ids: 33 us of checks plus 14 us of conversion for the
    staging before, on the CPU of the build machine)."""
    prompt_ids = _token_list(prompt_ids)
    if not prompt_ids:
        raise ValueError("prompt_ids is empty: a generation needs at least one token")
    try:
        ids = array.array("i", prompt_ids)
    except (TypeError, OverflowError, ValueError):
        ids = None
    low, high = _min_max(ids) if ids is not None else (-1, vocab)
    if set(map(type, prompt_ids)) != {int} or low < 0 or high >= vocab:
        for i, t in enumerate(prompt_ids):
            if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < vocab:
                raise ValueError(f"prompt_ids[{i}] = {t!r} is not a token id in [0, {vocab})")
    if len(ids) > max_seq_len - room:
        raise ValueError(f"the prompt has {len(ids)} tokens; max_seq_len {max_seq_len} leaves "
                         f"room for at most {max_seq_len - room}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or \
            max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive int, got {max_new_tokens!r}")
    return ids


def _token_list(prompt_ids):
    """prompt_ids as a sequence: itself, or the ids of a 1-D integer array
    (a numpy array or a torch tensor, e.g. a tokenizer's input_ids[0]) as
    a list of ints; ValueError for anything else."""
    if isinstance(prompt_ids, Sequence) and not isinstance(prompt_ids, (str, bytes)):
        return prompt_ids
    kind = type(prompt_ids).__name__
    dtype, shape = getattr(prompt_ids, "dtype", None), getattr(prompt_ids, "shape", None)
    if dtype is None or shape is None or not hasattr(prompt_ids, "tolist"):
        raise ValueError(f"prompt_ids must be a sequence of token ids, got {kind}")
    if len(shape) != 1:
        raise ValueError(f"prompt_ids: a {kind} of token ids must be 1-D (one prompt), got "
                         f"shape {tuple(shape)}")
    # numpy's "int64", "uint16"; torch's "torch.int32" (not "torch.bool").
    if not re.fullmatch(r"(torch\.)?u?int(8|16|32|64)", str(dtype)):
        raise ValueError(f"prompt_ids: a {kind} of token ids needs an integer dtype, got "
                         f"{dtype}")
    return prompt_ids.tolist()


def _min_max(ids):
    """(min, max) of an int32 array.array: numpy's reductions over its
    buffer where numpy is installed."""
    try:
        import numpy
    except ImportError:
        return min(ids), max(ids)
    view = numpy.frombuffer(ids, dtype=numpy.int32)
    return int(view.min()), int(view.max())


def _prefill_path(cfg, prefill, progress):
    """The prefill artifact to use: the one given, none (False), or compiled
    here when the compiler is installed (None)."""
    if prefill is False:
        return None
    if prefill is not None:
        return prefill
    import importlib.util

    if importlib.util.find_spec("tilemega.ir") is None:   # no compiler here
        return None
    return compile_prefill_cached(cfg, progress)


def _eos_of(path):
    """eos_token_id of generation_config.json or config.json (an id or a
    list of ids), else None."""
    for name in ("generation_config.json", "config.json"):
        try:
            with open(os.path.join(path, name)) as f:
                value = json.load(f).get("eos_token_id")
        except (OSError, json.JSONDecodeError, AttributeError):
            continue
        if isinstance(value, list) and value and all(
                isinstance(v, int) and not isinstance(v, bool) for v in value):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None
