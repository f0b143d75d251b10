"""Exception types of the TileMega runtime.

Design: every problem with the *arguments* of a launch (count, dtype, shape,
strides, device, scalar range, stream object) is an `ArgumentError`, which is a
`ValueError`. It is always raised before the GPU is touched. Problems reported
by the CUDA driver are `LaunchError`; a missing cuda-python, driver or device
is `RuntimeUnavailable`. Malformed artifact metadata is a plain `ValueError`.
A persistent mega-kernel that stopped on its watchdog is a `MegaKernelError`.
"""

from __future__ import annotations


class ArgumentError(ValueError):
    """An argument does not match the kernel's parameter metadata.

    Raised before anything touches the GPU. Wrong argument count is an
    ArgumentError too (not a TypeError) so one `except` covers all checks.
    """


class LaunchError(RuntimeError):
    """The CUDA driver reported an error.

    Attributes:
        code: the CUresult as an int (0 never appears here).
        error_name: e.g. "CUDA_ERROR_NO_BINARY_FOR_GPU" ("" when unknown).
    """

    def __init__(self, message: str, code: int = -1, error_name: str = ""):
        super().__init__(message)
        self.code = code
        self.error_name = error_name


class RuntimeUnavailable(RuntimeError):
    """cuda-python, the CUDA driver or a CUDA device is missing on this machine."""


class MegaKernelError(RuntimeError):
    """A mega-kernel's watchdog fired: a CTA waited too long and the kernel stopped.

    Decoded from the error record in `mega_state` (docs/mega.md). Attributes:
    code (1 worker wait, 2 scheduler wait, 3 JIT-queue wait), kind (words),
    cta, entry (-1 if none), event (-1 if none), seen and expected (counter
    values). The events and state are left as the kernel wrote them; call
    MegaKernel.reset() before launching again.
    """

    def __init__(self, message: str, code: int, kind: str, cta: int, entry: int, event: int,
                 seen: int, expected: int):
        super().__init__(message)
        self.code, self.kind, self.cta = code, kind, cta
        self.entry, self.event, self.seen, self.expected = entry, event, seen, expected
