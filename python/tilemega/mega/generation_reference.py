"""The float64 reference of one generation step and the checks of a step
that ran (examples/run_generation.py, test_generation_gpu.py, gpu_check.py).

A step at position p (generation_state.py) reads tokens[p], writes the k/v
cache rows p of every layer, attends over keys 0..p (rows < p as the caches
hold them: what earlier steps wrote), and ends with the logits of the next
token and the greedy pick. `step_float64` computes that in float64 numpy
from the step's own input tensors; `check_step` judges a launch by its
logits, its written cache rows, the cache rows it must not touch, its pick
and the state it left. numpy only, torch when given torch tensors; no
compiler.

Config: any object with the fields of tilemega.mega.models.ModelConfig.
"""

import math

import numpy as np

from . import generation_state as gs
from .generation_bodies import SAMPLING_WORDS
from .rope import tables as rope_tables

# Relative L2 of the logits against float64: bf16 weights and activations
# through the layers. Independent roundings add up like the square root of
# the depth: 3e-2 at 16 layers (reference.DECODE_TOLERANCE, where torch
# eager in bf16 is itself at 1.7e-2).
def logits_tolerance(cfg):
    return 7.5e-3 * math.sqrt(cfg.layers)




def kv_row_tolerance(cfg):
    """A written k/v row: computed from a hidden state whose error is at
    most the logits' tolerance, plus two bf16 roundings (qkv stored, k after
    RoPE) of about 2.3e-3 each (reference.KV_ROW_TOLERANCE: 4e-2 at 16
    layers). A missing write leaves a random row: error about sqrt(2)."""
    return logits_tolerance(cfg) + 1e-2


