"""Checks the scale_add artifact against torch on fresh random inputs."""

TOLERANCE = 1e-6  # ||out - ref|| / ||ref||; fp32 FMA rounding is ~1e-8.


def check(artifact, torch):
    a = torch.randn(256, 1024, device="cuda", dtype=torch.float32)
    b = torch.full_like(a, float("nan"))  # Poisoned: every element must be written.
    alpha = 0.75
    artifact(a, b, alpha)
    torch.cuda.synchronize()
    ref = a.double() * alpha + 1.0
    err = ((b.double() - ref).norm() / ref.norm()).item()
    return err if err == err else float("inf")  # NaN never passes.
