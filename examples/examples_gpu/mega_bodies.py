"""Checks a standalone mega task-body artifact (examples/mega_bodies.py)
against float64 torch on fresh random inputs.

The body is told apart by its kernel name (tilemega.mega.bodies names each
body after its kind and shapes); shapes come from the artifact's parameters,
and the two constants no parameter shows from the name: the `_p<pos>` of
kv_append and rope_kv_append, and attention_split's `_l<kv_len>`. Outputs
start as NaN, so an element no unit writes fails the check.
"""

import math
import re

# Relative error ||out - ref|| / ||ref||: bf16 outputs round at 2^-9 (~2e-3
# over a vector); attention's P @ V goes through bf16 too (~3e-3).
TOLERANCE = 1e-2


def _rel(out, ref):
    err = ((out.double() - ref).norm() / ref.norm()).item()
    return err if err == err else float("inf")  # NaN never passes.


def _nan(torch, n, dtype):
    return torch.full((n,), float("nan"), device="cuda", dtype=dtype)


def _randn(torch, *shape, dtype=None, scale=1.0):
    return (torch.randn(*shape, device="cuda") * scale).to(dtype or torch.bfloat16)


def _rmsnorm(kernel, torch):
    (h,) = kernel.spec.params[0].shape
    assert "_eps" not in kernel.name, "only the default eps is checked"
    eps = 1e-5  # the default, which the body's name leaves out
    x, w = _randn(torch, h), _randn(torch, h)
    y = _nan(torch, h, torch.bfloat16)
    kernel(x, w, y)
    torch.cuda.synchronize()
    xd = x.double()
    return _rel(y, xd * torch.rsqrt(xd.pow(2).mean() + eps) * w.double())


def _gemv(kernel, torch):
    n, k = kernel.spec.params[0].shape
    w, x = _randn(torch, n, k), _randn(torch, k)
    y = _nan(torch, n, torch.bfloat16)
    ref = w.double() @ x.double()
    if len(kernel.spec.params) == 4:   # residual
        r = _randn(torch, n, scale=10.0)
        kernel(w, x, r, y)
        ref = ref + r.double()
    else:
        kernel(w, x, y)
    torch.cuda.synchronize()
    return _rel(y, ref)


def _rmsnorm_ref(torch, x, w, eps=1e-5):
    xd = x.double()
    return xd * torch.rsqrt(xd.pow(2).mean() + eps) * w.double()


def _gemv_rmsnorm(kernel, torch):
    assert "_eps" not in kernel.name, "only the default eps is checked"
    n, k = kernel.spec.params[0].shape
    w, x, norm_w = _randn(torch, n, k), _randn(torch, k, scale=3.0), _randn(torch, k)
    y = _nan(torch, n, torch.bfloat16)
    kernel(w, x, norm_w, y)
    torch.cuda.synchronize()
    return _rel(y, w.double() @ _rmsnorm_ref(torch, x, norm_w))


def _gemv_silu(kernel, torch):
    n, k = kernel.spec.params[0].shape
    w, gu = _randn(torch, n, k), _randn(torch, 2 * k, scale=2.0)
    y = _nan(torch, n, torch.bfloat16)
    gate, up = gu.double()[:k], gu.double()[k:]
    ref = w.double() @ (torch.nn.functional.silu(gate) * up)
    if len(kernel.spec.params) == 4:   # residual
        r = _randn(torch, n, scale=10.0)
        kernel(w, gu, r, y)
        ref = ref + r.double()
    else:
        kernel(w, gu, y)
    torch.cuda.synchronize()
    return _rel(y, ref)


def _rotate_half(torch, heads, cos, sin):
    """Llama RoPE of rows of head_dim, float64."""
    half = heads.shape[1] // 2
    x1, x2 = heads[:, :half], heads[:, half:]
    c, s = cos.double(), sin.double()
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=1)


def _rope_angles(torch, half):
    angles = torch.rand(half, device="cuda", dtype=torch.float64) * 2 * math.pi
    return torch.cos(angles).float(), torch.sin(angles).float()


