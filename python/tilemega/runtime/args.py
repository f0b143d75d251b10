"""Checking launch arguments against a KernelSpec, without touching the GPU.

`bind(spec, args)` validates every argument and packs it into the ctypes
object that cuLaunchKernel will read, so a launch either gets fully checked
arguments or raises ArgumentError naming the kernel and the parameter.
"""

from __future__ import annotations

import ctypes
import functools
import numbers
import operator
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence

from .dtypes import DTYPES, pack_scalar
from .errors import ArgumentError
from .metadata import KernelSpec, ParamSpec
from .tensor_maps import TensorMaps
from .tensors import TensorDesc, TensorError, describe


@dataclass
class BoundArgs:
    """Checked, packed arguments of one launch."""
    kernel: str
    values: List[ctypes._SimpleCData]          # one per param, in order
    tensors: List[TensorDesc] = field(default_factory=list)
    device: Optional[int] = None               # None: no tensor named a device
    keepalive: List[Any] = field(default_factory=list)

    @property
    def first_tensor_is_torch(self) -> bool:
        return bool(self.tensors) and self.tensors[0].source == "torch"

    @property
    def probe_pointer(self) -> Optional[int]:
        """A non-null tensor pointer, to ask the driver for its device."""
        return next((t.ptr for t in self.tensors if t.ptr), None)


def bind(spec: KernelSpec, args: Sequence[Any], stream: Optional[int] = None) -> BoundArgs:
    """Check `args` against `spec` and pack them; raise ArgumentError."""
    if len(args) != len(spec.params):
        names = ", ".join(p.name for p in spec.params)
        raise ArgumentError(f"{spec.name}: expected {len(spec.params)} argument"
                            f"{'' if len(spec.params) == 1 else 's'} ({names}), got {len(args)}")
    bound = BoundArgs(spec.name, [], keepalive=list(args))
    devices = {}
    for i, (param, arg) in enumerate(zip(spec.params, args)):
        where = f"{spec.name}: argument {i} '{param.name}'"
        if param.kind == "scalar":
            bound.values.append(check_scalar(param, arg, where))
            continue
        desc = check_tensor(param, arg, where, stream)
        bound.tensors.append(desc)
        bound.values.append(ctypes.c_uint64(desc.ptr))
        if desc.keepalive is not None:
            bound.keepalive.append(desc.keepalive)
        if desc.device is not None:
            devices.setdefault(desc.device, param.name)
    if len(devices) > 1:
        listed = ", ".join(f"'{n}' on cuda:{d}" for d, n in devices.items())
        raise ArgumentError(f"{spec.name}: tensor arguments are on different devices ({listed})")
    bound.device = next(iter(devices), None)
    if spec.tensor_maps:
        # The TMA tensor maps of the tensors just checked, after the params.
        addresses = [v.value for v in bound.values]
        bound.values.extend(maps_for(spec).slots(addresses))
    return bound


@functools.lru_cache(maxsize=256)
def maps_for(spec: KernelSpec) -> TensorMaps:
    """The tensor maps (and their cache of encoded addresses) of `spec`."""
    return TensorMaps(spec)


def check_tensor(param: ParamSpec, arg, where: str, stream: Optional[int] = None) -> TensorDesc:
    """Describe `arg` and compare dtype, shape and strides with `param`."""
    try:
        desc = describe(arg, stream)
    except TensorError as exc:
        raise ArgumentError(f"{where}: {exc}") from None
    if desc.dtype != param.dtype:
        raise ArgumentError(f"{where}: expected dtype {param.dtype}, got {desc.dtype}")
    if desc.shape != param.shape:
        raise ArgumentError(f"{where}: expected shape {list(param.shape)}, got {list(desc.shape)}")
    if not _strides_match(desc.shape, desc.strides, param.strides):
        raise ArgumentError(
            f"{where}: expected strides {list(param.strides)} (elements, row-major), got "
            f"{list(desc.strides)}; pass a contiguous tensor (e.g. x.contiguous())")
    if desc.ptr % param.alignment:
        raise ArgumentError(
            f"{where}: the kernel uses {param.alignment}-byte vector accesses but the "
            f"tensor's address {desc.ptr:#x} is not {param.alignment}-byte aligned "
            "(a view into another tensor?); pass a fresh copy (e.g. x.clone())")
    return desc


def _strides_match(shape, actual, expected) -> bool:
    if 0 in shape:                       # empty tensor: never addressed
        return True
    # The stride of an extent-1 dimension is never used, and libraries set it freely.
    return all(a == e for n, a, e in zip(shape, actual, expected) if n != 1)


def check_scalar(param: ParamSpec, value, where: str) -> ctypes._SimpleCData:
    """Validate a scalar and pack it.

    Int dtypes take an int (or anything with __index__, e.g. numpy ints) in
    range; float dtypes take an int or a real number. bool is refused for
    both, as it is almost always a mistake for a kernel parameter.
    """
    dt = DTYPES[param.dtype]
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise ArgumentError(f"{where}: expected a number for {dt.name}, got bool")
    if dt.int_range is not None:
        try:
            ivalue = operator.index(value)
        except TypeError:
            raise ArgumentError(f"{where}: expected an int for {dt.name}, "
                                f"got {type(value).__name__} {value!r}") from None
        lo, hi = dt.int_range
        if not lo <= ivalue <= hi:
            raise ArgumentError(f"{where}: value {ivalue} out of range for {dt.name} [{lo}, {hi}]")
        return pack_scalar(dt.name, ivalue)
    if not isinstance(value, numbers.Real):
        raise ArgumentError(f"{where}: expected an int or float for {dt.name}, "
                            f"got {type(value).__name__} {value!r}")
    try:
        return pack_scalar(dt.name, float(value))
    except OverflowError:
        raise ArgumentError(f"{where}: value {value!r} out of range for {dt.name}") from None
