"""The fast launch path behind `Kernel.__call__`.

The general path (`Kernel.launch`: args.bind, then launch.launch_kernel inside
driver.device_context) is written for clarity and for every kind of argument;
it costs tens of microseconds of host time per launch. This module handles the
common case in a few microseconds:

  * every tensor argument is a torch.Tensor on a CUDA device (all on one),
  * every scalar is a plain Python int or float,
  * the primary context of that device is current on the calling thread
    (torch makes it so once it has used the device on that thread).

It checks exactly what the general path checks, against values precomputed
once per kernel from its spec (torch dtype objects, shape and stride tuples,
alignment, scalar ranges, a struct format that packs all parameters with one
call). It never raises an ArgumentError itself and never decides that an
argument is bad: whenever anything is not certainly fine (a dtype, shape,
stride, device or alignment mismatch, a numpy scalar, an out-of-range value,
another context current, another thread using the kernel at the same moment)
it returns False and the caller runs the general path, which then either
launches (e.g. torch's arbitrary strides of size-1 dimensions) or raises the
usual ArgumentError with the usual message. So acceptance, error messages and
the order in which errors are found are the general path's by construction.

Thread safety: the parameter buffer is preallocated per kernel and guarded by
a lock taken without blocking; a thread that finds it taken uses the general
path (which allocates its own), so a Kernel may be called from several threads
at once. The context check (cuCtxGetCurrent) is per thread by nature.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Optional

from . import driver, l2_window
from .args import _strides_match, maps_for
from .dtypes import DTYPES, _bfloat16_bits
from .launch import check_result, describe, stream_handle
from .tensor_maps import MAP_ALIGN, MAP_BYTES

# Kinds of parameter checks, the first field of each entry of FastLauncher.checks.
_TENSOR, _INT, _FLOAT, _BF16 = 0, 1, 2, 3

# struct codes (little-endian, standard sizes) of each artifact dtype's bytes.
# The integer codes refuse (struct.error) exactly the values outside the
# dtype's range, and 'e'/'f' raise OverflowError where pack_scalar does; both
# send the call to the general path, which reports it. bfloat16 is packed as
# its bit pattern (uint16) by _bfloat16_bits, as pack_scalar does.
_CODES = {"int8": "b", "uint8": "B", "int16": "h", "int32": "i", "int64": "q",
          "float16": "e", "float32": "f", "float64": "d", "bfloat16": "H",
          # Tensor parameters only (metadata refuses 8-bit float scalars).
          "float8_e4m3fn": "B", "float8_e5m2": "B"}
_SLOT = 8       # every parameter gets an 8-byte aligned 8-byte slot in the buffer

# CUstream objects by raw handle, shared by all kernels: cuLaunchKernel takes a
# CUstream as is, while an int would be wrapped into a new one at every call.
_streams = {}
_MAX_STREAMS = 256


def _cu_stream(drv, handle: int):
    cu = _streams.get(handle)
    if cu is None:
        if len(_streams) >= _MAX_STREAMS:
            _streams.clear()
        cu = _streams[handle] = drv.CUstream(handle)
    return cu


def _raw_stream_getter(torch):
    """device -> torch's current CUstream handle on it, as cheaply as torch allows."""
    raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    current_stream = torch.cuda.current_stream
    return lambda device: current_stream(device).cuda_stream


def _param_slots(nparams: int, nmaps: int):
    """(buffer, void*[] kernelParams, map slot addresses): an 8-byte slot per
    parameter, then a 64-byte-aligned 128-byte slot per tensor map."""
    size = _SLOT * nparams + (MAP_ALIGN + MAP_BYTES * nmaps if nmaps else 0)
    buffer = ctypes.create_string_buffer(max(size, _SLOT))
    base = ctypes.addressof(buffer)
    slots = [base + _SLOT * i for i in range(nparams)]
    first = base + _SLOT * nparams
    first += -first % MAP_ALIGN
    maps = [first + MAP_BYTES * j for j in range(nmaps)]
    pointers = (ctypes.c_void_p * max(nparams + nmaps, 1))(*(slots + maps))
    return buffer, pointers, maps


