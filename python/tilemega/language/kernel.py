"""The kernel context and loops: `T.Kernel`, `T.Parallel`, `T.Pipelined`, `T.serial`.

    with T.Kernel(T.ceildiv(N, 128), M // 64, threads=128) as (bx, by):
        for i, j in T.Parallel(64, 128):        # tile.parallel, traced once
            ...
        for k in T.Pipelined(K // 32, num_stages=3):   # tile.pipelined
            ...

`T.Parallel` and `T.Pipelined` are iterators that create their op, yield
index values once (so the loop body is traced once, into the op's region),
and close the region when the body is done. A plain Python `for` loop over
`range(...)` is unrolled at trace time.
"""

from __future__ import annotations

from typing import Optional

from .trace import (Scope, TileLangTypeError, current, in_kernel, user_error,
                    user_location, user_position)
from .types import index, static_int
from .values import Expr, constant, emit_pure, to_index


class Kernel:
    """`with T.Kernel(gx[, gy[, gz]], threads=128) as bx` (or `(bx, by)`...):
    the kernel body, run once per thread block of the grid.

    Grid sizes and `threads` are compile-time ints (symbolic dimensions are
    fine: kernels are specialised per shape). `threads` is a multiple of 32,
    at most 1024. The block indices are index values.

    `cluster=N` (sm_90a, 2 to 8) launches the blocks in clusters of N
    consecutive values of the first index (which must be a multiple of N):
    a warp-specialised T.Pipelined loop then multicasts each TMA copy whose
    box is the same for the whole cluster (offsets that do not depend on
    `bx`, or only through `bx // N`), each block loading 1/N of it for all.
    With T.use_swizzle the raster orders clusters, not blocks.

    `resident=True` (a 1-D grid) makes the grid an upper bound: the runtime
    launches as many blocks as the device keeps resident at once (whole
    clusters: on an H100, 30 clusters of 4 blocks fit, not 33), at most
    this many, and the body walks its work with the launched count,
    `T.num_blocks()`, as its stride: a persistent kernel.

        with T.Kernel(132, threads=384, cluster=4, resident=True) as block:
            for t in T.serial(block // 4, tiles, T.num_blocks() // 4):
                ...
    """

    def __init__(self, *grid, threads=128, cluster=None, resident=False):
        self.grid = grid
        self.threads = threads
        self.cluster = cluster
        self.resident = resident
        self.reads_count = False          # T.num_blocks() (dim 0) was read
        self.scope: Optional[Scope] = None
        self.raster = None

    def __enter__(self):
        from ..dialects import tile

        api = "T.Kernel"
        state = current(api)
        if state.kernel is not None:
            user_error(api, "a kernel function holds exactly one `with T.Kernel(...)`; "
                            "this is the second")
        if len(state.scopes) != 1:
            user_error(api, "T.Kernel must be at the top level of the function body")
        if len(self.grid) == 1 and isinstance(self.grid[0], (tuple, list)):
            self.grid = tuple(self.grid[0])
        if not 1 <= len(self.grid) <= 3:
            user_error(api, f"the grid has 1 to 3 dimensions, got {len(self.grid)}")
        grid = [static_int(g, f"grid[{i}]", api, minimum=1) for i, g in enumerate(self.grid)]
        if isinstance(self.threads, (tuple, list)):
            user_error(api, f"threads must be one int (1-d thread blocks), got "
                            f"{self.threads!r}", TileLangTypeError)
        threads = static_int(self.threads, "threads", api)
        if threads < 32 or threads % 32 or threads > 1024:
            user_error(api, f"threads must be a positive multiple of 32 and at most 1024, "
                            f"got {threads}")
        limits = ((1 << 31) - 1, 65535, 65535)
        for i, (g, lim) in enumerate(zip(grid, limits)):
            if g > lim:
                user_error(api, f"grid[{i}] = {g} is over CUDA's limit of {lim} blocks")
        cluster = None
        if self.cluster is not None:
            cluster = static_int(self.cluster, "cluster", api)
            if not 2 <= cluster <= 8:
                user_error(api, f"cluster must be 2 to 8 blocks, got {cluster}")
            if grid[0] % cluster:
                user_error(api, f"clusters of {cluster} blocks along the first grid "
                                f"dimension need it to be a multiple of {cluster}, "
                                f"got grid[0] = {grid[0]}")
        if not isinstance(self.resident, bool):
            user_error(api, f"resident must be True or False, got {self.resident!r}",
                       TileLangTypeError)
        if self.resident and len(grid) != 1:
            user_error(api, f"a resident grid is 1-D (the runtime sizes its one dimension), "
                            f"got {len(grid)} dimensions")
        with user_location(), state.func_scope.end_point():
            op = tile.kernel(grid=grid, threads=threads, cluster=cluster,
                             resident=self.resident)
        block = op.body.blocks[0]
        state.kernel = op
        state.threads = threads
        scope = Scope("kernel", block, state.func_scope, op, user_position())
        state.kernel_scope = scope
        state.kernel_context = self
        state.push(scope)
        self.scope = scope
        self.grid_sizes = grid
        self.cluster_size = cluster or 1
        ids = tuple(Expr(a, index, scope, True, nonneg=True) for a in block.arguments)
        return ids[0] if len(ids) == 1 else ids

    def __exit__(self, exc_type, exc, tb):
        current(None).pop(self.scope)
        if exc_type is None and self.resident and not self.reads_count:
            user_error("T.Kernel", f"resident=True: the runtime may launch fewer than the "
                                   f"{self.grid_sizes[0]} blocks, but the body never reads how "
                                   f"many (T.num_blocks()), so its work would not be strided "
                                   f"over the blocks launched", position=self.scope.position)
        if exc_type is None and self.raster is not None:
            _rasterize(self.scope.block, self.grid_sizes, *self.raster,
                       cluster=self.cluster_size)
        return False