def _rope_kv_append(kernel, torch):
    pos = int(re.search(r"_p(\d+)$", kernel.name).group(1))
    total = kernel.spec.params[0].shape[0]
    hkv, seq, d = kernel.spec.params[4].shape
    hq = kernel.spec.params[3].shape[0] // d
    assert total == (hq + 2 * hkv) * d
    qkv = _randn(torch, total)
    cos, sin = _rope_angles(torch, d // 2)
    q = _nan(torch, hq * d, torch.bfloat16)
    k_cache, v_cache = _randn(torch, hkv, seq, d), _randn(torch, hkv, seq, d)
    k_old, v_old = k_cache.clone(), v_cache.clone()
    kernel(qkv, cos, sin, q, k_cache, v_cache)
    torch.cuda.synchronize()
    heads = qkv.view(hq + 2 * hkv, d)
    # Every other cache row stays as it was, and v is a copy: both exact.
    others = torch.arange(seq, device="cuda") != pos
    if not (torch.equal(k_cache[:, others], k_old[:, others])
            and torch.equal(v_cache[:, others], v_old[:, others])
            and torch.equal(v_cache[:, pos], heads[hq + hkv:])):
        return float("inf")
    ref = _rotate_half(torch, heads[: hq + hkv].double(), cos, sin).reshape(-1)
    return _rel(torch.cat([q, k_cache[:, pos].reshape(-1)]), ref)


def _rope(kernel, torch):
    total = kernel.spec.params[0].shape[0]
    half = kernel.spec.params[1].shape[0]
    d = 2 * half
    hq, hkv = kernel.spec.params[3].shape[0] // d, kernel.spec.params[4].shape[0] // d
    assert total == (hq + 2 * hkv) * d
    qkv = _randn(torch, total)
    cos, sin = _rope_angles(torch, half)
    q, k = _nan(torch, hq * d, torch.bfloat16), _nan(torch, hkv * d, torch.bfloat16)
    kernel(qkv, cos, sin, q, k)
    torch.cuda.synchronize()
    heads = qkv.double()[: (hq + hkv) * d].view(hq + hkv, d)
    return _rel(torch.cat([q, k]), _rotate_half(torch, heads, cos, sin).reshape(-1))


def _kv_append(kernel, torch):
    pos = int(re.search(r"_p(\d+)$", kernel.name).group(1))
    hkv, seq, d = kernel.spec.params[2].shape
    total = kernel.spec.params[1].shape[0]
    hq = total // d - 2 * hkv
    k_rot, qkv = _randn(torch, hkv * d), _randn(torch, total)
    k_cache, v_cache = _randn(torch, hkv, seq, d), _randn(torch, hkv, seq, d)
    k_ref, v_ref = k_cache.clone(), v_cache.clone()
    k_ref[:, pos] = k_rot.view(hkv, d)
    v_ref[:, pos] = qkv[(hq + hkv) * d:].view(hkv, d)
    kernel(k_rot, qkv, k_cache, v_cache)
    torch.cuda.synchronize()
    # A copy: exact, and no other row may change.
    if not (torch.equal(k_cache, k_ref) and torch.equal(v_cache, v_ref)):
        return float("inf")
    return 0.0


def _attention_split(kernel, torch):
    kv_len = int(re.search(r"_l(\d+)_", kernel.name).group(1))
    hkv, s_max, d = kernel.spec.params[1].shape
    hq = kernel.spec.params[0].shape[0] // d
    splits = kernel.spec.params[4].shape[0] // hq
    g = hq // hkv
    # Scores with a standard deviation of ~3: peaked rows, so the running
    # maximum changes between chunks and the rescaling matters.
    q = _randn(torch, hq * d, scale=3.0)
    k, v = _randn(torch, hkv, s_max, d), _randn(torch, hkv, s_max, d)
    o_part = _nan(torch, hq * splits * d, torch.float32)
    lse = _nan(torch, hq * splits, torch.float32)
    kernel(q, k, v, o_part, lse)
    torch.cuda.synchronize()
    kr = k.double().repeat_interleave(g, dim=0)[:, :kv_len]   # head h uses k[h // g]
    vr = v.double().repeat_interleave(g, dim=0)[:, :kv_len]
    scores = torch.einsum("hd,hkd->hk", q.double().view(hq, d), kr) / math.sqrt(d)
    scores = scores.view(hq, splits, kv_len // splits)
    o_ref = torch.einsum("hsk,hskd->hsd", scores.softmax(-1),
                         vr.reshape(hq, splits, kv_len // splits, d))
    lse_ref = torch.logsumexp(scores, -1) / math.log(2)          # base 2
    # The body's layout: row (group * splits + split) * g + head in group.
    o_ref = o_ref.reshape(hkv, g, splits, d).permute(0, 2, 1, 3).reshape(-1)
    lse_ref = lse_ref.reshape(hkv, g, splits).permute(0, 2, 1).reshape(-1)
    return max(_rel(o_part, o_ref), _rel(lse, lse_ref))


def _attention_combine(kernel, torch):
    n_lse = kernel.spec.params[1].shape[0]
    hq_d = kernel.spec.params[2].shape[0]
    shape = re.search(r"_(\d+)x(\d+)x(\d+)_k(\d+)$", kernel.name)
    hq, hkv, d, splits = (int(x) for x in shape.groups())
    assert hq * d == hq_d and hq * splits == n_lse
    g = hq // hkv
    o_part = torch.randn(hq * splits * d, device="cuda")
    lse = torch.randn(hq * splits, device="cuda") * 4
    o = _nan(torch, hq * d, torch.bfloat16)
    kernel(o_part, lse, o)
    torch.cuda.synchronize()
    parts = o_part.double().view(hkv, splits, g, d)
    wts = torch.softmax(lse.double().view(hkv, splits, g) * math.log(2), dim=1)
    ref = (parts * wts[..., None]).sum(1).reshape(-1)   # [hkv, g, d] = heads in order
    return _rel(o, ref)


def _silu_mul(kernel, torch):
    (n,) = kernel.spec.params[1].shape
    gu = _randn(torch, 2 * n, scale=2.0)
    a = _nan(torch, n, torch.bfloat16)
    kernel(gu, a)
    torch.cuda.synchronize()
    gate, up = gu.double()[:n], gu.double()[n:]
    return _rel(a, torch.nn.functional.silu(gate) * up)


def _add(kernel, torch):
    (n,) = kernel.spec.params[0].shape
    a, b = _randn(torch, n), _randn(torch, n)
    y = _nan(torch, n, torch.bfloat16)
    kernel(a, b, y)
    torch.cuda.synchronize()
    return _rel(y, a.double() + b.double())


# First match wins: the fused bodies' prefixes before their plain ones.
_CHECKS = [("rmsnorm_", _rmsnorm), ("gemv_rms_", _gemv_rmsnorm),
           ("gemv_silu_", _gemv_silu), ("gemv_", _gemv), ("rope_kv_", _rope_kv_append),
           ("rope_", _rope),
           ("kv_append_", _kv_append), ("attn_split_", _attention_split),
           ("attn_combine_", _attention_combine), ("silu_mul_", _silu_mul),
           ("add_", _add)]


def check(artifact, torch):
    (kernel,) = artifact.kernels.values()
    for prefix, fn in _CHECKS:
        if kernel.name.startswith(prefix):
            return fn(kernel, torch)
    raise ValueError(f"no check for body {kernel.name}")
