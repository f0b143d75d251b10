"""TMA tensor maps: the CUtensorMaps a kernel with bulk copies takes by value
after its own parameters (artifact `tensor_maps`, docs/artifact-format.md).

A map describes one tensor argument - its address, shape and strides - and
the box its copies read; everything but the address is fixed by the
artifact, so a launch encodes a map only for an address it has not seen
(`TensorMaps.bytes_for`, a small cache per kernel) and copies the 128 bytes
into its parameter slot. Encoding is the driver's cuTensorMapEncodeTiled,
called through ctypes (libcuda is already loaded by then): its inputs are
plain integers and the output a 64-byte-aligned buffer, so nothing depends
on a binding's wrapper types.
"""

from __future__ import annotations

import ctypes
from typing import Callable, Dict, List, Sequence, Tuple

from .dtypes import DTYPES
from .errors import ArgumentError, LaunchError
from .metadata import KernelSpec, ParamSpec, TensorMapSpec, row_major_strides

MAP_BYTES, MAP_ALIGN = 128, 64

# CUtensorMapDataType (cuda.h). TMA copies bits: the signed integer types
# travel as the unsigned ones of their width.
_DATA_TYPES = {"uint8": 0, "int8": 0, "uint16": 1, "int16": 1, "int32": 3,
               "int64": 5, "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9,
               # 8-bit floats move as bytes (CU_TENSOR_MAP_DATA_TYPE_UINT8).
               "float8_e4m3fn": 0, "float8_e5m2": 0}
# CUtensorMapSwizzle by span in bytes.
_SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}
_INTERLEAVE_NONE, _L2_PROMOTION_256B, _OOB_FILL_ZEROS = 0, 3, 0

# (data type, dims, byte strides, box, swizzle), innermost dimension first
# (the driver's order) -> the 128 map bytes.
Encoder = Callable[[int, int, Tuple[int, ...], Tuple[int, ...], Tuple[int, ...], int], bytes]


def aligned_slot(size: int = MAP_BYTES, align: int = MAP_ALIGN):
    """A ctypes byte array of `size` at an `align`-byte aligned address (a
    view into a larger buffer, which it keeps alive)."""
    raw = (ctypes.c_uint8 * (size + align))()
    offset = -ctypes.addressof(raw) % align
    return (ctypes.c_uint8 * size).from_buffer(raw, offset)


def _driver_encode(dtype: int, address: int, dims, strides, box, swizzle: int) -> bytes:
    """cuTensorMapEncodeTiled through libcuda."""
    lib = _libcuda()
    rank = len(dims)
    out = aligned_slot()
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    result = lib.cuTensorMapEncodeTiled(
        ctypes.byref(out), ctypes.c_int(dtype), u32(rank), ctypes.c_void_p(address),
        (u64 * rank)(*dims), (u64 * max(rank - 1, 1))(*strides or (0,)),
        (u32 * rank)(*box), (u32 * rank)(*([1] * rank)), ctypes.c_int(_INTERLEAVE_NONE),
        ctypes.c_int(swizzle), ctypes.c_int(_L2_PROMOTION_256B), ctypes.c_int(_OOB_FILL_ZEROS))
    if result != 0:
        name = ctypes.c_char_p()
        lib.cuGetErrorName(ctypes.c_int(result), ctypes.byref(name))
        raise LaunchError(f"cuTensorMapEncodeTiled failed: "
                          f"{(name.value or b'?').decode()} ({result}) for dims {list(dims)}, "
                          f"byte strides {list(strides)}, box {list(box)}, swizzle {swizzle}")
    return bytes(out)


_lib = None


def _libcuda():
    global _lib
    if _lib is None:
        try:
            _lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise LaunchError(f"tensor maps need the CUDA driver (libcuda.so.1): {exc}") from None
        _lib.cuTensorMapEncodeTiled.restype = ctypes.c_int
        _lib.cuGetErrorName.restype = ctypes.c_int
    return _lib


# The encoder launches use; tests replace it (no driver on CPU machines).
encoder: Encoder = _driver_encode


def driver_arguments(spec: TensorMapSpec, param: ParamSpec) -> Tuple[int, tuple, tuple, tuple, int]:
    """(data type, dims, byte strides, box, swizzle) of `spec` over `param`,
    innermost dimension first."""
    itemsize = DTYPES[param.dtype].itemsize
    shape = spec.shape or param.shape
    element_strides = row_major_strides(spec.shape) if spec.shape else param.strides
    dims = tuple(reversed(shape))
    strides = tuple(s * itemsize for s in reversed(element_strides[:-1]))
    return (_DATA_TYPES[param.dtype], dims, strides, tuple(reversed(spec.box)),
            _SWIZZLES[spec.swizzle_bytes])


class TensorMaps:
    """The tensor maps of one kernel: which argument each reads, and the
    bytes of each for the addresses seen so far."""

    # Addresses remembered per map; beyond, the cache starts over.
    MAX_CACHED = 64

    def __init__(self, spec: KernelSpec):
        self.kernel = spec.name
        self.specs = spec.tensor_maps
        self.params = tuple(s.param for s in spec.tensor_maps)
        self.fixed = tuple(driver_arguments(s, spec.params[s.param]) for s in spec.tensor_maps)
        self.names = tuple(spec.params[s.param].name for s in spec.tensor_maps)
        self.cache: List[Dict[int, bytes]] = [{} for _ in spec.tensor_maps]

    def __len__(self):
        return len(self.specs)

    def bytes_for(self, index: int, address: int) -> bytes:
        """The 128 bytes of map `index` for its tensor at `address`."""
        cache = self.cache[index]
        found = cache.get(address)
        if found is None:
            if address % 16:
                raise ArgumentError(
                    f"{self.kernel}: argument {self.params[index]} '{self.names[index]}': TMA "
                    f"reads tensors at 16-byte aligned addresses, got {address:#x}; pass a "
                    "fresh copy (e.g. x.clone())")
            dtype, dims, strides, box, swizzle = self.fixed[index]
            found = encoder(dtype, address, dims, strides, box, swizzle)
            if len(found) != MAP_BYTES:
                raise LaunchError(f"{self.kernel}: a tensor map must be {MAP_BYTES} bytes, "
                                  f"the encoder gave {len(found)}")
            if len(cache) >= self.MAX_CACHED:
                cache.clear()
            cache[address] = found
        return found

    def slots(self, addresses: Sequence[int]) -> list:
        """Fresh 64-byte-aligned parameter slots holding the maps for the
        tensors at `addresses` (one per kernel param; scalars ignored)."""
        out = []
        for index, param in enumerate(self.params):
            slot = aligned_slot()
            ctypes.memmove(ctypes.addressof(slot), self.bytes_for(index, addresses[param]),
                           MAP_BYTES)
            out.append(slot)
        return out