def num_blocks(dim=0):
    """`T.num_blocks(dim=0)` (`tile.num_blocks`): the blocks the launch has
    along grid dimension `dim`, an index value: the kernel's own grid size,
    except along a `resident` kernel's grid, which the runtime sizes to
    what stays resident on the device (a persistent loop's stride)."""
    from ..dialects import tile

    api = "T.num_blocks"
    state = in_kernel(api)
    rank = len(state.kernel_context.grid_sizes)
    dim = static_int(dim, "dim", api)
    if not 0 <= dim < rank:
        user_error(api, f"dim must name a dimension of the kernel's {rank}-D grid "
                        f"(0 to {rank - 1}), got {dim}")
    if dim == 0:
        state.kernel_context.reads_count = True
    # Pure and the same all kernel long: at the top of the kernel (once), so
    # that hoisted arithmetic on it may follow.
    return emit_pure(api, ("num_blocks", dim), [], lambda: tile.NumBlocksOp(dim).result,
                     index, nonneg=True)


def set_block_raster(panel_size, order="row", enable=True):
    """`T.use_swizzle(panel_size, order="row", enable=True)`, as TileLang spells
    it: the kernel's blocks take their (bx, by) from a panelled raster of the
    2-D grid instead of the launch order, so that the blocks resident at
    once share operand tiles in L2. With order "row" a panel is
    `panel_size` consecutive values of the second index (TileLang's rows,
    `by`): consecutive blocks walk down the panel's rows, then across the
    first index, every other panel in reverse; order "column" swaps the two
    indices' roles. The last panel may be narrower. The block indices
    change everywhere in the kernel, before the call too (the remap is put
    at the kernel's start when the kernel closes)."""
    api = "T.use_swizzle"
    state = in_kernel(api)
    kernel = state.kernel_context
    if state.scope is not state.kernel_scope:
        user_error(api, "block rasterisation belongs at the kernel's top level "
                        "(not inside a loop or T.Parallel)")
    if kernel.raster is not None:
        user_error(api, "the kernel's block raster is already set (one T.use_swizzle "
                        "a kernel)")
    panel = static_int(panel_size, "panel_size", api, minimum=1)
    if order not in ("row", "column", "col"):
        user_error(api, f"order must be 'row' or 'column', got {order!r}")
    if not isinstance(enable, bool):
        user_error(api, f"enable must be a bool, got {enable!r}", TileLangTypeError)
    if len(kernel.grid_sizes) < 2:
        user_error(api, f"block rasterisation reorders a 2-D grid; this kernel's grid "
                        f"is {list(kernel.grid_sizes)}")
    if enable:
        kernel.raster = (panel, "column" if order == "col" else order,
                         user_position())


def raster_indices(b0, b1, g0, g1, panel, order, ops=None, cluster=1):
    """The panelled raster of T.use_swizzle: the block indices that launch
    block (b0, b1) of a (g0, g1) grid takes. One rule for the kernel (ops:
    arith ops on index values) and for Python (ops None: ints). With
    clusters of `cluster` blocks along the first index the raster orders the
    clusters (b0 // cluster of a g0 / cluster wide grid) and a block keeps
    its place in its cluster (b0 % cluster), so that a cluster's blocks
    share the second index."""
    ops = ops or _IntOps()
    c = ops.const
    if cluster > 1:
        row, col = raster_indices(ops.div(b0, c(cluster)), b1, g0 // cluster, g1,
                                  panel, order, ops)
        return ops.add(ops.mul(row, c(cluster)), ops.rem(b0, c(cluster))), col
    # The launch order: the first index fastest.
    linear = ops.add(b0, ops.mul(b1, c(g0)))
    # "row" panels the second index; "column" the first (swap the sizes,
    # then the results back).
    if order == "column":
        g0, g1 = g1, g0
    band = c(panel * g0)
    index = ops.div(linear, band)
    within = ops.rem(linear, band)
    first_row = ops.mul(index, c(panel))
    # The last panel holds the rows that are left.
    rows = ops.min(c(panel), ops.sub(c(g1), first_row))
    row = ops.add(first_row, ops.rem(within, rows))
    col = ops.div(within, rows)
    # Every other panel walks the first index backwards, so that the blocks
    # either side of a panel boundary share tiles.
    col = ops.select(ops.rem(index, c(2)), ops.sub(c(g0 - 1), col), col)
    return (row, col) if order == "column" else (col, row)


