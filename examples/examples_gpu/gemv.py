"""Checks a GEMV artifact against torch on fresh random inputs."""

TOLERANCE = 1e-2  # bf16 output, f32 accumulation.


def check(artifact, torch):
    (kernel,) = artifact.kernels.values()
    n, k = kernel.spec.params[0].shape
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(k, device="cuda", dtype=torch.bfloat16)
    y = torch.full((n,), float("nan"), device="cuda", dtype=torch.bfloat16)
    artifact(w, x, y)
    torch.cuda.synchronize()
    ref = w.double() @ x.double()
    err = ((y.double() - ref).norm() / ref.norm()).item()
    return err if err == err else float("inf")
