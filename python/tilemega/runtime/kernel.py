"""`Kernel`: one launchable kernel of an artifact."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Optional

from . import driver, launch
from .args import BoundArgs, bind
from .errors import ArgumentError
from .fast import FastLauncher
from .metadata import KernelSpec

if TYPE_CHECKING:
    from .artifact import Artifact

# Above this the driver needs CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES raised.
DEFAULT_DYNAMIC_SHARED_LIMIT = 48 * 1024

_modules = sys.modules
_UNSET = object()


class Kernel:
    """A kernel of a loaded artifact; call it with its arguments to launch it.

    Attributes: `name`, `spec` (the KernelSpec: grid, block,
    dynamic_shared_bytes, params) and `artifact`.

    `kernel(*args, stream=None)` checks every argument against the metadata
    (count, dtype, shape, strides, CUDA device; scalar type and range) and
    raises `ArgumentError` before touching the GPU. It then launches
    asynchronously on `stream`: an int CUstream handle, a torch.cuda.Stream,
    or None, meaning torch's current stream if the first tensor argument is a
    torch tensor and the legacy default stream (0) otherwise. Tensors may be
    torch tensors, objects with `__cuda_array_interface__` or DLPack CUDA
    tensors; scalars are Python ints/floats. Driver failures raise
    `LaunchError`; a missing cuda-python or GPU raises `RuntimeUnavailable`.

    Calling the kernel takes a fast path (runtime/fast.py, a few microseconds
    of host time) when all tensors are torch CUDA tensors on one device whose
    primary context is current, and scalars are plain ints/floats; it checks
    the same things as the general path, and anything else (other tensor
    types, numpy scalars, another current context, any argument that the
    fast checks do not accept) goes through `launch`, the general path, which
    gives the same results and errors as before. A Kernel may be called from
    several threads at once.
    """

    def __init__(self, artifact: "Artifact", spec: KernelSpec):
        self.artifact = artifact
        self.spec = spec
        self.name = spec.name
        self._fast_torch = _UNSET      # the torch module self._fast was built for
        self._fast: Optional[FastLauncher] = None
        # A persistent kernel's CTAs wait for each other: launch it cooperatively,
        # so that the driver refuses a grid that cannot be resident at once.
        self.cooperative = spec.mega is not None
        self._grids = {}               # (CUDA ordinal, shared bytes) -> a resident grid

    def __repr__(self):
        params = ", ".join(
            f"{p.name}: {p.dtype}{list(p.shape) if p.kind == 'tensor' else ''}"
            for p in self.spec.params)
        return f"<Kernel {self.name}({params}) grid={self.spec.grid} block={self.spec.block}>"

    def __call__(self, *args, stream=None):
        torch = _modules.get("torch")
        if torch is not self._fast_torch:      # first call, or torch imported since
            self._fast = None if torch is None else FastLauncher.build(self, torch)
            self._fast_torch = torch
        fast = self._fast
        if fast is None or not fast.try_launch(args, stream):
            self.launch(*args, stream=stream)

    def bind_launch(self, args):
        """The arguments checked and packed once for repeated launches
        (fast.BoundLaunch), or None where the fast path does not apply to
        them (then launch through __call__)."""
        torch = _modules.get("torch")
        if torch is None:
            return None
        if torch is not self._fast_torch:
            self._fast = FastLauncher.build(self, torch)
            self._fast_torch = torch
        return None if self._fast is None else self._fast.bound(tuple(args))

    def check(self, *args, stream=None) -> BoundArgs:
        """Check and pack `args` without launching (never touches the GPU)."""
        return bind(self.spec, args, launch.stream_handle(stream))

    def launch(self, *args, grid=None, block=None, stream=None,
               dynamic_shared_bytes: Optional[int] = None, sync: bool = False):
        """Launch through the general path, with checked launch-shape overrides.

        This is the general path, for every kind of argument (and the path
        that `kernel(...)` falls back to); it costs tens of microseconds of
        host time, `kernel(...)` a few in the common case.

        grid/block (an int or 1-3 ints, missing ones are 1) may only restate
        the compiled shape: a kernel is compiled for exactly its grid and
        block (the PTX's .maxntid, block indices assumed below the grid, every
        block owning fixed tiles of fixed-shape tensors), so another shape
        would skip tiles or touch memory past the tensors; ArgumentError
        otherwise. dynamic_shared_bytes may grow the compiled amount up to
        the device's per-block limit (not for a persistent kernel, whose
        residency was checked for the compiled amount). sync=True waits for
        the stream and reports asynchronous faults (e.g. an illegal address)
        as LaunchError here instead of at some later CUDA call.
        """
        handle = launch.stream_handle(stream)
        bound = bind(self.spec, args, handle)
        smem = self._check_overrides(grid, block, dynamic_shared_bytes)
        device = self._device(bound)
        if handle is None:
            handle = launch.default_stream(device, bound.first_tensor_is_torch)
        with driver.device_context(device):
            if smem > self.spec.dynamic_shared_bytes:
                limit = driver.device_attribute(device, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
                if smem > limit:
                    raise ArgumentError(f"{self.name}: dynamic_shared_bytes={smem} exceeds "
                                        f"device {device}'s limit of {limit} bytes per block")
            function = self.artifact._function(device, self.name, smem)
            launch_grid = self.grid_on(device, function, smem) if grid is None else \
                launch.normalize_dims(grid, "grid")
            launch.launch_kernel(function, launch_grid, self.spec.block, smem, handle,
                                 bound.values, self.name, self.cooperative)
            if sync:
                driver.stream_synchronize(handle)
        del bound  # tensors and DLPack capsules stay alive until the launch is enqueued

    def grid_on(self, device: int, function, dynamic_shared_bytes: Optional[int] = None
                ) -> tuple:
        """The grid a launch on `device` uses: the compiled one, or for a
        resident kernel as many blocks (whole clusters) as the device keeps
        resident at once, at most the compiled count (decided once a device,
        with its context current; again for a launch that raises its
        dynamic shared memory, which may fit fewer)."""
        spec = self.spec
        if not spec.resident:
            return spec.grid
        smem = spec.dynamic_shared_bytes if dynamic_shared_bytes is None else dynamic_shared_bytes
        grid = self._grids.get((device, smem))
        if grid is None:
            blocks = driver.resident_grid(device, function, spec.grid[0], spec.block[0],
                                          smem, spec.cluster, self.name)
            grid = self._grids[(device, smem)] = (blocks, 1, 1)
        return grid

    def _check_overrides(self, grid, block, dynamic_shared_bytes) -> int:
        """The dynamic shared memory to launch with; ArgumentError for an
        override the compiled kernel cannot run with (before the GPU is touched)."""
        spec = self.spec
        for what, given, compiled in (("grid", grid, spec.grid), ("block", block, spec.block)):
            if given is None:
                continue
            dims = launch.normalize_dims(given, what)
            if what == "grid" and spec.resident:
                # Any count of whole clusters up to the bound: the body
                # strides over its work by the launched count.
                if (dims[1:] != (1, 1) or dims[0] > compiled[0]
                        or dims[0] % spec.cluster):
                    raise ArgumentError(
                        f"{self.name}: grid={list(dims)} is not a resident grid of this "
                        f"kernel: 1-D, at most {compiled[0]} blocks, whole clusters of "
                        f"{spec.cluster}")
                continue
            if dims != tuple(compiled):
                kind = "persistent kernel" if self.cooperative else "kernel"
                raise ArgumentError(
                    f"{self.name}: {what}={list(dims)} differs from the compiled {what} "
                    f"{list(compiled)}; the {kind} is compiled for exactly its grid and block "
                    f"(another shape would skip tiles or access memory past its tensors)")
        if dynamic_shared_bytes is None:
            return spec.dynamic_shared_bytes
        if isinstance(dynamic_shared_bytes, bool) or not isinstance(dynamic_shared_bytes, int):
            raise ArgumentError(f"{self.name}: dynamic_shared_bytes must be an int, got "
                                f"{dynamic_shared_bytes!r}")
        smem = dynamic_shared_bytes
        if smem < spec.dynamic_shared_bytes:
            raise ArgumentError(f"{self.name}: dynamic_shared_bytes={smem} is less than the "
                                f"{spec.dynamic_shared_bytes} bytes the kernel is compiled for")
        if self.cooperative and smem != spec.dynamic_shared_bytes:
            raise ArgumentError(f"{self.name}: dynamic_shared_bytes={smem} differs from the "
                                f"compiled {spec.dynamic_shared_bytes}; a persistent kernel's "
                                f"residency is checked for the compiled amount")
        return smem

    def _device(self, bound: BoundArgs) -> int:
        """The CUDA ordinal to launch on: from the tensors, else the driver."""
        if bound.device is not None:
            return bound.device
        ptr = bound.probe_pointer
        found = driver.device_of_pointer(ptr) if ptr else None
        if found is None:
            found = driver.current_device()
        return 0 if found is None else found
