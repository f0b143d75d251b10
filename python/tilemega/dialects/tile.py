"""Python builders of the `tile` dialect.

The generated op classes come from ODS; the helpers below create the ops
whose regions have index arguments (kernel, parallel, pipelined) with their
entry block already in place.

    k = tile.kernel(grid=[4, 2], threads=128)
    with InsertionPoint(k.body.blocks[0]):
        bx, by = k.body.blocks[0].arguments
"""

from ._tile_ops_gen import *  # noqa: F401,F403
from ._tile_ops_gen import _Dialect  # noqa: F401
from ._tile_enum_gen import *  # noqa: F401,F403
from ._tile_ops_gen import KernelOp, ParallelOp, PipelinedOp

from ..ir import (Attribute, BoolAttr, DenseI64ArrayAttr, IndexType, IntegerAttr,
                  IntegerType)


def _check_ints(name, values, *, minimum):
    values = list(values)
    if not values or not all(isinstance(v, int) for v in values):
        raise TypeError(f"{name} must be a non-empty list of ints, got {values!r}")
    for v in values:
        if v < minimum:
            raise ValueError(f"{name} entries must be >= {minimum}, got {values!r}")
    return values


def kernel(grid, threads, *, cluster=None, resident=False, loc=None, ip=None) -> KernelOp:
    """Creates `tile.kernel` with one block index argument per grid dimension
    (`cluster`: blocks per cluster along the first one, or None; `resident`:
    the runtime launches as many blocks as stay resident, at most `grid`)."""
    grid = _check_ints("grid", grid, minimum=1)
    if len(grid) > 3:
        raise ValueError(f"grid has at most 3 dimensions, got {grid!r}")
    if not isinstance(threads, int) or threads < 32 or threads % 32 or threads > 1024:
        raise ValueError(
            f"threads must be a positive multiple of 32 and at most 1024, got {threads!r}")
    op = KernelOp(DenseI64ArrayAttr.get(grid),
                  IntegerAttr.get(IntegerType.get_signless(64), threads),
                  cluster=None if cluster is None else
                  IntegerAttr.get(IntegerType.get_signless(64), cluster),
                  resident=bool(resident), loc=loc, ip=ip)
    op.body.blocks.append(*([IndexType.get()] * len(grid)))
    return op


def parallel(extents, *, layout=None, loc=None, ip=None) -> ParallelOp:
    """Creates `tile.parallel` over `extents` with one index argument each."""
    extents = _check_ints("extents", extents, minimum=1)
    op = ParallelOp(DenseI64ArrayAttr.get(extents),
                    layout=Attribute.parse(layout) if isinstance(layout, str) else layout,
                    loc=loc, ip=ip)
    op.body.blocks.append(*([IndexType.get()] * len(extents)))
    return op


def pipelined(lower, upper, step, num_stages, *, wgmma_in_flight=False, tma=None,
              warp_specialize=False, loc=None, ip=None) -> PipelinedOp:
    """Creates `tile.pipelined` from index values; the block argument is the IV.
    `wgmma_in_flight` marks the loop (tile-pipeline keeps its wgmma pending
    into the next iteration); `tma` (None, True or False) is the loop's own
    TMA decision (True requires TMA bulk copies, False keeps cp.async);
    `warp_specialize` gives its copies to a producer warpgroup."""
    if not isinstance(num_stages, int) or num_stages < 1:
        raise ValueError(f"num_stages must be an int >= 1, got {num_stages!r}")
    if tma is not None and not isinstance(tma, bool):
        raise ValueError(f"tma must be None, True or False, got {tma!r}")
    op = PipelinedOp(lower, upper, step,
                     IntegerAttr.get(IntegerType.get_signless(64), num_stages),
                     wgmma_in_flight=True if wgmma_in_flight else None,
                     tma=None if tma is None else BoolAttr.get(tma),
                     warp_specialize=True if warp_specialize else None,
                     loc=loc, ip=ip)
    op.body.blocks.append(IndexType.get())
    return op


_DYNAMIC = -(2**63)  # ShapedType::kDynamic: this offset is an SSA value.


def _split_offsets(name, offsets, rank):
    """Mixed ints / index Values -> (dynamic values, static list)."""
    from ..ir import Value

    if offsets is None:
        return [], [0] * rank
    offsets = list(offsets)
    if len(offsets) != rank:
        raise ValueError(f"{name} needs {rank} entries (the buffer's rank), got {len(offsets)}")
    dynamic, static = [], []
    for i, off in enumerate(offsets):
        if isinstance(off, int):
            if off < 0:
                raise ValueError(f"{name}[{i}] must be >= 0, got {off}")
            static.append(off)
        elif isinstance(off, Value) or hasattr(off, "result"):
            dynamic.append(off)
            static.append(_DYNAMIC)
        else:
            raise TypeError(f"{name}[{i}] must be an int or an index Value, got {type(off).__name__}")
    return dynamic, static


def copy(src, dst, *, src_offsets=None, dst_offsets=None, sizes=None, loc=None, ip=None):
    """`tile.copy` of the box of `sizes` (default: dst's shape) at
    `src_offsets` into `dst` at `dst_offsets`; offsets mix ints and Values."""
    from ..ir import MemRefType

    src_type, dst_type = MemRefType(src.type), MemRefType(dst.type)
    if sizes is None:
        sizes = list(dst_type.shape)
    src_dyn, src_static = _split_offsets("src_offsets", src_offsets, src_type.rank)
    dst_dyn, dst_static = _split_offsets("dst_offsets", dst_offsets, dst_type.rank)
    return CopyOp(src, src_dyn, src_static, dst, dst_dyn, dst_static,
                  list(sizes), loc=loc, ip=ip)
