"""Tile operations: allocation, copy, gemm, fill, reduce, atomics, layouts.

Each function checks its arguments in Python (ranks, shapes, scopes, dtypes)
and raises `TileLangError` naming the argument and the user's line; what the
Python side does not check, the MLIR verifier reports at the same line.
"""

from __future__ import annotations

from typing import Optional

from .trace import TileLangTypeError, in_kernel, assigned_name, user_error, user_location, \
    user_position
from .types import SymExpr, as_dtype, static_int
from .values import Buffer, BufferLoad, BufferRegion, Expr, as_expr, to_index

_SHARED_SPACE = "#gpu.address_space<workgroup>"
_FRAGMENT_SPACE = "#tile.fragment"


# ---------------------------------------------------------------------------
# Layout and swizzle attributes
# ---------------------------------------------------------------------------

def _int_list(value, what, api, minimum):
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        user_error(api, f"{what} must be a non-empty list of ints, got {value!r}",
                   TileLangTypeError)
    out = []
    for i, v in enumerate(value):
        if isinstance(v, SymExpr):
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            user_error(api, f"{what}[{i}] must be an int, got {v!r}", TileLangTypeError)
        if v < minimum:
            user_error(api, f"{what}[{i}] must be >= {minimum}, got {v}")
        out.append(v)
    return out


class Blocked:
    """A blocked fragment layout (`#tile.blocked`, Triton's encoding).

        T.Blocked(size_per_thread=[1, 4], threads_per_warp=[1, 32],
                  warps_per_block=[4, 1], order=[1, 0])

    `order` lists dimensions fastest-varying first (default: the last
    dimension fastest). The product of `threads_per_warp` is 32 and the
    product of `warps_per_block` times 32 is the kernel's thread count.
    """

    def __init__(self, size_per_thread, threads_per_warp, warps_per_block, order=None):
        api = "T.Blocked"
        self.size_per_thread = _int_list(size_per_thread, "size_per_thread", api, 1)
        rank = len(self.size_per_thread)
        self.threads_per_warp = _int_list(threads_per_warp, "threads_per_warp", api, 1)
        self.warps_per_block = _int_list(warps_per_block, "warps_per_block", api, 1)
        self.order = (list(range(rank - 1, -1, -1)) if order is None
                      else _int_list(order, "order", api, 0))
        for name in ("threads_per_warp", "warps_per_block", "order"):
            if len(getattr(self, name)) != rank:
                user_error(api, f"{name} has {len(getattr(self, name))} entries but "
                                f"size_per_thread has {rank}")
        if sorted(self.order) != list(range(rank)):
            user_error(api, f"order must be a permutation of 0..{rank - 1}, got {self.order}")
        prod = 1
        for t in self.threads_per_warp:
            prod *= t
        if prod != 32:
            user_error(api, f"the product of threads_per_warp must be 32, got "
                            f"{self.threads_per_warp} (product {prod})")

    @property
    def rank(self) -> int:
        return len(self.size_per_thread)

    @property
    def num_threads(self) -> int:
        n = 32
        for w in self.warps_per_block:
            n *= w
        return n

    def __str__(self):
        f = lambda v: "[" + ", ".join(map(str, v)) + "]"  # noqa: E731
        return (f"#tile.blocked<sizePerThread = {f(self.size_per_thread)}, threadsPerWarp = "
                f"{f(self.threads_per_warp)}, warpsPerBlock = {f(self.warps_per_block)}, "
                f"order = {f(self.order)}>")

    __repr__ = __str__


