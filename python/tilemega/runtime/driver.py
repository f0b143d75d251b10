"""Thin wrapper over cuda.bindings.driver (cuda-python), imported lazily.

cuda-python calls return tuples `(CUresult, *outputs)`; `call()` checks the
CUresult and turns failures into LaunchError carrying the error name. Nothing
here runs at import time, so the runtime imports on machines without CUDA.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from typing import Optional, Tuple

from .errors import LaunchError, RuntimeUnavailable

_lock = threading.RLock()
_cuda = None                 # the cuda.bindings.driver module once initialised
_device_count = 0
_primary = {}                # device ordinal -> retained primary CUcontext


def cuda():
    """The initialised cuda.bindings.driver module, or RuntimeUnavailable."""
    global _cuda, _device_count
    if _cuda is not None:
        return _cuda
    with _lock:
        if _cuda is not None:
            return _cuda
        try:
            from cuda.bindings import driver as drv
        except ImportError as exc:
            raise RuntimeUnavailable(
                "cuda-python is not installed (need cuda.bindings.driver; "
                "pip install cuda-python): cannot launch TileMega kernels here") from exc
        try:
            result = drv.cuInit(0)
        except Exception as exc:  # e.g. cuda.pathfinder's DynamicLibNotFoundError
            raise RuntimeUnavailable(f"the CUDA driver library (libcuda) could not be "
                                     f"loaded: {exc}") from exc
        code = _code(result[0])
        if code != 0:
            raise RuntimeUnavailable(f"cuInit failed with {_name(drv, result[0])} ({code}): "
                                     "no usable CUDA driver or device")
        count = int(_checked(drv, drv.cuDeviceGetCount(), "cuDeviceGetCount"))
        if count == 0:
            raise RuntimeUnavailable("no CUDA device found (cuDeviceGetCount() == 0)")
        _device_count = count
        _cuda = drv
        return drv


def device_count() -> int:
    cuda()
    return _device_count


def call(result, what: str):
    """Check a cuda-python result tuple; return its outputs (None, one, or a tuple)."""
    return _checked(cuda(), result, what)


def _code(err) -> int:
    return int(getattr(err, "value", err))


def _name(drv, err) -> str:
    try:
        res, name = drv.cuGetErrorName(err)
        if _code(res) == 0 and name:
            return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        pass
    return getattr(err, "name", None) or f"CUresult {_code(err)}"


def _describe(drv, err) -> str:
    try:
        res, text = drv.cuGetErrorString(err)
        if _code(res) == 0 and text:
            return text.decode() if isinstance(text, bytes) else str(text)
    except Exception:
        pass
    return ""


def error_from(drv, err, what: str) -> LaunchError:
    name, code, text = _name(drv, err), _code(err), _describe(drv, err)
    return LaunchError(f"{what} failed: {name} ({code})" + (f": {text}" if text else ""),
                       code=code, error_name=name)


def _checked(drv, result, what: str):
    if not isinstance(result, tuple):       # defensive: a bare CUresult
        result = (result,)
    err, rest = result[0], result[1:]
    if _code(err) != 0:
        raise error_from(drv, err, what)
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


def primary_context(device: int):
    """Retain (once per process) and return the primary context of `device`."""
    drv = cuda()
    if not 0 <= device < _device_count:
        raise LaunchError(f"CUDA device {device} does not exist ({_device_count} found)")
    with _lock:
        ctx = _primary.get(device)
        if ctx is None:
            dev = call(drv.cuDeviceGet(device), f"cuDeviceGet({device})")
            ctx = call(drv.cuDevicePrimaryCtxRetain(dev), f"cuDevicePrimaryCtxRetain({device})")
            _primary[device] = ctx      # kept for the process: torch/CuPy share it
        return ctx


@contextlib.contextmanager
def device_context(device: int):
    """Make the primary context of `device` current for the block.

    If no context is current it is simply set (as torch would do); if another
    context is current it is pushed and popped again, so the caller's notion of
    the current device (torch.cuda.current_device()) does not change.
    """
    drv = cuda()
    ctx = primary_context(device)
    current = call(drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if current is not None and int(current) == int(ctx):
        yield ctx
    elif current is None or int(current) == 0:
        call(drv.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        yield ctx
    else:
        call(drv.cuCtxPushCurrent(ctx), "cuCtxPushCurrent")
        try:
            yield ctx
        finally:
            call(drv.cuCtxPopCurrent(), "cuCtxPopCurrent")


def current_device() -> Optional[int]:
    """Ordinal of the current context's device, or None without a context."""
    drv = cuda()
    current = call(drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if current is None or int(current) == 0:
        return None
    return int(call(drv.cuCtxGetDevice(), "cuCtxGetDevice"))


# cuCtxEnablePeerAccess's answer when the access is on already.
_PEER_ACCESS_ALREADY_ENABLED = 704


def enable_peer_access(device: int, peer: int, what: str):
    """Let kernels on `device` reach `peer`'s memory (its primary context's
    allocations): LaunchError naming `what` when the two GPUs cannot (no
    NVLink or PCIe peer path); a no-op when it is on already."""
    drv = cuda()
    for d in (device, peer):
        if not 0 <= d < _device_count:
            raise LaunchError(f"{what}: CUDA device {d} does not exist ({_device_count} found)")
    dev = call(drv.cuDeviceGet(device), f"cuDeviceGet({device})")
    other = call(drv.cuDeviceGet(peer), f"cuDeviceGet({peer})")
    if not call(drv.cuDeviceCanAccessPeer(dev, other),
                f"cuDeviceCanAccessPeer({device}, {peer})"):
        raise LaunchError(f"{what}: device {device} cannot access device {peer}'s memory "
                          "(no peer path between the two GPUs)")
    target = primary_context(peer)
    with device_context(device):
        result = drv.cuCtxEnablePeerAccess(target, 0)
        err = result[0] if isinstance(result, tuple) else result
        if _code(err) not in (0, _PEER_ACCESS_ALREADY_ENABLED):
            raise error_from(drv, err, f"{what}: cuCtxEnablePeerAccess({device} -> {peer})")


def device_of_pointer(ptr: int) -> Optional[int]:
    """Device ordinal owning a device pointer, or None if the driver cannot tell."""
    drv = cuda()
    attr = drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    try:
        err, ordinal = drv.cuPointerGetAttribute(attr, drv.CUdeviceptr(ptr))
    except Exception:
        return None
    return int(ordinal) if _code(err) == 0 else None


def load_module(cubin: Optional[bytes], ptx: bytes, label: str) -> Tuple[object, str]:
    """Load a module into the current context: cubin first, then PTX (JIT).

    Returns (CUmodule, "cubin" | "ptx"). A cubin that the driver refuses (e.g.
    CUDA_ERROR_NO_BINARY_FOR_GPU on another chip) falls back to the PTX with a
    warning; if the PTX fails too, the error names both failures and adds the
    JIT error log when the driver gives one.
    """
    drv = cuda()
    cubin_error = None
    if cubin:
        err, module = drv.cuModuleLoadData(cubin)
        if _code(err) == 0:
            return module, "cubin"
        cubin_error = error_from(drv, err, f"cuModuleLoadData({label} cubin)")
        warnings.warn(f"{cubin_error}; falling back to JIT-compiling the PTX", RuntimeWarning,
                      stacklevel=4)
    image = ptx if ptx.endswith(b"\0") else ptx + b"\0"
    err, module = drv.cuModuleLoadData(image)
    if _code(err) == 0:
        return module, "ptx"
    exc = error_from(drv, err, f"cuModuleLoadData({label} PTX)")
    log = _jit_error_log(drv, image)
    message = str(exc)
    if log:
        message += f"\nJIT error log:\n{log}"
    if cubin_error is not None:
        message += f"\n(the cubin failed before: {cubin_error})"
    raise LaunchError(message, code=exc.code, error_name=exc.error_name)


def _jit_error_log(drv, image: bytes) -> str:
    """Re-run the PTX load with an error-log buffer, for the message only."""
    try:
        size = 16384
        buf = bytearray(size)     # the driver writes into it through char*
        opts = [drv.CUjit_option.CU_JIT_ERROR_LOG_BUFFER,
                drv.CUjit_option.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES]
        err, module = drv.cuModuleLoadDataEx(image, len(opts), opts, [buf, size])
        if _code(err) == 0:       # should not happen; do not leak the module
            drv.cuModuleUnload(module)
            return ""
        return bytes(buf).split(b"\0", 1)[0].decode(errors="replace").strip()
    except Exception:
        return ""


def get_function(module, name: str):
    drv = cuda()
    return call(drv.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name!r})")


