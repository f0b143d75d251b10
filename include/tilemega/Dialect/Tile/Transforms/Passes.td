//===- Passes.td - tile dialect transforms -----------------*- tablegen -*-===//

#ifndef TILEMEGA_DIALECT_TILE_TRANSFORMS_PASSES_TD
#define TILEMEGA_DIALECT_TILE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def TileInferLayouts : Pass<"tile-infer-layouts", "::mlir::func::FuncOp"> {
  let summary = "Assign thread/register layouts to fragments and parallel loops";
  let description = [{
    Gives every `tile.alloc_fragment` without a `layout` a `#tile.blocked`
    layout, and every `tile.parallel` the layout of its iterations, so that the
    lowering knows which thread holds which element.

    Fragments that one `tile.parallel` touches must share a layout (a thread
    computes an element only where it holds all the operands), so they are
    grouped and given one layout. A group's layout makes each thread hold
    consecutive elements of the innermost dimension, as many as fit one
    128-bit access of the group's widest element type, with the lanes of a
    warp side by side along that dimension: global and shared accesses are
    then coalesced and vectorised. A user-annotated layout is kept and imposed
    on its group; two different annotations in one group are an error that
    names both fragments and both layouts.

    A `tile.reduce` result, and a fragment a `tile.parallel` reads with one
    of its indices left out (`row_max[i]` in a loop over `(i, j)`), get the
    `#tile.slice` of the source's layout along that dimension; tensor-core
    gemm accumulators get `#tile.mma`. When a parallel reads a fragment whose
    layout is not the slice it needs, a conversion through shared memory is
    inserted right before the parallel (a copy into a new fragment with the
    needed layout); other conflicts are an error that names both layouts.

    ```mlir
    %f = tile.alloc_fragment : memref<64x128xf32, #tile.fragment>
    // becomes
    %f = tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1, 4],
        threadsPerWarp = [1, 32], warpsPerBlock = [4, 1], order = [1, 0]>}
        : memref<64x128xf32, #tile.fragment>
    ```

    With `wgmma`, a tensor-core gemm whose accumulator would take the Hopper
    path with 16 rows a warp (`#tile.mma<warpsPerBlock = [w, 1]>`) gets that
    layout, and its shared tiles the 128-byte swizzle, when
    `tile::chooseWgmma` accepts the result (the same rule
    `convert-tile-to-gpu wgmma=true` lowers by); otherwise the usual choice.
  }];
  let options = [
    Option<"wgmma", "wgmma", "bool", /*default=*/"false",
           "Prefer the accumulator layout of the Hopper wgmma lowering">
  ];
  let dependentDialects = ["::mlir::tilemega::tile::TileDialect"];
}

