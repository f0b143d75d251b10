"""Checks the RMSNorm artifact against torch on fresh random inputs."""

TOLERANCE = 1e-2  # bf16 output.
EPS = 1e-6


def check(artifact, torch):
    (kernel,) = artifact.kernels.values()
    m, h = kernel.spec.params[0].shape
    x = torch.randn(m, h, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(h, device="cuda", dtype=torch.bfloat16)
    y = torch.full_like(x, float("nan"))
    artifact(x, w, y)
    torch.cuda.synchronize()
    xd = x.double()
    ref = xd * torch.rsqrt(xd.pow(2).mean(dim=1, keepdim=True) + EPS) * w.double()
    err = ((y.double() - ref).norm() / ref.norm()).item()
    return err if err == err else float("inf")