class Swizzle:
    """A shared-memory XOR swizzle `#tile.swizzle<bits, base, shift>`
    (CuTe's Swizzle<B, M, S>); bits = 0 is no swizzle. `columns` > 0 first
    stores the rows in blocks of that many columns, one block after another
    (the layout of a Hopper MN-major operand wider than 64 elements)."""

    def __init__(self, bits=3, base=3, shift=3, columns=0):
        api = "T.Swizzle"
        self.bits = static_int(bits, "bits", api, minimum=0)
        self.base = static_int(base, "base", api, minimum=0)
        self.shift = static_int(shift, "shift", api, minimum=0)
        self.columns = static_int(columns, "columns", api, minimum=0)

    @classmethod
    def row_chunks(cls, row_elems):
        """The swizzle of a tile whose rows are `row_elems` 2-byte elements
        (a power of two): each row's 8-element (16-byte) chunk index XORed
        with the row's low 3 bits (bit log2(row_elems) of the offset starts
        a row), so a fragment's 4-byte pieces stored row by row land without
        bank conflicts and rows leave in 16-byte pieces (a GEMM's C staged
        through shared memory)."""
        return cls(bits=3, base=3, shift=int(row_elems).bit_length() - 1 - 3)

    def __str__(self):
        blocks = f", columns = {self.columns}" if self.columns else ""
        return (f"#tile.swizzle<bits = {self.bits}, base = {self.base}, "
                f"shift = {self.shift}{blocks}>")

    __repr__ = __str__


def _parse_attr(text: str, api, what):
    from ..ir import Attribute, MLIRError
    try:
        return Attribute.parse(text)
    except (MLIRError, ValueError) as e:
        user_error(api, f"{what}: cannot parse attribute {text!r}: {e}")


def layout_attr(layout, rank: int, threads: Optional[int], api, what):
    """An MLIR layout attribute from a Blocked, an attribute string or an Attribute."""
    if isinstance(layout, Blocked):
        if layout.rank != rank:
            user_error(api, f"{what}: the layout has rank {layout.rank} but the tile has "
                            f"rank {rank}")
        if threads is not None and layout.num_threads != threads:
            user_error(api, f"{what}: the layout spreads over {layout.num_threads} threads "
                            f"(warps_per_block {layout.warps_per_block}) but the kernel has "
                            f"{threads}")
        return _parse_attr(str(layout), api, what)
    if isinstance(layout, str):
        return _parse_attr(layout, api, what)
    if hasattr(layout, "context") and hasattr(layout, "type"):   # an ir.Attribute
        return layout
    user_error(api, f"{what} must be a T.Blocked, an attribute string or an MLIR attribute, "
                    f"got {type(layout).__name__}", TileLangTypeError)


def swizzle_attr(swizzle, api, what):
    if isinstance(swizzle, Swizzle):
        return _parse_attr(str(swizzle), api, what)
    if isinstance(swizzle, (tuple, list)) and len(swizzle) == 3:
        return _parse_attr(str(Swizzle(*swizzle)), api, what)
    if isinstance(swizzle, dict):
        return _parse_attr(str(Swizzle(**swizzle)), api, what)
    if isinstance(swizzle, str):
        return _parse_attr(swizzle, api, what)
    if hasattr(swizzle, "context") and hasattr(swizzle, "type"):
        return swizzle
    user_error(api, f"{what} must be a T.Swizzle, (bits, base, shift), an attribute string "
                    f"or an MLIR attribute, got {swizzle!r}", TileLangTypeError)


# ---------------------------------------------------------------------------
# Allocation
# ---------------------------------------------------------------------------

