"""A Hopper GEMM in T.*: C = A @ B on wgmma.mma_async.

A is M x K (K x M with `transpose_a`) and B is K x N (N x K with
`transpose_b`, the default: C = A @ B^T), f16 or bf16; C is M x N in the
input type, accumulated in f32. wgmma reads every one of these forms from
shared memory: a K-major operand tile as rows of 64 elements of K, an
M- or N-major one as rows of K in 64-column blocks, each block one TMA box
(tile::chooseWgmma, #tile.swizzle<..., columns = 64>). The kernel is
the plain TileLang-style GEMM — T.alloc_shared tiles, a T.Pipelined K loop
of T.copy + T.gemm, the accumulator copied out — with no layout, swizzle or
option written: on sm_90a layout inference gives the tiles the 128-byte
swizzle and the accumulator 16 rows a warp, and convert-tile-to-gpu lowers
the gemm to wgmma (tilemega.compile's wgmma, on by default there;
docs/architecture.md). Tiles that
overhang M, N or K are masked, so the sizes need not be multiples of the
block.

`group_m` orders the blocks in panels of that many row tiles, walked
across the columns (the L2 reuse of a grouped raster:
`T.use_swizzle(group_m, order="column")`, as TileLang spells it); 0 keeps
the launch order.

`persistent` (with warp_specialize) launches at most that many blocks, as
many as the device keeps resident at once (`T.Kernel(..., resident=True)`:
the runtime sizes the grid, in whole clusters), each walking tiles block,
block + launched, ... (`T.num_blocks()`) with the warp-specialised K loop
inside: the producer loads the next tile while the consumers store C. A
fixed count over what fits loses a whole round: 33 clusters of 4 where an
H100 co-schedules 30 ran the TN 3000x5000x1234 in 100 us, 30 in 69.

`tma_store` (with stage_c) stores C's shared tile by TMA (one thread's bulk
copies, a box per 64-column block of the 128-byte-swizzled tile) instead of
the threads' 16-byte stores.

`warp_specialize` gives the K loop's TMA copies to a producer warpgroup
added to the block (`T.Pipelined(..., warp_specialize=True)`): it runs up
to `num_stages` k-tiles ahead on full / empty mbarriers while the consumer
warpgroups only wait for data and compute, with no block barrier per
k-tile.

`cluster` (with warp_specialize) launches clusters of that many
consecutive row tiles (`T.Kernel(..., cluster=n)`; persistent: clusters of
blocks walk tiles of n row tiles, block r taking row r): they read the same B
tile each k-step, so the producer of each loads 1/n of it into all n blocks
(TMA multicast), and each stage goes back to the producers once the
consumers of all n blocks are done with it. `group_m` then counts row
tiles in panels of whole clusters.

`stage_c` stores the block's C through a shared tile: the accumulator's
fragment goes to shared memory (4-byte pieces, conflict-free under a
swizzle that permutes each row's 16-byte chunks by the row), then rows go to
global memory in coalesced 16-byte pieces, rather than every thread storing
its fragment's 4-byte pieces to scattered rows (half of each 32-byte sector).

`build(name=..., **config)` returns the kernel's MLIR text (parameters:
DEFAULTS; `wgmma_in_flight` keeps each k-tile's wgmma pending into the next
iteration, `T.Pipelined(..., wgmma_in_flight=True)`); run_examples.EXAMPLES lists the configurations it compiles and
examples_gpu/gemm_hopper.py checks. The compiler is imported in `build()`
only, so `config()` and `reference()` load on a GPU machine with just the
runtime.
"""

import sys

from example_config import with_defaults

DEFAULTS = dict(M=1024, N=1024, K=1024, block_m=128, block_n=128, num_stages=4,
                dtype="bf16", wgmma_in_flight=False, stage_c=False, group_m=0,
                transpose_a=False, transpose_b=True, warp_specialize=False,
                persistent=0, tma_store=False, cluster=1)

# wgmma reads K in 64-element rows (TileTensorCores.h kWgmmaRowElems).
BLOCK_K = 64