def tensor_specs(cfg):
    """{name: (shape, dtype)} of every tensor the generation graph binds
    (models.generation_graph), in the graph's order, logits last."""
    H, D, S, V = cfg.hidden, cfg.head_dim, cfg.max_seq_len, cfg.vocab
    Hq, Hkv, I = cfg.heads, cfg.kv_heads, cfg.intermediate
    bf, n = "bfloat16", (Hq + 2 * Hkv) * D
    specs = {"embed": ((V, H), bf), "rope_cos": ((S, D // 2), "float32"),
             "rope_sin": ((S, D // 2), "float32"), "tokens": ((S,), "int32"),
             "gen": ((gs.GEN_WORDS,), "int32"), "sampling": ((SAMPLING_WORDS,), "float32")}
    for layer in range(cfg.layers):
        p = f"l{layer}."
        specs[p + "attn_norm"] = ((H,), bf)
        specs[p + "wqkv"] = ((n, H), bf)
        if cfg.qkv_bias:
            specs[p + "bqkv"] = ((n,), bf)
        specs.update({p + "wo": ((H, Hq * D), bf), p + "mlp_norm": ((H,), bf),
                      p + "wgu": ((2 * I, H), bf), p + "wd": ((H, I), bf),
                      p + "k_cache": ((Hkv, S, D), bf), p + "v_cache": ((Hkv, S, D), bf)})
    specs["final_norm"] = ((H,), bf)
    if not cfg.tie_embeddings:
        specs["lm_head"] = ((V, H), bf)
    specs["logits"] = ((V,), bf)
    return specs


def cache_names(cfg):
    return [f"l{layer}.{kind}" for layer in range(cfg.layers) for kind in ("k_cache", "v_cache")]


def head_name(cfg):
    return "embed" if cfg.tie_embeddings else "lm_head"


def scaled_normal(name, shape, t):
    """A standard-normal tensor `t` (torch or numpy) of spec `name`, scaled
    as make_tensors scales it: norms 1 + 0.05 t, biases 0.1 t, projections
    and the LM head t / sqrt(fan_in), anything else t."""
    kind = name.split(".")[-1]
    if kind.endswith("norm"):
        return 1.0 + 0.05 * t
    if kind.startswith("b"):
        return 0.1 * t
    if kind.startswith("w") or name == "lm_head":
        return t / math.sqrt(shape[1])
    return t


def make_numpy_tensors(cfg, seed=0):
    """make_tensors' specs and scaling as float64 / int32 numpy arrays, for
    CPU tests of the float64 models: caches random at every position,
    tokens uniform in [0, vocab), gen and sampling zeros, logits NaN."""
    rng = np.random.default_rng(seed)
    cos, sin = rope_tables(cfg.max_seq_len, cfg.head_dim, cfg.rope_theta, cfg.rope_scaling)
    out = {}
    for name, (shape, dtype) in tensor_specs(cfg).items():
        if name in ("rope_cos", "rope_sin"):
            out[name] = cos if name == "rope_cos" else sin
        elif name == "tokens":
            out[name] = rng.integers(0, cfg.vocab, shape).astype(np.int32)
        elif name in ("gen", "sampling"):
            out[name] = np.zeros(shape, dtype=np.int32 if dtype == "int32" else np.float32)
        elif name == "logits":
            out[name] = np.full(shape, np.nan)
        else:
            out[name] = scaled_normal(name, shape, rng.standard_normal(shape))
    return out


def make_tensors(cfg, seed=0, device="cuda"):
    """Random tensors of every spec (torch): projections normal / sqrt(fan_in),
    norms 1 + 0.05 normal, biases 0.1 normal, the embedding normal, caches
    normal at every position (a stale row differs from the one a step must
    write), tokens uniform in [0, vocab), the rope tables of cfg
    (rope.tables), gen zeros and logits NaN. A test sets gen and the
    tokens it means."""
    import torch

    gen = torch.Generator(device="cpu").manual_seed(seed)
    out = {}
    cos, sin = rope_tables(cfg.max_seq_len, cfg.head_dim, cfg.rope_theta, cfg.rope_scaling)
    for name, (shape, dtype) in tensor_specs(cfg).items():
        if name in ("rope_cos", "rope_sin"):
            t = torch.from_numpy(cos if name == "rope_cos" else sin)
        elif name == "tokens":
            t = torch.randint(0, cfg.vocab, shape, generator=gen, dtype=torch.int32)
        elif name == "gen":
            t = torch.zeros(shape, dtype=torch.int32)
        elif name == "sampling":
            t = torch.zeros(shape, dtype=torch.float32)
        elif name == "logits":
            t = torch.full(shape, float("nan"))
        else:
            t = scaled_normal(name, shape, torch.randn(shape, generator=gen))
        dt = {"bfloat16": torch.bfloat16, "float32": torch.float32,
              "int32": torch.int32}[dtype]
        out[name] = t.to(dt).to(device)
    return out


# ----------------------------------------------------------- float64 (numpy)


def _f64(t):
    if hasattr(t, "detach"):
        import torch

        return t.detach().to(dtype=torch.float64, copy=True).cpu().numpy()
    return np.array(t, dtype=np.float64)


def _int(t):
    return int(t.item()) if hasattr(t, "item") else int(t)


def _rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x) + eps) * w


def _rope(t, cos, sin):
    x1, x2 = np.split(t, 2, axis=-1)
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def step_float64(cfg, tensors, pos=None, token=None):
    """The step at position `pos` (default tensors["gen"][POS]) in float64,
    on copies. Returns {"logits": [vocab], "rows": {cache name: [kv_heads,
    head_dim]} (k after RoPE), "x": the final hidden state}."""
    pos = _int(tensors["gen"][gs.POS]) if pos is None else int(pos)
    if not 0 <= pos < cfg.max_seq_len:
        raise ValueError(f"position {pos} is outside the cache of {cfg.max_seq_len}")
    token = _int(tensors["tokens"][pos]) if token is None else int(token)
    Hq, Hkv, D, G = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.heads // cfg.kv_heads
    x = _f64(tensors["embed"][token])
    cos = _f64(tensors["rope_cos"][pos])
    sin = _f64(tensors["rope_sin"][pos])
    rows = {}
    for layer in range(cfg.layers):
        def w(name, p=f"l{layer}."):
            return _f64(tensors[p + name])

        qkv = w("wqkv") @ _rmsnorm(x, w("attn_norm"), cfg.eps)
        if cfg.qkv_bias:
            qkv = qkv + w("bqkv")
        q, k, v = np.split(qkv, [Hq * D, (Hq + Hkv) * D])
        q = _rope(q.reshape(Hq, D), cos, sin)
        k = _rope(k.reshape(Hkv, D), cos, sin)
        v = v.reshape(Hkv, D)
        p = f"l{layer}."
        kc = _f64(tensors[p + "k_cache"][:, :pos + 1])
        vc = _f64(tensors[p + "v_cache"][:, :pos + 1])
        kc[:, pos], vc[:, pos] = k, v
        rows[p + "k_cache"], rows[p + "v_cache"] = k, v
        scores = np.einsum("kgd,kld->kgl", q.reshape(Hkv, G, D), kc) / math.sqrt(D)
        prob = np.exp(scores - scores.max(axis=-1, keepdims=True))
        prob /= prob.sum(axis=-1, keepdims=True)
        attn = np.einsum("kgl,kld->kgd", prob, vc).reshape(Hq * D)
        x = x + w("wo") @ attn
        gate, up = np.split(w("wgu") @ _rmsnorm(x, w("mlp_norm"), cfg.eps), 2)
        x = x + w("wd") @ (gate / (1.0 + np.exp(-gate)) * up)
    xn = _rmsnorm(x, _f64(tensors["final_norm"]), cfg.eps)
    head = tensors[head_name(cfg)]
    logits = np.concatenate([_f64(head[r:r + 16384]) @ xn
                             for r in range(0, cfg.vocab, 16384)])
    return {"logits": logits, "rows": rows, "x": x}


def prefill_float64(cfg, tensors, positions):
    """The k/v cache rows 0 .. positions - 1 that the prompt tokens[0 ..
    positions - 1] give, in float64, all positions at once (causal
    attention within them): {cache name: [kv_heads, positions, head_dim]}."""
    P = int(positions)
    Hq, Hkv, D, G = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.heads // cfg.kv_heads
    tokens = [int(v) for v in _ints(tensors["tokens"])[:P]]
    x = _f64(tensors["embed"][tokens])
    cos = _f64(tensors["rope_cos"][:P])[:, None, :]
    sin = _f64(tensors["rope_sin"][:P])[:, None, :]
    causal = np.tril(np.ones((P, P), dtype=bool))
    rows = {}
    for layer in range(cfg.layers):
        def w(name, p=f"l{layer}."):
            return _f64(tensors[p + name])

        def norm(v, weight):
            return v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + cfg.eps) * weight

        qkv = norm(x, w("attn_norm")) @ w("wqkv").T
        if cfg.qkv_bias:
            qkv = qkv + w("bqkv")
        q, k, v = np.split(qkv, [Hq * D, (Hq + Hkv) * D], axis=-1)
        q = _rope(q.reshape(P, Hq, D), cos, sin)
        k = _rope(k.reshape(P, Hkv, D), cos, sin)
        v = v.reshape(P, Hkv, D)
        p = f"l{layer}."
        rows[p + "k_cache"], rows[p + "v_cache"] = k.transpose(1, 0, 2), v.transpose(1, 0, 2)
        scores = np.einsum("pkgd,lkd->kgpl", q.reshape(P, Hkv, G, D), k) / math.sqrt(D)
        scores = np.where(causal, scores, -np.inf)
        prob = np.exp(scores - scores.max(axis=-1, keepdims=True))
        prob /= prob.sum(axis=-1, keepdims=True)
        attn = np.einsum("kgpl,lkd->pkgd", prob, v).reshape(P, Hq * D)
        x = x + attn @ w("wo").T
        gate, up = np.split(norm(x, w("mlp_norm")) @ w("wgu").T, 2, axis=-1)
        x = x + (gate / (1.0 + np.exp(-gate)) * up) @ w("wd").T
    return rows


def check_prefill(cfg, tensors, before, expected, positions, row_tolerance=None):
    """Judges a prefill of `positions` rows: every layer's k and v rows
    against prefill_float64 (relative L2 over the rows), the rows past them
    unchanged bit for bit (`before` = snapshot()). {"error", "tolerance",
    "passed", "details"}."""
    tolerance = kv_row_tolerance(cfg) if row_tolerance is None else row_tolerance
    P = int(positions)
    details, failed, worst = {}, [], 0.0
    for name in cache_names(cfg):
        err = rel_l2(tensors[name][:, :P], expected[name])
        worst = max(worst, err)
        if err > 1e-2 or name.startswith("l0."):
            details[name] = err
        if not err <= tolerance:
            failed.append(name)
        if not _same(tensors[name][:, P:], before[name][:, P:]):
            failed.append(f"{name} rows from {P} on")
    details["failed"] = failed
    return {"error": worst, "tolerance": tolerance, "passed": not failed, "details": details}


# ----------------------------------------------------------- judging a step


def rel_l2(ours, ref):
    a, b = _f64(ours).ravel(), np.asarray(ref, dtype=np.float64).ravel()
    err = float(np.linalg.norm(a - b) / np.linalg.norm(b))
    return float("inf") if err != err else err


def snapshot(cfg, tensors):
    """Copies of the caches, tokens and gen before a launch."""
    names = cache_names(cfg) + ["tokens", "gen"]
    return {n: (tensors[n].clone() if hasattr(tensors[n], "clone")
                else np.array(tensors[n], copy=True)) for n in names}


def _same(a, b):
    if hasattr(a, "detach"):
        import torch

        return bool(torch.equal(a, b))
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def _ints(t):
    return [int(v) for v in (t.tolist() if hasattr(t, "tolist") else list(t))]


def check_step(cfg, tensors, before, expected, tolerance=None, row_tolerance=None):
    """Judges one launch: tensors after it, `before` = snapshot() taken
    before it, `expected` = step_float64 of the tensors as they were.

    Checks: logits against float64 (relative L2); every layer's k and v row
    at the position; every other cache position unchanged bit for bit; the
    pick equal to the first maximum of the kernel's own logits, and to the
    float64 argmax unless the float64 top two are closer than the logits'
    error (with sampling: the largest of logit / T + the seed's noise,
    float64 noise from philox.py); gen and tokens as
    generation_state.advance makes them.

    Returns {"error": the logits' relative L2, "tolerance", "passed",
    "details": {...every check..., "failed": [names]}}."""

    tolerance = logits_tolerance(cfg) if tolerance is None else tolerance
    row_tolerance = kv_row_tolerance(cfg) if row_tolerance is None else row_tolerance
    pos = _int(before["gen"][gs.POS])
    logits = tensors["logits"]
    details, failed = {}, []
    err = rel_l2(logits, expected["logits"])
    details["logits"] = err
    if not err <= tolerance:
        failed.append("logits")
    for name in cache_names(cfg):
        key = name.replace("_cache", "_row")
        details[key] = rel_l2(tensors[name][:, pos], expected["rows"][name])
        if not details[key] <= row_tolerance:
            failed.append(key)
        now, then = tensors[name], before[name]
        if not (_same(now[:, :pos], then[:, :pos]) and _same(now[:, pos + 1:], then[:, pos + 1:])):
            failed.append(f"{name} positions other than {pos}")
    # The pick: the kernel's own logits decide it (exactly when greedy).
    ours = _f64(logits)
    ref = expected["logits"]
    words_before = _ints(before["gen"])
    inv_t, top_k, top_p = (float(v) for v in _f64(tensors["sampling"])) \
        if "sampling" in tensors else (0.0, 0.0, 1.0)
    noise = 3 * err * float(np.linalg.norm(ref)) / math.sqrt(ref.size)
    if inv_t > 0:
        g = gumbel_of(words_before, ref.size)
        # The set the step may draw from follows from its own logits (whose
        # error the logits check bounds): float64 draws from the same set.
        keep = sampled_set(ours, inv_t, int(top_k), top_p)
        ours = np.where(keep, ours * inv_t + g, -np.inf)
        ref = np.where(keep, ref * inv_t + g, -np.inf)
        noise = noise * inv_t
        details["kept"] = int(keep.sum())
    own_pick = int(np.argmax(ours))
    top2 = np.sort(ref)[-2:]
    ref_pick = int(np.argmax(ref))
    if not np.isfinite(top2).all():      # one candidate kept (top-p): no runner-up
        top2 = np.array([-np.inf, top2[-1]])
    tokens_now, expect_tokens = _ints(tensors["tokens"]), _ints(before["tokens"])
    picked = _ints(tensors["gen"])[gs.LAST]
    details.update(pick=picked, own_argmax=own_pick, float64_argmax=ref_pick,
                   float64_top2_gap=float(top2[1] - top2[0]), noise=noise,
                   inverse_temperature=inv_t)
    if inv_t > 0:
        # The device's noise is float32 (its log differs from numpy's in
        # the last bits): any score that close to the largest may win.
        slack = 1e-4 * max(1.0, abs(float(ours[own_pick])))
        if not (0 <= picked < ours.size and ours[picked] >= ours[own_pick] - slack):
            failed.append("pick is not the largest of logit / T + the noise of its seed")
        elif ours[picked] < ours[own_pick]:
            own_pick = picked              # a float32 near-tie, judged by the slack
    elif picked != own_pick:
        failed.append("pick is not the first maximum of the logits")
    new_words = gs.advance(words_before, own_pick, expect_tokens)
    if ref_pick != own_pick and top2[1] - top2[0] > noise:
        failed.append("pick differs from float64's clear argmax")
    if _ints(tensors["gen"]) != new_words:
        failed.append(f"gen {_ints(tensors['gen'])} != {new_words}")
    if tokens_now != expect_tokens:
        changed = [i for i, (a, b) in enumerate(zip(tokens_now, expect_tokens)) if a != b]
        failed.append(f"tokens differ at {changed[:8]}")
    details.update(kv_row_tolerance=row_tolerance, failed=failed)
    return {"error": err, "tolerance": tolerance, "passed": not failed, "details": details}


def sampled_set(logits, inv_t, top_k, top_p):
    """The tokens a sampled step may draw (a bool mask): the top_k largest
    (all when top_k is 0; ties by the lower index, as torch.topk) and of
    those the ones whose mass ranked above is below top_p of their mass
    (generation_bodies.sample_top_k and sample_filtered), in float64."""
    logits = np.asarray(logits, dtype=np.float64)
    keep = np.ones(logits.size, dtype=bool)
    if top_k <= 0 and top_p >= 1:
        return keep
    k = logits.size if top_k <= 0 else min(top_k, logits.size)
    order = np.lexsort((np.arange(logits.size), -logits))[:k]
    p = np.exp((logits[order] - logits[order[0]]) * inv_t)
    above = np.concatenate([[0.0], np.cumsum(p)[:-1]])
    # top_p = 1 keeps the k (as transformers, which then has no top-p
    # warper), also tokens whose mass underflows.
    kept = order[(np.arange(k) == 0) | (top_p >= 1) | (above < top_p * p.sum())]
    keep[:] = False
    keep[kept] = True
    return keep


def filtered_pick(logits, scores, inv_t, top_k, top_p, rounds=64):
    """generation_bodies.sample_filtered's rounds in float64, for the tests:
    from the largest score, while the candidate is not kept (k or more
    tokens, or top_p of the mass or more, ranked above it), the next
    candidate is the largest score ranked above it. Returns (pick, rounds
    taken); the pick is the argmax of the scores over sampled_set."""
    logits = np.asarray(logits, dtype=np.float64)
    scores = np.asarray(scores, dtype=np.float64)
    idx = np.arange(logits.size)
    e = np.exp((logits - logits.max()) * inv_t)
    k = logits.size if top_k <= 0 else top_k
    # top_p is a share of the k's mass (sample_filtered's top_k_mass).
    share_of = e[np.lexsort((idx, -logits))[:k]].sum()
    s = int(np.argmax(scores))
    for r in range(rounds):
        up = (logits > logits[s]) | ((logits == logits[s]) & (idx < s))
        if up.sum() < k and (top_p >= 1 or e[up].sum() < top_p * share_of):
            return s, r + 1
        s = int(np.argmax(np.where(up, scores, -np.inf)))
    return int(np.lexsort((idx, -logits))[0]), rounds


def order_keys(logits_bf16):
    """generation_bodies.order_key of each bfloat16 logit (a torch
    bfloat16 tensor or its int16 bits as numpy): int64 keys in [0, 65536)
    ordered as the values."""
    bits = np.asarray(logits_bf16, dtype=np.int16).astype(np.int64)
    return np.where(bits >= 0, bits, bits ^ 0x7FFF) + 32768


def kth_key_by_digits(keys, k, digit_bits=None):
    """generation_bodies.top_k_mass's radix select in numpy, digit by digit
    from the top: (the k-th largest key, the count of keys above it)."""
    from .generation_bodies import KEY_DIGIT_BITS

    bits = digit_bits or KEY_DIGIT_BITS
    keys = np.asarray(keys)
    base, upper = 0, 0
    for level in range(16 // bits):
        step = 1 << (16 - bits * (level + 1))
        counts = [int((keys >= base + d * step).sum()) for d in range(1 << bits)]
        digit = max(d for d in range(1 << bits) if counts[d] >= k)
        if digit + 1 < (1 << bits):
            upper = counts[digit + 1]
        base += digit * step
    return base, upper


def gumbel_of(words, vocab):
    """The Gumbel noise of every token for the step of state `words` (its
    position and seed words), float64 (philox.gumbel)."""
    from . import philox

    seed = (words[gs.SEED_LO] & 0xFFFFFFFF) | ((words[gs.SEED_HI] & 0xFFFFFFFF) << 32)
    return philox.gumbel(np.arange(vocab), words[gs.POS], seed)


def set_state(tensors, pos, given, end, eos=None, seed=0, temperature=None, top_k=0,
              top_p=1.0):
    """Writes a fresh generation state into tensors["gen"] and the sampling
    settings (greedy unless a temperature) into tensors["sampling"] (in
    place)."""
    import torch

    if "sampling" in tensors:
        words = [0.0, 0.0, 1.0] if not temperature else [1.0 / temperature, top_k, top_p]
        tensors["sampling"].copy_(torch.tensor(words, dtype=torch.float32))
    words = gs.initial(pos, given, end, eos, seed)
    tensors["gen"].copy_(torch.tensor(words, dtype=torch.int32))
    return words