def _shape(shape, api):
    if isinstance(shape, (int, SymExpr)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not shape:
        user_error(api, f"shape must be a non-empty tuple of ints, got {shape!r}",
                   TileLangTypeError)
    return [static_int(d, f"shape[{i}]", api, minimum=1) for i, d in enumerate(shape)]


def _alloc(kind, shape, dtype, api, attrs):
    from ..dialects import tile
    from ..ir import Attribute, MemRefType

    state = in_kernel(api)
    dims = _shape(shape, api)
    dt = as_dtype(dtype, "dtype", api=api)
    space = Attribute.parse(_SHARED_SPACE if kind == "shared" else _FRAGMENT_SPACE)
    ty = MemRefType.get(dims, dt.mlir_type(), memory_space=space)
    ks = state.kernel_scope
    # Allocations belong to the kernel body; one made inside a loop is hoisted
    # to the top of the kernel.
    ip = ks.end_point() if state.scope is ks else ks.hoist_point()
    name = assigned_name(f"{kind}@{user_position()[1]}")
    with user_location(), ip:
        if kind == "shared":
            value = tile.alloc_shared(ty, **attrs)
        else:
            value = tile.alloc_fragment(ty, **attrs)
    if state.scope is not ks:
        ks.last_hoisted = value.owner
    buf = Buffer(value, name, dims, dt, kind, value.owner, user_position())
    state.buffers.append(buf)
    return buf


def alloc_shared(shape, dtype="float32", scope="shared.dyn", *, swizzle=None) -> Buffer:
    """A tile in the block's shared memory (`tile.alloc_shared`).

    swizzle: a `T.Swizzle`, `(bits, base, shift)` or attribute string; by
    default the compiler chooses.
    """
    api = "T.alloc_shared"
    if scope not in ("shared", "shared.dyn"):
        user_error(api, f"scope must be 'shared' or 'shared.dyn', got {scope!r}")
    attrs = {}
    if swizzle is not None:
        in_kernel(api)
        attrs["swizzle"] = swizzle_attr(swizzle, api, "swizzle")
    return _alloc("shared", shape, dtype, api, attrs)


def alloc_fragment(shape, dtype="float32", scope="local.fragment", *, layout=None) -> Buffer:
    """A tile spread over the threads' registers (`tile.alloc_fragment`).

    layout: a `T.Blocked` or attribute string (see also `T.annotate_layout`);
    by default layout inference chooses.
    """
    api = "T.alloc_fragment"
    if scope not in ("local.fragment", "fragment"):
        user_error(api, f"scope must be 'local.fragment', got {scope!r}")
    attrs = {}
    if layout is not None:
        state = in_kernel(api)
        attrs["layout"] = layout_attr(layout, len(_shape(shape, api)), state.threads, api,
                                      "layout")
    return _alloc("fragment", shape, dtype, api, attrs)


def annotate_layout(layouts: dict):
    """`T.annotate_layout({A_f: T.Blocked(...), A_s: T.Swizzle(3, 3, 3)})`:
    fixes the `layout` of fragments and the `swizzle` of shared tiles.
    Values may also be MLIR attribute strings."""
    api = "T.annotate_layout"
    state = in_kernel(api)
    if not isinstance(layouts, dict):
        user_error(api, f"expects a dict {{buffer: layout}}, got {type(layouts).__name__}",
                   TileLangTypeError)
    for buf, layout in layouts.items():
        if not isinstance(buf, Buffer):
            user_error(api, f"keys must be buffers from T.alloc_fragment / T.alloc_shared, "
                            f"got {type(buf).__name__}", TileLangTypeError)
        what = f"layout of {buf.name}"
        if buf.scope == "fragment":
            if isinstance(layout, Swizzle):
                user_error(api, f"{what}: a swizzle applies to shared tiles, {buf.name} is a "
                                "fragment")
            buf.op.attributes["layout"] = layout_attr(layout, buf.ndim, state.threads, api,
                                                      what)
        elif buf.scope == "shared":
            if isinstance(layout, Blocked):
                user_error(api, f"{what}: a blocked layout applies to fragments, {buf.name} is "
                                "shared (give it a T.Swizzle)")
            buf.op.attributes["swizzle"] = swizzle_attr(layout, api, what)
        else:
            user_error(api, f"{what}: {buf.name} is a global tensor; only shared and fragment "
                            "tiles take layouts")


def use_swizzle(target, *args, **kwargs):
    """Two forms. `T.use_swizzle(panel_size, order="row", enable=True)`, as
    TileLang spells it, reorders the kernel's thread blocks into a panelled
    raster for L2 reuse (kernel.set_block_raster). `T.use_swizzle(A_s,
    bits=3, base=3, shift=3)` sets a shared tile's XOR swizzle."""
    if isinstance(target, Buffer):
        return _use_tile_swizzle(target, *args, **kwargs)
    if isinstance(target, (int, Expr)) and not isinstance(target, bool):
        from .kernel import set_block_raster
        return set_block_raster(target, *args, **kwargs)
    in_kernel("T.use_swizzle")
    user_error("T.use_swizzle", f"the first argument must be a panel size (an int) or a "
                                f"shared tile, got {type(target).__name__} {target!r}",
               TileLangTypeError)


def _use_tile_swizzle(buf, bits=3, base=3, shift=3):
    """Sets the `swizzle` of a shared tile."""
    api = "T.use_swizzle"
    in_kernel(api)
    if buf.scope != "shared":
        user_error(api, f"{buf.name} is a {buf.scope} buffer; swizzles apply to shared tiles")
    buf.op.attributes["swizzle"] = swizzle_attr(Swizzle(bits, base, shift), api, "swizzle")


# ---------------------------------------------------------------------------
# Regions
# ---------------------------------------------------------------------------

class _Side:
    """One side of a copy/atomic: a buffer and a box (starts, extents or None)."""

    def __init__(self, buffer, starts, extents, kind, load=None):
        self.buffer = buffer
        self.starts = starts
        self.extents = extents
        self.kind = kind          # "buffer", "point" or "region"
        self.load = load

    def describe(self):
        b = self.buffer
        if self.kind == "buffer":
            return f"{b.name} (shape {list(b.shape)})"
        if self.kind == "region":
            return f"region of {b.name} (extents {self.extents})"
        return f"{b.name}[...]"


def _side(x, api, what) -> _Side:
    if isinstance(x, Buffer):
        return _Side(x, [0] * x.ndim, list(x.shape), "buffer")
    if isinstance(x, BufferRegion):
        return _Side(x.buffer, x.starts, x.extents, "region")
    if isinstance(x, BufferLoad):
        return _Side(x.buffer, x.indices, None, "point", x)
    user_error(api, f"{what} must be a buffer, a region start `A[r, c]` or a slice "
                    f"`A[r:r+64, c:c+128]`, got {type(x).__name__} {x!r}", TileLangTypeError)


def _offsets(side: _Side, api):
    """ints stay static; traced indices become index Values."""
    out = []
    for s in side.starts:
        out.append(s if isinstance(s, int) else to_index(s, api, "offset").ir)
    return out


def _check_box(side: _Side, sizes, api, what):
    buf = side.buffer
    if len(sizes) != buf.ndim:
        user_error(api, f"{what} {buf.name} has rank {buf.ndim} but the copied box has rank "
                        f"{len(sizes)} ({sizes}); both sides of a copy need the same rank")
    for d, (s, n) in enumerate(zip(side.starts, sizes)):
        if isinstance(s, int) and s + n > buf.shape[d]:
            user_error(api, f"{what} box [{s}, {s + n}) in dimension {d} is out of bounds of "
                            f"{buf.describe()}")
    if buf.scope == "fragment" and (any(not (isinstance(s, int) and s == 0)
                                        for s in side.starts) or list(sizes) != list(buf.shape)):
        user_error(api, f"fragment {buf.name} is copied whole: its box must be its shape "
                        f"{list(buf.shape)} at offset 0, got extents {list(sizes)}")


# ---------------------------------------------------------------------------
# Data movement
# ---------------------------------------------------------------------------

def copy(src, dst, *, tma_store=False, early=False):
    """`T.copy(src, dst)` (`tile.copy`), TileLang semantics.

    Each side is a whole buffer, a region start `A[r, c]` (whose extent is the
    other side's shape) or a slice `A[r:r+64, c:c+128]`. The extents of both
    sides must agree. Element types may differ (both floats or both integers:
    each element is converted). `tma_store=True` (a whole shared tile into a
    kernel argument, same element type, sm_90a) stores it by TMA bulk copies
    issued by one thread; the compile says at this line when it cannot.
    `early=True` (a global-to-shared copy in a T.Pipelined loop): its
    prologue may be issued at the nearest `T.prefetch_point()` before the
    loop, so the first stages load under the work between the two; where it
    cannot (an address not known there, a write between the point and the
    loop to the memory it copies, tiles sharing bytes), it stays at the loop
    and `-debug-only=tile-pipeline` says why.
    """
    from ..dialects import tile

    api = "T.copy"
    state = in_kernel(api)
    s, d = _side(src, api, "src"), _side(dst, api, "dst")
    if s.extents is not None and d.extents is not None:
        if list(s.extents) != list(d.extents):
            user_error(api, f"extents do not match: src {s.describe()} vs dst "
                            f"{d.describe()}")
        sizes = list(s.extents)
    elif s.extents is not None:
        sizes = list(s.extents)
    elif d.extents is not None:
        sizes = list(d.extents)
    else:
        user_error(api, "both src and dst are region starts (`A[r, c]`), so the extent is "
                        "unknown: give one side as a whole buffer or a slice")
    _check_box(s, sizes, api, "src")
    _check_box(d, sizes, api, "dst")
    sb, db = s.buffer, d.buffer
    if sb.scope == "global" and db.scope == "global":
        user_error(api, f"cannot copy global {sb.name} to global {db.name}: stage the tile "
                        "through T.alloc_shared or T.alloc_fragment")
    if sb.scope == "fragment" and db.scope == "fragment":
        user_error(api, f"cannot copy fragment {sb.name} to fragment {db.name}: use "
                        "T.Parallel")
    if (sb.dtype.kind == "float") != (db.dtype.kind == "float"):
        user_error(api, f"dtype mismatch: cannot convert {sb.dtype.name} ({sb.name}) to "
                        f"{db.dtype.name} ({db.name}); both must be floats or both integers",
                   TileLangTypeError)
    for side in (s, d):
        if side.load is not None:
            side.load.consume()
    if not isinstance(tma_store, bool):
        user_error(api, f"tma_store must be a Python bool, got {tma_store!r}",
                   TileLangTypeError)
    if tma_store and (sb.scope != "shared" or db.scope != "global"):
        user_error(api, f"tma_store copies a shared tile to a global tensor, got "
                        f"{sb.scope} {sb.name} to {db.scope} {db.name}")
    if not isinstance(early, bool):
        user_error(api, f"early must be a Python bool, got {early!r}", TileLangTypeError)
    if early and (sb.scope != "global" or db.scope != "shared"):
        user_error(api, f"early loads a global tensor into a shared tile, got "
                        f"{sb.scope} {sb.name} to {db.scope} {db.name}")
    if early and state.scope.kind != "pipelined":
        user_error(api, "early applies to a copy directly in a T.Pipelined loop (its "
                        "prologue is what starts early)")
    src_offsets, dst_offsets = _offsets(s, api), _offsets(d, api)
    with user_location(), state.scope.end_point():
        op = tile.copy(sb.ir, db.ir, src_offsets=src_offsets, dst_offsets=dst_offsets,
                       sizes=sizes)
        from ..ir import UnitAttr
        if tma_store:
            op.operation.attributes["tma_store"] = UnitAttr.get()
        if early:
            op.operation.attributes["tile.early"] = UnitAttr.get()


def prefetch_point():
    """`T.prefetch_point()`: the prologues of the `T.copy(..., early=True)`
    copies of the T.Pipelined loops after it (in this block, or nested in
    what follows) may be issued here (`tile.prefetch_point`), so their
    first stages load while the code in between runs."""
    from ..dialects import tile

    _marker("T.prefetch_point", "a prefetch point", tile.prefetch_point)


def task_wait():
    """`T.task_wait()`: in the body of a mega task, where the persistent
    kernel waits for the task's events (`tile.task_wait`; without it, before
    the whole body). The code before it runs while the task's inputs are
    still being produced: it may read weights, tensors only later tasks of
    the step write (the generation state) and, in `T.copy(..., early=True)`,
    tensors the task itself writes; anything else is a compile error naming
    the tensor and its writer. A `T.prefetch_point()` before it starts the
    early copies of the loops after it there. At the top of the kernel
    body, once; a kernel launched on its own ignores it."""
    from ..dialects import tile

    _marker("T.task_wait", "a task wait", tile.task_wait)


def _marker(api, what, emit):
    """Emits a marker op (emit()) at the kernel's current point, outside
    any T.Parallel loop."""
    state = in_kernel(api)
    if state.in_parallel():
        user_error(api, f"{what} cannot sit inside a T.Parallel loop")
    with user_location(), state.scope.end_point():
        emit()


def _tile_buffer(x, api, what, scopes=("shared", "fragment")) -> Buffer:
    if isinstance(x, BufferRegion):
        b = x.buffer
        if list(x.extents) == list(b.shape) and all(isinstance(s, int) and s == 0
                                                    for s in x.starts):
            return b
        user_error(api, f"{what}: only whole tiles are supported, got a region of {b.name}")
    if not isinstance(x, Buffer):
        user_error(api, f"{what} must be a tile buffer, got {type(x).__name__} {x!r}",
                   TileLangTypeError)
    if x.scope not in scopes:
        user_error(api, f"{what} ({x.name}) must be {' or '.join(scopes)}, got {x.scope}")
    return x


def gemm(A, B, C, transpose_A=False, transpose_B=False, clear_accum=False, *, policy=None,
         k_pack=None, wg_wait=None):
    """`T.gemm(A, B, C)`: C += op(A) @ op(B) (`tile.gemm`).

    A (M x K, or K x M with transpose_A) and B (K x N, or N x K with
    transpose_B) are shared tiles or fragments; C (M x N) is a fragment.
    With clear_accum C is zeroed first. `wg_wait=-1` (TileLang's spelling)
    leaves the gemm's wgmma in flight: C belongs to the tensor cores, and A
    and B may not be written, until `T.wait_wgmma` hands C back; 0 (or None)
    waits at once. (`policy` and `k_pack` of TileLang are accepted and
    ignored.)
    """
    from ..dialects import tile
    from ..ir import UnitAttr

    api = "T.gemm"
    state = in_kernel(api)
    a = _tile_buffer(A, api, "A")
    b = _tile_buffer(B, api, "B")
    c = _tile_buffer(C, api, "C", scopes=("fragment",))
    for name, buf in (("A", a), ("B", b), ("C", c)):
        if buf.ndim != 2:
            user_error(api, f"{name} ({buf.name}) must be a 2-d tile, got rank {buf.ndim}")
    m, ka = (a.shape[1], a.shape[0]) if transpose_A else a.shape
    kb, n = (b.shape[1], b.shape[0]) if transpose_B else b.shape
    if ka != kb:
        user_error(api, f"K differs: A ({a.name} {list(a.shape)}"
                        f"{', transposed' if transpose_A else ''}) gives K = {ka}, B "
                        f"({b.name} {list(b.shape)}{', transposed' if transpose_B else ''}) "
                        f"gives K = {kb}")
    if list(c.shape) != [m, n]:
        user_error(api, f"C ({c.name}) must be {m} x {n} (M x N), got {list(c.shape)}")
    if a.dtype is not b.dtype:
        user_error(api, f"dtype mismatch: A is {a.dtype.name} but B is {b.dtype.name}",
                   TileLangTypeError)
    if wg_wait not in (None, 0, -1):
        user_error(api, f"wg_wait must be 0 (wait at once) or -1 (stay in flight until "
                        f"T.wait_wgmma), got {wg_wait!r}")
    with user_location(), state.scope.end_point():
        tile.GemmOp(a.ir, b.ir, c.ir,
                    transpose_a=UnitAttr.get() if transpose_A else None,
                    transpose_b=UnitAttr.get() if transpose_B else None,
                    clear_accum=UnitAttr.get() if clear_accum else None,
                    async_=UnitAttr.get() if wg_wait == -1 else None)
    if wg_wait == -1:
        state.scope.pending_gemms.append(c)


def wait_wgmma(pending=0):
    """`T.wait_wgmma(n)`: waits until at most `n` of this block's asynchronous
    gemms (`T.gemm(..., wg_wait=-1)`, one group each) are in flight, and
    hands back the accumulators of those that completed (`tile.wgmma_wait`;
    the kernel's verifier checks the list this fills in)."""
    from ..dialects import tile
    from ..ir import IntegerAttr, IntegerType

    api = "T.wait_wgmma"
    state = in_kernel(api)
    if not isinstance(pending, int) or isinstance(pending, bool) or pending < 0:
        user_error(api, f"pending must be a non-negative Python int, got {pending!r}")
    groups = state.scope.pending_gemms
    keep = min(pending, len(groups))
    done, still = groups[:len(groups) - keep], groups[len(groups) - keep:]
    # An accumulator a newer gemm still writes is not handed back yet.
    ready = []
    for c in done:
        if all(c is not s for s in still) and all(c is not r for r in ready):
            ready.append(c)
    del groups[:len(done)]
    with user_location(), state.scope.end_point():
        tile.WgmmaWaitOp(IntegerAttr.get(IntegerType.get_signless(64), pending),
                         [c.ir for c in ready])


def clear(buffer):
    """Sets every element of a shared or fragment tile to zero (`tile.clear`)."""
    from ..dialects import tile

    api = "T.clear"
    state = in_kernel(api)
    buf = _tile_buffer(buffer, api, "buffer")
    with user_location(), state.scope.end_point():
        tile.ClearOp(buf.ir)


def fill(buffer, value):
    """Writes `value` (a Python number or a traced value of the tile's dtype)
    into every element of a shared or fragment tile (`tile.fill`)."""
    from ..dialects import tile

    api = "T.fill"
    state = in_kernel(api)
    buf = _tile_buffer(buffer, api, "buffer")
    if isinstance(value, Expr) and value.dtype is not buf.dtype:
        user_error(api, f"dtype mismatch: filling {buf.dtype.name} tile {buf.name} with a "
                        f"{value.dtype.name} value; use T.cast(value, '{buf.dtype.name}')",
                   TileLangTypeError)
    v = as_expr(value, buf.dtype, api, "value")
    with user_location(), state.scope.end_point():
        tile.FillOp(buf.ir, v.ir)


def _reduce(kind, src, dst, dim, clear, api):
    from ..dialects import tile
    from ..ir import UnitAttr

    state = in_kernel(api)
    s = _tile_buffer(src, api, "src")
    d = _tile_buffer(dst, api, "dst")
    dim = static_int(dim, "dim", api)
    if not -s.ndim <= dim < s.ndim:
        user_error(api, f"dim {dim} is out of range for src {s.name} of rank {s.ndim}")
    dim %= s.ndim
    if s.ndim < 2:
        user_error(api, f"src {s.name} must have rank >= 2 (the result keeps the other "
                        "dimensions)")
    expected = [n for i, n in enumerate(s.shape) if i != dim]
    if list(d.shape) != expected:
        user_error(api, f"dst {d.name} must have shape {expected} (src {list(s.shape)} "
                        f"without dimension {dim}), got {list(d.shape)}")
    if s.dtype is not d.dtype:
        user_error(api, f"dtype mismatch: src is {s.dtype.name} but dst is {d.dtype.name}",
                   TileLangTypeError)
    with user_location(), state.scope.end_point():
        tile.ReduceOp(getattr(tile.ReduceKind, kind), s.ir, dim, d.ir,
                      clear=UnitAttr.get() if clear else None)


def reduce_sum(buffer, out, dim=-1, clear=True):
    """out = sum of `buffer` along `dim` (`tile.reduce sum`); with clear=False
    the result is added to what `out` holds."""
    _reduce("sum", buffer, out, dim, clear, "T.reduce_sum")


def reduce_max(buffer, out, dim=-1, clear=True):
    """out = max of `buffer` along `dim` (`tile.reduce max`)."""
    _reduce("max", buffer, out, dim, clear, "T.reduce_max")


def reduce_min(buffer, out, dim=-1, clear=True):
    """out = min of `buffer` along `dim` (`tile.reduce min`)."""
    _reduce("min", buffer, out, dim, clear, "T.reduce_min")


def reduce_absmax(buffer, out, dim=-1, clear=True):
    """out = the largest magnitude of `buffer` along `dim` (`tile.reduce absmax`)."""
    _reduce("absmax", buffer, out, dim, clear, "T.reduce_absmax")


def _atomic(kind, dst, value, api):
    from ..dialects import tile
    from ..dialects.tile import _split_offsets

    state = in_kernel(api)
    src = _tile_buffer(value, api, "value")
    d = _side(dst, api, "dst")
    if d.buffer.scope != "global":
        user_error(api, f"dst ({d.buffer.name}) must be a global tensor, got {d.buffer.scope}")
    sizes = list(src.shape)
    if d.extents is not None and list(d.extents) != sizes:
        if d.kind == "buffer":
            user_error(api, f"extents do not match: dst {d.describe()} vs value {src.name} "
                            f"{sizes}; give the destination as a region start dst[r, c]")
        user_error(api, f"extents do not match: dst {d.describe()} vs value {src.name} "
                        f"{sizes}")
    _check_box(d, sizes, api, "dst")
    if src.dtype is not d.buffer.dtype:
        user_error(api, f"dtype mismatch: value {src.name} is {src.dtype.name} but dst "
                        f"{d.buffer.name} is {d.buffer.dtype.name}", TileLangTypeError)
    if d.load is not None:
        d.load.consume()
    dyn, static = _split_offsets("offsets", _offsets(d, api), d.buffer.ndim)
    with user_location(), state.scope.end_point():
        tile.AtomicOp(getattr(tile.AtomicKind, kind), src.ir, d.buffer.ir, dyn, static)


def atomic_add(dst, value):
    """`T.atomic_add(C[r, c], C_frag)`: atomically adds a tile into global
    memory at a region start (or a slice / whole tensor of the tile's shape)."""
    _atomic("add", dst, value, "T.atomic_add")


def atomic_max(dst, value):
    """Like `T.atomic_add`, with max."""
    _atomic("max", dst, value, "T.atomic_max")


def block_atomic_add(dst, value=1):
    """`old = T.block_atomic_add(counts[g], 1)` (`tile.block_atomic_add`):
    the block adds `value` once to the global int32 / int64 element and
    every thread gets the element's value from before the add. The add
    releases everything the block wrote before it (device scope) and
    acquires what the earlier adders wrote before theirs, so the block
    that sees `old == n - 1` on a counter n blocks add 1 to is the last
    and may read all of their results: a split reduction finished by its
    last split. Every thread must reach it (two block barriers): not in a
    T.Parallel loop, and in a loop or branch only where all threads take
    it alike (`T.serial(T.if_then_else(cond, 1, 0))` with a block-uniform
    cond). Resetting the counter for the next use is the caller's."""
    from ..dialects import tile

    api = "T.block_atomic_add"
    state = in_kernel(api)
    if state.in_parallel():
        user_error(api, "every thread of the block must reach it (it holds block barriers); "
                        "it cannot sit inside a T.Parallel loop")
    if not isinstance(dst, BufferLoad):
        user_error(api, f"dst must be one element of a global tensor, `counts[i]`, got "
                        f"{type(dst).__name__} {dst!r}", TileLangTypeError)
    buf = dst.buffer
    if buf.scope != "global":
        user_error(api, f"dst ({buf.name}) must be a global tensor, got {buf.scope}")
    if buf.dtype.name not in ("int32", "int64"):
        user_error(api, f"dst ({buf.name}) must hold int32 or int64 counters, got "
                        f"{buf.dtype.name}", TileLangTypeError)
    if len(dst.indices) != buf.ndim:
        user_error(api, f"dst {buf.name} has rank {buf.ndim} but {len(dst.indices)} "
                        "indices were given")
    v = as_expr(value, buf.dtype, api, "value")
    if v.dtype is not buf.dtype:
        user_error(api, f"value is {v.dtype.name} but dst {buf.name} holds "
                        f"{buf.dtype.name}", TileLangTypeError)
    indices = [to_index(i, api, "index").ir for i in dst.indices]
    dst.consume()
    scratch = alloc_shared((1,), buf.dtype.name)
    with user_location(), state.scope.end_point():
        old = tile.BlockAtomicAddOp(v.ir, buf.ir, indices, scratch.ir).result
    return Expr(old, buf.dtype, state.scope, False)
