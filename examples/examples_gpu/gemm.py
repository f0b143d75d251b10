"""Checks a gemm artifact against a float64 torch reference on fresh inputs.

The artifact's configuration (sizes, dtype, transposes) is its entry in
run_examples.EXAMPLES, found by the artifact's name.
"""

import run_examples

gemm = run_examples.example_module("gemm")   # not bench/gemm.py

# ||C - ref|| / ||ref||: C is stored in the input type, so its rounding
# (2^-9 for bf16, 2^-12 for f16, relative) dominates the f32 accumulation.
TOLERANCES = {"bf16": 1e-2, "f16": 5e-3}
TOLERANCE = max(TOLERANCES.values())  # For callers that ignore tolerance().


def _config(artifact):
    return run_examples.entry_config(artifact.name, "gemm")


def tolerance(artifact):
    return TOLERANCES[_config(artifact)["dtype"]]


def check(artifact, torch):
    return check_config(artifact, torch, _config(artifact))


def check_config(artifact, torch, cfg):
    """The relative error of `artifact`, a gemm built from `cfg`
    (gemm.config(...)), on fresh inputs."""
    M, N, K = cfg["M"], cfg["N"], cfg["K"]
    ta, tb = cfg["transpose_a"], cfg["transpose_b"]
    dt = torch.float16 if cfg["dtype"] == "f16" else torch.bfloat16
    a = torch.randn(*((K, M) if ta else (M, K)), device="cuda").to(dt)
    b = torch.randn(*((N, K) if tb else (K, N)), device="cuda").to(dt)
    # Poisoned: every element must be written.
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
    if cfg["epilogue"]:
        bias = torch.randn(N, device="cuda").to(dt)
        artifact(a, b, c, bias)
    else:
        artifact(a, b, c)
    torch.cuda.synchronize()
    ref = gemm.reference(a, b, ta, tb)
    if cfg["epilogue"] == "bias_relu":
        ref = torch.relu(ref + bias.double())
    elif cfg["epilogue"] == "bias_gelu":
        ref = torch.nn.functional.gelu(ref + bias.double(), approximate="tanh")
    err = ((c.double() - ref).norm() / ref.norm()).item()
    return err if err == err else float("inf")  # NaN never passes.
