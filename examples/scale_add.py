"""The first TileMega kernel, built with the Python IR builder.

B = alpha * A + 1 over a 256x1024 float32 matrix. Each block moves a 64x128
tile global -> shared -> registers (a fragment), computes the elementwise body
with `tile.parallel`, and writes the tile back. `build()` returns the module;
`python examples/scale_add.py OUT_DIR` compiles it into an artifact there.
"""

import sys

from tilemega.dialects import arith, func, memref, tile
from tilemega.ir import (Attribute, Context, DictAttr, F32Type, FloatAttr,
                         IndexType,
                         InsertionPoint, Location, MemRefType, Module,
                         StringAttr)

M, N = 256, 1024
BLOCK_M, BLOCK_N = 64, 128
THREADS = 128


def build(name="scale_add") -> Module:
    f32 = F32Type.get()
    shared = Attribute.parse("#gpu.address_space<workgroup>")
    fragment = Attribute.parse("#tile.fragment")
    a_type = MemRefType.get([M, N], f32)
    s_type = MemRefType.get([BLOCK_M, BLOCK_N], f32, memory_space=shared)
    f_type = MemRefType.get([BLOCK_M, BLOCK_N], f32, memory_space=fragment)
    index = IndexType.get()

    module = Module.create()
    with InsertionPoint(module.body):
        fn = func.FuncOp(name, ([a_type, a_type, f32], []))
        fn.arg_attrs = [DictAttr.get({"tile.name": StringAttr.get(n)})
                        for n in ("A", "B", "alpha")]
        with InsertionPoint(fn.add_entry_block()):
            A, B, alpha = fn.arguments
            k = tile.kernel(grid=[M // BLOCK_M, N // BLOCK_N], threads=THREADS)
            with InsertionPoint(k.body.blocks[0]):
                bx, by = k.body.blocks[0].arguments
                row = arith.muli(bx, arith.constant(index, BLOCK_M))
                col = arith.muli(by, arith.constant(index, BLOCK_N))
                s = tile.alloc_shared(s_type)
                f = tile.alloc_fragment(f_type)
                tile.copy(A, s, src_offsets=[row, col])
                tile.copy(s, f)
                p = tile.parallel([BLOCK_M, BLOCK_N])
                with InsertionPoint(p.body.blocks[0]):
                    i, j = p.body.blocks[0].arguments
                    x = memref.load(f, [i, j])
                    one = arith.constant(f32, FloatAttr.get(f32, 1.0))
                    y = arith.addf(arith.mulf(x, alpha), one)
                    memref.store(y, f, [i, j])
                tile.copy(f, B, dst_offsets=[row, col], sizes=[BLOCK_M, BLOCK_N])
            func.ReturnOp([])
    return module


def reference(a, alpha):
    return a * alpha + 1.0


if __name__ == "__main__":
    import tilemega

    with Context(), Location.unknown():
        result = tilemega.compile(build(), chip="sm_90a")
    print(result.save(sys.argv[1] if len(sys.argv) > 1 else "out"))
