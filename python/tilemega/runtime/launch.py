"""Kernel-parameter packing, stream resolution and cuLaunchKernel.

cuLaunchKernel takes `void** kernelParams`: an array with one pointer per
parameter, each pointing at that parameter's bytes. We build it with ctypes
and pass its address as an int (cuda.bindings accepts an int as a ready void**).
The driver copies the values during the call, so they only need to live until
it returns.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Optional, Sequence, Tuple

from . import driver
from .errors import ArgumentError


def param_array(values: Sequence[ctypes._SimpleCData]):
    """(ctypes array of void*, its address or None) for the packed params."""
    if not values:
        return None, None          # NULL kernelParams for a kernel without params
    arr = (ctypes.c_void_p * len(values))(*(ctypes.addressof(v) for v in values))
    return arr, ctypes.addressof(arr)


def stream_handle(stream) -> Optional[int]:
    """A CUstream handle as an int, or None for "choose the default".

    Accepts None, an int, a torch.cuda.Stream (or anything with .cuda_stream),
    an object implementing __cuda_stream__ (cuda.core), or a CUstream.
    """
    if stream is None:
        return None
    if isinstance(stream, bool):
        raise ArgumentError(f"stream: expected a stream handle or object, got {stream!r}")
    if isinstance(stream, int):
        return stream
    if hasattr(stream, "cuda_stream"):          # torch.cuda.Stream
        return int(stream.cuda_stream)
    if hasattr(stream, "__cuda_stream__"):      # cuda.core stream protocol: (version, handle)
        return int(stream.__cuda_stream__()[1])
    if type(stream).__name__ == "CUstream":     # cuda.bindings.driver.CUstream
        return int(stream)
    raise ArgumentError(f"stream: expected an int handle, a torch.cuda.Stream or a CUstream, "
                        f"got {type(stream).__name__}")


def default_stream(device: int, first_tensor_is_torch: bool) -> int:
    """torch's current stream when the first tensor is torch, else the legacy stream 0."""
    torch = sys.modules.get("torch")
    if first_tensor_is_torch and torch is not None:
        return int(torch.cuda.current_stream(device).cuda_stream)
    return 0


def normalize_dims(dims, what: str) -> Tuple[int, int, int]:
    """(x, y, z) from an int or a 1-3 sequence of positive ints."""
    if isinstance(dims, int) and not isinstance(dims, bool):
        dims = (dims,)
    try:
        dims = tuple(int(d) for d in dims)
    except TypeError:
        raise ArgumentError(f"{what}: expected an int or up to 3 ints, got {dims!r}") from None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise ArgumentError(f"{what}: expected 1 to 3 positive ints, got {list(dims)}")
    return dims + (1,) * (3 - len(dims))


def launch_kernel(function, grid, block, shared_bytes: int, stream: int, values, name: str):
    """cuLaunchKernel with checked result; LaunchError names the kernel."""
    drv = driver.cuda()
    arr, addr = param_array(values)
    result = drv.cuLaunchKernel(function, grid[0], grid[1], grid[2], block[0], block[1],
                                block[2], int(shared_bytes), drv.CUstream(stream), addr, 0)
    del arr  # kept alive until here on purpose: the driver read it during the call
    driver.call(result, f"cuLaunchKernel({name!r}, grid={tuple(grid)}, block={tuple(block)}, "
                        f"dynamic_shared_bytes={shared_bytes})")
