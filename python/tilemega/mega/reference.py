"""PyTorch reference of one batch-1 Llama decode step and of the MLP chain.

bench/decode.py times `LlamaDecodeStep` (eager and under a CUDA graph) next to
the mega-kernel and checks both against `reference_float64`. A config is any
object with layers, hidden, intermediate, heads, kv_heads, head_dim, kv_len,
eps, rope_theta and dtype (tilemega.mega.graph.LlamaConfig is one); this module
does not import graph.py, which needs the compiler the GPU machine lacks.

torch is imported only when used: the shapes, `bytes_per_step` and the float64
references (numpy) work without it. `LlamaDecodeStep` and `MlpChain` are
torch.nn.Module classes built at first access (module __getattr__).
"""

import functools
import math

import numpy as np

_ITEMSIZE = {"bfloat16": 2, "float16": 2, "float32": 4}


def weight_shapes(cfg):
    """name -> shape of every tensor `make_weights` returns, in creation order."""
    hq, hkv, d, h, i = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.hidden, cfg.intermediate
    shapes = {}
    for layer in range(cfg.layers):
        p = f"l{layer}."
        shapes[p + "attn_norm"] = (h,)
        shapes[p + "wqkv"] = ((hq + 2 * hkv) * d, h)
        shapes[p + "wo"] = (h, hq * d)
        shapes[p + "mlp_norm"] = (h,)
        shapes[p + "wgu"] = (2 * i, h)
        shapes[p + "wd"] = (h, i)
        shapes[p + "k_cache"] = (hkv, cfg.kv_len, d)
        shapes[p + "v_cache"] = (hkv, cfg.kv_len, d)
    shapes["x"] = (h,)
    shapes["rope_cos"] = (d // 2,)
    shapes["rope_sin"] = (d // 2,)
    return shapes


def bytes_per_step(cfg):
    """Bytes one step must read from HBM: every layer's weights and its whole
    KV cache (x and the rope tables are a few KiB and left out)."""
    itemsize = _ITEMSIZE[cfg.dtype]
    return sum(math.prod(s) for n, s in weight_shapes(cfg).items() if n.startswith("l")) * itemsize


def mlp_bytes(hidden, intermediate, itemsize=2):
    """Bytes the MLP chain reads: norm weight, gate/up and down projections."""
    return (hidden + 3 * intermediate * hidden) * itemsize


def rope_angles(cfg):
    """float64 angles pos * theta^(-2j/D), j < D/2, for pos = kv_len - 1."""
    d = cfg.head_dim
    j = np.arange(d // 2, dtype=np.float64)
    return (cfg.kv_len - 1) * cfg.rope_theta ** (-2.0 * j / d)


def make_weights(cfg, seed=0, device="cuda"):
    """Random weights, KV caches and inputs with the names of `weight_shapes`.

    Projections are normal / sqrt(fan_in) and norms 1 + 0.05 * normal, as in a
    trained model, so that activations stay O(1) through the layers in bf16.
    Cache positions < kv_len - 1 are normal; the last one is zero (the step
    writes it).
    """
    import torch

    dtype = getattr(torch, cfg.dtype)
    gen = torch.Generator(device=device).manual_seed(seed)
    out = {}
    for name, shape in weight_shapes(cfg).items():
        kind = name.split(".")[-1]
        if kind.startswith("rope"):
            continue
        r = torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
        if kind.endswith("norm"):
            r = 1.0 + 0.05 * r
        elif kind.startswith("w"):
            r = r / math.sqrt(shape[1])
        elif kind.endswith("cache"):
            r[:, -1] = 0.0
        out[name] = r.to(dtype)
    angles = torch.from_numpy(rope_angles(cfg))
    out["rope_cos"] = torch.cos(angles).to(device=device, dtype=torch.float32)
    out["rope_sin"] = torch.sin(angles).to(device=device, dtype=torch.float32)
    return out


def make_mlp_weights(hidden, intermediate, seed=0, device="cuda", dtype="bfloat16"):
    """x, norm_w, wgu [2I, H] (gate rows first), wd [H, I], and a zero `out`."""
    import torch

    dt = getattr(torch, dtype)
    gen = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape):
        return torch.randn(shape, generator=gen, device=device, dtype=torch.float32)

    return {"x": randn(hidden).to(dt),
            "norm_w": (1.0 + 0.05 * randn(hidden)).to(dt),
            "wgu": (randn(2 * intermediate, hidden) / math.sqrt(hidden)).to(dt),
            "wd": (randn(hidden, intermediate) / math.sqrt(intermediate)).to(dt),
            "out": torch.zeros(hidden, device=device, dtype=dt)}


# ----------------------------------------------------------- float64 (numpy)


def _f64(t):
    """A float64 numpy copy of a torch tensor (any device) or array."""
    if hasattr(t, "detach"):
        import torch

        # copy=True: a CPU float64 tensor would otherwise be shared, not copied.
        return t.detach().to(device="cpu", dtype=torch.float64, copy=True).numpy()
    return np.array(t, dtype=np.float64)


def _rmsnorm64(x, w, eps):
    return x / np.sqrt(np.mean(x * x) + eps) * w


def _silu_mul64(gu):
    gate, up = np.split(gu, 2)
    return gate / (1.0 + np.exp(-gate)) * up


def _rope64(t, cos, sin):
    x1, x2 = np.split(t, 2, axis=-1)
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def reference_float64(cfg, weights, x=None, rope_cos=None, rope_sin=None):
    """The decode step in float64 numpy on copies (the inputs are not touched).

    Tensors default to weights["x"], ["rope_cos"], ["rope_sin"]. Converts one
    layer at a time (a float64 copy of all 1B-model weights would be 16 GB).
    Returns the final x as a float64 array [hidden].
    """
    hq, hkv, d = cfg.heads, cfg.kv_heads, cfg.head_dim
    pos = cfg.kv_len - 1
    x = _f64(weights["x"] if x is None else x)
    cos = _f64(weights["rope_cos"] if rope_cos is None else rope_cos)
    sin = _f64(weights["rope_sin"] if rope_sin is None else rope_sin)
    for layer in range(cfg.layers):
        def w(name, prefix=f"l{layer}."):
            return _f64(weights[prefix + name])

        qkv = w("wqkv") @ _rmsnorm64(x, w("attn_norm"), cfg.eps)
        q, k, v = np.split(qkv, [hq * d, (hq + hkv) * d])
        q = _rope64(q.reshape(hq, d), cos, sin)
        kc, vc = w("k_cache"), w("v_cache")
        kc[:, pos] = _rope64(k.reshape(hkv, d), cos, sin)
        vc[:, pos] = v.reshape(hkv, d)
        # q head h reads kv head h // group: view q as [kv_heads, group, D].
        scores = np.einsum("kgd,kld->kgl", q.reshape(hkv, hq // hkv, d), kc) / math.sqrt(d)
        p = np.exp(scores - scores.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        attn = np.einsum("kgl,kld->kgd", p, vc).reshape(hq * d)
        x = x + w("wo") @ attn
        x = x + w("wd") @ _silu_mul64(w("wgu") @ _rmsnorm64(x, w("mlp_norm"), cfg.eps))
    return x


def mlp_reference_float64(weights, eps=1e-5, x=None):
    """wd @ (silu(gate) * up), gate/up = wgu @ rmsnorm(x, norm_w), in float64."""
    x = _f64(weights["x"] if x is None else x)
    h = _rmsnorm64(x, _f64(weights["norm_w"]), eps)
    return _f64(weights["wd"]) @ _silu_mul64(_f64(weights["wgu"]) @ h)


def compare(ours, ref):
    """max_abs and relative L2 (||ours - ref|| / ||ref||) of two tensors/arrays."""
    a, b = _f64(ours).ravel(), _f64(ref).ravel()
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    diff = a - b
    return {"max_abs": float(np.max(np.abs(diff))),
            "rel_l2": float(np.linalg.norm(diff) / np.linalg.norm(b))}


# ----------------------------------------------------------- torch modules


@functools.lru_cache(maxsize=None)
def _torch_classes():
    import torch
    import torch.nn.functional as F

    def rmsnorm(x, w32, eps):
        # fp32 math, bf16 out; w32 is the norm weight pre-cast to fp32.
        return F.rms_norm(x.float(), (x.shape[-1],), w32, eps).to(x.dtype)

    def rope(t, cos, sin):
        t1, t2 = t.float().chunk(2, dim=-1)
        return torch.cat((t1 * cos - t2 * sin, t2 * cos + t1 * sin), dim=-1).to(t.dtype)

    class LlamaDecodeStep(torch.nn.Module):
        """One batch-1 decode step as a careful eager PyTorch user writes it:
        fused QKV and gate/up weights, one rope call for q and k together,
        F.rms_norm, and SDPA with q viewed as [kv_heads, group, D] queries
        (GQA with no expanded K/V and no mask: decode attends every position).
        Uses the tensors of `weights` in place: forward writes the caches."""

        def __init__(self, cfg, weights):
            super().__init__()
            self.cfg = cfg
            self.pos = cfg.kv_len - 1
            self.layers = []
            for layer in range(cfg.layers):
                w = {k.split(".", 1)[1]: v for k, v in weights.items()
                     if k.startswith(f"l{layer}.")}
                for norm in ("attn_norm", "mlp_norm"):
                    w[norm] = w[norm].float()
                self.layers.append(w)

        def forward(self, x, rope_cos, rope_sin):
            c = self.cfg
            hq, hkv, d = c.heads, c.kv_heads, c.head_dim
            for w in self.layers:
                qkv = F.linear(rmsnorm(x, w["attn_norm"], c.eps), w["wqkv"])
                qk = rope(qkv[:(hq + hkv) * d].view(hq + hkv, d), rope_cos, rope_sin)
                w["k_cache"][:, self.pos] = qk[hq:]
                w["v_cache"][:, self.pos] = qkv[(hq + hkv) * d:].view(hkv, d)
                attn = F.scaled_dot_product_attention(
                    qk[:hq].view(1, hkv, hq // hkv, d), w["k_cache"][None], w["v_cache"][None])
                x = x + F.linear(attn.reshape(hq * d), w["wo"])
                gate, up = F.linear(rmsnorm(x, w["mlp_norm"], c.eps), w["wgu"]).chunk(2)
                x = x + F.linear(F.silu(gate) * up, w["wd"])
            return x

    class MlpChain(torch.nn.Module):
        """out = wd @ (silu(gate) * up), gate/up = wgu @ rmsnorm(x, norm_w)."""

        def __init__(self, weights, eps=1e-5):
            super().__init__()
            self.norm_w = weights["norm_w"].float()
            self.wgu, self.wd, self.eps = weights["wgu"], weights["wd"], eps

        def forward(self, x):
            gate, up = F.linear(rmsnorm(x, self.norm_w, self.eps), self.wgu).chunk(2)
            return F.linear(F.silu(gate) * up, self.wd)

    return {"LlamaDecodeStep": LlamaDecodeStep, "MlpChain": MlpChain}


def __getattr__(name):
    # The torch.nn.Module classes, built (importing torch) at first access.
    if name in ("LlamaDecodeStep", "MlpChain"):
        return _torch_classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