class FastLauncher:
    """Per-kernel state of the fast path; `try_launch(args, stream)` -> bool."""

    def __init__(self, kernel, torch):
        spec = kernel.spec
        self.kernel = kernel
        self.tensor_type = torch.Tensor
        self.nparams = len(spec.params)
        checks, fmt = [], "<"
        for p in spec.params:
            code = _CODES[p.dtype]
            if p.kind == "tensor":
                tdtype = getattr(torch, p.dtype)     # torch dtypes are singletons
                checks.append((_TENSOR, tdtype, tuple(p.shape), tuple(p.strides), p.alignment))
                code = "Q"
            else:
                dt = DTYPES[p.dtype]
                if dt.int_range is not None:
                    checks.append((_INT, None, None, None, None))
                elif p.dtype == "bfloat16":
                    checks.append((_BF16, None, None, None, None))
                else:
                    checks.append((_FLOAT, None, None, None, None))
            fmt += code + "x" * (_SLOT - struct.calcsize("<" + code))
        self.checks = tuple(checks)
        self.pack_into = struct.Struct(fmt).pack_into
        # TMA tensor maps, by value after the params: the general path's
        # cache of encoded maps (args.maps_for), and the tensor's address
        # each slot was last written for.
        self.maps = maps_for(spec) if spec.tensor_maps else None
        self.nmaps = len(spec.tensor_maps)
        # One slot per parameter and the void*[] kernelParams pointing at them,
        # allocated once: a launch only writes the slots (build() ensures >= 1).
        self.buffer, self.pointers, self.map_slots = _param_slots(self.nparams, self.nmaps)
        self.params_address = ctypes.addressof(self.pointers)
        self.map_addresses = [None] * self.nmaps
        self.grid = spec.grid
        self.block = spec.block
        self.smem = spec.dynamic_shared_bytes
        self.cooperative = kernel.cooperative
        self.what = describe(spec.name, spec.grid, spec.block, spec.dynamic_shared_bytes,
                             self.cooperative)
        self.raw_stream = _raw_stream_getter(torch)
        self.lock = threading.Lock()
        self.devices = {}      # CUDA ordinal -> (primary context as int, CUfunction)
        self.drv = None        # cuda.bindings.driver, once the first launch got it

    @classmethod
    def build(cls, kernel, torch) -> Optional["FastLauncher"]:
        """A launcher for `kernel`, or None where the fast path cannot apply."""
        spec = kernel.spec
        if not any(p.kind == "tensor" for p in spec.params):
            return None          # no tensor names the device: the general path decides
        if not isinstance(getattr(torch, "Tensor", None), type):
            return None
        if any(p.kind == "tensor" and getattr(torch, p.dtype, None) is None for p in spec.params):
            return None
        if not hasattr(torch, "cuda"):
            return None
        return cls(kernel, torch)

    # -- per call --------------------------------------------------------------

    def try_launch(self, args, stream) -> bool:
        """Launch and return True, or return False for the general path.

        Raises only what the general path would raise for the same call: an
        ArgumentError for a bad `stream` object, a LaunchError from the driver.
        """
        if stream is not None:
            handle = stream if type(stream) is int else stream_handle(stream)
        checked = self._checked(args)
        if checked is None:
            return False
        values, device = checked
        entry = self.devices.get(device)
        if entry is None:
            entry = self._prepare(device)
        drv = self.drv
        current = drv.cuCtxGetCurrent()[1]
        if current is None or int(current) != entry[0]:
            return False                 # no or another context current: the general path
        if stream is None:               # sets or pushes (and pops) the primary one
            handle = self.raw_stream(device)
        cu_stream = _streams.get(handle)
        if cu_stream is None:
            cu_stream = _cu_stream(drv, handle)

        lock = self.lock
        if not lock.acquire(False):
            return False                 # another thread is using the buffer right now
        try:
            try:
                self.pack_into(self.buffer, 0, *values)
            except (OverflowError, struct.error):
                return False             # e.g. a float beyond float32: the general path says so
            if self.maps is not None:
                self._write_maps(values, self.map_slots, self.map_addresses)
            grid, block = entry[2], self.block
            if self.cooperative:
                result = drv.cuLaunchCooperativeKernel(entry[1], grid[0], grid[1], grid[2],
                                                       block[0], block[1], block[2], self.smem,
                                                       cu_stream, self.params_address)
            else:
                result = drv.cuLaunchKernel(entry[1], grid[0], grid[1], grid[2], block[0],
                                            block[1], block[2], self.smem, cu_stream,
                                            self.params_address, 0)
        finally:
            lock.release()
        err = result[0]
        if err and driver._code(err) != 0:
            self._fail(result, entry[2])
        return True

    def _fail(self, result, grid):
        """Raise the driver's error for a launch of `grid` (a resident
        kernel's grid is the device's, not the compiled bound)."""
        what = self.what if grid == self.grid else describe(
            self.kernel.name, grid, self.block, self.smem, self.cooperative)
        check_result(result, what, self.kernel.name, grid)

    def _write_maps(self, values, slots, written):
        """The tensor maps of the tensors in `values` into `slots`, where the
        address a slot was written for (`written`) changed."""
        maps = self.maps
        for index, param in enumerate(maps.params):
            address = values[param]
            if written[index] != address:
                ctypes.memmove(slots[index], maps.bytes_for(index, address), MAP_BYTES)
                written[index] = address

    def _checked(self, args):
        """(packed values, device) when every argument passes the fast
        checks, else None (the general path decides)."""
        tensor_type = self.tensor_type
        if len(args) != self.nparams:
            return None
        values = []
        device = -1
        for arg, (kind, a, b, c, d) in zip(args, self.checks):
            if kind == _TENSOR:          # a: torch dtype, b: shape, c: strides, d: alignment
                if not isinstance(arg, tensor_type) or arg.dtype is not a or not arg.is_cuda:
                    return None
                if arg.shape != b:
                    return None
                strides = arg.stride()
                if strides != c and not _strides_match(b, strides, c):
                    return None
                ptr = arg.data_ptr()
                if ptr % d:
                    return None
                index = arg.get_device()
                if index != device:
                    if device >= 0 or index < 0:
                        return None     # tensors on different devices
                    device = index
                values.append(ptr)
            elif kind == _INT:           # the range is checked by pack_into
                if type(arg) is not int:
                    return None
                values.append(arg)
            else:
                t = type(arg)
                if t is not float and t is not int:
                    return None
                if kind == _BF16:
                    try:
                        arg = _bfloat16_bits(float(arg))
                    except OverflowError:
                        return None
                values.append(arg)

        return values, device

    def bound(self, args) -> Optional["BoundLaunch"]:
        """A launch with `args` packed once (see BoundLaunch), or None where
        the fast checks do not accept them."""
        checked = self._checked(args)
        if checked is None:
            return None
        values, device = checked
        if device not in self.devices:
            self._prepare(device)
        try:
            return BoundLaunch(self, values, device)
        except (OverflowError, struct.error):
            return None

    def _prepare(self, device: int):
        """Load the module on `device` (once) and remember its context and function."""
        self.drv = driver.cuda()
        kernel = self.kernel
        ctx = driver.primary_context(device)
        with driver.device_context(device):
            function = kernel.artifact._function(device, kernel.name, self.smem)
            grid = kernel.grid_on(device, function)
        entry = (int(ctx), function, grid)
        self.devices[device] = entry
        return entry


