"""An L2 access-policy window on a kernel's launches: the bytes a launch
should find in L2 the next time (a decode step's k/v caches, re-read by
every step while the weights stream through once) are marked persisting,
so that the weights' reads do not evict them.

The window is a launch attribute (CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW,
through cuLaunchKernelEx), so a CUDA-graph capture of the launch keeps it in
its kernel node; the L2 it may hold is the context's persisting set-aside
(CU_LIMIT_PERSISTING_L2_CACHE_SIZE), which `L2Window.apply` raises to what
the window asks, at most the device's maximum."""

from dataclasses import dataclass

from . import driver
from .errors import LaunchError


@dataclass(frozen=True)
class L2Window:
    base: int            # device address of the window's first byte
    num_bytes: int
    hit_ratio: float     # the share of the window's accesses marked persisting

    @staticmethod
    def covering(tensors, hit_ratio: float = 1.0, what: str = "l2 window") -> "L2Window":
        """The window from the lowest to the highest byte of `tensors`
        (anything with data_ptr(), numel() and element_size(): the k/v
        caches as checkpoint.assemble allocates them, one pool)."""
        spans = [(int(t.data_ptr()), int(t.data_ptr()) + t.numel() * t.element_size())
                 for t in tensors]
        if not spans:
            raise ValueError(f"{what}: no tensors to cover")
        if not 0.0 < hit_ratio <= 1.0:
            raise ValueError(f"{what}: hit_ratio must be in (0, 1], got {hit_ratio}")
        base = min(s for s, _ in spans)
        return L2Window(base, max(e for _, e in spans) - base, float(hit_ratio))

    def apply(self, device: int, what: str) -> "L2Window":
        """The window as `device` takes it: at most the device's largest
        (CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE; the bytes past
        it are left out, a hint lost, never a wrong result), with the
        context's persisting set-aside raised to cover it (at most the
        device's maximum). LaunchError when the device has no persisting L2."""
        largest = driver.device_attribute(device, "MAX_ACCESS_POLICY_WINDOW_SIZE")
        most = driver.device_attribute(device, "MAX_PERSISTING_L2_CACHE_SIZE")
        if largest <= 0 or most <= 0:
            raise LaunchError(f"{what}: device {device} has no persisting L2 "
                              "(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE is 0)")
        window = L2Window(self.base, min(self.num_bytes, largest), self.hit_ratio)
        drv = driver.cuda()
        with driver.device_context(device):
            limit = drv.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE
            current = int(driver.call(drv.cuCtxGetLimit(limit), "cuCtxGetLimit"))
            if current < min(most, window.num_bytes):
                driver.call(drv.cuCtxSetLimit(limit, min(most, window.num_bytes)),
                            "cuCtxSetLimit")
        return window

    def attribute(self, drv):
        """The CUlaunchAttribute of this window."""
        attr = drv.CUlaunchAttribute()
        attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW
        window = attr.value.accessPolicyWindow
        window.base_ptr = self.base
        window.num_bytes = self.num_bytes
        window.hitRatio = self.hit_ratio
        window.hitProp = drv.CUaccessProperty.CU_ACCESS_PROPERTY_PERSISTING
        window.missProp = drv.CUaccessProperty.CU_ACCESS_PROPERTY_STREAMING
        return attr


def launch(drv, function, grid, block, shared_bytes: int, cu_stream, params_address: int,
           cooperative: bool, window: L2Window):
    """cuLaunchKernelEx of `function` with the window (and the cooperative
    attribute where asked); returns the driver's result tuple."""
    config = drv.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.sharedMemBytes = int(shared_bytes)
    config.hStream = cu_stream
    attrs = [window.attribute(drv)]
    if cooperative:
        attr = drv.CUlaunchAttribute()
        attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE
        attr.value.cooperative = 1
        attrs.append(attr)
    config.attrs = attrs
    config.numAttrs = len(attrs)
    return drv.cuLaunchKernelEx(config, function, params_address, 0)


def reset_persisting(device: int = 0):
    """Every persisting line of `device`'s L2 back to normal
    (cuCtxResetPersistingL2Cache): between generations of different
    engines, so that one's caches do not hold L2 while another runs."""
    drv = driver.cuda()
    with driver.device_context(device):
        driver.call(drv.cuCtxResetPersistingL2Cache(), "cuCtxResetPersistingL2Cache")
