"""Graphs of whole models: one Llama decode step, and the MLP chain.

Tensor names match reference.py (weights `l{l}.wqkv` ..., caches
`l{l}.k_cache`, inputs `x`, `rope_cos`, `rope_sin`, output `out`), so the
runtime and the reference exchange tensors by name. Every intermediate of
every layer is its own scratch tensor (SSA style): no task overwrites what an
earlier task still reads, so the only hazards are true dependencies.
"""

from dataclasses import dataclass

from .graph import Graph


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


def decode_graph(cfg: LlamaConfig, workers=132, threads=256, attention_splits=8) -> Graph:
    """One batch-1 decode step of `cfg.layers` layers: the new token's k/v go
    to position kv_len - 1 of the caches and attention runs over kv_len keys.
    `out` is the hidden state after the last layer (no final norm, no LM
    head); rope_cos / rope_sin [head_dim / 2] (float32) are the step's
    rotation, computed by the host."""
    H, I, D = cfg.hidden, cfg.intermediate, cfg.head_dim
    Hq, Hkv, dt = cfg.heads, cfg.kv_heads, cfg.dtype
    pos = cfg.kv_len - 1
    g = Graph("decode", workers=workers, threads=threads)
    x = g.input("x", [H], dt)
    cos = g.input("rope_cos", [D // 2], "float32")
    sin = g.input("rope_sin", [D // 2], "float32")
    for l in range(cfg.layers):
        p = f"l{l}."
        attn_norm = g.weight(p + "attn_norm", [H], dt)
        wqkv = g.weight(p + "wqkv", [(Hq + 2 * Hkv) * D, H], dt)
        wo = g.weight(p + "wo", [H, Hq * D], dt)
        mlp_norm = g.weight(p + "mlp_norm", [H], dt)
        wgu = g.weight(p + "wgu", [2 * I, H], dt)
        wd = g.weight(p + "wd", [H, I], dt)
        k_cache = g.cache(p + "k_cache", [Hkv, cfg.kv_len, D], dt)
        v_cache = g.cache(p + "v_cache", [Hkv, cfg.kv_len, D], dt)

        h = g.scratch(p + "h", [H], dt)
        g.rmsnorm(x, attn_norm, h, cfg.eps, name=p + "attn_norm")
        qkv = g.scratch(p + "qkv", [(Hq + 2 * Hkv) * D], dt)
        g.linear(wqkv, h, qkv, name=p + "qkv")
        q = g.scratch(p + "q", [Hq * D], dt)
        k = g.scratch(p + "k", [Hkv * D], dt)
        g.rope(qkv, cos, sin, q, k, name=p + "rope")
        g.kv_append(k, qkv, k_cache, v_cache, pos, name=p + "kv_append")
        attn = g.scratch(p + "attn", [Hq * D], dt)
        g.attention(q, k_cache, v_cache, attn, kv_len=cfg.kv_len,
                    splits=attention_splits, name=p + "attn")
        x1 = g.scratch(p + "x1", [H], dt)
        g.linear(wo, attn, x1, residual=x, name=p + "wo")
        h2 = g.scratch(p + "h2", [H], dt)
        g.rmsnorm(x1, mlp_norm, h2, cfg.eps, name=p + "mlp_norm")
        gu = g.scratch(p + "gu", [2 * I], dt)
        g.linear(wgu, h2, gu, name=p + "wgu")
        act = g.scratch(p + "act", [I], dt)
        g.silu_mul(gu, act, name=p + "silu_mul")
        last = l == cfg.layers - 1
        x2 = g.output("out", [H], dt) if last else g.scratch(p + "x2", [H], dt)
        g.linear(wd, act, x2, residual=x1, name=p + "wd")
        x = x2
    return g


def mlp_graph(hidden=2048, intermediate=8192, workers=132, threads=256, eps=1e-5) -> Graph:
    """out = wd @ (silu(gate) * up), [gate; up] = wgu @ rmsnorm(x, norm_w)
    (no residual), as reference.MlpChain."""
    g = Graph("mlp", workers=workers, threads=threads)
    x = g.input("x", [hidden])
    norm_w = g.weight("norm_w", [hidden])
    wgu = g.weight("wgu", [2 * intermediate, hidden])
    wd = g.weight("wd", [hidden, intermediate])
    out = g.output("out", [hidden])
    h = g.scratch("h", [hidden])
    g.rmsnorm(x, norm_w, h, eps)
    gu = g.scratch("gu", [2 * intermediate])
    g.linear(wgu, h, gu, name="wgu")
    act = g.scratch("act", [intermediate])
    g.silu_mul(gu, act)
    g.linear(wd, act, out, name="wd")
    return g
