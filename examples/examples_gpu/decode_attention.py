"""Checks a decode_attention artifact against float64 torch SDPA on fresh inputs.

Works for both forms (split + combine kernels, or the single kernel): the
shapes come from the artifact's metadata, decode_attention.run launches
whatever kernels it holds. The output and the split kernel's workspace start
as NaN, so an element no kernel writes fails the check.
"""

import decode_attention

# ||o - ref|| / ||ref||: o is stored as bf16 (relative rounding 2^-9) and P
# goes through bf16 for the P @ V gemm; everything else accumulates in f32.
# Expected error ~3e-3.
TOLERANCE = 1e-2


def check(artifact, torch):
    kernels = list(artifact.kernels.values())
    attention = next(k for k in kernels if not k.name.endswith("_combine"))
    heads, d = attention.spec.params[0].shape
    kv_heads, seq, _ = attention.spec.params[1].shape
    # Scores q.k / sqrt(d) with a standard deviation of ~3: peaked rows, so
    # the running maximum changes between chunks and the rescaling matters.
    q = (torch.randn(heads, d, device="cuda") * 3).to(torch.bfloat16)
    k = torch.randn(kv_heads, seq, d, device="cuda").to(torch.bfloat16)
    v = torch.randn(kv_heads, seq, d, device="cuda").to(torch.bfloat16)
    o = torch.full((heads, d), float("nan"), device="cuda", dtype=torch.bfloat16)
    workspace = None
    if len(kernels) > 1:
        splits = attention.spec.params[3].shape[0]
        workspace = tuple(t.fill_(float("nan"))
                          for t in decode_attention.make_workspace(q, splits))
    decode_attention.run(artifact, q, k, v, o, workspace)
    torch.cuda.synchronize()
    ref = decode_attention.reference(q, k, v, torch)
    err = ((o.double() - ref).norm() / ref.norm()).item()
    return err if err == err else float("inf")  # NaN never passes.
