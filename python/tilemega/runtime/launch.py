"""Kernel-parameter packing, stream resolution and the launch call.

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
from .errors import ArgumentError, LaunchError


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


# CUresult of a cooperative launch whose grid cannot be resident at once.
COOPERATIVE_LAUNCH_TOO_LARGE = 720


def launch_kernel(function, grid, block, shared_bytes: int, stream: int, values, name: str,
                  cooperative: bool = False):
    """cuLaunchKernel (cuLaunchCooperativeKernel if `cooperative`) with checked
    result; LaunchError names the kernel."""
    drv = driver.cuda()
    arr, addr = param_array(values)
    if cooperative:
        result = drv.cuLaunchCooperativeKernel(function, grid[0], grid[1], grid[2], block[0],
                                               block[1], block[2], int(shared_bytes),
                                               drv.CUstream(stream), addr)
    else:
        result = drv.cuLaunchKernel(function, grid[0], grid[1], grid[2], block[0], block[1],
                                    block[2], int(shared_bytes), drv.CUstream(stream), addr, 0)
    del arr  # kept alive until here on purpose: the driver read it during the call
    check_result(result, describe(name, grid, block, shared_bytes, cooperative), name, grid)


def describe(name: str, grid, block, shared_bytes: int, cooperative: bool) -> str:
    api = "cuLaunchCooperativeKernel" if cooperative else "cuLaunchKernel"
    return (f"{api}({name!r}, grid={tuple(grid)}, block={tuple(block)}, "
            f"dynamic_shared_bytes={shared_bytes})")


def check_result(result, what: str, name: str, grid):
    """Raise LaunchError for a failed launch; the driver's refusal of a
    cooperative grid gets words a user can act on."""
    err = result[0] if isinstance(result, tuple) else result
    code = driver._code(err)
    if code == 0:
        return
    if code == COOPERATIVE_LAUNCH_TOO_LARGE:
        ctas = grid[0] * grid[1] * grid[2]
        raise LaunchError(f"{what} failed: CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE ({code}): "
                          f"the driver refuses to start persistent kernel {name!r}, whose "
                          f"{ctas} CTAs cannot all be resident on this device at once (other "
                          f"work or a smaller shared-memory carveout leaves less room than "
                          f"the occupancy check saw); recompile with fewer workers "
                          f"(mega_max_ctas)", code=code,
                          error_name="CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE")
    driver.call(result, what)
