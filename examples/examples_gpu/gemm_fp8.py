"""Checks a gemm_fp8 artifact (C = scale_a * scale_b * A @ B^T, 8-bit float
inputs on wgmma, bf16 out) against a float64 torch reference on fresh
inputs. The configuration is the artifact's entry in run_examples.EXAMPLES
(or, for the benchmark GEMMs, bench/build_artifacts.py's FP8_GEMMS, through
check_config)."""

import run_examples

gemm_fp8 = run_examples.example_module("gemm_fp8")

# ||C - ref|| / ||ref|| against the product of the same 8-bit inputs: C is
# stored in bf16 (2^-9 relative rounding) after an f32 accumulation.
TOLERANCE = 1e-2


def _config(artifact):
    return run_examples.entry_config(artifact.name, "gemm_fp8")


def tolerance(artifact):
    return TOLERANCE


def check(artifact, torch):
    return check_config(artifact, torch, _config(artifact))


def inputs(torch, cfg):
    """Random 8-bit A (M x K) and B (N x K), per-tensor scales in [0.25, 2)
    as one-element float32 tensors, and a NaN-poisoned bf16 C."""
    dt = getattr(torch, gemm_fp8.DTYPES[cfg["dtype"]])
    M, N, K = cfg["M"], cfg["N"], cfg["K"]
    a = torch.randn(M, K, device="cuda").to(dt)
    b = torch.randn(N, K, device="cuda").to(dt)
    scale_a = torch.rand(1, device="cuda") * 1.75 + 0.25
    scale_b = torch.rand(1, device="cuda") * 1.75 + 0.25
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    return a, b, scale_a, scale_b, c


def check_config(artifact, torch, cfg):
    """The relative error of `artifact`, built from `cfg`, on fresh inputs;
    C starts as NaN so every element must be written."""
    a, b, scale_a, scale_b, c = inputs(torch, cfg)
    artifact(a, b, scale_a, scale_b, c)
    torch.cuda.synchronize()
    ref = gemm_fp8.reference(a, b, scale_a, scale_b)
    err = ((c.double() - ref).norm() / ref.norm()).item()
    return err if err == err else float("inf")  # NaN never passes.
