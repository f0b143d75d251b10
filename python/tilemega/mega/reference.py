"""PyTorch reference of one batch-1 Llama decode step and of the MLP chain.

bench/decode.py times `LlamaDecodeStep` (eager and under a CUDA graph) next to
the mega-kernel and checks both against `reference_float64`;
`reference_step_float64` also gives the k/v rows the step writes, and
`check_decode_step` judges a step's output, written cache rows and untouched
positions against them (examples/run_mega.py, test_mega_gpu.py). A config is any
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

# Relative L2 tolerances against float64. The MLP chain and the decode step:
# bf16 activations through 1 or 16 layers (torch eager in bf16 is itself at
# 1.7e-2 on the 16-layer step).
MLP_TOLERANCE = 2e-2
DECODE_TOLERANCE = 3e-2
# A written k/v cache row (per layer, over its [kv_heads, head_dim] values).
# The row of layer l is computed from x_l, whose error against float64 grows
# through the layers and is at most what DECODE_TOLERANCE accepts for the
# final x; on top come at most two bf16 roundings (qkv stored, then k after
# RoPE), each under the unit roundoff 2^-8 per value, about 2.3e-3 in
# relative L2 (uniform rounding: 2^-8 / sqrt(3)): 3e-2 + 2 * 2.3e-3 < 4e-2.
# A missing write leaves the random values make_weights put there (relative
# L2 about sqrt(2)) and a zero row gives 1.0: 25x and more above.
KV_ROW_TOLERANCE = 4e-2


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


def written_position(cfg):
    """The cache position a step writes: the new token's, kv_len - 1."""
    return cfg.kv_len - 1