def config(**overrides):
    """DEFAULTS updated with `overrides` (unknown keys are an error)."""
    cfg = with_defaults(DEFAULTS, overrides, "gemm_hopper")
    if cfg["dtype"] not in ("f16", "bf16"):
        raise ValueError(f"dtype must be 'f16' or 'bf16', got {cfg['dtype']!r}")
    check_tiling(cfg)
    if cfg["tma_store"] and not cfg["stage_c"]:
        raise ValueError("tma_store needs stage_c (the TMA store reads C's shared tile)")
    if cfg["persistent"] < 0:
        raise ValueError(f"persistent must be 0 (one block a tile) or the number of "
                         f"blocks, got {cfg['persistent']}")
    if cfg["persistent"] and not cfg["warp_specialize"]:
        raise ValueError("persistent needs warp_specialize (the producer warpgroup runs "
                         "ahead into the next tile while the consumers store C)")
    if cfg["cluster"] != 1:
        if not cfg["warp_specialize"]:
            raise ValueError("cluster needs warp_specialize (the multicast copies run "
                             "in the producer warpgroup)")
        if cfg["persistent"] % cfg["cluster"]:
            raise ValueError(f"cluster={cfg['cluster']} must divide persistent="
                             f"{cfg['persistent']} (whole clusters of blocks)")
        grid_m = -(-cfg["M"] // cfg["block_m"])
        if grid_m % cfg["cluster"] or cfg["group_m"] % cfg["cluster"]:
            raise ValueError(f"cluster={cfg['cluster']} must divide the {grid_m} row "
                             f"tiles and group_m={cfg['group_m']}")
    return cfg


def check_tiling(cfg):
    """The block rules every Hopper GEMM example shares (examples/gemm_fp8.py
    too): a warpgroup per 64 rows, whole groups of row tiles."""
    if cfg["block_m"] % 64:
        raise ValueError(f"block_m must be a multiple of 64 (one warpgroup per 64 rows), "
                         f"got {cfg['block_m']}")
    grid_m = -(-cfg["M"] // cfg["block_m"])
    if cfg["group_m"] < 0 or (cfg["group_m"] and grid_m % cfg["group_m"]):
        raise ValueError(f"group_m={cfg['group_m']} must divide the {grid_m} row tiles")


def threads(cfg):
    """One warpgroup (128 threads) per 64 rows of the block."""
    return cfg["block_m"] // 64 * 128


def build(name="gemm_hopper", **overrides):
    """The MLIR text of one kernel named `name`."""
    import tilemega
    import tilemega.language as T

    cfg = config(**overrides)
    M, N = cfg["M"], cfg["N"]
    BM, BN = cfg["block_m"], cfg["block_n"]
    stage_c = cfg["stage_c"]
    group = cfg["group_m"]
    row_chunks = T.Swizzle.row_chunks(BN)
    if cfg["tma_store"] or (BN & (BN - 1) and BN % 64 == 0):
        # A row that is not a power of two (BN = 192) does not start at a bit
        # of the offset: rows go in blocks of 64 columns, whose rows do.
        # It is also what a TMA store reads: 128-byte rows under the 128-byte
        # swizzle, in blocks of 64 columns (one box each). (A 192-column
        # tile's offsets are split back by a division by 192: 128 x 192
        # tiles spill 36-76 bytes, and lost to 128 x 256 ones on the H100.)
        row_chunks = T.Swizzle(bits=3, base=3, shift=3, columns=64)
    dtype = {"f16": "float16", "bf16": "bfloat16"}[cfg["dtype"]]

    ta, tb = cfg["transpose_a"], cfg["transpose_b"]
    a_shape, b_shape = a_shape_of(cfg), b_shape_of(cfg)

    if cfg["persistent"]:
        return _build_persistent(name, cfg, T, tilemega, dtype, row_chunks)

    @tilemega.jit(name=name, cache=False)
    def kernel(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype),
               C: T.Tensor((M, N), dtype)):
        grid_m, grid_n = T.ceildiv(M, BM), T.ceildiv(N, BN)
        cluster = cfg["cluster"]
        with T.Kernel(grid_m, grid_n, threads=threads(cfg),
                      cluster=cluster if cluster > 1 else None) as (bx, by):
            if group:
                # Panels of `group` row tiles (bx), walked across the columns
                # (the raster orders clusters: group // cluster of them).
                T.use_swizzle(group // cluster, order="column")
            a_s = T.alloc_shared((BLOCK_K, BM) if ta else (BM, BLOCK_K), dtype)
            b_s = T.alloc_shared((BN, BLOCK_K) if tb else (BLOCK_K, BN), dtype)
            acc = T.alloc_fragment((BM, BN), "float32")
            _tile(T, cfg, A, B, a_s, b_s, acc, bx, by)
            c_s = T.alloc_shared((BM, BN), dtype, swizzle=row_chunks) if stage_c else None
            _store_c(T, cfg, acc, c_s, C, bx, by)

    return kernel.ir()


def grouped(t, group, grid_m, grid_n):
    """Tile t's (row, column) in the raster T.use_swizzle(group,
    order="column") gives block t of the launch: a persistent kernel walks
    its tiles in the same order."""
    from tilemega.language.kernel import ExprOps, raster_indices
    return raster_indices(t % grid_m, t // grid_m, grid_m, grid_n, group, "column",
                          ExprOps())


def _tile(T, cfg, A, B, a_s, b_s, acc, bx, by):
    """One C tile's K loop into `acc`: the A and B tiles of each k-tile
    (transposed forms read as stored), one gemm."""
    ta, tb = cfg["transpose_a"], cfg["transpose_b"]
    BM, BN = cfg["block_m"], cfg["block_n"]
    T.clear(acc)
    for k in T.Pipelined(T.ceildiv(cfg["K"], BLOCK_K), num_stages=cfg["num_stages"],
                         wgmma_in_flight=cfg["wgmma_in_flight"],
                         warp_specialize=cfg["warp_specialize"]):
        if ta:
            T.copy(A[k * BLOCK_K, bx * BM], a_s)
        else:
            T.copy(A[bx * BM, k * BLOCK_K], a_s)
        if tb:
            T.copy(B[by * BN, k * BLOCK_K], b_s)
        else:
            T.copy(B[k * BLOCK_K, by * BN], b_s)
        T.gemm(a_s, b_s, acc, transpose_A=ta, transpose_B=tb)


def _store_c(T, cfg, acc, c_s, C, bx, by):
    """The tile into C: through the shared tile `c_s` (stage_c; by TMA with
    tma_store) or straight from the fragment."""
    row, col = bx * cfg["block_m"], by * cfg["block_n"]
    if c_s is not None:
        T.copy(acc, c_s)
        T.copy(c_s, C[row, col], tma_store=cfg["tma_store"])
    else:
        T.copy(acc, C[row, col])


def _build_persistent(name, cfg, T, tilemega, dtype, row_chunks):
    """At most `persistent` blocks, as many as stay resident (the runtime's
    choice), walk the tiles t = block, block + launched, ... (grouped order
    with group_m): the K loop is warp-specialised inside the loop over
    tiles, so the producer warpgroup loads the next tile's k-tiles while
    the consumers store this tile's C (stage_c: through a shared tile of
    its own, next to the stages)."""
    M, N = cfg["M"], cfg["N"]
    BM, BN = cfg["block_m"], cfg["block_n"]
    group, blocks_n = cfg["group_m"], cfg["persistent"]
    ta, tb = cfg["transpose_a"], cfg["transpose_b"]
    grid_m, grid_n = -(-M // BM), -(-N // BN)

    @tilemega.jit(name=name, cache=False)
    def kernel(A: T.Tensor(a_shape_of(cfg), dtype), B: T.Tensor(b_shape_of(cfg), dtype),
               C: T.Tensor((M, N), dtype)):
        cluster = cfg["cluster"]
        with T.Kernel(blocks_n, threads=threads(cfg), cluster=cluster if cluster > 1 else None,
                      resident=True) as block:
            launched = T.num_blocks()
            a_s = T.alloc_shared((BLOCK_K, BM) if ta else (BM, BLOCK_K), dtype)
            b_s = T.alloc_shared((BN, BLOCK_K) if tb else (BLOCK_K, BN), dtype)
            acc = T.alloc_fragment((BM, BN), "float32")
            c_s = T.alloc_shared((BM, BN), dtype, swizzle=row_chunks) if cfg["stage_c"] \
                else None
            if cluster == 1:
                for t in T.serial(block, grid_m * grid_n, launched):
                    bx, by = grouped(t, group, grid_m, grid_n) if group else \
                        (t // grid_n, t % grid_n)
                    _tile(T, cfg, A, B, a_s, b_s, acc, bx, by)
                    _store_c(T, cfg, acc, c_s, C, bx, by)
                return
            # Clusters walk tiles of `cluster` row tiles (the same B tiles:
            # multicast), block r of a cluster taking row r of each.
            grid_c = grid_m // cluster
            for t in T.serial(block // cluster, grid_c * grid_n, launched // cluster):
                cx, by = grouped(t, group // cluster, grid_c, grid_n) if group else \
                    (t // grid_n, t % grid_n)
                bx = cx * cluster + block % cluster
                _tile(T, cfg, A, B, a_s, b_s, acc, bx, by)
                _store_c(T, cfg, acc, c_s, C, bx, by)

    return kernel.ir()


def a_shape_of(cfg):
    """A's shape: K x M with transpose_a, else M x K."""
    return (cfg["K"], cfg["M"]) if cfg["transpose_a"] else (cfg["M"], cfg["K"])


def b_shape_of(cfg):
    """B's shape: N x K with transpose_b, else K x N."""
    return (cfg["N"], cfg["K"]) if cfg["transpose_b"] else (cfg["K"], cfg["N"])


def reference(a, b, cfg=None):
    """float64 reference of C = op(A) @ op(B) (torch tensors); without `cfg`
    the default form, C = A @ B^T."""
    cfg = cfg or DEFAULTS
    a, b = a.double(), b.double()
    return (a.t() if cfg["transpose_a"] else a) @ (b.t() if cfg["transpose_b"] else b)


if __name__ == "__main__":
    import tilemega

    print(tilemega.compile(build(), chip="sm_90a").save(
        sys.argv[1] if len(sys.argv) > 1 else "out"))