class _IntOps:
    const = staticmethod(lambda v: v)
    add = staticmethod(lambda x, y: x + y)
    sub = staticmethod(lambda x, y: x - y)
    mul = staticmethod(lambda x, y: x * y)
    div = staticmethod(lambda x, y: x // y)
    rem = staticmethod(lambda x, y: x % y)
    min = staticmethod(min)
    select = staticmethod(lambda nonzero, x, y: x if nonzero else y)


class ExprOps(_IntOps):
    """Traced index values (T.* expressions): a kernel that walks its own
    tiles (a persistent one) takes the same raster from a tile number."""
    min = staticmethod(lambda x, y: _t_min(x, y))
    select = staticmethod(lambda nonzero, x, y: _if_then_else(nonzero != 0, x, y))


def _t_min(x, y):
    from .mathops import min as t_min
    return t_min(x, y)


def _if_then_else(cond, x, y):
    from .values import if_then_else
    return if_then_else(cond, x, y)


class _ArithOps:
    """Unsigned index arithmetic (block indices are never negative)."""

    def __init__(self):
        from ..dialects import arith
        from ..ir import IndexType, IntegerAttr
        self.arith, self.ty, self.attr = arith, IndexType.get(), IntegerAttr
        (self.add, self.sub, self.mul, self.div, self.rem, self.min) = (
            arith.addi, arith.subi, arith.muli, arith.divui, arith.remui, arith.minui)

    def const(self, v):
        return self.arith.constant(self.ty, self.attr.get(self.ty, v))

    def select(self, nonzero, x, y):
        a = self.arith
        return a.select(a.cmpi(a.CmpIPredicate.ne, nonzero, self.const(0)), x, y)


def _rasterize(block, grid, panel, order, position, cluster=1):
    """Replaces the block indices of the first two grid dimensions by the
    panelled raster (raster_indices, by clusters in a kernel of clusters: a
    cluster's blocks share the second index, which lets their copies
    multicast), computed at the kernel's start."""
    from ..ir import InsertionPoint, Location

    before = {op.operation for op in block.operations}
    with Location.file(*position), InsertionPoint.at_block_begin(block):
        new0, new1 = raster_indices(block.arguments[0], block.arguments[1],
                                    grid[0], grid[1], panel, order, _ArithOps(),
                                    cluster=cluster)
    new_ops = [op.operation for op in block.operations if op.operation not in before]
    # Uses in the remap itself keep the launch's indices.
    block.arguments[0].replace_all_uses_except(new0, new_ops)
    block.arguments[1].replace_all_uses_except(new1, new_ops)


def _extents(api, extents):
    if len(extents) == 1 and isinstance(extents[0], (tuple, list)):
        extents = tuple(extents[0])
    if not extents:
        user_error(api, "needs at least one extent")
    return [static_int(e, f"extent {i}", api, minimum=1) for i, e in enumerate(extents)]


class Parallel:
    """`for i, j in T.Parallel(64, 128):` an elementwise loop nest over a tile
    (`tile.parallel`), spread over the block's threads. Extents are
    compile-time ints. `layout=` (a `T.Blocked` or attribute string) fixes
    which thread runs which iteration."""

    def __init__(self, *extents, layout=None):
        self.extents = extents
        self.layout = layout

    def __iter__(self):
        from ..dialects import tile
        from .ops import layout_attr

        api = "T.Parallel"
        state = in_kernel(api)
        extents = _extents(api, self.extents)
        if state.in_parallel():
            user_error(api, "T.Parallel loops cannot be nested; use one T.Parallel with "
                            "several extents")
        layout = None
        if self.layout is not None:
            layout = layout_attr(self.layout, len(extents), state.threads, api, "layout")
        position = user_position()
        with user_location(), state.scope.end_point():
            op = tile.parallel(extents, layout=layout)
        block = op.body.blocks[0]
        scope = Scope("parallel", block, state.scope, op, position)
        state.push(scope)
        try:
            ids = tuple(Expr(a, index, scope, True, nonneg=True) for a in block.arguments)
            yield ids[0] if len(ids) == 1 else ids
        finally:
            state.pop(scope)


class Pipelined:
    """`for k in T.Pipelined(n, num_stages=3):` or `T.Pipelined(lb, ub, step=1,
    num_stages=3)`: a counted loop (`tile.pipelined`) whose global->shared
    copies may overlap across `num_stages` iterations. Bounds may be ints or
    traced index values, and so may the step (e.g. `T.num_blocks()`), which
    must then be positive when the kernel runs; `num_stages=0` (TileLang's
    "no pipelining") is 1.
    `wgmma_in_flight=True` (Hopper, num_stages >= 3) keeps each iteration's
    wgmma pending into the next, the copies num_stages - 2 iterations ahead
    (`tile.pipelined ... wgmma_in_flight`; a config parameter can set it, so
    autotune can choose it). `tma=True` requires this loop's global->shared
    tiles to come by TMA bulk copies on mbarriers (Hopper; an error at this
    line names the copy that cannot be one TMA box), `tma=False` keeps
    cp.async; None (the default) leaves it to the compile's `tma`.
    `warp_specialize=True` (Hopper, TMA) gives the loop's copies to a
    producer warpgroup added to the kernel's threads, which runs ahead of
    them on full / empty mbarriers (`tile.producer`); the loop must be at
    the kernel's top level or in a loop that is (a persistent kernel's loop
    over its tiles, whose iterations the producer then runs ahead through)."""

    def __init__(self, start, stop=None, step=1, *, num_stages=1, wgmma_in_flight=False,
                 tma=None, warp_specialize=False, **ignored):
        if stop is None:
            start, stop = 0, start
        self.start, self.stop, self.step = start, stop, step
        self.num_stages = num_stages
        self.wgmma_in_flight = wgmma_in_flight
        self.tma = tma
        self.warp_specialize = warp_specialize
        self.ignored = ignored
        self.api = "T.Pipelined"

    def __iter__(self):
        from ..dialects import tile

        api = self.api
        state = in_kernel(api)
        if self.ignored:
            user_error(api, f"unsupported arguments {sorted(self.ignored)} (supported: start, "
                            "stop, step, num_stages, wgmma_in_flight, tma, warp_specialize)",
                       TileLangTypeError)
        stages = static_int(self.num_stages, "num_stages", api, minimum=0)
        in_flight = self.wgmma_in_flight
        if not isinstance(in_flight, bool):
            user_error(api, f"wgmma_in_flight must be a Python bool, got {in_flight!r}",
                       TileLangTypeError)
        if in_flight and stages < 3:
            user_error(api, f"wgmma_in_flight needs num_stages >= 3 (a stage that neither the "
                            f"pending wgmma nor the current iteration reads), got {stages}")
        if self.tma is not None and not isinstance(self.tma, bool):
            user_error(api, f"tma must be None or a Python bool, got {self.tma!r}",
                       TileLangTypeError)
        if not isinstance(self.warp_specialize, bool):
            user_error(api, f"warp_specialize must be a Python bool, got "
                            f"{self.warp_specialize!r}", TileLangTypeError)
        if self.warp_specialize and self.tma is False:
            user_error(api, "warp_specialize needs TMA (its producer warpgroup issues bulk "
                            "copies), but tma=False")
        scope = state.scope
        if self.warp_specialize and not (
                scope.kind == "kernel" or
                (scope.kind == "pipelined" and scope.parent.kind == "kernel")):
            user_error(api, "warp_specialize needs a loop at the kernel's top level or in a "
                            "loop that is (a persistent kernel's loop over its tiles): the "
                            "producer warpgroup runs the kernel's only such loop")
        lb = to_index(self.start, api, "start")
        ub = to_index(self.stop, api, "stop")
        if isinstance(self.step, Expr):
            # Known on the GPU only (a persistent loop's T.num_blocks()
            # stride), which must then be positive.
            st = to_index(self.step, api, "step")
        else:
            st = constant(static_int(self.step, "step", api, minimum=1), index, api=api)
        position = user_position()
        with user_location(), state.scope.end_point():
            op = tile.pipelined(lb.ir, ub.ir, st.ir, max(1, stages),
                                wgmma_in_flight=in_flight, tma=self.tma,
                                warp_specialize=self.warp_specialize)
        block = op.body.blocks[0]
        scope = Scope("pipelined", block, state.scope, op, position)
        state.push(scope)
        try:
            yield Expr(block.arguments[0], index, scope, True, nonneg=lb.nonneg)
        finally:
            state.pop(scope)


def serial(start, stop=None, step=1):
    """`for k in T.serial(n):` a loop kept as a loop (a `tile.pipelined` with
    one stage); a Python `range` loop would be unrolled at trace time."""
    p = Pipelined(start, stop, step, num_stages=1)
    p.api = "T.serial"
    return p
