"""A split reduction finished by its last block, in T.*: out = sum(x).

`blocks` blocks each sum a chunk of the float32 vector x (N elements) and
store the partial; then each counts itself in with
`T.block_atomic_add(counts[0], 1)` (tile.block_atomic_add: a device-scope
release of the block's partial, an acquire of the earlier blocks'). The
block that finds `blocks - 1` before it is the last: it adds the partials
into `out` and puts the count back to zero, so the next launch starts
from a zeroed counter with no memset. One kernel and no spin-wait, the
pattern the mega-kernel's attention uses to merge its splits
(generation_bodies.merge_by_last_split).

    python examples/split_sum.py OUT_DIR   # print the IR, save the artifact
"""

import sys

CONFIG = {"N": 1 << 20, "blocks": 128, "threads": 256}


def build(name="split_sum", N=CONFIG["N"], blocks=CONFIG["blocks"],
          threads=CONFIG["threads"]):
    """The MLIR text of the kernel (x [N] f32, part [P] f32, counts [1]
    int32, out [1] f32; P = max(blocks, threads), the partials past
    `blocks` stay as the caller zeroed them)."""
    import tilemega
    import tilemega.language as T

    if N % (blocks * threads):
        raise ValueError(f"split_sum: N {N} is not a multiple of blocks x threads "
                         f"({blocks} x {threads})")
    chunk = N // blocks
    P = max(blocks, threads)

    @tilemega.jit(name=name, cache=False, out_idx=None)
    def split_sum(x: T.Tensor((N,), "float32"), part: T.Tensor((P,), "float32"),
                  counts: T.Tensor((1,), "int32"), out: T.Tensor((1,), "float32")):
        with T.Kernel(blocks, threads=threads) as b:
            acc = T.alloc_fragment((1, threads), "float32")
            tile = T.alloc_fragment((1, threads), "float32")
            total = T.alloc_fragment((1,), "float32")
            T.clear(acc)
            for t in T.serial(chunk // threads):
                T.copy(x.view(N // threads, threads)[b * (chunk // threads) + t, 0], tile)
                for i, j in T.Parallel(1, threads):
                    acc[i, j] = acc[i, j] + tile[i, j]
            T.reduce_sum(acc, total, dim=1)
            for i in T.Parallel(1):
                part[b + i] = total[i]
            before = T.block_atomic_add(counts[0], 1)
            for _ in T.serial(T.if_then_else(before == blocks - 1, 1, 0)):
                counts[0] = 0
                parts = T.alloc_fragment((1, P), "float32")
                T.copy(part.view(1, P)[0, 0], parts)
                T.reduce_sum(parts, total, dim=1)
                for i in T.Parallel(1):
                    out[i] = total[i]

    return split_sum.ir()


if __name__ == "__main__":
    import tilemega

    text = build()
    print(text)
    print(tilemega.compile(text, chip="sm_90a", name="split_sum").save(
        sys.argv[1] if len(sys.argv) > 1 else "out"))
