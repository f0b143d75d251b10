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
    C starts as NaN so every element must be written. A persistent kernel
    (a resident grid: as many blocks as fit) is also launched as one
    cluster (one block) walking every tile; the larger error counts."""
    M, N, K = cfg["M"], cfg["N"], cfg["K"]
    dt = torch.float16 if cfg["dtype"] == "f16" else torch.bfloat16
    a = torch.randn(*gemm_hopper.a_shape_of(cfg), device="cuda").to(dt)
    b = torch.randn(*gemm_hopper.b_shape_of(cfg), device="cuda").to(dt)
    ref = gemm_hopper.reference(a, b, cfg)
    (kernel,) = artifact.kernels.values()
    grids = [None] + ([cfg["cluster"]] if cfg["persistent"] else [])
    worst = 0.0
    for grid in grids:
        c = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
        kernel.launch(a, b, c, grid=grid)
        torch.cuda.synchronize()
        err = ((c.double() - ref).norm() / ref.norm()).item()
        worst = max(worst, err if err == err else float("inf"))  # NaN never passes.
    return worst
