"""Reading a legacy DLPack capsule ("dltensor") with ctypes.

Only the fields are read; the capsule is not renamed to "used_dltensor", so its
own destructor calls the producer's deleter when the capsule is collected. The
caller keeps both the capsule and the producer object alive until the launch
has been enqueued (the producer owns the memory).
"""

from __future__ import annotations

import ctypes
from typing import NamedTuple, Optional, Tuple

KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_CUDA_MANAGED = 13
DEVICE_NAMES = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 4: "kDLOpenCL",
                7: "kDLVulkan", 8: "kDLMetal", 10: "kDLROCM", 13: "kDLCUDAManaged",
                14: "kDLOneAPI"}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),  # NULL: compact row-major
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))),
]

CAPSULE_NAME = b"dltensor"

_api = ctypes.pythonapi
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class DLInfo(NamedTuple):
    ptr: int                                  # data + byte_offset
    device_type: int
    device_id: int
    dtype: Tuple[int, int, int]               # (code, bits, lanes)
    shape: Tuple[int, ...]
    strides: Optional[Tuple[int, ...]]        # elements, None if NULL


def read_capsule(capsule) -> DLInfo:
    """Fields of the DLTensor inside a "dltensor" PyCapsule."""
    if not _api.PyCapsule_IsValid(capsule, CAPSULE_NAME):
        raise ValueError("__dlpack__() did not return a valid 'dltensor' capsule "
                         "(already consumed, or a versioned DLPack >= 1.0 capsule)")
    addr = _api.PyCapsule_GetPointer(capsule, CAPSULE_NAME)
    t = DLManagedTensor.from_address(addr).dl_tensor
    ndim = int(t.ndim)
    shape = tuple(int(t.shape[i]) for i in range(ndim))
    strides = tuple(int(t.strides[i]) for i in range(ndim)) if t.strides else None
    return DLInfo(
        ptr=int(t.data or 0) + int(t.byte_offset),
        device_type=int(t.device.device_type),
        device_id=int(t.device.device_id),
        dtype=(int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes)),
        shape=shape,
        strides=strides,
    )
