"""Row softmax: Y = softmax(X, dim=1) for a bf16 M x N matrix.

One block per BLOCK_M rows. The rows go global -> registers (converted to
f32 by the copy), then max (tile.reduce), exp(x - max) (tile.parallel reading
the row maximum at [i]), sum, divide, and back to global as bf16. The row
statistics live in sliced fragments: every thread holds the maxima of the
rows it holds, so no element crosses threads except inside the reductions.
"""

import sys

from tilemega.dialects import arith, func, math, memref, tile
from tilemega.ir import (Attribute, BF16Type, Context, DictAttr, F32Type,
                         IndexType, InsertionPoint, Location, MemRefType,
                         Module, StringAttr)

CONFIG = {"M": 4096, "N": 1024, "BLOCK_M": 4, "THREADS": 128}


def build(M=CONFIG["M"], N=CONFIG["N"], BLOCK_M=CONFIG["BLOCK_M"],
          THREADS=CONFIG["THREADS"], name="softmax") -> Module:
    f32, bf16 = F32Type.get(), BF16Type.get()
    fragment = Attribute.parse("#tile.fragment")
    x_type = MemRefType.get([M, N], bf16)
    tile_type = MemRefType.get([BLOCK_M, N], f32, memory_space=fragment)
    row_type = MemRefType.get([BLOCK_M], f32, memory_space=fragment)
    index = IndexType.get()

    module = Module.create()
    with InsertionPoint(module.body):
        fn = func.FuncOp(name, ([x_type, x_type], []))
        fn.arg_attrs = [DictAttr.get({"tile.name": StringAttr.get(n)}) for n in ("X", "Y")]
        with InsertionPoint(fn.add_entry_block()):
            X, Y = fn.arguments
            k = tile.kernel(grid=[M // BLOCK_M], threads=THREADS)
            with InsertionPoint(k.body.blocks[0]):
                (bx,) = k.body.blocks[0].arguments
                row = arith.muli(bx, arith.constant(index, BLOCK_M))
                x = tile.alloc_fragment(tile_type)
                row_max = tile.alloc_fragment(row_type)
                row_sum = tile.alloc_fragment(row_type)
                tile.copy(X, x, src_offsets=[row, 0])
                tile.reduce(tile.ReduceKind.max, x, 1, row_max, clear=True)
                p = tile.parallel([BLOCK_M, N])
                with InsertionPoint(p.body.blocks[0]):
                    i, j = p.body.blocks[0].arguments
                    v = arith.subf(memref.load(x, [i, j]), memref.load(row_max, [i]))
                    memref.store(math.exp(v), x, [i, j])
                tile.reduce(tile.ReduceKind.sum, x, 1, row_sum, clear=True)
                p = tile.parallel([BLOCK_M, N])
                with InsertionPoint(p.body.blocks[0]):
                    i, j = p.body.blocks[0].arguments
                    v = arith.divf(memref.load(x, [i, j]), memref.load(row_sum, [i]))
                    memref.store(v, x, [i, j])
                tile.copy(x, Y, dst_offsets=[row, 0], sizes=[BLOCK_M, N])
            func.ReturnOp([])
    return module


if __name__ == "__main__":
    import tilemega

    with Context(), Location.unknown():
        result = tilemega.compile(build(), chip="sm_90a")
    print(result.save(sys.argv[1] if len(sys.argv) > 1 else "out"))
