"""Checks a gemm_hopper artifact (C = op(A) @ op(B) on wgmma) against a float64
torch reference on fresh inputs. The configuration is the artifact's entry in
run_examples.EXAMPLES (or, for the benchmark GEMMs, bench/build_artifacts.py's
HOPPER_GEMMS, through check_config)."""

import run_examples

gemm_hopper = run_examples.example_module("gemm_hopper")

# ||C - ref|| / ||ref||: C is stored in the input type, whose rounding
# (2^-9 for bf16, 2^-12 for f16, relative) dominates the f32 accumulation.
TOLERANCES = {"bf16": 1e-2, "f16": 5e-3}
TOLERANCE = max(TOLERANCES.values())


def _config(artifact):
    return run_examples.entry_config(artifact.name, "gemm_hopper")


def tolerance(artifact):
    return TOLERANCES[_config(artifact)["dtype"]]


def check(artifact, torch):
    return check_config(artifact, torch, _config(artifact))


def check_config(artifact, torch, cfg):
    """The relative error of `artifact`, built from `cfg`, on fresh inputs;
    C starts as NaN so every element must be written."""
    M, N, K = cfg["M"], cfg["N"], cfg["K"]
    dt = torch.float16 if cfg["dtype"] == "f16" else torch.bfloat16
    a = torch.randn(*gemm_hopper.a_shape_of(cfg), device="cuda").to(dt)
    b = torch.randn(*gemm_hopper.b_shape_of(cfg), device="cuda").to(dt)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
    artifact(a, b, c)
    torch.cuda.synchronize()
    ref = gemm_hopper.reference(a, b, cfg)
    err = ((c.double() - ref).norm() / ref.norm()).item()
    return err if err == err else float("inf")  # NaN never passes.
