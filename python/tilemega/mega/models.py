"""Graphs of whole models: one Llama decode step, and the MLP chain.

Tensor names match reference.py (weights `l{l}.wqkv` ..., caches
`l{l}.k_cache`, inputs `x`, `rope_cos`, `rope_sin`, output `out`), so the
runtime and the reference exchange tensors by name. Every intermediate of
every layer is its own scratch tensor (SSA style): no task overwrites what an
earlier task still reads, so the only hazards are true dependencies.
"""

from dataclasses import dataclass

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
                 fuse=True) -> Graph:
    """One batch-1 decode step of `cfg.layers` layers: the new token's k/v go
    to position kv_len - 1 of the caches and attention runs over kv_len keys.
    `out` is the hidden state after the last layer (no final norm, no LM
    head); rope_cos / rope_sin [head_dim / 2] (float32) are the step's
    rotation, computed by the host. workers=None: one per SM of the default
    chip but one, left to the scheduler CTA that the attention's JIT queue
    needs (131 on the 132 SMs of an H100/H200).

    fuse=True: 7 tasks a layer (_fused_layer); fuse=False: every operator its
    own task, 11 a layer (_layer), each boundary a cross-SM synchronisation."""
    H, D, dt = cfg.hidden, cfg.head_dim, cfg.dtype
    if workers is None:
        workers = default_workers(scheduler_ctas=1)
    g = Graph("decode", workers=workers, threads=threads)
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
        x = (_fused_layer if fuse else _layer)(g, cfg, p, x, rot, w, last, attention_splits)
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


def _fused_layer(g, cfg, p, x, rot, w, last, splits):
    """One layer in 7 tasks: qkv = wqkv @ rmsnorm(x); rope + kv_append;
    attention split + combine; x1 = x + wo @ attn; gu = wgu @ rmsnorm(x1);
    x2 = x1 + wd @ silu_mul(gu). The same numbers as _layer (the fused
    bodies round where the unfused ones store)."""
    H, I, D, Hq, Hkv, dt = (cfg.hidden, cfg.intermediate, cfg.head_dim, cfg.heads,
                            cfg.kv_heads, cfg.dtype)
    qkv = g.scratch(p + "qkv", [(Hq + 2 * Hkv) * D], dt)
    g.linear(w["wqkv"], x, qkv, norm=w["attn_norm"], eps=cfg.eps, name=p + "qkv")
    q = g.scratch(p + "q", [Hq * D], dt)
    g.rope_kv_append(qkv, *rot, q, w["k_cache"], w["v_cache"], cfg.kv_len - 1,
                     name=p + "rope_kv")
    attn = g.scratch(p + "attn", [Hq * D], dt)
    g.attention(q, w["k_cache"], w["v_cache"], attn, kv_len=cfg.kv_len, splits=splits,
                name=p + "attn")
    x1 = g.scratch(p + "x1", [H], dt)
    g.linear(w["wo"], attn, x1, residual=x, name=p + "wo")
    gu = g.scratch(p + "gu", [2 * I], dt)
    g.linear(w["wgu"], x1, gu, norm=w["mlp_norm"], eps=cfg.eps, name=p + "wgu")
    x2 = g.output("out", [H], dt) if last else g.scratch(p + "x2", [H], dt)
    g.linear_silu(w["wd"], gu, x2, residual=x1, name=p + "wd")
    return x2


def mlp_graph(hidden=2048, intermediate=8192, workers=None, threads=256, eps=1e-5,
              fuse=True) -> Graph:
    """out = wd @ (silu(gate) * up), [gate; up] = wgu @ rmsnorm(x, norm_w)
    (no residual), as reference.MlpChain: 2 tasks with fuse=True
    (gemv_rmsnorm, gemv_silu), 4 with fuse=False."""
    g = Graph("mlp", workers=workers, threads=threads)
    x = g.input("x", [hidden])
    norm_w = g.weight("norm_w", [hidden])
    wgu = g.weight("wgu", [2 * intermediate, hidden])
    wd = g.weight("wd", [hidden, intermediate])
    out = g.output("out", [hidden])
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
