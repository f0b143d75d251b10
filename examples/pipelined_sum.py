"""Software pipelining: per-row partial sums of A (M x K, float32) over K tiles.

Each block owns BLOCK_M rows and walks K in tiles of BLOCK_K with
`tile.pipelined ... num_stages STAGES`: the A tile goes global -> shared
(cp.async, STAGES buffers in flight) -> registers, and `tile.parallel` adds it
into a BLOCK_M x BLOCK_K accumulator fragment, which lands in
out[M, BLOCK_K]:

    out[r, j] = sum over tiles t of A[r, t * BLOCK_K + j]   (0 past K)

(`tile.reduce` is not lowered yet; the check sums the columns on the host.)
K = 1000 is not a multiple of 32: the last tile overhangs the tensor and only
the async copy's zero-fill keeps its 24 extra columns out of the sums. A wrong
wait or barrier reads a stage before it lands or after it is refilled; either
shows up as wrong partials.

With SECOND_STAGES, a sibling pipelined loop then adds the partials of a
second tensor B into the same accumulator, reusing the shared tile with its own
stage count (out = partials(A) + partials(B)).

`build()` returns the module; `python examples/pipelined_sum.py OUT_DIR`
compiles every configuration into artifacts there.
"""

import sys

from tilemega.dialects import arith, func, memref, tile
from tilemega.ir import (Attribute, Context, DictAttr, F32Type, IndexType,
                         InsertionPoint, Location, MemRefType, Module,
                         StringAttr)

# Artifact name -> build() arguments; run_examples.py lists the same ones.
CONFIGS = {
    "pipelined_sum": {},
    "pipelined_sum_1_stage": {"STAGES": 1},
    "pipelined_sum_2_stages": {"STAGES": 2},
    "pipelined_sum_4_stages": {"STAGES": 4},
    # One K tile, partly outside the tensor: a single-iteration loop.
    "pipelined_sum_single_tile": {"K": 20},
    # Sibling loops with 3 and 2 stages sharing one shared tile.
    "pipelined_sum_siblings": {"SECOND_STAGES": 2},
}


def build(M=512, K=1000, BLOCK_M=64, BLOCK_K=32, STAGES=3, THREADS=128,
          SECOND_STAGES=None, name="pipelined_sum") -> Module:
    f32 = F32Type.get()
    shared = Attribute.parse("#gpu.address_space<workgroup>")
    fragment = Attribute.parse("#tile.fragment")
    a_type = MemRefType.get([M, K], f32)
    out_type = MemRefType.get([M, BLOCK_K], f32)
    s_type = MemRefType.get([BLOCK_M, BLOCK_K], f32, memory_space=shared)
    f_type = MemRefType.get([BLOCK_M, BLOCK_K], f32, memory_space=fragment)
    index = IndexType.get()
    k_tiles = (K + BLOCK_K - 1) // BLOCK_K
    inputs = ["A"] if SECOND_STAGES is None else ["A", "B"]

    module = Module.create()
    with InsertionPoint(module.body):
        fn = func.FuncOp(name, ([a_type] * len(inputs) + [out_type], []))
        fn.arg_attrs = [DictAttr.get({"tile.name": StringAttr.get(n)})
                        for n in inputs + ["out"]]
        with InsertionPoint(fn.add_entry_block()):
            *tensors, out = fn.arguments
            k = tile.kernel(grid=[M // BLOCK_M], threads=THREADS)
            with InsertionPoint(k.body.blocks[0]):
                (bx,) = k.body.blocks[0].arguments
                row = arith.muli(bx, arith.constant(index, BLOCK_M))
                s = tile.alloc_shared(s_type)
                f = tile.alloc_fragment(f_type)
                acc = tile.alloc_fragment(f_type)
                tile.clear(acc)
                stages = [STAGES] if SECOND_STAGES is None else [STAGES, SECOND_STAGES]
                for tensor, num_stages in zip(tensors, stages):
                    loop = tile.pipelined(arith.constant(index, 0),
                                          arith.constant(index, k_tiles),
                                          arith.constant(index, 1), num_stages)
                    with InsertionPoint(loop.body.blocks[0]):
                        (kt,) = loop.body.blocks[0].arguments
                        col = arith.muli(kt, arith.constant(index, BLOCK_K))
                        tile.copy(tensor, s, src_offsets=[row, col])
                        tile.copy(s, f)
                        p = tile.parallel([BLOCK_M, BLOCK_K])
                        with InsertionPoint(p.body.blocks[0]):
                            i, j = p.body.blocks[0].arguments
                            total = arith.addf(memref.load(acc, [i, j]),
                                               memref.load(f, [i, j]))
                            memref.store(total, acc, [i, j])
                tile.copy(acc, out, dst_offsets=[row, 0],
                          sizes=[BLOCK_M, BLOCK_K])
            func.ReturnOp([])
    return module


if __name__ == "__main__":
    import tilemega

    out_dir = sys.argv[1] if len(sys.argv) > 1 else "out"
    for name, config in CONFIGS.items():
        with Context(), Location.unknown():
            print(tilemega.compile(build(**config, name=name),
                                   chip="sm_90a").save(out_dir))
