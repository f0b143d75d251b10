"""Prefill: the prompt's k/v cache rows from our tile kernels, one launch per
operator, a chunk of positions at a time (prefill_bodies.py), before the
generation kernel takes over at the prompt's last position.

    art = compile_prefill(cfg, out)               # on the compiler machine
    pre = Prefill(cfg, tensors, art)              # tensors: the engine's
    pre.run(prompt_length)                        # caches rows 0 .. P - 2

The engine then starts its decode steps at position P - 1 (the last prompt
token), whose step writes that row and picks the first new token. A chunk
is C positions (CHUNK): its launches take `span` = (start, count) from a
device tensor, so the artifact serves every prompt length and a chunk's
launches can be captured once into a CUDA graph and replayed per chunk.
"""

import time

from . import prefill_bodies as pb

CHUNK = 256


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
        "gu": pb.linear(2 * I, H, C),
        "silu_mul": pb.silu_mul_rows(I, C),
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


class Prefill:
    """Runs the prefill kernels of artifact `path` on the engine's tensors
    (tilemega.mega.checkpoint names); scratch buffers of one chunk are
    allocated here."""

    def __init__(self, cfg, tensors, path, C=CHUNK):
        import torch

        from ..runtime import load_artifact

        self.cfg, self.t, self.C = cfg, tensors, C
        self.art = load_artifact(path)
        self.bodies = prefill_bodies(cfg, C)
        missing = [b.name for b in self.bodies.values() if b.name not in self.art]
        if missing:
            raise ValueError(f"{path}: not the prefill artifact of this config (chunk {C}, "
                             f"max_seq_len {cfg.max_seq_len}): no kernel {missing[0]!r}")
        H, D, I = cfg.hidden, cfg.head_dim, cfg.intermediate
        n = (cfg.heads + 2 * cfg.kv_heads) * D

        def buf(*shape):
            return torch.zeros(shape, dtype=torch.bfloat16, device="cuda")

        self.span = torch.zeros(2, dtype=torch.int32, device="cuda")
        self.x, self.h, self.x1 = buf(C, H), buf(C, H), buf(C, H)
        self.qkv, self.q, self.o = buf(C, n), buf(C, cfg.heads * D), buf(C, cfg.heads * D)
        self.gu, self.a = buf(C, 2 * I), buf(C, I)
        self._torch = torch
        self._graph = None
        self.last_s = None

    def _kernel(self, role):
        return self.art[self.bodies[role].name]

    def chunk(self):
        """The launches of one chunk at the position `span` holds."""
        t, cfg = self.t, self.cfg
        k = self._kernel
        k("embed")(t["embed"], t["tokens"], self.span, self.x)
        for layer in range(cfg.layers):
            p = f"l{layer}."
            k("norm")(self.x, t[p + "attn_norm"], self.h)
            if cfg.qkv_bias:
                k("qkv")(self.h, t[p + "wqkv"], t[p + "bqkv"], self.qkv)
            else:
                k("qkv")(self.h, t[p + "wqkv"], self.qkv)
            k("rope")(self.qkv, t["rope_cos"], t["rope_sin"], self.span, self.q,
                      t[p + "k_cache"], t[p + "v_cache"])
            k("attention")(self.q, t[p + "k_cache"], t[p + "v_cache"], self.span, self.o)
            k("o")(self.o, t[p + "wo"], self.x, self.x1)
            k("norm")(self.x1, t[p + "mlp_norm"], self.h)
            k("gu")(self.h, t[p + "wgu"], self.gu)
            k("silu_mul")(self.gu, self.a)
            k("down")(self.a, t[p + "wd"], self.x1, self.x)

    def run(self, positions, graph=True):
        """Writes the cache rows 0 .. positions - 1 from tokens[0 ..
        positions - 1], on torch's current stream; graph: replay one
        chunk's launches from a CUDA graph (captured the first time)."""
        torch = self._torch
        began = time.perf_counter()
        chunks = -(-positions // self.C)
        if graph and self._graph is None and chunks:
            self._capture()
        for c in range(chunks):
            start = c * self.C
            self.span.copy_(torch.tensor([start, min(self.C, positions - start)],
                                         dtype=torch.int32), non_blocking=False)
            if graph:
                self._graph.replay()
            else:
                self.chunk()
        self.last_s = time.perf_counter() - began
        return chunks

    def _capture(self):
        """One chunk's launches into a CUDA graph; the warm-up launch runs on
        span (0, 0), which writes no cache row."""
        torch = self._torch
        self.span.zero_()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.chunk()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.chunk()
        self._graph = graph
