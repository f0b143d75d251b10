"""Checks a pipelined_sum artifact against torch on fresh random inputs.

out[r, j] must be the sum over K tiles t of A[r, t * BLOCK_K + j] (plus the
same for B when the artifact has a second input), with the columns past K
counting as 0. A stage read before its copy landed, or after the next copy
refilled it, or an overhanging tile that is not zero-filled, gives errors of
order 1; fp32 rounding of a 32-term sum is ~1e-7.
"""

TOLERANCE = 1e-5  # ||out - ref|| / ||ref||


def check(artifact, torch):
    (kernel,) = artifact.kernels.values()
    *inputs, out_spec = kernel.spec.params
    m, k = inputs[0].shape
    block_k = out_spec.shape[1]
    tensors = [torch.randn(m, k, device="cuda", dtype=torch.float32)
               for _ in inputs]
    # Poisoned: every element must be written.
    out = torch.full((m, block_k), float("nan"), device="cuda",
                     dtype=torch.float32)
    artifact(*tensors, out)
    torch.cuda.synchronize()
    tiles = -(-k // block_k)
    ref = torch.zeros(m, block_k, device="cuda", dtype=torch.float64)
    for x in tensors:
        padded = torch.zeros(m, tiles * block_k, device="cuda",
                             dtype=torch.float64)
        padded[:, :k] = x.double()
        ref += padded.view(m, tiles, block_k).sum(dim=1)
    err = ((out.double() - ref).norm() / ref.norm()).item()
    return err if err == err else float("inf")  # NaN never passes.
