"""GEMV for batch-1 decode: y = W x with W bf16 N x K, x bf16 K, y bf16 N.

One block per BLOCK_N output rows walks K in chunks of BLOCK_K, STAGES
chunks of W and x in flight through shared memory (tile.pipelined: cp.async).
Each chunk goes to registers, x's into a fragment that every row's threads
share (its layout is the slice of W's layout along the rows); the products
accumulate elementwise and are reduced across threads once, at the end.
"""

import sys

from tilemega.dialects import arith, func, memref, tile
from tilemega.ir import (Attribute, BF16Type, Context, DictAttr, F32Type,
                         IndexType, InsertionPoint, Location, MemRefType,
                         Module, StringAttr)

CONFIGS = {
    "gemv_2048x8192": {"N": 8192, "K": 2048, "BLOCK_N": 16, "BLOCK_K": 256, "THREADS": 128, "STAGES": 4},
    "gemv_8192x2048": {"N": 2048, "K": 8192, "BLOCK_N": 8, "BLOCK_K": 512, "THREADS": 128, "STAGES": 4},
}


def build(N, K, BLOCK_N, BLOCK_K, THREADS, STAGES=4, name="gemv") -> Module:
    f32, bf16 = F32Type.get(), BF16Type.get()
    shared = Attribute.parse("#gpu.address_space<workgroup>")
    fragment = Attribute.parse("#tile.fragment")
    w_type = MemRefType.get([N, K], bf16)
    x_type = MemRefType.get([K], bf16)
    y_type = MemRefType.get([N], bf16)
    ws_type = MemRefType.get([BLOCK_N, BLOCK_K], bf16, memory_space=shared)
    xs_type = MemRefType.get([BLOCK_K], bf16, memory_space=shared)
    wf_type = MemRefType.get([BLOCK_N, BLOCK_K], f32, memory_space=fragment)
    xf_type = MemRefType.get([BLOCK_K], f32, memory_space=fragment)
    row_type = MemRefType.get([BLOCK_N], f32, memory_space=fragment)
    index = IndexType.get()

    module = Module.create()
    with InsertionPoint(module.body):
        fn = func.FuncOp(name, ([w_type, x_type, y_type], []))
        fn.arg_attrs = [DictAttr.get({"tile.name": StringAttr.get(n)}) for n in ("W", "x", "y")]
        with InsertionPoint(fn.add_entry_block()):
            W, X, Y = fn.arguments
            k = tile.kernel(grid=[N // BLOCK_N], threads=THREADS)
            with InsertionPoint(k.body.blocks[0]):
                (bx,) = k.body.blocks[0].arguments
                row = arith.muli(bx, arith.constant(index, BLOCK_N))
                w_s = tile.alloc_shared(ws_type)
                x_s = tile.alloc_shared(xs_type)
                w = tile.alloc_fragment(wf_type)
                x = tile.alloc_fragment(xf_type)
                acc = tile.alloc_fragment(wf_type)
                out = tile.alloc_fragment(row_type)
                tile.clear(acc)
                # W streams through shared memory STAGES chunks ahead
                # (cp.async); products accumulate elementwise, and are
                # reduced across threads once, after the loop.
                loop = tile.pipelined(arith.constant(index, 0), arith.constant(index, K),
                                      arith.constant(index, BLOCK_K), STAGES)
                with InsertionPoint(loop.body.blocks[0]):
                    (kk,) = loop.body.blocks[0].arguments
                    tile.copy(W, w_s, src_offsets=[row, kk])
                    tile.copy(X, x_s, src_offsets=[kk])
                    tile.copy(w_s, w)
                    tile.copy(x_s, x)
                    p = tile.parallel([BLOCK_N, BLOCK_K])
                    with InsertionPoint(p.body.blocks[0]):
                        i, j = p.body.blocks[0].arguments
                        prod = arith.mulf(memref.load(w, [i, j]), memref.load(x, [j]))
                        memref.store(arith.addf(memref.load(acc, [i, j]), prod), acc, [i, j])
                tile.reduce(tile.ReduceKind.sum, acc, 1, out, clear=True)
                tile.copy(out, Y, dst_offsets=[row], sizes=[BLOCK_N])
            func.ReturnOp([])
    return module


if __name__ == "__main__":
    import tilemega

    out = sys.argv[1] if len(sys.argv) > 1 else "out"
    for name, config in CONFIGS.items():
        with Context(), Location.unknown():
            print(tilemega.compile(build(**config, name=name), chip="sm_90a").save(out))