def TilePipeline : Pass<"tile-pipeline", "::mlir::func::FuncOp"> {
  let summary = "Software-pipeline the global-to-shared copies of tile.pipelined loops";
  let description = [{
    Turns every `tile.pipelined %k = lb to ub step s num_stages N` into an
    `scf.for` whose global-to-shared copies run N - 1 iterations ahead of the
    code that reads them, as asynchronous copies (`cp.async`) into N-fold
    buffered shared tiles.

    **Producers.** A copy is pipelined when it is a `tile.copy` at the top
    level of the loop body, from global memory into a whole
    `tile.alloc_shared` tile (offsets 0, sizes the tile's shape) of the same
    element type, whose source and offsets are computed in the body only by
    side-effect-free ops from the induction variable and values defined
    before the loop, and whose tile is, inside the loop, written by nothing
    else and read only after the copy (by `tile.copy`, `tile.gemm`,
    `tile.reduce`, `tile.atomic`, `memref.load` or `vector.load`). Outside
    the loop the tile may be used only by other pipelined loops that pipeline
    it too (each gets its own buffers). Other copies stay synchronous where
    they are; a loop without producers is left as it is and runs in order.

    **Buffers.** Each producer's tile becomes `tile.alloc_shared :
    memref<N x shape>` with the tile's swizzle; stage `s` is the rank-reducing
    `memref.subview %buf[s, 0, ...]`, swizzled as a tile of its own. Shared
    memory grows N-fold for these tiles; a kernel that then exceeds the
    shared memory of one block on `chip` (227 KiB on sm_90a) is an error that
    names the loop.

    **Schedule.** With T = ceildiv(ub - lb, s) iterations:

    - prologue: for j in [0, N - 1): if j < T, issue the copies of iteration
      j into stage j; then `tile.async_commit`;
    - iteration i of the loop (`scf.for %i = 0 to T`): `tile.async_wait
      pending N-2` (iteration i's group has landed: the refill below is not
      committed yet); one `gpu.barrier`, which both publishes every thread's
      copies of stage i % N and ensures every thread is done reading stage
      (i - 1) % N; then, if i + N - 1 < T, issue the copies of iteration
      i + N - 1 into that freed stage (i + N - 1) % N; a `tile.async_commit`
      on every path (an empty group when predicated off, so that the group
      count stays uniform); the rest of the body with stage i % N;
    - after the loop, one `gpu.barrier`, so that later writers of shared
      memory (a sibling loop's prologue) wait for the last iteration's reads.

    **In-flight wgmma** (with `wgmma`, the option of a pipeline that lowers
    gemms with `convert-tile-to-gpu wgmma`: for every loop with
    `wgmma-in-flight`, else for the loops marked `wgmma_in_flight`, which
    get a warning where it cannot apply): in a loop of N >= 3 stages, the gemms
    at the top of the body that `tile::chooseWgmma` accepts and whose
    accumulator nothing else in the loop touches get the unit attribute
    `tile.wgmma_in_flight`, as does the `scf.for`. The copies then run
    N - 2 iterations ahead (prologue 0 .. N - 3, `tile.async_wait pending
    N-3`, the refill for i + N - 2 into stage (i - 2) % N): the lowering
    waits for all but the newest wgmma group after each gemm
    (`wgmma.wait_group 1`), so iteration i's wgmma overlaps iteration
    i + 1's waits, barrier and refill, and the stage a refill overwrites was
    read by a wgmma already waited for; it waits for all after the loop.

    **TMA** (with `tma`, on sm_90a): a loop whose every producer copies from
    an argument of the kernel's function a box that `tile::chooseBulkCopy`
    accepts (TileBulkCopies.h), outside a persistent mega-kernel, gets the
    same schedule on mbarriers instead of cp.async groups: a
    `tile.alloc_shared : memref<N x i64>` of barriers, `tile.mbarrier_init`
    and a `gpu.barrier` before the prologue; issuing iteration j is
    `tile.mbarrier_arrive_expect_tx` of stage j % N with the bytes of all its
    tiles, then one `tile.bulk_copy` per producer into stage j % N signalling
    that barrier (no commit); the wait of iteration i is `tile.mbarrier_wait`
    on stage i % N with parity (i / N) % 2 (the k-th use of a stage completes
    its phase k), followed by the same `gpu.barrier`, which now only orders
    the reads of the stage the refill overwrites. A loop that cannot use TMA
    keeps cp.async; `-debug-only=tile-pipeline` says why.

    **Linear bulk copies** (with `linear-bulk`, in a persistent mega-kernel,
    whose runtime binds no tensor maps): a loop whose every producer's box
    `tile::chooseLinearBulkCopy` accepts (TileBulkCopies.h) gets the TMA
    schedule with `tile.bulk_copy {linear}` (1-D bulk copies, a row each,
    each row expecting its own bytes), the stage's arrival
    (`tile.mbarrier_arrive_expect_tx ..., 0`) after its copies. Early
    copies then start at the prefetch point as cp.async ones do, the
    barriers initialised there: the weights stream through the TMA unit,
    not the threads' load path, while the task's wait polls.

    **Early copies** (`tile.early` on a producer, `tile.prefetch_point`
    before the loop): in a kernel whose tiles never share bytes, the
    prologue of the early producers is issued at the nearest prefetch point
    when their addresses can be computed there and no op in between writes
    what they copy (not for a loop that streams across units, below); the
    loop's prologue then issues the others. With `early-depth` d > 0 only
    the first d iterations' early copies start there, the rest with the
    loop's prologue (a shallower burst of loads before the point's wait).

    **Streamed units** (the loop's parent, through `scf.if` ops, is an
    `scf.for` marked `tile.stream_units` with step 1): one ring of stages
    across that loop's iterations. Iteration i of its j-th iteration is ring
    position j * T + i; the prologue runs only when iteration j - 1 did not
    run the loop (j is the first, or j - 1 failed the guards); the refill
    for i + N - 1 >= T issues iteration i + N - 1 - T of iteration j + 1,
    with the copies' addresses and the guards recomputed for j + 1, when it
    runs the loop (one set of copies whose iteration of the `scf.for` and
    of the loop are selected, at ring position j * T + i + N - 1). The group count stays that of one long loop, so each
    `tile.async_wait` still covers its own iteration. Needs constant bounds
    (or bounds from outside the `scf.for`), cp.async producers, no other
    pipelined loop in it and a kernel whose tiles never share bytes;
    `-debug-only=tile-pipeline` says why not.

    N = 1 degenerates to copy, commit, wait 0, barrier, compute, barrier.
    Loops shorter than N - 1 iterations (down to none) only issue the copies
    they run; the tail of a K dimension that is not a multiple of the tile is
    zero-filled by the async copy itself. Run after `tile-infer-layouts` and
    before `convert-tile-to-gpu`.

    ```mlir
    %A_s = tile.alloc_shared : memref<64x32xf32, #gpu.address_space<workgroup>>
    tile.pipelined %k = %c0 to %c32 step %c1 num_stages 2 {
      %col = arith.muli %k, %c32 : index
      tile.copy %A[%row, %col] to %A_s[0, 0] sizes [64, 32] : ...
      tile.copy %A_s[0, 0] to %f[0, 0] sizes [64, 32] : ...
    }
    // becomes
    %buf = tile.alloc_shared : memref<2x64x32xf32, #gpu.address_space<workgroup>>
    %s0 = memref.subview %buf[0, 0, 0] [1, 64, 32] [1, 1, 1] : ...
    tile.copy async %A[%row, %c0] to %s0[0, 0] sizes [64, 32] : ...
    tile.async_commit
    scf.for %i = %c0 to %c32 step %c1 {
      %next = arith.addi %i, %c1 : index
      %more = arith.cmpi slt, %next, %c32 : index
      scf.if %more {
        %ns = arith.remui %next, %c2 : index
        %col = arith.muli %next, %c32 : index
        %sn = memref.subview %buf[%ns, 0, 0] [1, 64, 32] [1, 1, 1] : ...
        tile.copy async %A[%row, %col] to %sn[0, 0] sizes [64, 32] : ...
      }
      tile.async_commit
      tile.async_wait pending 1
      gpu.barrier
      %is = arith.remui %i, %c2 : index
      %si = memref.subview %buf[%is, 0, 0] [1, 64, 32] [1, 1, 1] : ...
      tile.copy %si[0, 0] to %f[0, 0] sizes [64, 32] : ...
      gpu.barrier
    }
    ```
  }];
  let options = [
    Option<"chip", "chip", "std::string", "\"sm_90a\"",
           "Target GPU whose shared memory per block bounds the buffers">,
    Option<"wgmma", "wgmma", "bool", /*default=*/"false",
           "The pipeline lowers gemms with convert-tile-to-gpu wgmma (what "
           "in-flight wgmma needs)">,
    Option<"wgmmaInFlight", "wgmma-in-flight", "bool", /*default=*/"false",
           "With wgmma: keep each iteration's wgmma in flight into the next "
           "in every loop that allows it (copies N - 2 iterations ahead)">,
    Option<"tma", "tma", "bool", /*default=*/"false",
           "Pipeline with TMA bulk copies on mbarriers where every producer "
           "of a loop can be one TMA box (sm_90a)">,
    Option<"linearBulk", "linear-bulk", "bool", /*default=*/"false",
           "In persistent mega-kernels, pipeline with 1-D bulk copies on "
           "mbarriers where every producer of a loop allows them (sm_90a)">,
    Option<"earlyDepth", "early-depth", "int64_t", /*default=*/"0",
           "Iterations of a loop's prologue whose early copies start at the "
           "prefetch point (0: all of it; the rest at the loop)">,
  ];
  let dependentDialects = [
    "::mlir::tilemega::tile::TileDialect", "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect", "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect"
  ];
}

def TileScalarizeFragments : Pass<"tile-scalarize-fragments"> {
  let summary = "Split constant-indexed per-thread fragments into one slot per element";
  let description = [{
    A fragment is a per-thread `memref.alloca` whose elements the lowered
    tile ops address with constant indices only (the loops over a thread's
    elements are unrolled). This pass splits every such alloca of at most
    `max-elements` elements into rank-0 allocas, one per element, so that
    `mem2reg` turns them into SSA values: registers, not local memory.

    It must run right after `convert-scf-to-cf`, before any pass whose
    greedy driver merges identical blocks: in a persistent mega-kernel the
    cases of different task bodies end in identical code (a GEMV's
    reduction), and merging them passes the fragments as block arguments,
    which nothing can promote any more (measured on the H200: the
    generation kernel then kept 288 bytes of stack and ran 5-25 % slower
    per GEMV than the same bodies launched alone).

    ```mlir
    %f = memref.alloca() : memref<2xf32>
    memref.store %v, %f[%c1] : memref<2xf32>
    %x = memref.load %f[%c1] : memref<2xf32>
    // becomes
    %f1 = memref.alloca() : memref<f32>
    memref.store %v, %f1[] : memref<f32>
    %x = memref.load %f1[] : memref<f32>
    ```
    An alloca with any other use (a view, a call, a dynamic index) is left
    as it is.
  }];
  let options = [
    Option<"maxElements", "max-elements", "int64_t", "256",
           "Largest fragment (in elements) that is split">,
  ];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

#endif // TILEMEGA_DIALECT_TILE_TRANSFORMS_PASSES_TD
