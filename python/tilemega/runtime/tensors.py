"""Turning a tensor argument into (pointer, dtype, shape, strides, device).

Accepted, tried in this order:
  1. torch.Tensor (only if torch is already imported: found via sys.modules,
     never imported here);
  2. any object with __cuda_array_interface__ (v2/v3; CuPy, Numba, JAX...);
  3. any object with __dlpack__/__dlpack_device__ on device kDLCUDA.
Nothing here calls the CUDA driver. Errors are `TensorError` with a message
that the caller prefixes with the kernel and parameter name.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple, Optional, Tuple

from . import dlpack
from .dtypes import contiguous_strides, from_dlpack, from_typestr


class TensorError(ValueError):
    """The object is not a usable CUDA tensor (message without param name)."""


class TensorDesc(NamedTuple):
    ptr: int
    dtype: str                       # artifact dtype name, or foreign spelling
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]         # in elements
    device: Optional[int]            # CUDA ordinal; None = unknown (CAI)
    source: str                      # "torch", "cai" or "dlpack"
    keepalive: Any = None            # e.g. the DLPack capsule


def _torch_tensor_type():
    torch = sys.modules.get("torch")
    return getattr(torch, "Tensor", None) if torch is not None else None


def is_torch_tensor(obj) -> bool:
    t = _torch_tensor_type()
    return t is not None and isinstance(obj, t)


def describe(obj, stream: Optional[int] = None) -> TensorDesc:
    """Describe a CUDA tensor; raise TensorError for anything else.

    `stream` (a CUstream handle) is passed to a DLPack producer's
    `__dlpack__(stream=...)` so it can order its pending work before ours.
    """
    if is_torch_tensor(obj):
        return _from_torch(obj)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_cai(cai)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _from_dlpack(obj, stream)
    if hasattr(obj, "__array_interface__") or hasattr(obj, "__array__"):
        raise TensorError(f"got a host array ({_typename(obj)}) in CPU memory; "
                          "expected a CUDA tensor: copy it to the GPU first")
    raise TensorError(f"expected a CUDA tensor (torch.Tensor, an object with "
                      f"__cuda_array_interface__ or __dlpack__), got {_typename(obj)}")


def _typename(obj) -> str:
    t = type(obj)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _from_torch(t) -> TensorDesc:
    dev = t.device
    if dev.type != "cuda":
        raise TensorError(f"got a torch tensor on device '{dev}'; expected a CUDA "
                          "tensor: move it with .cuda() or .to('cuda')")
    dtype = str(t.dtype).replace("torch.", "")
    # data_ptr() already includes the storage offset of views.
    index = dev.index if dev.index is not None else sys.modules["torch"].cuda.current_device()
    return TensorDesc(int(t.data_ptr()), dtype, tuple(int(s) for s in t.shape),
                      tuple(int(s) for s in t.stride()), int(index), "torch")


def _from_cai(cai) -> TensorDesc:
    try:
        shape = tuple(int(s) for s in cai["shape"])
        typestr = cai["typestr"]
        ptr = int(cai["data"][0] or 0)
    except (KeyError, TypeError, IndexError, ValueError) as exc:
        raise TensorError(f"malformed __cuda_array_interface__ ({exc!r})") from None
    if cai.get("mask") is not None:
        raise TensorError("masked __cuda_array_interface__ arrays are not supported")
    try:
        dtype, itemsize = from_typestr(typestr)
    except ValueError as exc:
        raise TensorError(f"__cuda_array_interface__: {exc}") from None
    byte_strides = cai.get("strides")
    if byte_strides is None:
        strides = contiguous_strides(shape)
    else:
        byte_strides = tuple(int(s) for s in byte_strides)
        if len(byte_strides) != len(shape) or any(s % itemsize for s in byte_strides):
            raise TensorError(f"__cuda_array_interface__ strides {list(byte_strides)} (bytes) "
                              f"do not fit shape {list(shape)} and itemsize {itemsize}")
        strides = tuple(s // itemsize for s in byte_strides)
    # The interface carries no device ordinal; the launcher asks the driver.
    return TensorDesc(ptr, dtype, shape, strides, None, "cai")


def _from_dlpack(obj, stream: Optional[int]) -> TensorDesc:
    dev_type, dev_id = (int(x) for x in obj.__dlpack_device__())
    if dev_type != dlpack.KDL_CUDA:
        name = dlpack.DEVICE_NAMES.get(dev_type, str(dev_type))
        where = "host memory" if dev_type == dlpack.KDL_CPU else f"device type {name}"
        raise TensorError(f"got a DLPack tensor ({_typename(obj)}) in {where}; "
                          "expected a CUDA device tensor (kDLCUDA)")
    # DLPack stream rule for CUDA: None or 1 = legacy default stream, 0 is
    # forbidden as ambiguous, other values are the consumer's stream.
    try:
        capsule = obj.__dlpack__(stream=None if not stream else stream)
    except TypeError:          # producers predating the stream keyword
        capsule = obj.__dlpack__()
    try:
        info = dlpack.read_capsule(capsule)
    except ValueError as exc:
        raise TensorError(str(exc)) from None
    if info.device_type != dlpack.KDL_CUDA:
        name = dlpack.DEVICE_NAMES.get(info.device_type, str(info.device_type))
        raise TensorError(f"DLPack capsule is on device type {name}; expected kDLCUDA")
    strides = info.strides if info.strides is not None else contiguous_strides(info.shape)
    return TensorDesc(info.ptr, from_dlpack(*info.dtype), info.shape, strides,
                      info.device_id, "dlpack", keepalive=capsule)
