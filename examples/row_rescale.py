"""Row rescale across tiles of different shapes: O = Y / max(X, dim=1).

X is M x 256 and Y, O are M x 64 (f32). The row maxima come from a
tile.reduce over X's tile, so they have the slice of X's layout; the
tile.parallel over Y's tile needs them in the slice of Y's layout, so layout
inference inserts a conversion through shared memory before it. This is the
shape of flash attention's rescaling of an output accumulator by statistics
of a score tile.
"""

import sys

from tilemega.dialects import arith, func, memref, tile
from tilemega.ir import (Attribute, Context, DictAttr, F32Type, IndexType,
                         InsertionPoint, Location, MemRefType, Module,
                         StringAttr)

CONFIG = {"M": 1024, "KX": 256, "NY": 64, "BLOCK_M": 16, "THREADS": 128}


def build(M=CONFIG["M"], KX=CONFIG["KX"], NY=CONFIG["NY"],
          BLOCK_M=CONFIG["BLOCK_M"], THREADS=CONFIG["THREADS"],
          name="row_rescale") -> Module:
    f32 = F32Type.get()
    fragment = Attribute.parse("#tile.fragment")
    index = IndexType.get()
    x_type, y_type = MemRefType.get([M, KX], f32), MemRefType.get([M, NY], f32)
    module = Module.create()
    with InsertionPoint(module.body):
        fn = func.FuncOp(name, ([x_type, y_type, y_type], []))
        fn.arg_attrs = [DictAttr.get({"tile.name": StringAttr.get(n)}) for n in ("X", "Y", "O")]
        with InsertionPoint(fn.add_entry_block()):
            X, Y, O = fn.arguments
            k = tile.kernel(grid=[M // BLOCK_M], threads=THREADS)
            with InsertionPoint(k.body.blocks[0]):
                (bx,) = k.body.blocks[0].arguments
                row = arith.muli(bx, arith.constant(index, BLOCK_M))
                x = tile.alloc_fragment(MemRefType.get([BLOCK_M, KX], f32, memory_space=fragment))
                y = tile.alloc_fragment(MemRefType.get([BLOCK_M, NY], f32, memory_space=fragment))
                m = tile.alloc_fragment(MemRefType.get([BLOCK_M], f32, memory_space=fragment))
                tile.copy(X, x, src_offsets=[row, 0])
                tile.copy(Y, y, src_offsets=[row, 0])
                tile.reduce(tile.ReduceKind.max, x, 1, m, clear=True)
                p = tile.parallel([BLOCK_M, NY])
                with InsertionPoint(p.body.blocks[0]):
                    i, j = p.body.blocks[0].arguments
                    memref.store(arith.divf(memref.load(y, [i, j]), memref.load(m, [i])), y, [i, j])
                tile.copy(y, O, dst_offsets=[row, 0], sizes=[BLOCK_M, NY])
            func.ReturnOp([])
    return module


if __name__ == "__main__":
    import tilemega

    with Context(), Location.unknown():
        print(tilemega.compile(build(), chip="sm_90a").save(sys.argv[1] if len(sys.argv) > 1 else "out"))
