"""Graphs of whole models: one Llama decode step, and the MLP chain.

Tensor names match reference.py (weights `l{l}.wqkv` ..., caches
`l{l}.k_cache`, inputs `x`, `rope_cos`, `rope_sin`, output `out`), so the
runtime and the reference exchange tensors by name. Every intermediate of
every layer is its own scratch tensor (SSA style): no task overwrites what an
earlier task still reads, so the only hazards are true dependencies.
"""

from dataclasses import dataclass
from typing import Optional

from .graph import Graph, default_workers


@dataclass
class LlamaConfig:
    layers: int = 16
    hidden: int = 2048
    intermediate: int = 8192
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 64
    kv_len: int = 1024
    eps: float = 1e-5
    rope_theta: float = 500000.0
    dtype: str = "bfloat16"


def decode_graph(cfg: LlamaConfig, workers=None, threads=256, attention_splits=8,
                 fuse=True, fused_glu=None, ctas_per_sm=1, rope_in_attention=True,
                 attention_tensor_cores=None, merge_in_projection=False) -> Graph:
    """One batch-1 decode step of `cfg.layers` layers: the new token's k/v go
    to position kv_len - 1 of the caches and attention runs over kv_len keys.
    `out` is the hidden state after the last layer (no final norm, no LM
    head); rope_cos / rope_sin [head_dim / 2] (float32) are the step's
    rotation, computed by the host. workers=None: one per SM of the default
    chip but one, left to the scheduler CTA that the attention's JIT queue
    needs (131 on the 132 SMs of an H100/H200).

    fuse=True: 6 tasks a layer (_fused_layer); fuse=False: every operator its
    own task, 11 a layer (_layer), each boundary a cross-SM synchronisation.
    fused_glu (with fuse; None: as fuse): the activation in the gate/up
    projection (Graph.linear_glu), the down projection a plain GEMV, as
    generation_graph has it on one GPU; False: the activation in the down
    projection (Graph.linear_silu). ctas_per_sm:
    CTAs sharing an SM (2: the generation graph's default; workers=None
    then fills them, one left to the scheduler CTA).

    rope_in_attention (with fuse): the generation graph's attention at the
    fixed position kv_len - 1 (Graph.rope_attention_at's pos): every split
    rotates its group's q heads and the group's splits write the cache
    row, one task fewer a layer; False: RoPE and the cache row a task of
    their own before the attention (bodies.rope_kv_append, attention_split,
    attention_combine; 7 tasks a layer). attention_tensor_cores: as
    generation_graph's (None: wherever the shape allows; with
    rope_in_attention only). merge_in_projection: as generation_graph's
    (with rope_in_attention only)."""
    if fused_glu is None:
        fused_glu = fuse
    if fused_glu and not fuse:
        raise ValueError("decode_graph: fused_glu needs fuse=True")
    if attention_tensor_cores and not (fuse and rope_in_attention):
        raise ValueError("decode_graph: attention_tensor_cores needs fuse=True and "
                         "rope_in_attention=True (the generation graph's attention)")
    if merge_in_projection and not (fuse and rope_in_attention):
        raise ValueError("decode_graph: merge_in_projection needs fuse=True and "
                         "rope_in_attention=True (the generation graph's attention)")
    H, D, dt = cfg.hidden, cfg.head_dim, cfg.dtype
    if workers is None:
        workers = default_workers(scheduler_ctas=1, ctas_per_sm=ctas_per_sm)
    g = Graph("decode", workers=workers, threads=threads, ctas_per_sm=ctas_per_sm)
    x = g.input("x", [H], dt)
    rot = (g.input("rope_cos", [D // 2], "float32"), g.input("rope_sin", [D // 2], "float32"))
    for l in range(cfg.layers):
        p = f"l{l}."
        w = {"attn_norm": g.weight(p + "attn_norm", [H], dt),
             "wqkv": g.weight(p + "wqkv", [(cfg.heads + 2 * cfg.kv_heads) * D, H], dt),
             "wo": g.weight(p + "wo", [H, cfg.heads * D], dt),
             "mlp_norm": g.weight(p + "mlp_norm", [H], dt),
             "wgu": g.weight(p + "wgu", [2 * cfg.intermediate, H], dt),
             "wd": g.weight(p + "wd", [H, cfg.intermediate], dt),
             "k_cache": g.cache(p + "k_cache", [cfg.kv_heads, cfg.kv_len, D], dt),
             "v_cache": g.cache(p + "v_cache", [cfg.kv_heads, cfg.kv_len, D], dt)}
        last = l == cfg.layers - 1
        if fuse:
            x = _fused_layer(g, cfg, p, x, rot, w, last, attention_splits, fused_glu,
                             rope_in_attention, attention_tensor_cores, merge_in_projection)
        else:
            x = _layer(g, cfg, p, x, rot, w, last, attention_splits)
    return g


def _layer(g, cfg, p, x, rot, w, last, splits):
    """One layer, one task per operator; returns the layer's output."""
    H, I, D, Hq, Hkv, dt = (cfg.hidden, cfg.intermediate, cfg.head_dim, cfg.heads,
                            cfg.kv_heads, cfg.dtype)
    h = g.scratch(p + "h", [H], dt)
    g.rmsnorm(x, w["attn_norm"], h, cfg.eps, name=p + "attn_norm")
    qkv = g.scratch(p + "qkv", [(Hq + 2 * Hkv) * D], dt)
    g.linear(w["wqkv"], h, qkv, name=p + "qkv")
    q = g.scratch(p + "q", [Hq * D], dt)
    k = g.scratch(p + "k", [Hkv * D], dt)
    g.rope(qkv, *rot, q, k, name=p + "rope")
    g.kv_append(k, qkv, w["k_cache"], w["v_cache"], cfg.kv_len - 1, name=p + "kv_append")
    attn = g.scratch(p + "attn", [Hq * D], dt)
    g.attention(q, w["k_cache"], w["v_cache"], attn, kv_len=cfg.kv_len, splits=splits,
                name=p + "attn")
    x1 = g.scratch(p + "x1", [H], dt)
    g.linear(w["wo"], attn, x1, residual=x, name=p + "wo")
    h2 = g.scratch(p + "h2", [H], dt)
    g.rmsnorm(x1, w["mlp_norm"], h2, cfg.eps, name=p + "mlp_norm")
    gu = g.scratch(p + "gu", [2 * I], dt)
    g.linear(w["wgu"], h2, gu, name=p + "wgu")
    act = g.scratch(p + "act", [I], dt)
    g.silu_mul(gu, act, name=p + "silu_mul")
    x2 = g.output("out", [H], dt) if last else g.scratch(p + "x2", [H], dt)
    g.linear(w["wd"], act, x2, residual=x1, name=p + "wd")
    return x2


def _fused_layer(g, cfg, p, x, rot, w, last, splits, fused_glu=False, rope_in_attention=True,
                 tensor_cores=None, merge_in_projection=False):
    """One layer in 6 tasks: qkv = wqkv @ rmsnorm(x); attention partials
    (RoPE and the cache row inside) and their merge; x1 = x + wo @ attn;
    gu = wgu @ rmsnorm(x1); x2 = x1 + wd @ silu_mul(gu) (7 without
    rope_in_attention: rope + kv_append a task before the attention). The
    same numbers as _layer (the fused bodies round where the unfused ones
    store). merge_in_projection: the output projection merges the
    attention's partials (5 tasks a layer)."""
    H, I, D, Hq, Hkv, dt = (cfg.hidden, cfg.intermediate, cfg.head_dim, cfg.heads,
                            cfg.kv_heads, cfg.dtype)
    qkv = g.scratch(p + "qkv", [(Hq + 2 * Hkv) * D], dt)
    g.linear(w["wqkv"], x, qkv, norm=w["attn_norm"], eps=cfg.eps, name=p + "qkv")
    if rope_in_attention:
        attn = None if merge_in_projection else g.scratch(p + "attn", [Hq * D], dt)
        # Marked variable as attention_split is (jit): the `auto` policy's
        # builds (mega_decode_jit) keep the attention on the JIT queue.
        task = g.rope_attention_at(qkv, *rot, None, w["k_cache"], w["v_cache"], attn,
                                   splits=splits, jit=True, name=p + "attn",
                                   tensor_cores=tensor_cores, pos=cfg.kv_len - 1,
                                   merge_in_projection=merge_in_projection)
        if merge_in_projection:
            attn = task   # the partials, which the output projection merges
    else:
        q = g.scratch(p + "q", [Hq * D], dt)
        g.rope_kv_append(qkv, *rot, q, w["k_cache"], w["v_cache"], cfg.kv_len - 1,
                         name=p + "rope_kv")
        attn = g.scratch(p + "attn", [Hq * D], dt)
        g.attention(q, w["k_cache"], w["v_cache"], attn, kv_len=cfg.kv_len, splits=splits,
                    name=p + "attn")
    x1 = g.scratch(p + "x1", [H], dt)
    g.linear(w["wo"], attn, x1, residual=x, name=p + "wo")
    if fused_glu:
        act = g.scratch(p + "act", [I], dt)
        g.linear_glu(w["wgu"], x1, act, norm=w["mlp_norm"], eps=cfg.eps, name=p + "wgu")
        x2 = g.output("out", [H], dt) if last else g.scratch(p + "x2", [H], dt)
        g.linear(w["wd"], act, x2, residual=x1, name=p + "wd")
        return x2
    gu = g.scratch(p + "gu", [2 * I], dt)
    g.linear(w["wgu"], x1, gu, norm=w["mlp_norm"], eps=cfg.eps, name=p + "wgu")
    x2 = g.output("out", [H], dt) if last else g.scratch(p + "x2", [H], dt)
    g.linear_silu(w["wd"], gu, x2, residual=x1, name=p + "wd")
    return x2


def mlp_graph(hidden=2048, intermediate=8192, workers=None, threads=256, eps=1e-5,
              fuse=True, fused_glu=False, ctas_per_sm=1) -> Graph:
    """out = wd @ (silu(gate) * up), [gate; up] = wgu @ rmsnorm(x, norm_w)
    (no residual), as reference.MlpChain: 2 tasks with fuse=True
    (gemv_rmsnorm, gemv_silu; with fused_glu gemv_rmsnorm_glu, gemv), 4 with
    fuse=False. ctas_per_sm: as decode_graph's (fused_glu with 2 is the
    generation graph's MLP)."""
    if fused_glu and not fuse:
        raise ValueError("mlp_graph: fused_glu needs fuse=True")
    g = Graph("mlp", workers=workers, threads=threads, ctas_per_sm=ctas_per_sm)
    x = g.input("x", [hidden])
    norm_w = g.weight("norm_w", [hidden])
    wgu = g.weight("wgu", [2 * intermediate, hidden])
    wd = g.weight("wd", [hidden, intermediate])
    out = g.output("out", [hidden])
    if fuse and fused_glu:
        act = g.scratch("act", [intermediate])
        g.linear_glu(wgu, x, act, norm=norm_w, eps=eps, name="wgu")
        g.linear(wd, act, out, name="wd")
        return g
    if fuse:
        gu = g.scratch("gu", [2 * intermediate])
        g.linear(wgu, x, gu, norm=norm_w, eps=eps, name="wgu")
        g.linear_silu(wd, gu, out, name="wd")
        return g
    h = g.scratch("h", [hidden])
    g.rmsnorm(x, norm_w, h, eps)
    gu = g.scratch("gu", [2 * intermediate])
    g.linear(wgu, h, gu, name="wgu")
    act = g.scratch("act", [intermediate])
    g.silu_mul(gu, act)
    g.linear(wd, act, out, name="wd")
    return g


# ------------------------------------------------------------------ generation

@dataclass
class ModelConfig:
    """A decoder-only Llama / Qwen2 model as the generation graph serves it.

    Field names follow transformers' config.json where there is one
    (hidden_size -> hidden, ...; tilemega.mega.checkpoint maps them). The
    rope tables are inputs of the graph (computed on the host from
    rope_theta / rope_scaling, rope.py), so they do not shape it."""
    layers: int = 16
    hidden: int = 2048
    intermediate: int = 8192
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 64
    vocab: int = 128256
    max_seq_len: int = 4096
    eps: float = 1e-5
    qkv_bias: bool = False
    tie_embeddings: bool = True
    rope_theta: float = 500000.0
    rope_scaling: Optional[dict] = None
    dtype: str = "bfloat16"

    # The limits of the bodies, checked once here with the field they concern.
    MAX_SEQ_LEN = 32768

    def check(self, source="config"):
        """ValueError naming the field of `source` (the config, a config.json
        path) that the generation graph cannot serve; returns self."""
        def bad(field, why):
            raise ValueError(f"{source}: {field}: {why}")

        for field in ("layers", "hidden", "intermediate", "heads", "kv_heads", "head_dim",
                      "vocab", "max_seq_len"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                bad(field, f"must be a positive int, got {value!r}")
        if self.heads % self.kv_heads:
            bad("kv_heads", f"{self.kv_heads} does not divide heads ({self.heads})")
        if not 1 <= self.heads // self.kv_heads <= 16:
            bad("kv_heads", f"a group of {self.heads // self.kv_heads} query heads per kv "
                            "head; 1 to 16 are supported")
        if self.head_dim not in (64, 128):
            bad("head_dim", f"{self.head_dim}; 64 and 128 are supported")
        for field in ("hidden", "intermediate"):
            if getattr(self, field) % 64:
                bad(field, f"{getattr(self, field)} is not a multiple of 64")
        if self.max_seq_len > self.MAX_SEQ_LEN or self.max_seq_len % 64:
            bad("max_seq_len", f"{self.max_seq_len}: a multiple of 64 up to "
                               f"{self.MAX_SEQ_LEN} (key chunks of the attention)")
        if self.vocab >= 1 << 24:
            bad("vocab", f"{self.vocab} is over 2^24 (the pick carries indices as floats)")
        if self.dtype != "bfloat16":
            bad("dtype", f"{self.dtype!r}; the generation graph runs bfloat16")
        if not self.eps > 0:
            bad("eps", f"must be > 0, got {self.eps!r}")
        return self


def generation_threads(cfg: ModelConfig) -> int:
    """Threads of the generation graph's CTAs: 256 when the hidden and MLP
    sizes spread over them (a vector of `hidden` is a [1, hidden] fragment
    of whole chunks of threads), else 128 or 64 (hidden 896 of Qwen2-0.5B
    runs on 128)."""
    for threads in (256, 128, 64):
        if cfg.hidden % threads == 0 and cfg.intermediate % threads == 0:
            return threads
    raise ValueError(f"hidden ({cfg.hidden}) and intermediate ({cfg.intermediate}) must be "
                     "multiples of 64")


# CTAs an SM of a one-GPU generation kernel. Two fit (per-body thread ids
# keep the registers under 128, the shared memory is under half an SM's)
# and ran 3.5 % and 2.8 % faster than one on an H100, in two A/Bs
# (docs/results/generate_ab_options_h100.json, generate_ab_ctas_h100.json).
GENERATION_CTAS_PER_SM = 2
# The projections of generation_graph whose units rows_per_unit and gemv_stages size.
GENERATION_PROJECTIONS = ("qkv", "wo", "wgu", "wd", "lm_head")


def _per_projection(option, mapping, what):
    """generation_graph's `option` (rows_per_unit, gemv_stages) as
    {projection: positive int or None}; `what` names the count."""
    out = dict.fromkeys(GENERATION_PROJECTIONS)
    for name, value in (mapping or {}).items():
        if name not in out:
            raise ValueError(f"{option}: {name!r} is not a projection of the "
                             f"generation graph ({', '.join(GENERATION_PROJECTIONS)})")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{option}[{name!r}]: {value!r} is not a positive "
                             f"number of {what}")
        out[name] = value
    return out


def generation_graph(cfg: ModelConfig, workers=None, threads=None, attention_splits=8,
                     jit_attention=False, rope_in_attention=True, world=1,
                     ctas_per_sm=None, fused_glu=None, key_block=None,
                     workers_by_sm=False, merge_in_split=False,
                     attention_tensor_cores=None, merge_in_projection=False,
                     rows_per_unit=None, gemv_stages=None) -> Graph:
    """One decode step of `cfg` at the position the device state says
    (generation_state.py): embedding of tokens[pos], every layer (the fused
    7 tasks of decode_graph, the cache row at pos, attention over pos + 1
    keys), the final RMSNorm, the LM head into `logits` [vocab] and the
    greedy pick, which appends the next token and advances the state.
    Launched repeatedly (or replayed from a CUDA graph) it generates.

    Tensors (names as checkpoint.py loads them): embed [vocab, hidden];
    lm_head (unless tie_embeddings: the LM head reads embed); final_norm;
    rope_cos / rope_sin [max_seq_len, head_dim/2] f32; per layer l{i}.attn_norm,
    .wqkv, .bqkv (qkv_bias), .wo, .mlp_norm, .wgu, .wd and the caches
    l{i}.k_cache / .v_cache [kv_heads, max_seq_len, head_dim]; the state
    tokens [max_seq_len] and gen [GEN_WORDS] (int32, role cache), sampling
    [1] f32 (the inverse temperature, 0 for greedy); the output logits.
    A launch runs one step, or up to max_seq_len steps when the runtime
    sets a step limit (MegaKernel.set_step_limit), stopping at DONE.
    jit_attention: the attention partials on the JIT queue (Graph.attention_at).
    rope_in_attention: RoPE and the cache row inside the attention's
    partials (Graph.rope_attention_at, 6 tasks a layer); False keeps them a
    task of their own (Graph.rope_kv_at, 7 tasks a layer). key_block: keys
    a chunk of the attention (generation_bodies.attention_at_config; None:
    64 on Llama-3.2-1B). 128 (one chunk a split at positions 512-640, not
    two) measured no faster on an H100: 1.0373 / 1.0372 against 1.0408 /
    1.0365 ms/token (docs/results/generate_ab_key_block_h100.json).

    world > 1: the graph one rank of `world` GPUs runs (Graph(ranks=world),
    tensor_parallel.py): the rank's heads, kv heads, MLP columns and
    vocabulary rows (tensor_parallel.shard names and shapes its tensors;
    the LM head is always `head`, the rank's rows, tied or not), the
    output and down projections' partial sums all-reduced with the residual
    add (Graph.all_reduce), the pick over every rank's partials
    (Graph.pick_next_ranks), the rank in `rank` (int32 [1]); the
    attention on the AOT queues and no scheduler CTA (the multi-rank
    simulator models no JIT queue).

    ctas_per_sm: CTAs sharing an SM (None: GENERATION_CTAS_PER_SM on one
    GPU, 1 over ranks); workers=None fills them, less the scheduler's.

    fused_glu (None: on for one GPU, off over ranks): the gate/up
    projection computes silu(gate) * up in its epilogue (Graph.linear_glu)
    into `l{i}.act` [intermediate], and the down projection is a plain GEMV
    of it, rather than recomputing the activation from `l{i}.gu` in every
    unit (Graph.linear_silu); the same numbers, 1.7 % faster on an H100
    (docs/benchmarks.md). Over ranks the down projection's partial sums
    keep the activation (fused_glu=True is refused there: untested).

    workers_by_sm (off; not yet measured on a GPU): each CTA takes a worker
    index its SM stands for (mega.graph workers_by_sm), and mega-schedule
    gives the attention's split and merge tasks (latency-bound) SMs of
    their own, so that the output and gate/up projections' early loads
    run on the other SMs while the attention waits on its round trips
    (docs/mega.md, "What the per-entry timeline says").

    merge_in_split (off; one GPU only): no attention merge task; each kv
    group's last split merges the group's partials (Graph.attention_at's
    merge_in_split): a stage and its boundary fewer a layer, measured no
    faster on an H100 (1.0122 against 1.0135 ms/token; docs/mega.md,
    "Merge in the last split").

    merge_in_projection (off; one GPU only): no attention merge task; every
    unit of the output projection merges the partials itself after its
    wait, its weights loaded early (merged_projection.gemv_merge): a stage
    and its boundary fewer a layer, but each of the 256 units reads all
    64 KB of partials from L2 (16 MB a layer): measured slower on an H100,
    1.0553 against 1.0000 ms/token (docs/mega.md, "Merge in the output
    projection").

    attention_tensor_cores (None: wherever the shape allows): the
    attention's scores and outputs on mma.sync (the group's rows padded to
    a 16-row tile) rather than CUDA cores
    (generation_bodies.attention_at_config; None takes them when
    generation_bodies.tensor_cores_serve says the shape fits, False keeps
    CUDA cores, True refuses a shape that does not fit). Measured 1.4-1.9 %
    faster per token than CUDA cores on an H100 in three runs, both orders
    (docs/mega.md, "Attention on tensor cores").

    rows_per_unit (None: graph.gemv_rows_per_unit's choice for every
    projection): {projection: rows} for any of GENERATION_PROJECTIONS, the
    rows of W one unit of that projection streams (gate/up: rows of each
    half). gemv_stages (None: bodies.GEMV_STAGES): {projection: stages}, the
    most stages of W a unit of it keeps in flight (bodies.gemv_config; the
    early prologue is one fewer). Not for the down projection of
    fused_glu=False, nor a merged output projection."""
    from . import generation_bodies as gbodies
    from .generation_state import DONE, GEN_WORDS
    from .tensor_parallel import check_world

    cfg.check()
    local = check_world(cfg, world)
    if fused_glu is None:
        fused_glu = world == 1
    if world > 1 and fused_glu:
        raise ValueError("fused_glu: graphs of several ranks keep the activation in the down "
                         "projection")
    if world > 1 and merge_in_split:
        raise ValueError("merge_in_split: graphs of several ranks keep the attention's merge "
                         "task (the merge in the last split is not checked on ranks)")
    if world > 1 and merge_in_projection:
        raise ValueError("merge_in_projection: graphs of several ranks keep the attention's "
                         "merge task (their projection sums partial products)")
    if world > 1 and jit_attention:
        raise ValueError("jit_attention: a graph of several ranks keeps its attention on the "
                         "AOT queues")
    rows = _per_projection("rows_per_unit", rows_per_unit, "rows")
    stages = _per_projection("gemv_stages", gemv_stages, "stages")
    if stages["wd"] is not None and not fused_glu:
        raise ValueError("gemv_stages: the down projection of fused_glu=False "
                         "(bodies.gemv_silu) keeps the default stages")
    threads = threads or generation_threads(local)
    H, D, S, V, dt = cfg.hidden, cfg.head_dim, cfg.max_seq_len, cfg.vocab, cfg.dtype
    Hq, Hkv, I = local.heads, local.kv_heads, local.intermediate
    if ctas_per_sm is None:
        ctas_per_sm = GENERATION_CTAS_PER_SM if world == 1 else 1
    if workers is None:
        workers = default_workers(scheduler_ctas=1 if world == 1 else 0,
                                  ctas_per_sm=ctas_per_sm)
    if world == 1:
        g = Graph("generate", workers=workers, threads=threads, ctas_per_sm=ctas_per_sm,
                  workers_by_sm=workers_by_sm)
    else:
        g = Graph("generate", workers=workers, threads=threads, schedulers=0, ranks=world,
                  ctas_per_sm=ctas_per_sm, workers_by_sm=workers_by_sm)
        rank = g.input("rank", [1], "int32")
    def project(linear, W, inp, out, residual, name):
        """out = W @ inp + residual (linear: Graph.linear or linear_silu);
        over ranks the rank's partial product, all-reduced after the
        residual (row-parallel W)."""
        role = name.rsplit(".", 1)[-1]
        sizes = dict(rows_per_unit=rows[role])
        if stages[role] is not None:
            sizes["stages"] = stages[role]
        if world == 1:
            return linear(W, inp, out, residual=residual, name=name, **sizes)
        part = g.scratch(name + "_part", [out.size], dt)
        linear(W, inp, part, name=name, **sizes)
        return g.all_reduce(part, out, residual=residual, rank=rank, name=name + "_sum")

    embed = g.weight("embed", [V, H], dt)
    rot = (g.weight("rope_cos", [S, D // 2], "float32"),
           g.weight("rope_sin", [S, D // 2], "float32"))
    tokens = g.cache("tokens", [S], "int32")
    gen = g.cache("gen", [GEN_WORDS], "int32")
    sampling = g.cache("sampling", [gbodies.SAMPLING_WORDS], "float32")
    x = g.scratch("x", [H], dt)
    g.embed_token(embed, tokens, gen, x, name="embed")
    for layer in range(cfg.layers):
        p = f"l{layer}."
        qkv_n = (Hq + 2 * Hkv) * D
        w = {"attn_norm": g.weight(p + "attn_norm", [H], dt),
             "wqkv": g.weight(p + "wqkv", [qkv_n, H], dt),
             "bqkv": g.weight(p + "bqkv", [qkv_n], dt) if cfg.qkv_bias else None,
             "wo": g.weight(p + "wo", [H, Hq * D], dt),
             "mlp_norm": g.weight(p + "mlp_norm", [H], dt),
             "wgu": g.weight(p + "wgu", [2 * I, H], dt),
             "wd": g.weight(p + "wd", [H, I], dt),
             "k_cache": g.cache(p + "k_cache", [Hkv, S, D], dt),
             "v_cache": g.cache(p + "v_cache", [Hkv, S, D], dt)}
        qkv = g.scratch(p + "qkv", [qkv_n], dt)
        g.linear(w["wqkv"], x, qkv, norm=w["attn_norm"], eps=cfg.eps, bias=w["bqkv"],
                 rows_per_unit=rows["qkv"], stages=stages["qkv"], name=p + "qkv")
        attn = None if merge_in_projection else g.scratch(p + "attn", [Hq * D], dt)
        if rope_in_attention:
            task = g.rope_attention_at(qkv, *rot, gen, w["k_cache"], w["v_cache"], attn,
                                       splits=attention_splits, jit=jit_attention,
                                       name=p + "attn", key_block=key_block,
                                       merge_in_split=merge_in_split,
                                       tensor_cores=attention_tensor_cores,
                                       merge_in_projection=merge_in_projection)
        else:
            q = g.scratch(p + "q", [Hq * D], dt)
            g.rope_kv_at(qkv, *rot, gen, q, w["k_cache"], w["v_cache"], name=p + "rope_kv")
            task = g.attention_at(q, w["k_cache"], w["v_cache"], gen, attn,
                                  splits=attention_splits, jit=jit_attention, name=p + "attn",
                                  key_block=key_block, merge_in_split=merge_in_split,
                                  tensor_cores=attention_tensor_cores,
                                  merge_in_projection=merge_in_projection)
        if merge_in_projection:
            attn = task   # the partials, which the output projection merges
        x1 = g.scratch(p + "x1", [H], dt)
        project(g.linear, w["wo"], attn, x1, x, p + "wo")
        if fused_glu:
            act = g.scratch(p + "act", [I], dt)
            g.linear_glu(w["wgu"], x1, act, norm=w["mlp_norm"], eps=cfg.eps,
                         rows_per_unit=rows["wgu"], stages=stages["wgu"], name=p + "wgu")
            x2 = g.scratch(p + "x2", [H], dt)
            project(g.linear, w["wd"], act, x2, x1, p + "wd")
        else:
            gu = g.scratch(p + "gu", [2 * I], dt)
            g.linear(w["wgu"], x1, gu, norm=w["mlp_norm"], eps=cfg.eps,
                     rows_per_unit=rows["wgu"], stages=stages["wgu"], name=p + "wgu")
            x2 = g.scratch(p + "x2", [H], dt)
            project(g.linear_silu, w["wd"], gu, x2, x1, p + "wd")
        x = x2
    final_norm = g.weight("final_norm", [H], dt)
    if world == 1:
        head = embed if cfg.tie_embeddings else g.weight("lm_head", [V, H], dt)
    else:
        head = g.weight("head", [local.vocab, H], dt)
    logits = g.output("logits", [local.vocab], dt)
    g.linear(head, x, logits, norm=final_norm, eps=cfg.eps, rows_per_unit=rows["lm_head"],
             stages=stages["lm_head"], name="lm_head")
    if world == 1:
        g.pick_next(logits, tokens, gen, sampling, name="pick")
    else:
        g.pick_next_ranks(logits, tokens, gen, sampling, rank, name="pick")
    # One launch may run a whole generation: it stops after the step that
    # sets DONE (at max_new_tokens, EOS or the end of the cache).
    g.repeat_until(gen, DONE, max_steps=S)
    return g
