"""Checks the row_rescale artifact (a layout conversion) against torch."""

TOLERANCE = 1e-6  # f32: one division.


def check(artifact, torch):
    (kernel,) = artifact.kernels.values()
    m, kx = kernel.spec.params[0].shape
    ny = kernel.spec.params[1].shape[1]
    x = torch.rand(m, kx, device="cuda") + 0.5   # positive maxima
    y = torch.randn(m, ny, device="cuda")
    o = torch.full_like(y, float("nan"))
    artifact(x, y, o)
    torch.cuda.synchronize()
    ref = y.double() / x.double().amax(dim=1, keepdim=True)
    err = ((o.double() - ref).norm() / ref.norm()).item()
    return err if err == err else float("inf")
