"""Exception types of the TileMega runtime.

Design: every problem with the *arguments* of a launch (count, dtype, shape,
strides, device, scalar range, stream object) is an `ArgumentError`, which is a
`ValueError`. It is always raised before the GPU is touched. Problems reported
by the CUDA driver are `LaunchError`; a missing cuda-python, driver or device
is `RuntimeUnavailable`. Malformed artifact metadata is a plain `ValueError`.
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
