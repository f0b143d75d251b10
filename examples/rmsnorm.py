"""RMSNorm: Y = X * rsqrt(mean(X^2, dim=1) + eps) * W for bf16 M x H.

One block per BLOCK_M rows: the rows go to registers as f32, their squares
are summed by tile.reduce into a sliced fragment, and the normalised, weighted
rows go back as bf16. Memory-bound: it reads X once and writes Y once.
"""

import sys

from tilemega.dialects import arith, func, math, memref, tile
from tilemega.ir import (Attribute, BF16Type, Context, DictAttr, F32Type,
                         FloatAttr, IndexType, InsertionPoint, Location,
                         MemRefType, Module, StringAttr)

CONFIG = {"M": 8192, "H": 4096, "BLOCK_M": 2, "THREADS": 256, "EPS": 1e-6}


def build(M=CONFIG["M"], H=CONFIG["H"], BLOCK_M=CONFIG["BLOCK_M"],
          THREADS=CONFIG["THREADS"], EPS=CONFIG["EPS"], name="rmsnorm") -> Module:
    f32, bf16 = F32Type.get(), BF16Type.get()
    fragment = Attribute.parse("#tile.fragment")
    x_type = MemRefType.get([M, H], bf16)
    w_type = MemRefType.get([H], bf16)
    tile_type = MemRefType.get([BLOCK_M, H], f32, memory_space=fragment)
    row_type = MemRefType.get([BLOCK_M], f32, memory_space=fragment)
    index = IndexType.get()

    module = Module.create()
    with InsertionPoint(module.body):
        fn = func.FuncOp(name, ([x_type, w_type, x_type], []))
        fn.arg_attrs = [DictAttr.get({"tile.name": StringAttr.get(n)}) for n in ("X", "W", "Y")]
        with InsertionPoint(fn.add_entry_block()):
            X, W, Y = fn.arguments
            k = tile.kernel(grid=[M // BLOCK_M], threads=THREADS)
            with InsertionPoint(k.body.blocks[0]):
                (bx,) = k.body.blocks[0].arguments
                row = arith.muli(bx, arith.constant(index, BLOCK_M))
                x = tile.alloc_fragment(tile_type)
                sq = tile.alloc_fragment(tile_type)
                ss = tile.alloc_fragment(row_type)
                # W in registers too: its layout is the slice of x's along
                # the rows, so each thread loads (16 bytes at a time) just
                # the columns it normalises.
                w = tile.alloc_fragment(MemRefType.get([H], f32, memory_space=fragment))
                tile.copy(X, x, src_offsets=[row, 0])
                tile.copy(W, w)
                p = tile.parallel([BLOCK_M, H])
                with InsertionPoint(p.body.blocks[0]):
                    i, j = p.body.blocks[0].arguments
                    v = memref.load(x, [i, j])
                    memref.store(arith.mulf(v, v), sq, [i, j])
                tile.reduce(tile.ReduceKind.sum, sq, 1, ss, clear=True)
                p = tile.parallel([BLOCK_M, H])
                with InsertionPoint(p.body.blocks[0]):
                    i, j = p.body.blocks[0].arguments
                    mean = arith.mulf(memref.load(ss, [i]),
                                      arith.constant(f32, FloatAttr.get(f32, 1.0 / H)))
                    scale = math.rsqrt(arith.addf(mean, arith.constant(f32, FloatAttr.get(f32, EPS))))
                    v = arith.mulf(arith.mulf(memref.load(x, [i, j]), scale),
                                   memref.load(w, [j]))
                    memref.store(v, x, [i, j])
                tile.copy(x, Y, dst_offsets=[row, 0], sizes=[BLOCK_M, H])
            func.ReturnOp([])
    return module


if __name__ == "__main__":
    import tilemega

    with Context(), Location.unknown():
        result = tilemega.compile(build(), chip="sm_90a")
    print(result.save(sys.argv[1] if len(sys.argv) > 1 else "out"))