def rope_angles(cfg):
    """float64 angles pos * theta^(-2j/D), j < D/2, for pos = kv_len - 1."""
    d = cfg.head_dim
    j = np.arange(d // 2, dtype=np.float64)
    return written_position(cfg) * cfg.rope_theta ** (-2.0 * j / d)


def make_weights(cfg, seed=0, device="cuda"):
    """Random weights, KV caches and inputs with the names of `weight_shapes`.

    Projections are normal / sqrt(fan_in) and norms 1 + 0.05 * normal, as in a
    trained model, so that activations stay O(1) through the layers in bf16.
    Every cache position is normal, the one the step writes (kv_len - 1)
    too: it holds what a stale row would, so a step that does not write it
    leaves values that differ from the reference's row (check_decode_step).
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

        # Converted where it lives (on the GPU far faster than on the host),
        # then copied; copy=True: a CPU float64 tensor would otherwise be
        # shared, not copied.
        t = t.detach().to(dtype=torch.float64, copy=True)
        return t.cpu().numpy()
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
    """The decode step's final x, float64 [hidden] (reference_step_float64)."""
    return reference_step_float64(cfg, weights, x, rope_cos, rope_sin)[0]


def reference_step_float64(cfg, weights, x=None, rope_cos=None, rope_sin=None, position=None):
    """The decode step in float64 numpy on copies (the inputs are not touched).

    Tensors default to weights["x"], ["rope_cos"], ["rope_sin"]. Converts one
    layer at a time (a float64 copy of all 1B-model weights would be 16 GB).
    Returns (x, rows): the final x, float64 [hidden], and the rows the step
    writes at written_position(cfg), {"l<i>.k_cache" / "l<i>.v_cache":
    float64 [kv_heads, head_dim]} (k after RoPE). What the caches hold at
    that position does not matter: the step overwrites it before reading.
    `position` writes the rows elsewhere instead (a broken step, for tests
    of check_decode_step); attention still reads all kv_len positions.
    """
    hq, hkv, d = cfg.heads, cfg.kv_heads, cfg.head_dim
    pos = written_position(cfg) if position is None else position
    x = _f64(weights["x"] if x is None else x)
    cos = _f64(weights["rope_cos"] if rope_cos is None else rope_cos)
    sin = _f64(weights["rope_sin"] if rope_sin is None else rope_sin)
    rows = {}
    for layer in range(cfg.layers):
        def w(name, prefix=f"l{layer}."):
            return _f64(weights[prefix + name])

        qkv = w("wqkv") @ _rmsnorm64(x, w("attn_norm"), cfg.eps)
        q, k, v = np.split(qkv, [hq * d, (hq + hkv) * d])
        q = _rope64(q.reshape(hq, d), cos, sin)
        kc, vc = w("k_cache"), w("v_cache")
        kc[:, pos] = rows[f"l{layer}.k_cache"] = _rope64(k.reshape(hkv, d), cos, sin)
        vc[:, pos] = rows[f"l{layer}.v_cache"] = v.reshape(hkv, d)
        # q head h reads kv head h // group: view q as [kv_heads, group, D].
        scores = np.einsum("kgd,kld->kgl", q.reshape(hkv, hq // hkv, d), kc) / math.sqrt(d)
        p = np.exp(scores - scores.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        attn = np.einsum("kgl,kld->kgd", p, vc).reshape(hq * d)
        x = x + w("wo") @ attn
        x = x + w("wd") @ _silu_mul64(w("wgu") @ _rmsnorm64(x, w("mlp_norm"), cfg.eps))
    return x, rows


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


# ----------------------------------------------------------- judging a step


def cache_names(cfg):
    """The caches a decode step of `cfg` writes, layer by layer."""
    return [f"l{layer}.{kind}" for layer in range(cfg.layers) for kind in ("k_cache", "v_cache")]


def _copy(t):
    return t.clone() if hasattr(t, "clone") else np.array(t, copy=True)


def snapshot_caches(cfg, tensors):
    """Copies of every cache in `tensors` (torch tensors or numpy arrays),
    taken before a launch: check_decode_step compares the positions the
    step must not write against them."""
    return {name: _copy(tensors[name]) for name in cache_names(cfg)}


def _equal(a, b):
    """Equal element for element, on the device they live on (the caches
    hold no NaN before a launch, so a NaN written into them differs)."""
    if hasattr(a, "detach"):
        import torch

        return torch.equal(a, b)
    return np.array_equal(np.asarray(a), np.asarray(b))


def _row_error(got, expected):
    err = compare(got, expected)["rel_l2"]
    return float("inf") if err != err else err     # a NaN row fails any tolerance


def check_decode_step(cfg, tensors, before, out, expected_out, expected_rows,
                      tolerance=DECODE_TOLERANCE, row_tolerance=KV_ROW_TOLERANCE):
    """Judges one decode step after it ran.

    tensors: the bound tensors (name -> torch tensor or numpy array), caches
    included; before: snapshot_caches(cfg, tensors) taken before the launch;
    out: the step's output; expected_out, expected_rows: from
    reference_step_float64. Checks the output, every layer's k and v row at
    written_position(cfg) (relative L2, KV_ROW_TOLERANCE says why that one),
    and that every other position of every cache is bit-for-bit what it was.

    Returns {"error": output rel L2, "tolerance", "passed": every check holds,
    "details": {"out", "l<i>.k_row", "l<i>.v_row" (rel L2 each),
    "kv_row_tolerance", "untouched_rows_ok", "failed": [names of the failed
    checks]}}.
    """
    pos = written_position(cfg)
    out_error = compare(out, expected_out)["rel_l2"]
    details = {"out": out_error}
    failed = [] if out_error <= tolerance else ["out"]     # NaN fails too
    untouched_ok = True
    for name in cache_names(cfg):
        layer, kind = name.split(".")
        key = f"{layer}.{kind[0]}_row"
        details[key] = _row_error(tensors[name][:, pos], expected_rows[name])
        if not details[key] <= row_tolerance:
            failed.append(key)
        now, then = tensors[name], before[name]
        if not (_equal(now[:, :pos], then[:, :pos]) and _equal(now[:, pos + 1:],
                                                                then[:, pos + 1:])):
            untouched_ok = False
            failed.append(f"{name} positions other than {pos}")
    details.update(kv_row_tolerance=row_tolerance, untouched_rows_ok=untouched_ok,
                   failed=failed)
    return {"error": out_error, "tolerance": tolerance, "passed": not failed,
            "details": details}


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
