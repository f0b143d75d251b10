"""The element types of artifact format v1, and how other libraries spell them.

Pure stdlib (struct/ctypes): scalar packing must work without numpy or torch.
"""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass
from typing import Optional, Tuple


@dataclass(frozen=True)
class DType:
    name: str                 # artifact spelling, e.g. "float32"
    itemsize: int             # bytes
    kind: str                 # "f" float, "i" signed int, "u" unsigned int
    dlpack: Tuple[int, int]   # (DLDataTypeCode, bits)
    int_range: Optional[Tuple[int, int]] = None  # inclusive, int dtypes only


# DLPack type codes (dlpack.h): kDLInt=0, kDLUInt=1, kDLFloat=2, kDLBfloat=4,
# kDLFloat8_e4m3fn=10, kDLFloat8_e5m2=12.
DTYPES = {
    d.name: d
    for d in (
        DType("float16", 2, "f", (2, 16)),
        DType("bfloat16", 2, "f", (4, 16)),
        DType("float32", 4, "f", (2, 32)),
        DType("float64", 8, "f", (2, 64)),
        # Tensors only (gemm inputs); no scalar parameter has these types.
        DType("float8_e4m3fn", 1, "f", (10, 8)),
        DType("float8_e5m2", 1, "f", (12, 8)),
        DType("int8", 1, "i", (0, 8), (-(2**7), 2**7 - 1)),
        DType("uint8", 1, "u", (1, 8), (0, 2**8 - 1)),
        DType("int16", 2, "i", (0, 16), (-(2**15), 2**15 - 1)),
        DType("int32", 4, "i", (0, 32), (-(2**31), 2**31 - 1)),
        DType("int64", 8, "i", (0, 64), (-(2**63), 2**63 - 1)),
    )
}

_BY_DLPACK = {d.dlpack: d.name for d in DTYPES.values()}
_DLPACK_CODE_NAMES = {0: "int", 1: "uint", 2: "float", 3: "opaque", 4: "bfloat",
                      5: "complex", 6: "bool"}


def from_dlpack(code: int, bits: int, lanes: int) -> str:
    """Artifact dtype name for a DLDataType, or a descriptive foreign name."""
    if lanes == 1 and (code, bits) in _BY_DLPACK:
        return _BY_DLPACK[(code, bits)]
    base = f"{_DLPACK_CODE_NAMES.get(code, f'code{code}')}{bits}"
    return base if lanes == 1 else f"{base}x{lanes}"


def from_typestr(typestr: str) -> Tuple[str, int]:
    """(dtype name, itemsize) for an array-interface typestr such as '<f4'.

    Unknown or big-endian types come back under their own spelling so the
    caller's mismatch message shows what was passed.
    """
    if len(typestr) < 3 or not typestr[2:].isdigit():
        raise ValueError(f"malformed typestr {typestr!r}")
    order, kind, size = typestr[0], typestr[1], int(typestr[2:])
    little = order in "<|" or (order == "=" and struct.pack("=H", 1) == b"\x01\x00")
    if little:
        for d in DTYPES.values():
            # bfloat16 and the 8-bit floats have no array-interface
            # spelling; '<f2' is float16.
            if d.kind == kind and d.itemsize == size and d.name in _TYPESTR_FLOATS + _INTS:
                return d.name, size
    return typestr, size


_TYPESTR_FLOATS = ("float16", "float32", "float64")
_INTS = ("int8", "uint8", "int16", "int32", "int64")

#: The dtypes a scalar (by-value) parameter may have.
SCALAR_DTYPES = _TYPESTR_FLOATS + ("bfloat16",) + _INTS


def contiguous_strides(shape) -> Tuple[int, ...]:
    """Row-major strides in elements."""
    strides, acc = [], 1
    for extent in reversed(tuple(shape)):
        strides.append(acc)
        acc *= max(int(extent), 1)
    return tuple(reversed(strides))


_CTYPE_INT = {
    "int8": ctypes.c_int8, "uint8": ctypes.c_uint8, "int16": ctypes.c_int16,
    "int32": ctypes.c_int32, "int64": ctypes.c_int64,
}


def pack_scalar(dtype: str, value) -> ctypes._SimpleCData:
    """A ctypes object holding `value` in the bit layout of `dtype`.

    `value` must already be validated (see args.check_scalar); this raises
    OverflowError if a float does not fit the type.
    """
    if dtype in _CTYPE_INT:
        return _CTYPE_INT[dtype](value)
    if dtype == "float64":
        return ctypes.c_double(value)
    if dtype == "float32":
        struct.pack("<f", value)  # raises OverflowError where c_float would give inf
        return ctypes.c_float(value)
    if dtype == "float16":
        return ctypes.c_uint16(struct.unpack("<H", struct.pack("<e", value))[0])
    if dtype == "bfloat16":
        return ctypes.c_uint16(_bfloat16_bits(value))
    raise ValueError(f"unknown dtype {dtype!r}")


def _bfloat16_bits(value: float) -> int:
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    if (bits & 0x7F800000) == 0x7F800000:      # inf or nan: keep, force a quiet nan
        return (bits >> 16) | (0x40 if bits & 0x007FFFFF else 0)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16   # round to nearest even
    if (rounded & 0x7F80) == 0x7F80:
        raise OverflowError("value too large for bfloat16")
    return rounded & 0xFFFF
