"""Checks a flash_attention artifact against a float64 torch reference on
fresh inputs. The configuration is the artifact's entry in
run_examples.EXAMPLES (or, for the benchmark kernels, bench/build_artifacts.py's
ATTENTIONS, through check_config)."""

import run_examples

flash_attention = run_examples.example_module("flash_attention")

# ||O - ref|| / ||ref||: P rounds to the input type before P @ V and O is
# stored in it (2^-9 relative for bf16, 2^-12 for f16).
TOLERANCES = {"bf16": 1e-2, "f16": 5e-3}
TOLERANCE = max(TOLERANCES.values())


def _config(artifact):
    return run_examples.entry_config(artifact.name, "flash_attention")


def tolerance(artifact):
    return TOLERANCES[_config(artifact)["dtype"]]


def check(artifact, torch):
    return check_config(artifact, torch, _config(artifact))


def inputs(torch, cfg):
    """Fresh q, k, v and an all-NaN o (every element must be written)."""
    B, Hq, Hkv, S, D = (cfg[k] for k in ("batch", "heads", "kv_heads", "seq", "head_dim"))
    dt = torch.float16 if cfg["dtype"] == "f16" else torch.bfloat16
    q = torch.randn(B, Hq, S, D, device="cuda").to(dt)
    k = torch.randn(B, Hkv, S, D, device="cuda").to(dt)
    v = torch.randn(B, Hkv, S, D, device="cuda").to(dt)
    o = torch.full((B, Hq, S, D), float("nan"), device="cuda", dtype=dt)
    return q, k, v, o


def rel_error(torch, o, q, k, v, causal):
    """||o - ref|| / ||ref|| against float64, one (batch, kv head) group at a
    time so long sequences fit; NaN never passes."""
    num = den = 0.0
    G = q.shape[1] // k.shape[1]
    for b in range(q.shape[0]):
        for g in range(k.shape[1]):
            heads = slice(g * G, (g + 1) * G)
            ref = flash_attention.reference(q[b:b + 1, heads], k[b:b + 1, g:g + 1],
                                            v[b:b + 1, g:g + 1], causal)
            num += (o[b:b + 1, heads].double() - ref).pow(2).sum().item()
            den += ref.pow(2).sum().item()
    err = (num / den) ** 0.5
    return err if err == err else float("inf")


def check_config(artifact, torch, cfg):
    q, k, v, o = inputs(torch, cfg)
    artifact(q, k, v, o)
    torch.cuda.synchronize()
    return rel_error(torch, o, q, k, v, cfg["causal"])
