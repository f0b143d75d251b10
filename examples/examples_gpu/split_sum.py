"""Checks split_sum (the last block adds the partials) against a float64
sum, over several launches: each must see a counter its previous launch
put back to zero, and write the sum of its own x."""

TOLERANCE = 1e-5  # float32 partial sums of 2^20 normal values.
LAUNCHES = 5


def check(artifact, torch):
    (kernel,) = artifact.kernels.values()
    (n,), (p,) = kernel.spec.params[0].shape, kernel.spec.params[1].shape
    part = torch.zeros(p, device="cuda", dtype=torch.float32)
    counts = torch.zeros(1, device="cuda", dtype=torch.int32)
    worst = 0.0
    for _ in range(LAUNCHES):
        x = torch.randn(n, device="cuda", dtype=torch.float32)
        out = torch.full((1,), float("nan"), device="cuda", dtype=torch.float32)
        artifact(x, part, counts, out)
        torch.cuda.synchronize()
        ref = x.double().sum()
        err = (abs(out.double()[0] - ref) / x.double().abs().sum()).item()
        if counts.item() != 0 or err != err:
            return float("inf")
        worst = max(worst, err)
    return worst
