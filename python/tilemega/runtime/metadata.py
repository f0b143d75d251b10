"""Validation of artifact JSON (docs/artifact-format.md, version 1).

Turns the parsed JSON into frozen spec objects, or raises ValueError naming the
file and the field (e.g. "kernels[0].params[1].dtype"), so a bad artifact is
reported at load time and not as a crash inside a launch.
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field, replace
from typing import Any, Dict, Optional, Tuple

from .dtypes import DTYPES, SCALAR_DTYPES
from .mega_meta import validate as validate_mega, validate_tables

FORMAT = "tilemega.artifact"
VERSIONS = (1,)

# Hardware limits common to every CUDA GPU since sm_30; checking them here
# gives a clear message instead of CUDA_ERROR_INVALID_VALUE at launch.
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)
MAX_THREADS_PER_BLOCK = 1024
# More shared memory per block than any CUDA GPU offers (sm_90: 227 KiB); the
# launch checks the device's own limit, this only refuses absurd metadata.
MAX_DYNAMIC_SHARED_BYTES = 256 * 1024


@dataclass(frozen=True)
class ParamSpec:
    """One kernel parameter. shape/strides (in elements) only for tensors."""
    name: str
    kind: str                       # "tensor" or "scalar"
    dtype: str
    shape: Optional[Tuple[int, ...]] = None
    strides: Optional[Tuple[int, ...]] = None
    # Bytes the tensor's address must be a multiple of (vector accesses).
    alignment: int = 1
    # Mega-kernel graph params only: who provides the tensor (ROLES); None: the user.
    role: Optional[str] = None


@dataclass(frozen=True)
class TensorMapSpec:
    """A TMA tensor map (CUtensorMap) the kernel takes after its params: of
    the tensor param `param`, read in boxes of `box` elements (outermost
    first) into shared tiles swizzled by `swizzle_bytes` (0, 32, 64, 128).
    `shape`, when set, is the row-major view of the (contiguous) tensor the
    map describes instead of its own shape (`.view` in T.*)."""
    param: int
    box: Tuple[int, ...]
    swizzle_bytes: int
    shape: Optional[Tuple[int, ...]] = None


@dataclass(frozen=True)
class KernelSpec:
    """One kernel entry of the artifact."""
    name: str
    grid: Tuple[int, int, int]
    block: Tuple[int, int, int]
    dynamic_shared_bytes: int
    params: Tuple[ParamSpec, ...]
    # The persistent kernel's schedule (docs/mega.md), None for ordinary kernels.
    # Left out of ==/hash: a dict is unhashable and the tables can be large.
    mega: Optional[Dict[str, Any]] = field(default=None, compare=False, repr=False)
    # A persistent kernel's graph arguments (`mega.args`): not parameters,
    # reached through its argument table (mega_args), in table order.
    graph_args: Tuple[ParamSpec, ...] = ()
    # TMA tensor maps (tile.bulk_copy), passed by value after `params`.
    tensor_maps: Tuple[TensorMapSpec, ...] = ()
    # Blocks a thread-block cluster groups along the first grid dimension
    # (1: no clusters); the cubin carries it too (.reqnctapercluster).
    cluster: int = 1
    # A resident grid: grid[0] is an upper bound, the runtime launches as
    # many blocks (whole clusters) as the device keeps resident at once.
    resident: bool = False


# Param roles of a mega-kernel's graph tensors; the runtime allocates "scratch".
# "runtime": the four buffers of a persistent kernel (mega_tables, ...)
ROLES = ("input", "weight", "cache", "output", "scratch", "runtime")


@dataclass(frozen=True)
class ArtifactSpec:
    """The validated top-level metadata."""
    name: str
    version: int
    chip: Optional[str]
    ptx: str
    cubin: Optional[str]
    toolchain: Dict[str, Any]
    kernels: Tuple[KernelSpec, ...]


class _Checker:
    def __init__(self, source: str):
        self.source = source

    def fail(self, field: str, message: str):
        raise ValueError(f"{self.source}: field '{field}': {message}")

    def get(self, obj: dict, key: str, field: str, required: bool = True):
        if key not in obj:
            if required:
                self.fail(field, "missing")
            return None
        return obj[key]

    def string(self, value, field: str) -> str:
        if not isinstance(value, str) or not value:
            self.fail(field, f"expected a non-empty string, got {value!r}")
        return value

    def file_name(self, value, field: str) -> str:
        """A path relative to the JSON's folder that cannot leave it: no
        absolute path, drive or `..` component (symlinks are checked when the
        file is opened, artifact.py)."""
        self.string(value, field)
        if "\0" in value:
            self.fail(field, f"file name {value!r} contains a NUL character")
        parts = value.replace("\\", "/").split("/")
        if value.startswith(("/", "\\")) or ":" in parts[0]:
            self.fail(field, f"file name {value!r} is absolute; it must be relative to the "
                             "artifact's folder")
        if ".." in parts or "" in parts:
            self.fail(field, f"file name {value!r} has a '..' or empty component; it must "
                             "stay inside the artifact's folder")
        return value

    def integer(self, value, field: str, minimum: int = 0) -> int:
        # bool is an int subclass in Python but never a valid count here.
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(field, f"expected an integer, got {value!r}")
        if value < minimum:
            self.fail(field, f"expected an integer >= {minimum}, got {value}")
        return value

    def int_list(self, value, field: str, minimum: int, length: Optional[int] = None):
        if not isinstance(value, list):
            self.fail(field, f"expected a list of integers, got {value!r}")
        if length is not None and len(value) != length:
            self.fail(field, f"expected {length} integers, got {len(value)}: {value!r}")
        return tuple(self.integer(v, f"{field}[{i}]", minimum) for i, v in enumerate(value))


def parse(meta: Any, source: str) -> ArtifactSpec:
    """Validate parsed JSON `meta`; `source` (the file path) prefixes errors."""
    c = _Checker(source)
    if not isinstance(meta, dict):
        raise ValueError(f"{source}: expected a JSON object at top level, got {type(meta).__name__}")
    fmt = c.get(meta, "format", "format")
    if fmt != FORMAT:
        c.fail("format", f"expected {FORMAT!r}, got {fmt!r}")
    version = c.get(meta, "version", "version")
    if isinstance(version, bool) or version not in VERSIONS:
        c.fail("version", f"unsupported version {version!r}; this runtime reads {list(VERSIONS)}")
    name = c.string(c.get(meta, "name", "name"), "name")
    chip = meta.get("chip")
    if chip is not None:
        c.string(chip, "chip")
    ptx = c.file_name(c.get(meta, "ptx", "ptx"), "ptx")
    cubin = meta.get("cubin")
    if cubin is not None:
        c.file_name(cubin, "cubin")
    toolchain = meta.get("toolchain")
    toolchain = {} if toolchain is None else toolchain
    if not isinstance(toolchain, dict):
        c.fail("toolchain", f"expected an object, got {toolchain!r}")
    kernels = c.get(meta, "kernels", "kernels")
    if not isinstance(kernels, list) or not kernels:
        c.fail("kernels", f"expected a non-empty list, got {kernels!r}")
    specs = tuple(_kernel(c, k, f"kernels[{i}]") for i, k in enumerate(kernels))
    seen = set()
    for i, k in enumerate(specs):
        if k.name in seen:
            c.fail(f"kernels[{i}].name", f"duplicate kernel name {k.name!r}")
        seen.add(k.name)
    return ArtifactSpec(name, version, chip, ptx, cubin, dict(toolchain), specs)


def _kernel(c: _Checker, k: Any, field: str) -> KernelSpec:
    if not isinstance(k, dict):
        c.fail(field, f"expected an object, got {k!r}")
    name = c.string(c.get(k, "name", f"{field}.name"), f"{field}.name")
    grid = c.int_list(c.get(k, "grid", f"{field}.grid"), f"{field}.grid", 1, 3)
    block = c.int_list(c.get(k, "block", f"{field}.block"), f"{field}.block", 1, 3)
    for axis, (g, limit) in enumerate(zip(grid, MAX_GRID)):
        if g > limit:
            c.fail(f"{field}.grid[{axis}]", f"{g} exceeds the CUDA limit {limit}")
    for axis, (b, limit) in enumerate(zip(block, MAX_BLOCK)):
        if b > limit:
            c.fail(f"{field}.block[{axis}]", f"{b} exceeds the CUDA limit {limit}")
    if block[0] * block[1] * block[2] > MAX_THREADS_PER_BLOCK:
        c.fail(f"{field}.block", f"{list(block)} has more than {MAX_THREADS_PER_BLOCK} threads")
    smem = k.get("dynamic_shared_bytes", 0)
    smem = c.integer(smem, f"{field}.dynamic_shared_bytes", 0)
    if smem > MAX_DYNAMIC_SHARED_BYTES:
        c.fail(f"{field}.dynamic_shared_bytes", f"{smem} bytes exceeds the shared memory of any "
                                                f"CUDA GPU ({MAX_DYNAMIC_SHARED_BYTES})")
    params = c.get(k, "params", f"{field}.params")
    if not isinstance(params, list):
        c.fail(f"{field}.params", f"expected a list, got {params!r}")
    specs = tuple(_param(c, p, f"{field}.params[{i}]") for i, p in enumerate(params))
    seen = set()
    for i, p in enumerate(specs):
        if p.name in seen:
            c.fail(f"{field}.params[{i}].name", f"duplicate parameter name {p.name!r}")
        seen.add(p.name)
    maps = k.get("tensor_maps", [])
    if not isinstance(maps, list):
        c.fail(f"{field}.tensor_maps", f"expected a list, got {maps!r}")
    tensor_maps = tuple(_tensor_map(c, m, specs, f"{field}.tensor_maps[{i}]")
                        for i, m in enumerate(maps))
    # TMA reads its tensors at 16-byte aligned addresses.
    specs = tuple(replace(p, alignment=max(p.alignment, TMA_ALIGNMENT))
                  if any(m.param == i for m in tensor_maps) else p
                  for i, p in enumerate(specs))
    cluster = c.integer(k.get("cluster", 1), f"{field}.cluster", 1)
    if cluster > 8:
        c.fail(f"{field}.cluster", f"clusters have 1 to 8 blocks, got {cluster}")
    if grid[0] % cluster:
        c.fail(f"{field}.grid[0]", f"{grid[0]} blocks are not whole clusters of {cluster}")
    resident = k.get("resident", False)
    if not isinstance(resident, bool):
        c.fail(f"{field}.resident", f"expected true or false, got {resident!r}")
    if resident and (grid[1], grid[2]) != (1, 1):
        c.fail(f"{field}.resident", f"a resident grid is 1-D, got grid {list(grid)}")
    mega = k.get("mega")
    if resident and mega is not None:
        c.fail(f"{field}.resident", "a persistent mega-kernel's grid is its schedule's; "
                                    "it cannot be resident")
    graph_args: Tuple[ParamSpec, ...] = ()
    if mega is not None:
        if tensor_maps:
            c.fail(f"{field}.tensor_maps", "a persistent mega-kernel takes no tensor maps")
        validate_mega(mega, f"{field}.mega", c.source)
        validate_tables(mega, f"{field}.mega", c.source)
        graph_args = _graph_args(c, mega, f"{field}.mega.args")
    return KernelSpec(name, grid, block, smem, specs, mega, graph_args, tensor_maps,
                      cluster, resident)


# TMA's limits (cuTensorMapEncodeTiled): rank, box extents, address and
# stride alignment, swizzle spans; tile::chooseBulkCopy holds the compiler
# to the same.
TMA_MAX_RANK, TMA_MAX_BOX, TMA_ALIGNMENT = 5, 256, 16
TMA_SWIZZLES = (0, 32, 64, 128)


def _tensor_map(c: _Checker, m: Any, params: Tuple[ParamSpec, ...], field: str) -> TensorMapSpec:
    if not isinstance(m, dict):
        c.fail(field, f"expected an object, got {m!r}")
    index = c.integer(c.get(m, "param", f"{field}.param"), f"{field}.param", 0)
    if index >= len(params) or params[index].kind != "tensor":
        c.fail(f"{field}.param", f"{index} is not the index of a tensor parameter")
    param = params[index]
    itemsize = DTYPES[param.dtype].itemsize
    shape = m.get("shape")
    if shape is not None:
        shape = c.int_list(shape, f"{field}.shape", 1)
        if math.prod(shape) != math.prod(param.shape):
            c.fail(f"{field}.shape", f"a view of {list(shape)} has {math.prod(shape)} elements, "
                                     f"tensor '{param.name}' {math.prod(param.shape)}")
        if tuple(param.strides) != row_major_strides(param.shape):
            c.fail(f"{field}.shape", f"a view needs tensor '{param.name}' contiguous, its "
                                     f"strides are {list(param.strides)}")
    dims = shape or param.shape
    box = c.int_list(c.get(m, "box", f"{field}.box"), f"{field}.box", 1, len(dims))
    if not 1 <= len(box) <= TMA_MAX_RANK:
        c.fail(f"{field}.box", f"TMA boxes have rank 1 to {TMA_MAX_RANK}, got {len(box)}")
    for i, extent in enumerate(box):
        if extent > TMA_MAX_BOX:
            c.fail(f"{field}.box[{i}]", f"{extent} exceeds TMA's box limit {TMA_MAX_BOX}")
    if box[-1] * itemsize % 16:
        c.fail(f"{field}.box", f"rows of {box[-1] * itemsize} bytes; TMA needs multiples of 16")
    strides = row_major_strides(shape) if shape else param.strides
    if strides[-1] != 1 or any(s * itemsize % TMA_ALIGNMENT for s in strides[:-1]):
        c.fail(f"{field}.{'shape' if shape else 'param'}",
               f"tensor '{param.name}' has strides {list(strides)}: TMA "
               f"needs unit inner strides and {TMA_ALIGNMENT}-byte row strides")
    swizzle = c.integer(c.get(m, "swizzle_bytes", f"{field}.swizzle_bytes"),
                        f"{field}.swizzle_bytes", 0)
    if swizzle not in TMA_SWIZZLES:
        c.fail(f"{field}.swizzle_bytes", f"expected one of {list(TMA_SWIZZLES)}, got {swizzle}")
    if swizzle and box[-1] * itemsize != swizzle:
        c.fail(f"{field}.box", f"rows of {box[-1] * itemsize} bytes under a {swizzle}-byte "
                               "swizzle; they must be the swizzle's span")
    return TensorMapSpec(index, box, swizzle, shape)


def row_major_strides(shape) -> Tuple[int, ...]:
    """The element strides of a contiguous row-major tensor of `shape`."""
    strides = [1]
    for extent in reversed(shape[1:]):
        strides.insert(0, strides[0] * extent)
    return tuple(strides)


def _graph_args(c: _Checker, mega: Dict[str, Any], field: str) -> Tuple[ParamSpec, ...]:
    listed = c.get(mega, "args", field)
    if not isinstance(listed, list):
        c.fail(field, f"expected a list, got {listed!r}")
    args = tuple(_param(c, p, f"{field}[{i}]") for i, p in enumerate(listed))
    seen = set()
    for i, p in enumerate(args):
        if p.role == "runtime":
            c.fail(f"{field}[{i}].role", "the runtime buffers are params, not graph arguments")
        if p.kind == "scalar" and p.role == "scratch":
            c.fail(f"{field}[{i}].role", "a scalar cannot be scratch")
        if p.name in seen:
            c.fail(f"{field}[{i}].name", f"duplicate argument name {p.name!r}")
        seen.add(p.name)
    return args


def _param(c: _Checker, p: Any, field: str) -> ParamSpec:
    if not isinstance(p, dict):
        c.fail(field, f"expected an object, got {p!r}")
    name = c.string(c.get(p, "name", f"{field}.name"), f"{field}.name")
    role = p.get("role")
    if role is not None and role not in ROLES:
        c.fail(f"{field}.role", f"expected one of {list(ROLES)}, got {role!r}")
    kind = c.get(p, "kind", f"{field}.kind")
    if kind not in ("tensor", "scalar"):
        c.fail(f"{field}.kind", f"expected 'tensor' or 'scalar', got {kind!r}")
    dtype = c.get(p, "dtype", f"{field}.dtype")
    if dtype not in DTYPES:
        c.fail(f"{field}.dtype", f"unknown dtype {dtype!r}; expected one of {sorted(DTYPES)}")
    if kind == "scalar":
        if dtype not in SCALAR_DTYPES:
            c.fail(f"{field}.dtype", f"a scalar parameter cannot be {dtype}; expected one of "
                                     f"{sorted(SCALAR_DTYPES)}")
        return ParamSpec(name, kind, dtype, role=role)
    shape = c.int_list(c.get(p, "shape", f"{field}.shape"), f"{field}.shape", 0)
    strides = c.int_list(c.get(p, "strides", f"{field}.strides"), f"{field}.strides", 0)
    if len(strides) != len(shape):
        c.fail(f"{field}.strides", f"has {len(strides)} entries but shape has {len(shape)}")
    alignment = p.get("alignment", 1)
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment < 1 \
            or alignment & (alignment - 1):
        c.fail(f"{field}.alignment", f"expected a power of two >= 1, got {alignment!r}")
    return ParamSpec(name, kind, dtype, shape, strides, alignment, role)
