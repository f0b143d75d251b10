"""Prefill: the prompt's k/v cache rows from our tile kernels, one launch per
operator, a chunk of positions at a time (prefill_bodies.py), before the
generation kernel takes over at the prompt's last position.

    art = compile_prefill(cfg, out)               # on the compiler machine
    pre = Prefill(cfg, tensors, art)              # tensors: the engine's
    pre.run(prompt_length)                        # caches rows 0 .. P - 2

The engine then starts its decode steps at position P - 1 (the last prompt
token), whose step writes that row and picks the first new token. A chunk
is C positions (CHUNK): its launches take `span` = (start, count) from a
device tensor, one row per chunk (`spans`, written once per prompt), so the
artifact serves every prompt length and the launches of n chunks can be
captured once into a CUDA graph and replayed for every prompt of n chunks
(the engine captures them with its decode kernel's launch: a generation is
one graph launch, engine.py).
"""

import re
import time

from . import prefill_bodies as pb

# Rows a launch: a 512-token prompt in one chunk (its weights read once);
# blocks of rows past a shorter prompt do nothing (prefill_bodies), so a
# short prompt costs what it did with chunks of 256 (bench/prefill/time_ab.py,
# docs/results/prefill_chunks_h100.json).
CHUNK = 512


def max_chunks(max_seq_len, C=CHUNK):
    """The most chunks a prompt needs: rows 0 .. max_seq_len - 2 (the last
    row is the decode step's)."""
    return -(-(max_seq_len - 1) // C)


def chunk_spans(positions, max_seq_len, C=CHUNK):
    """(chunks, words): the number of C-row chunks of cache rows 0 ..
    positions - 1 and the words of a `spans` tensor for them - a row
    (start, count, 0, 0) a chunk, then rows (0, 0, 0, 0), which write
    nothing, up to the tensor's max_chunks + 1 rows (Prefill)."""
    if not 0 <= positions <= max_seq_len - 1:
        raise ValueError(f"prefill of {positions} rows: the cache has {max_seq_len} "
                         "(max_seq_len), the last one is the decode step's")
    chunks = -(-positions // C)
    words = []
    for c in range(chunks):
        words += [c * C, min(C, positions - c * C), 0, 0]
    words += [0, 0, 0, 0] * (max_chunks(max_seq_len, C) + 1 - chunks)
    return chunks, words


def prefill_bodies(cfg, C=CHUNK):
    """{role: Body} of cfg's prefill kernels."""
    H, D, S, V = cfg.hidden, cfg.head_dim, cfg.max_seq_len, cfg.vocab
    Hq, Hkv, I = cfg.heads, cfg.kv_heads, cfg.intermediate
    n = (Hq + 2 * Hkv) * D
    return {
        "embed": pb.embed_rows(V, H, S, C),
        "norm": pb.rmsnorm_rows(H, C, cfg.eps),
        "qkv": pb.linear(n, H, C, bias=cfg.qkv_bias),
        "rope": pb.rope_rows_kv(Hq, Hkv, D, S, C),
        "attention": pb.attention_rows(Hq, Hkv, D, S, C),
        "o": pb.linear(H, Hq * D, C, residual=True),
        "gu_silu": pb.gate_up_silu(I, H, C),
        "down": pb.linear(H, I, C, residual=True),
    }


def prefill_mlir(cfg, C=CHUNK) -> str:
    """One module holding every prefill kernel of cfg."""
    from tilemega.ir import Context, InsertionPoint, Location, Module

    from . import bodies

    seen = {}
    for body in prefill_bodies(cfg, C).values():
        seen.setdefault(body.name, body)
    with Context(), Location.unknown():
        module = Module.create()
        with InsertionPoint(module.body):
            for body in seen.values():
                bodies.emit(body)
        return str(module)


def compile_prefill(cfg, out, name, C=CHUNK):
    """The prefill artifact of cfg, saved in `out`; returns its JSON path."""
    import tilemega

    art = tilemega.compile(prefill_mlir(cfg, C), chip="sm_90a", name=name)
    return art.save(out)


def chunk_of(art):
    """The chunk (rows a launch) a loaded prefill artifact was built for:
    its embedding kernel's name ends in _c<C>; CHUNK when it has none (the
    check against the config's kernel names then says what is wrong)."""
    for name in art.kernels:
        match = re.fullmatch(r"prefill_embed_\d+x\d+_s\d+_c(\d+)", name)
        if match:
            return int(match[1])
    return CHUNK


class Prefill:
    """Runs the prefill kernels of artifact `path` on the engine's tensors
    (tilemega.mega.checkpoint names); scratch buffers of one chunk (C rows,
    the artifact's unless given) are allocated here."""

    def __init__(self, cfg, tensors, path, C=None):
        from ..runtime import load_artifact

        self.art = load_artifact(path)
        C = C or chunk_of(self.art)
        self.cfg, self.t, self.C = cfg, tensors, C
        self.bodies = prefill_bodies(cfg, C)
        missing = [b.name for b in self.bodies.values() if b.name not in self.art]
        if missing:
            raise ValueError(f"{path}: not the prefill artifact of this config (chunk {C}, "
                             f"max_seq_len {cfg.max_seq_len}) and this version of the "
                             f"prefill kernels: no kernel {missing[0]!r} (compile it again: "
                             "compile_prefill)")
        for body in self.bodies.values():
            have = [(q.name, tuple(q.shape or ()), q.dtype)
                    for q in self.art[body.name].spec.params]
            if have != [(name, tuple(shape), dtype) for name, shape, dtype in body.args]:
                raise ValueError(f"{path}: kernel {body.name!r} takes {have}, not the "
                                 f"parameters this prefill passes {list(body.args)}: an "
                                 "artifact of another version of the prefill kernels; "
                                 "compile it again (compile_prefill)")
        import torch                   # after the checks: they need no GPU

        H, D, I = cfg.hidden, cfg.head_dim, cfg.intermediate
        n = (cfg.heads + 2 * cfg.kv_heads) * D

        def buf(*shape):
            return torch.zeros(shape, dtype=torch.bfloat16, device="cuda")

        self.max_chunks = max_chunks(cfg.max_seq_len, C)
        # One row a chunk, and a last one that stays (0, 0) for warm(); rows
        # of 4 words, so that each chunk's span is 16-byte aligned as the
        # kernels' vector loads of it need.
        self.spans = torch.zeros(self.max_chunks + 1, 4, dtype=torch.int32, device="cuda")
        self.x, self.h, self.x1 = buf(C, H), buf(C, H), buf(C, H)
        self.qkv, self.q, self.o = buf(C, n), buf(C, cfg.heads * D), buf(C, cfg.heads * D)
        self.a = buf(C, I)
        self._torch = torch
        self._graphs = {}              # chunks -> torch.cuda.CUDAGraph
        self._warm = False
        self.last_s = None

    def _kernel(self, role):
        return self.art[self.bodies[role].name]

    def chunk(self, c=0):
        """The launches of chunk c, at the position spans[c] holds."""
        t, cfg = self.t, self.cfg
        k = self._kernel
        span = self.spans[c, :2]
        k("embed")(t["embed"], t["tokens"], span, self.x)
        for layer in range(cfg.layers):
            p = f"l{layer}."
            k("norm")(self.x, t[p + "attn_norm"], span, self.h)
            if cfg.qkv_bias:
                k("qkv")(self.h, t[p + "wqkv"], t[p + "bqkv"], span, self.qkv)
            else:
                k("qkv")(self.h, t[p + "wqkv"], span, self.qkv)
            k("rope")(self.qkv, t["rope_cos"], t["rope_sin"], span, self.q,
                      t[p + "k_cache"], t[p + "v_cache"])
            k("attention")(self.q, t[p + "k_cache"], t[p + "v_cache"], span, self.o)
            k("o")(self.o, t[p + "wo"], self.x, span, self.x1)
            k("norm")(self.x1, t[p + "mlp_norm"], span, self.h)
            k("gu_silu")(self.h, t[p + "wgu"], span, self.a)
            k("down")(self.a, t[p + "wd"], self.x1, span, self.x)

    def span_rows(self, positions):
        """chunk_spans of this prefill's cache and chunk."""
        return chunk_spans(positions, self.cfg.max_seq_len, self.C)

    def set_spans(self, positions):
        """Writes the span of each chunk of rows 0 .. positions - 1 (on
        torch's current stream, ordered before what follows there) and
        returns the number of chunks."""
        chunks, rows = self.span_rows(positions)
        torch = self._torch
        self.spans.copy_(torch.tensor(rows, dtype=torch.int32).view(-1, 4))
        return chunks

    def enqueue(self, chunks):
        """The launches of chunks 0 .. chunks - 1 on torch's current stream."""
        for c in range(chunks):
            self.chunk(c)

    def warm(self):
        """Every kernel launched once, before any capture (modules loaded,
        launches packed): on a side stream, at the span (0, 0) of the last
        row (never a chunk's), which writes no cache row."""
        if self._warm:
            return
        torch = self._torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.chunk(self.max_chunks)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        self._warm = True

    def run(self, positions, graph=True):
        """Writes the cache rows 0 .. positions - 1 from tokens[0 ..
        positions - 1], on torch's current stream; graph: replay the
        launches of all chunks from one CUDA graph (captured the first time
        for that number of chunks)."""
        began = time.perf_counter()
        chunks = self.set_spans(positions)
        self.launch(chunks, graph)
        self.last_s = time.perf_counter() - began
        return chunks

    def launch(self, chunks, graph=True):
        """The launches of chunks 0 .. chunks - 1 whose spans are already in
        `spans` (set_spans, or a caller's copy of span_rows: the engine's
        staging), on torch's current stream; graph as run()."""
        began = time.perf_counter()
        if chunks and graph:
            g = self._graphs.get(chunks)
            if g is None:
                g = self._graphs[chunks] = self._capture(chunks)
            g.replay()
        else:
            self.enqueue(chunks)
        self.last_s = time.perf_counter() - began

    def _capture(self, chunks):
        torch = self._torch
        self.warm()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.enqueue(chunks)
        return graph
