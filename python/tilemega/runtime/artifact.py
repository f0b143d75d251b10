"""`load_artifact` and `Artifact`: the JSON + PTX/cubin written by the compiler."""

from __future__ import annotations

import json
import os
import threading
import warnings
from typing import Dict, Optional, Tuple

from . import driver
from .kernel import DEFAULT_DYNAMIC_SHARED_LIMIT, Kernel
from .metadata import ArtifactSpec, parse
from .ptx_check import check_ptx


def load_artifact(path, name: Optional[str] = None) -> "Artifact":
    """Load an artifact's metadata (no GPU needed; code is loaded at first launch).

    `path` is the .json file, the path without its ".json", or the folder
    holding it; with a folder, `name` picks `<folder>/<name>.json`, and may be
    left out when the folder holds exactly one .json file. Raises
    FileNotFoundError for missing files and ValueError naming the file and the
    field for malformed metadata.
    """
    json_path = _resolve(os.fspath(path), name)
    try:
        with open(json_path, "rb") as f:
            meta = json.loads(f.read().decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{json_path}: not valid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{json_path}: not UTF-8 text: {exc}") from None
    return Artifact(json_path, parse(meta, json_path))


def _resolve(path: str, name: Optional[str]) -> str:
    if os.path.isdir(path):
        if name is not None:
            candidate = os.path.join(path, name if name.endswith(".json") else name + ".json")
            if not os.path.isfile(candidate):
                raise FileNotFoundError(f"no artifact {candidate}")
            return candidate
        found = sorted(f for f in os.listdir(path) if f.endswith(".json"))
        if len(found) != 1:
            raise ValueError(f"{path}: give the artifact name; the folder holds "
                             f"{len(found)} .json files {found}")
        return os.path.join(path, found[0])
    if name is not None:
        raise ValueError(f"name={name!r} is only used with a folder, but {path} is not one")
    if os.path.isfile(path):
        return path
    if not path.endswith(".json") and os.path.isfile(path + ".json"):
        return path + ".json"
    raise FileNotFoundError(f"no artifact {path}")


class Artifact:
    """A compiled TileMega module: metadata plus PTX and (optionally) cubin.

    `kernels` maps names to `Kernel`s; `art.NAME` and `art["NAME"]` give one
    (use `[]` for names that clash with attributes). `art(*args, stream=None)`
    launches the only kernel and raises TypeError if there are several. The
    module is loaded once per device, lazily at the first launch (or with
    `load()`), in that device's primary context.
    """

    def __init__(self, json_path: str, spec: ArtifactSpec):
        self.path = os.path.abspath(json_path)
        self.spec = spec
        self.name = spec.name
        self.chip = spec.chip
        folder = os.path.dirname(self.path)
        self.ptx_path = _inside(folder, spec.ptx, "ptx", self.path)
        if not os.path.isfile(self.ptx_path):
            raise ValueError(f"{self.path}: field 'ptx': file {spec.ptx!r} not found "
                             f"next to the JSON ({self.ptx_path})")
        if os.path.getsize(self.ptx_path) == 0:
            raise ValueError(f"{self.path}: field 'ptx': file {spec.ptx!r} is empty")
        self.cubin_path = None
        if spec.cubin is not None:
            cubin = _inside(folder, spec.cubin, "cubin", self.path)
            if os.path.isfile(cubin):
                self.cubin_path = cubin
            else:   # the PTX is always enough; do not refuse the artifact
                warnings.warn(f"{self.path}: cubin {spec.cubin!r} not found; the PTX will be "
                              "JIT-compiled instead", RuntimeWarning, stacklevel=3)
        self.kernels: Dict[str, Kernel] = {k.name: Kernel(self, k) for k in spec.kernels}
        self._lock = threading.Lock()
        self._modules: Dict[int, Tuple[object, str]] = {}      # device -> (CUmodule, source)
        self._functions: Dict[Tuple[int, str], object] = {}    # (device, kernel) -> CUfunction
        self._smem_limit: Dict[Tuple[int, str], int] = {}
        self._code: Optional[Tuple[Optional[bytes], bytes]] = None   # checked (cubin, PTX)

    def __repr__(self):
        return f"<Artifact {self.name} ({self.chip}) kernels={list(self.kernels)}>"

    def __getattr__(self, attr):
        # Only called for attributes not found normally; guard against recursion
        # before __init__ has set `kernels` (copy, pickle).
        kernels = self.__dict__.get("kernels")
        if kernels is not None and attr in kernels:
            return kernels[attr]
        names = list(kernels) if kernels is not None else []
        raise AttributeError(f"artifact has no kernel or attribute {attr!r}; kernels: {names}")

    def __getitem__(self, name: str) -> Kernel:
        try:
            return self.kernels[name]
        except KeyError:
            raise KeyError(f"no kernel {name!r} in artifact {self.name}; "
                           f"kernels: {list(self.kernels)}") from None

    def __contains__(self, name) -> bool:
        return name in self.kernels

    def __iter__(self):
        return iter(self.kernels.values())

    def __call__(self, *args, stream=None):
        if len(self.kernels) != 1:
            raise TypeError(f"artifact {self.name} has {len(self.kernels)} kernels "
                            f"{list(self.kernels)}; call one by name, e.g. art.{next(iter(self.kernels))}(...)")
        next(iter(self.kernels.values()))(*args, stream=stream)

    def load(self, device: Optional[int] = None) -> str:
        """Load the module on `device` now (default: current device or 0).

        Returns "cubin" or "ptx", whichever the driver accepted. Useful to pay
        the PTX JIT cost before timing.
        """
        self.code()
        if device is None:
            device = driver.current_device() or 0
        with driver.device_context(device):
            return self._module(device)[1]

    def code(self) -> Tuple[Optional[bytes], bytes]:
        """(cubin or None, PTX) as read from disk and checked (ptx_check.py):
        ValueError naming the file and the field for a truncated PTX, a PTX
        without one of the kernels or with another block size, or a cubin that
        is not an ELF file. Read once; nothing reaches the driver before."""
        with self._lock:
            if self._code is None:
                ptx = _read(self.ptx_path)
                check_ptx(ptx, self.spec, f"{self.path}: field 'ptx' ({self.ptx_path})")
                cubin = _read(self.cubin_path) if self.cubin_path else None
                if cubin is not None and not cubin.startswith(b"\x7fELF"):
                    raise ValueError(f"{self.path}: field 'cubin': {self.cubin_path} is not an "
                                     f"ELF file ({len(cubin)} bytes): truncated or not a cubin")
                self._code = (cubin, ptx)
            return self._code

    # -- called by Kernel.launch with the device's primary context current --

    def _module(self, device: int):
        entry = self._modules.get(device)
        if entry is not None:
            return entry
        cubin, ptx = self.code()
        with self._lock:
            entry = self._modules.get(device)
            if entry is None:
                entry = driver.load_module(cubin, ptx, self.name)
                self._modules[device] = entry
            return entry

    def _function(self, device: int, kernel: str, dynamic_shared_bytes: int):
        module = self._module(device)[0]
        key = (device, kernel)
        with self._lock:
            fn = self._functions.get(key)
            if fn is None:
                fn = driver.get_function(module, kernel)
                self._functions[key] = fn
            # The default limit counts static shared memory too (kernels
            # may declare a few bytes), so raise it for any dynamic request
            # that is not provably below it.
            if (dynamic_shared_bytes > DEFAULT_DYNAMIC_SHARED_LIMIT - 1024
                    and dynamic_shared_bytes > self._smem_limit.get(key, 0)):
                driver.set_max_dynamic_shared(fn, dynamic_shared_bytes, kernel)
                self._smem_limit[key] = dynamic_shared_bytes
            return fn


def _inside(folder: str, name: str, field: str, json_path: str) -> str:
    """`folder/name`, refused (ValueError) when it resolves outside `folder`,
    e.g. through a symlink; metadata.py already refused absolute names and `..`."""
    path = os.path.join(folder, name)
    real, root = os.path.realpath(path), os.path.realpath(folder)
    if os.path.commonpath([real, root]) != root:
        raise ValueError(f"{json_path}: field '{field}': file {name!r} resolves to {real}, "
                         f"outside the artifact's folder {root}")
    return path


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()