def set_max_dynamic_shared(function, nbytes: int, name: str):
    drv = cuda()
    attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    call(drv.cuFuncSetAttribute(function, attr, int(nbytes)),
         f"cuFuncSetAttribute({name!r}, MAX_DYNAMIC_SHARED_SIZE_BYTES={nbytes})")


def function_attributes(function) -> dict:
    """A few CU_FUNC_ATTRIBUTE_* values, for `python -m tilemega.runtime load`."""
    drv = cuda()
    out = {}
    for key in ("NUM_REGS", "SHARED_SIZE_BYTES", "LOCAL_SIZE_BYTES", "MAX_THREADS_PER_BLOCK",
                "MAX_DYNAMIC_SHARED_SIZE_BYTES", "BINARY_VERSION", "PTX_VERSION"):
        attr = getattr(drv.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{key}", None)
        if attr is not None:
            err, value = drv.cuFuncGetAttribute(attr, function)
            out[key.lower()] = int(value) if _code(err) == 0 else None
    return out


def resident_blocks(device: int, function, threads: int, dynamic_shared_bytes: int
                    ) -> Tuple[int, int]:
    """(SMs of `device`, most CTAs of `function` with `threads` threads and
    `dynamic_shared_bytes` one SM keeps resident at once); call it with the
    device's primary context current."""
    drv = cuda()
    dev = call(drv.cuDeviceGet(device), f"cuDeviceGet({device})")
    sms = call(drv.cuDeviceGetAttribute(
        drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
        "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)")
    per_sm = call(drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(
        function, int(threads), int(dynamic_shared_bytes)),
        f"cuOccupancyMaxActiveBlocksPerMultiprocessor(threads={threads}, "
        f"dynamic_shared_bytes={dynamic_shared_bytes})")
    return int(sms), int(per_sm)


def resident_clusters(function, grid_x: int, threads: int, dynamic_shared_bytes: int,
                      cluster: int) -> int:
    """Most clusters of `cluster` blocks of `function` the device runs at once
    (cuOccupancyMaxActiveClusters: the GPCs place whole clusters, so this is
    usually fewer than SMs / cluster); call it with the context current."""
    drv = cuda()
    config = drv.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = int(grid_x), 1, 1
    config.blockDimX, config.blockDimY, config.blockDimZ = int(threads), 1, 1
    config.sharedMemBytes = int(dynamic_shared_bytes)
    # The cluster shape is the kernel's own (.reqnctapercluster); the config
    # leaves it unspecified, which the driver then takes from the function.
    config.numAttrs = 0
    return int(call(drv.cuOccupancyMaxActiveClusters(function, config),
                    f"cuOccupancyMaxActiveClusters(cluster={cluster}, threads={threads}, "
                    f"dynamic_shared_bytes={dynamic_shared_bytes})"))


def resident_grid(device: int, function, grid_x: int, threads: int,
                  dynamic_shared_bytes: int, cluster: int, name: str) -> int:
    """The blocks a resident grid launches on `device`: as many as stay
    resident at once (whole clusters), at most `grid_x`. LaunchError when
    not even one block (cluster) fits."""
    if cluster > 1:
        fits = resident_clusters(function, grid_x, threads, dynamic_shared_bytes,
                                 cluster) * cluster
    else:
        sms, per_sm = resident_blocks(device, function, threads, dynamic_shared_bytes)
        fits = sms * per_sm
    if fits < cluster:
        raise LaunchError(f"kernel {name!r}: device {device} cannot keep one "
                          f"{'cluster of ' + str(cluster) + ' blocks' if cluster > 1 else 'block'}"
                          f" of {threads} threads and {dynamic_shared_bytes} bytes of shared "
                          f"memory resident")
    return min(int(grid_x), fits)


def stream_synchronize(stream: int):
    drv = cuda()
    call(drv.cuStreamSynchronize(drv.CUstream(stream)), "cuStreamSynchronize")


def device_attribute(device: int, name: str) -> int:
    """CU_DEVICE_ATTRIBUTE_<name> of `device`, e.g. "COOPERATIVE_LAUNCH"."""
    drv = cuda()
    dev = call(drv.cuDeviceGet(device), f"cuDeviceGet({device})")
    attr = getattr(drv.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
    return int(call(drv.cuDeviceGetAttribute(attr, dev), f"cuDeviceGetAttribute({name})"))


def event_create():
    """A CUevent without timing (the cheapest kind), in the current context."""
    drv = cuda()
    return call(drv.cuEventCreate(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")


def event_destroy(event):
    """Destroy `event`, ignoring a driver that is already shut down (at exit)."""
    if _cuda is not None:
        _cuda.cuEventDestroy(event)


def event_record(event, stream: int):
    drv = cuda()
    call(drv.cuEventRecord(event, drv.CUstream(stream)), "cuEventRecord")


def stream_wait_event(stream: int, event):
    drv = cuda()
    call(drv.cuStreamWaitEvent(drv.CUstream(stream), event, 0), "cuStreamWaitEvent")


def copy_to_device(device_ptr: int, host_ptr: int, nbytes: int, stream: int):
    """cuMemcpyHtoDAsync of `nbytes` from pinned host memory on `stream`:
    asynchronous (the host buffer must stay unchanged until the copy ran)
    and, on a stream being captured, a memcpy node of the graph."""
    drv = cuda()
    call(drv.cuMemcpyHtoDAsync(drv.CUdeviceptr(device_ptr), host_ptr, nbytes,
                               drv.CUstream(stream)), "cuMemcpyHtoDAsync")


def stream_is_capturing(stream: int) -> bool:
    """Whether `stream` is being captured into a CUDA graph right now."""
    drv = cuda()
    status = call(drv.cuStreamIsCapturing(drv.CUstream(stream)), "cuStreamIsCapturing")
    return _code(status) != _code(drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE)


class LaunchGraph:
    """Work enqueued on a stream, captured once into an instantiated CUDA
    graph and launched again with one driver call (cuGraphLaunch): the
    cheapest way to repeat a launch whose arguments never change."""

    def __init__(self, stream: int, enqueue):
        drv = cuda()
        cu = drv.CUstream(stream)
        mode = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        call(drv.cuStreamBeginCapture(cu, mode), "cuStreamBeginCapture")
        try:
            enqueue()
        except BaseException:
            # The stream leaves capture mode whatever went wrong.
            err, graph = drv.cuStreamEndCapture(cu)
            if _code(err) == 0 and graph is not None:
                drv.cuGraphDestroy(graph)
            raise
        graph = call(drv.cuStreamEndCapture(cu), "cuStreamEndCapture")
        try:
            self._exec = call(drv.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
        finally:
            drv.cuGraphDestroy(graph)
        # Uploaded now, not by the first launch (which the caller times).
        call(drv.cuGraphUpload(self._exec, cu), "cuGraphUpload")
        self._drv = drv
        self._stream = stream
        self._cu = cu
        self._others = {}      # CUstream wrappers of the other streams launched on

    def launch(self, stream: int):
        """Launch the graph on the raw stream `stream`."""
        cu = self._cu if stream == self._stream else self._others.get(stream)
        if cu is None:
            if len(self._others) >= 16:
                self._others.clear()
            cu = self._others[stream] = self._drv.CUstream(stream)
        err = self._drv.cuGraphLaunch(self._exec, cu)[0]
        if _code(err) != 0:
            call((err,), "cuGraphLaunch")

    def __del__(self):
        if _cuda is not None and getattr(self, "_exec", None) is not None:
            _cuda.cuGraphExecDestroy(self._exec)