class BoundLaunch:
    """One kernel's arguments checked and packed once, for a caller that
    launches the same tensors many times (a persistent kernel whose tensors
    are bound once): a launch is the context check, the stream lookup and
    the driver call, whatever the number of parameters. The caller keeps
    the tensors alive and unchanged (MegaKernel holds them while bound)."""

    def __init__(self, launcher: FastLauncher, values, device: int):
        self.launcher = launcher
        self.device = device
        self.buffer, self.pointers, slots = _param_slots(launcher.nparams, launcher.nmaps)
        launcher.pack_into(self.buffer, 0, *values)
        if launcher.maps is not None:
            launcher._write_maps(values, slots, [None] * launcher.nmaps)
        self.params_address = ctypes.addressof(self.pointers)
        self.window = None    # an l2_window.L2Window the launches carry, if set

    def launch(self, handle: int) -> bool:
        """Launch on the raw stream `handle`; False (nothing launched) when
        the device's primary context is not current on this thread."""
        fl = self.launcher
        drv = fl.drv
        context, function, grid = fl.devices[self.device]
        current = drv.cuCtxGetCurrent()[1]
        if current is None or int(current) != context:
            return False
        cu_stream = _streams.get(handle)
        if cu_stream is None:
            cu_stream = _cu_stream(drv, handle)
        block = fl.block
        if self.window is not None:
            result = l2_window.launch(drv, function, grid, block, fl.smem, cu_stream,
                                      self.params_address, fl.cooperative, self.window)
        elif fl.cooperative:
            result = drv.cuLaunchCooperativeKernel(function, grid[0], grid[1], grid[2],
                                                   block[0], block[1], block[2], fl.smem,
                                                   cu_stream, self.params_address)
        else:
            result = drv.cuLaunchKernel(function, grid[0], grid[1], grid[2], block[0],
                                        block[1], block[2], fl.smem, cu_stream,
                                        self.params_address, 0)
        err = result[0]
        if err and driver._code(err) != 0:
            fl._fail(result, grid)
        return True
