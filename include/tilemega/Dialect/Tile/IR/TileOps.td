//===- TileOps.td - tile dialect operations ----------------*- tablegen -*-===//

#ifndef TILEMEGA_DIALECT_TILE_IR_TILEOPS_TD
#define TILEMEGA_DIALECT_TILE_IR_TILEOPS_TD

include "tilemega/Dialect/Tile/IR/TileDialect.td"
include "tilemega/Dialect/Tile/IR/TileAttrs.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ViewLikeInterface.td"

//===----------------------------------------------------------------------===//
// Base class and constraints
//===----------------------------------------------------------------------===//

// Every tile op except tile.kernel only has a meaning inside a kernel body;
// the trait makes that a verifier error instead of a lowering surprise.
def Tile_InKernel : NativeOpTrait<"InKernel"> {
  let cppNamespace = "::mlir::tilemega::tile";
}

class Tile_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tile_Dialect, mnemonic, !listconcat(traits, [Tile_InKernel])>;

def Tile_Buffer : Type<And<[IsMemRefTypePred,
                            CPred<"::llvm::cast<::mlir::MemRefType>($_self).hasStaticShape()">]>,
                       "statically shaped memref", "::mlir::MemRefType">;
def Tile_SharedBuffer : Type<And<[Tile_Buffer.predicate,
                                  CPred<"::mlir::tilemega::tile::isShared(::llvm::cast<::mlir::MemRefType>($_self))">]>,
                             "statically shaped shared-memory memref", "::mlir::MemRefType">;
def Tile_FragmentBuffer : Type<And<[Tile_Buffer.predicate,
                                    CPred<"::mlir::tilemega::tile::isFragment(::llvm::cast<::mlir::MemRefType>($_self))">]>,
                               "statically shaped fragment memref", "::mlir::MemRefType">;

//===----------------------------------------------------------------------===//
// tile.kernel
//===----------------------------------------------------------------------===//

def Tile_KernelOp : Op<Tile_Dialect, "kernel", [
    SingleBlock, NoTerminator, HasParent<"::mlir::func::FuncOp">,
    RecursiveMemoryEffects]> {
  let summary = "A GPU kernel launched over a grid of thread blocks";
  let description = [{
    The body runs once per thread block. The grid (1 to 3 dimensions) and the
    number of threads per block are static; the block indices are the region's
    arguments. The enclosing `func.func` is the kernel's signature: its memref
    arguments are global tensors, its scalar arguments are passed by value.
    The thread count is a positive multiple of 32 and at most 1024.

    `cluster N` (sm_90) launches the blocks in thread-block clusters of N
    (2 to 8) consecutive blocks along the first grid dimension, which must
    be a multiple of N: blocks N c .. N c + N - 1 of that dimension (the
    same other indices) form cluster c. A warp-specialised pipeline
    multicasts every TMA copy whose source box is the same for all blocks
    of a cluster (its offsets do not depend on the first block index but
    through its quotient by N, tile::isClusterUniform) and which all of
    them run as many times (tile::isRunUniformly): each block loads 1/N of
    the box into every block's tile.

    `resident` (a 1-D grid) makes the grid an upper bound: the runtime
    launches as many blocks as the device keeps resident at once (whole
    clusters with `cluster`: the clusters the GPCs co-schedule, which on an
    H100 is 30 of 4 blocks, not 132 / 4), at most the grid's size, chosen
    once per device when the kernel is loaded. The body reads the launched
    count with `tile.num_blocks` and walks its work with that stride (a
    persistent kernel): a fixed count over what fits would run its last
    blocks or clusters after the others, a whole extra round of their work.

    ```mlir
    func.func @add_one(%A: memref<256x256xf32>, %B: memref<256x256xf32>) {
      tile.kernel blocks(%bx, %by) in [4, 2] threads 128 {
        ...
      }
      return
    }
    ```
  }];
  let arguments = (ins DenseI64ArrayAttr:$grid, I64Attr:$threads,
                       OptionalAttr<I64Attr>:$cluster, UnitAttr:$resident);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    OpBuilder<(ins "::llvm::ArrayRef<int64_t>":$grid, "int64_t":$threads)>
  ];
  let extraClassDeclaration = [{
    /// The block indices, one per grid dimension.
    ::mlir::Block::BlockArgListType getBlockIndices() {
      return getBody().getArguments();
    }
  }];
}

def Tile_NumBlocksOp : Tile_Op<"num_blocks", [Pure]> {
  let summary = "The number of blocks launched along a grid dimension";
  let description = [{
    The launch's grid size along dimension `dim` (0 to the grid's rank -
    1): the kernel's own grid size, a constant, except along the first
    dimension of a `resident` kernel, whose count the runtime chooses at
    load time (`%nctaid.x`). A persistent kernel's stride over its work.

    ```mlir
    %n = tile.num_blocks 0
    ```
  }];
  let arguments = (ins I64Attr:$dim);
  let results = (outs Index:$result);
  let assemblyFormat = "$dim attr-dict";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Allocation
//===----------------------------------------------------------------------===//

def Tile_AllocSharedOp : Tile_Op<"alloc_shared", [HasParent<"KernelOp">]> {
  let summary = "Allocate a tile in the block's shared memory";
  let description = [{
    Allocates a statically shaped buffer in shared memory, visible to all the
    threads of the block for the whole kernel. An optional `swizzle` fixes how
    element offsets are permuted to avoid bank conflicts; without one, layout
    inference chooses.

    A multi-buffered tile (what `tile-pipeline` makes of a tile it pipelines)
    has a leading stage dimension; one stage is the rank-reducing
    `memref.subview %buf[%stage, 0, ...] [1, ...] [1, ...]`, which tile ops
    accept like a tile of their own and which is swizzled like one.

    ```mlir
    %A_s = tile.alloc_shared : memref<128x32xf16, #gpu.address_space<workgroup>>
    ```
  }];
  let arguments = (ins OptionalAttr<Tile_SwizzleAttr>:$swizzle);
  let results = (outs Res<Tile_SharedBuffer, "", [MemAlloc]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tile_AllocFragmentOp : Tile_Op<"alloc_fragment", [HasParent<"KernelOp">]> {
  let summary = "Allocate a tile distributed over the threads' registers";
  let description = [{
    Allocates a register fragment: a statically shaped tile whose elements are
    spread over the block's threads. An optional `layout` fixes the spread;
    without one, `tile-infer-layouts` chooses it from how the fragment is used.
    A fragment is accessed only whole: by `tile.copy`, `tile.gemm`,
    `tile.reduce`, `tile.fill`, `tile.atomic`, and by `memref.load` /
    `memref.store` inside a `tile.parallel` with the parallel's own indices.

    ```mlir
    %acc = tile.alloc_fragment : memref<128x128xf32, #tile.fragment>
    ```
  }];
  let arguments = (ins OptionalAttr<Tile_FragmentLayoutAttr>:$layout);
  let results = (outs Res<Tile_FragmentBuffer, "", [MemAlloc]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Tile_CopyOp : Tile_Op<"copy", [AttrSizedOperandSegments]> {
  let summary = "Copy a tile between memory scopes";
  let description = [{
    Copies the box of extent `sizes` at `src` offsets into the box at `dst`
    offsets. Offsets may be constants or index values. Either side may be
    global, shared or a fragment; global to global is not a tile copy.
    A fragment is always copied whole. When the element types differ (both
    floats or both integers) each element is converted.

    The lowering decides thread binding and vector width; global accesses
    outside the buffer are masked (loads read 0, stores are dropped), so the
    tile need not divide the tensor.

    ```mlir
    tile.copy %A[%row, 0] to %A_s[0, 0] sizes [128, 32]
        : memref<1024x1024xf16> to memref<128x32xf16, #gpu.address_space<workgroup>>
    ```

    With `async` the copy is only issued (`cp.async` on sm_80 and later): it
    goes from global to shared memory with one element type, and the
    destination may be read only once a `tile.async_commit` has closed the
    copy's group, a `tile.async_wait` has retired that group and a
    `gpu.barrier` has made every thread's part visible. Elements outside the
    global buffer are zero-filled. No barriers are inserted around an async
    copy: whoever issues it (normally `tile-pipeline`) places the waits.
    Chunks a thread cannot move in 4, 8 or 16 bytes are copied synchronously,
    which a later wait also covers.

    ```mlir
    tile.copy async %A[%row, %k] to %A_s[0, 0] sizes [128, 32]
        : memref<1024x1024xf16> to memref<128x32xf16, #gpu.address_space<workgroup>>
    tile.async_commit
    tile.async_wait pending 0
    gpu.barrier
    ```

    `tma_store` (in the attribute dictionary) asks for a TMA bulk store: a
    whole shared tile into a box of an argument of the kernel's function,
    which `tile::chooseBulkCopy`'s box rules accept (sm_90a with TMA);
    convert-tile-to-gpu makes it one thread's bulk copies through a tensor
    map (a box per column block of the tile), or says at the copy why it
    cannot (`T.copy(c_s, C[...], tma_store=True)`).
  }];
  let arguments = (ins
    Arg<Tile_Buffer, "source", [MemRead]>:$src,
    Variadic<Index>:$src_offsets,
    DenseI64ArrayAttr:$static_src_offsets,
    Arg<Tile_Buffer, "destination", [MemWrite]>:$dst,
    Variadic<Index>:$dst_offsets,
    DenseI64ArrayAttr:$static_dst_offsets,
    DenseI64ArrayAttr:$sizes,
    UnitAttr:$async,
    UnitAttr:$tma_store);
  let assemblyFormat = [{
    (`async` $async^)?
    $src `` custom<DynamicIndexList>($src_offsets, $static_src_offsets)
    `to` $dst `` custom<DynamicIndexList>($dst_offsets, $static_dst_offsets)
    `sizes` $sizes attr-dict `:` type($src) `to` type($dst)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::llvm::SmallVector<::mlir::OpFoldResult> getMixedSrcOffsets();
    ::llvm::SmallVector<::mlir::OpFoldResult> getMixedDstOffsets();
  }];
}

def Tile_AtomicOp : Tile_Op<"atomic", []> {
  let summary = "Atomically combine a tile into global memory";
  let description = [{
    Every element of `src` (a fragment or shared tile) is combined into the
    global buffer `dst` at `offsets` with an atomic `add` or `max`. Elements
    outside `dst` are skipped.

    ```mlir
    tile.atomic add %partial to %C[%row, %col]
        : memref<64x64xf32, #tile.fragment> to memref<1024x1024xf32>
    ```
  }];
  let arguments = (ins
    Tile_AtomicKindAttr:$kind,
    Arg<Tile_Buffer, "values", [MemRead]>:$src,
    Arg<Tile_Buffer, "global destination", [MemRead, MemWrite]>:$dst,
    Variadic<Index>:$offsets,
    DenseI64ArrayAttr:$static_offsets);
  let assemblyFormat = [{
    `` $kind $src `to` $dst `` custom<DynamicIndexList>($offsets, $static_offsets)
    attr-dict `:` type($src) `to` type($dst)
  }];
  let hasVerifier = 1;
}

def Tile_BlockAtomicAddOp : Tile_Op<"block_atomic_add", [
    AllTypesMatch<["value", "old"]>]> {
  let summary = "One atomic add for the whole block, ordered, its old value to every thread";
  let description = [{
    The block adds `value` once to the global element `dst[indices]` and
    every thread gets the element's value from before the add. The add is
    a device-scope release of everything the block wrote before it and an
    acquire for everything it reads after it: after a block barrier the
    first thread fences (`fence.acq_rel.gpu`), adds (a relaxed
    `atom.global.add`), fences again and leaves the old value in `scratch`
    (one shared word), which every thread reads after a second barrier.
    So the last of n blocks to add 1 to a zeroed counter (old value n - 1)
    sees everything the others wrote before their adds: a split reduction
    finished by its last split, with no other kernel and no spin-wait.

    Every thread of the block must reach it (it holds two block barriers):
    not inside `tile.parallel` or `tile.producer`, and under a loop or
    branch only where all threads take it alike.

    ```mlir
    %count = tile.alloc_shared : memref<1xi32, #gpu.address_space<workgroup>>
    %old = tile.block_atomic_add %c1_i32 to %counts[%g] via %count
        : i32, memref<8xi32>, memref<1xi32, #gpu.address_space<workgroup>>
    ```
  }];
  let arguments = (ins
    AnySignlessInteger:$value,
    Arg<Tile_Buffer, "global counter", [MemRead, MemWrite]>:$dst,
    Variadic<Index>:$indices,
    Arg<Tile_SharedBuffer, "the old value's hand-over", [MemRead, MemWrite]>:$scratch);
  let results = (outs AnySignlessInteger:$old);
  let assemblyFormat = [{
    $value `to` $dst `[` $indices `]` `via` $scratch attr-dict `:` type($value) `,`
    type($dst) `,` type($scratch)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

def Tile_GemmOp : Tile_Op<"gemm", []> {
  let summary = "Tile matrix multiply-accumulate: C += op(A) * op(B)";
  let description = [{
    Multiplies `A` (M x K, or K x M with `transpose_a`) by `B` (K x N, or N x K
    with `transpose_b`) and adds the product into the fragment `C` (M x N).
    With `clear_accum` C is zeroed first. A and B live in shared memory or in
    fragments and have one element type; C's element type is the accumulation
    type: f32 or f16 for f16/bf16 inputs, f32 for f32 inputs, i32 for i8.

    `async` (TileLang's `wg_wait=-1`) leaves a wgmma's group in flight: C,
    and the shared A and B it reads, belong to the tensor cores until a
    `tile.wgmma_wait` lists C, and nothing else may touch them before
    (tile::verifyAsyncGemms, run by the kernel's verifier). A gemm that
    lowers to mma.sync, which is synchronous, ignores it.

    ```mlir
    tile.gemm %A_s, %B_s, %acc {transpose_b}
        : memref<128x32xf16, #gpu.address_space<workgroup>>,
          memref<128x32xf16, #gpu.address_space<workgroup>>,
          memref<128x128xf32, #tile.fragment>
    ```
  }];
  let arguments = (ins
    Arg<Tile_Buffer, "A", [MemRead]>:$a,
    Arg<Tile_Buffer, "B", [MemRead]>:$b,
    Arg<Tile_FragmentBuffer, "C", [MemRead, MemWrite]>:$c,
    UnitAttr:$transpose_a, UnitAttr:$transpose_b, UnitAttr:$clear_accum,
    UnitAttr:$async);
  let assemblyFormat = [{
    $a `,` $b `,` $c attr-dict `:` type($a) `,` type($b) `,` type($c)
  }];
  let hasVerifier = 1;
}

def Tile_WgmmaWaitOp : Tile_Op<"wgmma_wait", []> {
  let summary = "Wait for asynchronous gemms, handing their accumulators back";
  let description = [{
    Blocks the warpgroup until at most `pending` of its groups of
    asynchronous wgmma (`tile.gemm ... {async}`, one group each) are
    incomplete (`wgmma.wait_group N`), and returns to the threads the
    accumulators of the gemms that completed: `fragments` must be exactly
    the C of every in-flight gemm but the `pending` newest, so that what
    reads them afterwards cannot be computed before the wait (the
    accumulator registers pass through the instruction). TileLang's
    `T.wait_wgmma(N)`; the T.* front end fills in the fragments.

    ```mlir
    tile.gemm %q, %k, %s {async, clear_accum, transpose_b} : ...
    tile.gemm %p, %v, %o {async} : ...
    tile.wgmma_wait pending 1 %s : memref<64x64xf32, #tile.fragment>
    ```
  }];
  let arguments = (ins I64Attr:$pending,
                       Arg<Variadic<Tile_FragmentBuffer>, "fragments",
                           [MemRead, MemWrite]>:$fragments);
  let assemblyFormat = [{
    `pending` $pending ($fragments^ `:` type($fragments))? attr-dict
  }];
  let hasVerifier = 1;
}

def Tile_ReduceOp : Tile_Op<"reduce", []> {
  let summary = "Reduce a tile along one dimension";
  let description = [{
    Reduces `src` along `dim` with `sum`, `max`, `min` or `absmax` (the
    largest magnitude) into `dst`, whose shape is `src`'s without `dim`. With
    `clear` the result overwrites `dst`; without it the result is combined
    with what `dst` holds.

    ```mlir
    tile.reduce max %scores dim 1 into %row_max {clear}
        : memref<64x128xf32, #tile.fragment> into memref<64xf32, #tile.fragment>
    ```
  }];
  let arguments = (ins
    Tile_ReduceKindAttr:$kind,
    Arg<Tile_Buffer, "source", [MemRead]>:$src,
    I64Attr:$dim,
    Arg<Tile_Buffer, "destination", [MemRead, MemWrite]>:$dst,
    UnitAttr:$clear);
  let assemblyFormat = [{
    `` $kind $src `dim` $dim `into` $dst attr-dict `:` type($src) `into` type($dst)
  }];
  let hasVerifier = 1;
}

def Tile_FillOp : Tile_Op<"fill", []> {
  let summary = "Set every element of a tile to a value";
  let description = [{
    Writes `value` into every element of a shared or fragment tile. The value's
    type is the tile's element type.

    ```mlir
    tile.fill %acc, %neg_inf : memref<64xf32, #tile.fragment>, f32
    ```
  }];
  let arguments = (ins Arg<Tile_Buffer, "tile", [MemWrite]>:$dst,
                       AnyTypeOf<[AnyFloat, AnySignlessInteger]>:$value);
  let assemblyFormat = "$dst `,` $value attr-dict `:` type($dst) `,` type($value)";
  let hasVerifier = 1;
}

def Tile_ClearOp : Tile_Op<"clear", []> {
  let summary = "Set every element of a tile to zero";
  let description = [{
    `tile.fill` with zero.

    ```mlir
    tile.clear %acc : memref<128x128xf32, #tile.fragment>
    ```
  }];
  let arguments = (ins Arg<Tile_Buffer, "tile", [MemWrite]>:$dst);
  let assemblyFormat = "$dst attr-dict `:` type($dst)";
  let hasVerifier = 1;
}

def Tile_ParallelOp : Tile_Op<"parallel", [
    SingleBlock, NoTerminator, RecursiveMemoryEffects]> {
  let summary = "An elementwise computation over a tile's index space";
  let description = [{
    Runs the body once for every index in `[0, extents)`, spread over the
    block's threads (like TileLang's `T.Parallel`). Iterations are independent.
    The body reads and writes tiles with `memref.load` / `memref.store`:
    fragments only at exactly the parallel's indices (so each thread touches
    the elements it holds), shared and global buffers at any index. The
    optional `layout` fixes which thread runs which iteration; layout inference
    sets it to the layout of the fragments the body touches.

    ```mlir
    tile.parallel (%i, %j) in [64, 128] {
      %x = memref.load %f[%i, %j] : memref<64x128xf32, #tile.fragment>
      %y = arith.addf %x, %one : f32
      memref.store %y, %f[%i, %j] : memref<64x128xf32, #tile.fragment>
    }
    ```
  }];
  let arguments = (ins DenseI64ArrayAttr:$extents,
                       OptionalAttr<Tile_FragmentLayoutAttr>:$layout);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::llvm::ArrayRef<int64_t>":$extents)>];
  let extraClassDeclaration = [{
    ::mlir::Block::BlockArgListType getIndices() {
      return getBody().getArguments();
    }
  }];
}

def Tile_PipelinedOp : Tile_Op<"pipelined", [
    SingleBlock, NoTerminator, RecursiveMemoryEffects]> {
  let summary = "A counted loop whose copies are software-pipelined";
  let description = [{
    Iterates `%iv` from `lb` to `ub` (exclusive) by `step`, like `scf.for`.
    `num_stages` is how many iterations' global-to-shared copies may be in
    flight at once (TileLang's `T.Pipelined(..., num_stages=N)`); 1 means no
    overlap. `tile-pipeline` turns it into multi-buffered shared tiles and
    asynchronous copies. `wgmma_in_flight` (N >= 3) asks `tile-pipeline` to
    keep each iteration's wgmma pending into the next (its `wgmma-in-flight`
    option, for this loop; `T.Pipelined(..., wgmma_in_flight=True)`).
    `tma` (a bool, in the attribute dictionary) decides for this loop what
    `tile-pipeline`'s `tma` option decides for all: true requires TMA bulk
    copies (an error names the copy that cannot be one TMA box, or the
    missing option), false keeps cp.async (`T.Pipelined(..., tma=...)`).
    `warp_specialize` (in the attribute dictionary) makes the loop's TMA
    copies the work of a producer warpgroup (`tile.producer`) that runs
    ahead of the kernel's threads on full / empty mbarriers, with no block
    barrier per iteration (`T.Pipelined(..., warp_specialize=True)`); it
    needs TMA and a loop at the kernel's top level.

    ```mlir
    tile.pipelined %k = %c0 to %c32 step %c1 num_stages 3 {
      tile.copy %A[%row, %k] to %A_s[0, 0] sizes [128, 32] : ... to ...
      tile.gemm %A_s, %B_s, %acc : ...
    }
    ```
  }];
  let arguments = (ins Index:$lowerBound, Index:$upperBound, Index:$step,
                       I64Attr:$num_stages, UnitAttr:$wgmma_in_flight,
                       OptionalAttr<BoolAttr>:$tma, UnitAttr:$warp_specialize);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::mlir::Value":$lowerBound,
      "::mlir::Value":$upperBound, "::mlir::Value":$step, "int64_t":$numStages,
      CArg<"bool", "false">:$wgmmaInFlight)>];
  let extraClassDeclaration = [{
    ::mlir::Value getInductionVar() { return getBody().getArgument(0); }
  }];
}

//===----------------------------------------------------------------------===//
// Asynchronous copies
//===----------------------------------------------------------------------===//

def Tile_AsyncCommitOp : Tile_Op<"async_commit", []> {
  let summary = "Close the group of the thread's outstanding async copies";
  let description = [{
    Every `tile.copy async` the thread issued since the previous commit forms
    one group; `tile.async_wait` counts these groups. A commit with no copy
    before it closes an empty group, which completes at once: committing on
    every path keeps the group count uniform across iterations and threads
    (`cp.async.commit_group`).

    ```mlir
    tile.copy async %A[%row, %k] to %A_s[0, 0] sizes [128, 32]
        : memref<1024x1024xf16> to memref<128x32xf16, #gpu.address_space<workgroup>>
    tile.async_commit
    ```
  }];
  let assemblyFormat = "attr-dict";
}

def Tile_PrefetchPointOp : Tile_Op<"prefetch_point", []> {
  let summary = "Where the prologues of early copies below may start";
  let description = [{
    Marks the earliest point at which `tile-pipeline` may issue the prologue
    of a pipelined loop that follows it (in its block, or nested in an op
    after it), for the loop's copies marked `tile.early` (a source nothing
    writes while the kernel runs: a weight). The ops between (a persistent
    kernel's wait for a task's inputs, a normalisation before a GEMV) then
    run while those copies are in flight. The prologue moves when the copy
    addresses can be computed at the point (values that dominate it, or
    side-effect-free ops of them) and the kernel's shared tiles never share
    bytes (a persistent kernel's); otherwise it stays at the loop, with the
    reason under `-debug-only=tile-pipeline`. The op itself is erased by
    `tile-pipeline`.

    ```mlir
    tile.prefetch_point
    // thread 0 waits for the task's events ...
    tile.pipelined %k = %c0 to %c2048 step %c256 num_stages 4 {
      tile.copy %W[%row, %k] to %w_s[0, 0] sizes [24, 256] {tile.early} : ...
      ...
    }
    ```
  }];
  let assemblyFormat = "attr-dict";
}

def Tile_TaskWaitOp : Tile_Op<"task_wait", []> {
  let summary = "Where a mega task body waits for its events";
  let description = [{
    In the body of a mega task, the point where the persistent kernel waits
    for the task's events (`convert-mega-to-gpu`); without it the wait comes
    before the whole body. The ops before it run while the inputs are still
    being produced, so they may read only graph tensors that are stable for
    the whole step before the task: tensors no task writes (weights),
    tensors only tasks after it write (the generation state, which the
    step's last task advances), and, in copies the body marks `tile.early`,
    tensors the task itself writes (the body vouching that a unit reads no
    element another unit writes). Anything else before it is an error
    naming the tensor and the task that writes it. A prefetch point before
    it starts the early copies of the loops after it there.

    Ignored where the task does not wait inside its case (a JIT queue,
    several ranks, `mega-early-loads` off, or a task of several units an
    entry: the wait then stays before the body) and in a kernel launched
    on its own, where `convert-tile-to-gpu` erases it.

    ```mlir
    %p = memref.load %gen[%c0] : memref<16xi32>
    tile.prefetch_point
    tile.task_wait
    tile.copy %qkv[%q0] to %x_s[0] sizes [256] : ...
    ```
  }];
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

def Tile_AsyncWaitOp : Tile_Op<"async_wait", []> {
  let summary = "Wait until at most N groups of async copies are in flight";
  let description = [{
    Blocks the thread until at most `pending` of its committed groups of
    async copies are incomplete (`cp.async.wait_group N`): with `pending 0`
    all of them have landed. It orders only the thread's own copies; a
    `gpu.barrier` after it makes the whole tile visible to the block.

    ```mlir
    // Three stages: two groups may stay in flight while stage i is read.
    tile.async_wait pending 2
    gpu.barrier
    ```
  }];
  let arguments = (ins I64Attr:$pending);
  let assemblyFormat = "`pending` $pending attr-dict";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Bulk tensor copies and mbarriers (sm_90)
//===----------------------------------------------------------------------===//

def Tile_Barriers : Type<And<[Tile_SharedBuffer.predicate,
                              CPred<"::llvm::cast<::mlir::MemRefType>($_self).getRank() == 1">,
                              CPred<"::llvm::cast<::mlir::MemRefType>($_self).getElementType().isInteger(64)">]>,
                         "1-D shared-memory memref of i64 (mbarriers)", "::mlir::MemRefType">;

def Tile_MbarrierInitOp : Tile_Op<"mbarrier_init", []> {
  let summary = "Initialise a row of mbarriers";
  let description = [{
    The block's first thread initialises every mbarrier of `barriers` (one
    i64 word each in shared memory) with an expected arrival count of
    `count` (1 unless given) and fences the initialisation for the async
    proxy (`mbarrier.init`, `fence.mbarrier_init`). A `gpu.barrier` must
    follow before any thread uses them.

    ```mlir
    %bars = tile.alloc_shared : memref<4xi64, #gpu.address_space<workgroup>>
    tile.mbarrier_init %bars : memref<4xi64, #gpu.address_space<workgroup>>
    tile.mbarrier_init %empty {count = 8} : memref<4xi64, #gpu.address_space<workgroup>>
    gpu.barrier
    ```
  }];
  let arguments = (ins Arg<Tile_Barriers, "mbarriers", [MemWrite]>:$barriers,
                       DefaultValuedAttr<I64Attr, "1">:$count);
  let assemblyFormat = "$barriers attr-dict `:` type($barriers)";
  let hasVerifier = 1;
}

def Tile_MbarrierArriveOp : Tile_Op<"mbarrier_arrive", []> {
  let summary = "Arrive on an mbarrier once per warp";
  let description = [{
    Each warp of the executing threads arrives once (its first lane, after
    every lane of the warp reached this point) on mbarrier `index`
    (`mbarrier.arrive`, release semantics at CTA scope): a warp-specialised
    pipeline's consumers hand a stage back to the producer so, on an
    "empty" barrier initialised with one arrival per consumer warp.
    With `cluster = N` each warp arrives on barrier `index` of every block
    of its cluster of N (`mapa` + `mbarrier.arrive` on the shared::cluster
    address, release at CTA scope): the stage is handed back to every
    producer whose multicast copies write it.

    ```mlir
    tile.mbarrier_arrive %empty[%stage]
        : memref<4xi64, #gpu.address_space<workgroup>>
    ```
  }];
  let arguments = (ins Arg<Tile_Barriers, "mbarriers", [MemRead, MemWrite]>:$barriers,
                       Index:$index,
                       OptionalAttr<I64Attr>:$cluster);
  let assemblyFormat = [{
    $barriers `[` $index `]` attr-dict `:` type($barriers)
  }];
  let hasVerifier = 1;
}

def Tile_ProducerOp : Tile_Op<"producer", [
    HasParent<"KernelOp">, SingleBlock, NoTerminator,
    RecursiveMemoryEffects]> {
  let summary = "The producer warpgroup of a warp-specialised kernel";
  let description = [{
    A kernel with a `tile.producer` runs one more warpgroup than its
    `threads`: threads `threads .. threads + 127`. They lower their register
    budget (`setmaxnreg.dec`), one of them runs the region (TMA bulk copies
    into pipeline stages, waiting for the consumers to hand stages back on
    "empty" mbarriers), and they leave the kernel. The kernel's own threads
    skip the region, raise their register budget (`setmaxnreg.inc`), and
    run the rest of the kernel, synchronising among themselves only (named
    barriers of `threads` threads). `tile-pipeline` builds it for a
    `tile.pipelined ... {warp_specialize}` loop; it follows the kernel's
    allocations and mbarrier initialisation, and its region uses nothing
    the kernel computes after it.

    ```mlir
    tile.producer {
      scf.for %i = %c0 to %c16 step %c1 { ... tile.bulk_copy ... }
    }
    ```
  }];
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$body attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Threads of the producer warpgroup (one warpgroup).
    static constexpr int64_t kThreads = 128;
  }];
}

def Tile_ClusterSyncOp : Tile_Op<"cluster_sync", []> {
  let summary = "Synchronise every thread of the block's cluster";
  let description = [{
    Every thread of every block of the kernel's cluster arrives and waits
    (`barrier.cluster.arrive` + `barrier.cluster.wait`, release / acquire):
    what a block wrote before it (its mbarriers' initialisation) is seen by
    the cluster's other blocks after it, before their multicast copies and
    remote arrivals reach that block. Only in a kernel with a `cluster`.

    ```mlir
    tile.cluster_sync
    ```
  }];
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

def Tile_MbarrierArriveExpectTxOp : Tile_Op<"mbarrier_arrive_expect_tx", []> {
  let summary = "Expect bytes on an mbarrier and arrive on it, once per block";
  let description = [{
    The block's first thread adds `bytes` to the transaction count the
    current phase of mbarrier `index` waits for and arrives on it (its one
    expected arrival): the phase completes once the bulk copies that signal
    it (`tile.bulk_copy`) have delivered that many bytes
    (`mbarrier.arrive.expect_tx`). With 0 bytes it only arrives
    (`mbarrier.arrive`): `linear` bulk copies issued before it expect their
    own bytes.

    ```mlir
    tile.mbarrier_arrive_expect_tx %bars[%stage], 32768
        : memref<4xi64, #gpu.address_space<workgroup>>
    ```
  }];
  let arguments = (ins Arg<Tile_Barriers, "mbarriers", [MemWrite]>:$barriers,
                       Index:$index, I64Attr:$bytes);
  let assemblyFormat = [{
    $barriers `[` $index `]` `,` $bytes attr-dict `:` type($barriers)
  }];
  let hasVerifier = 1;
}

def Tile_MbarrierWaitOp : Tile_Op<"mbarrier_wait", []> {
  let summary = "Wait for the phase of an mbarrier with a given parity";
  let description = [{
    Every thread waits until the phase of mbarrier `index` whose parity is
    `parity` (its low bit) has completed (`mbarrier.try_wait.parity` in a
    loop): the bytes its bulk copies delivered are then visible to the
    thread. The k-th use of a barrier (from 0) completes phase k.

    ```mlir
    tile.mbarrier_wait %bars[%stage], %parity
        : memref<4xi64, #gpu.address_space<workgroup>>
    ```
  }];
  let arguments = (ins Arg<Tile_Barriers, "mbarriers", [MemRead, MemWrite]>:$barriers,
                       Index:$index, Index:$parity);
  let assemblyFormat = [{
    $barriers `[` $index `]` `,` $parity attr-dict `:` type($barriers)
  }];
}

def Tile_BulkCopyOp : Tile_Op<"bulk_copy", []> {
  let summary = "Copy a global box into a shared tile by TMA, signalling an mbarrier";
  let description = [{
    The block's first thread issues one tensor-memory-accelerator copy
    (`cp.async.bulk.tensor`) of the box at `src` offsets, of the shape of
    the shared tile `dst`, into `dst`; its bytes complete on mbarrier
    `index` of `barriers`, whose phase must expect them
    (`tile.mbarrier_arrive_expect_tx`); `dst` may be read once a
    `tile.mbarrier_wait` has seen that phase complete. Elements outside the
    tensor land as zeros. `src` is an argument of the kernel's function:
    the kernel receives a tensor map (CUtensorMap) of it, built by the
    runtime, as a parameter after its own. The copy must satisfy
    `tile::chooseBulkCopy` (TileBulkCopies.h): rows of 16-byte multiples,
    box extents up to 256, and a destination swizzle that is one of TMA's
    modes.

    With `multicast = N` (a kernel of clusters of N blocks whose blocks all
    copy the same box) block r of the cluster copies its N-th of the box's
    pieces (tile::chooseBulkCopy's `pieces`) into the tile and barrier
    `index` of every block of the cluster (`.multicast::cluster`): each
    block's barrier still receives the whole tile's bytes. The verifier
    checks the offsets are the same in every block of the cluster and that
    all of them run the copy as often (tile::isClusterUniform,
    tile::isRunUniformly: the rule tile-pipeline chooses multicasts by).

    With `linear` the box needs no tensor map (a persistent mega-kernel's
    runtime binds none; `src` may be any global buffer): the block's first
    warp copies it with 1-D bulk copies (`cp.async.bulk`), a row a lane in
    turn, each row's bytes added to the barrier's expected ones as it is
    issued (`mbarrier.expect_tx`), so the phase's arrival
    (`tile.mbarrier_arrive_expect_tx ..., 0`) must come after the copies. A
    row outside the tensor is filled with zeros instead. The copy must
    satisfy `tile::chooseLinearBulkCopy` (TileBulkCopies.h): unswizzled
    contiguous tile, rows of 16-byte multiples that never cross the end of a
    tensor row.

    ```mlir
    tile.bulk_copy %A[%row, %k] to %a_stage, %bars[%stage]
        : memref<4096x4096xbf16> to memref<128x64xbf16, strided<[64, 1], offset: ?>, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>
    tile.bulk_copy %W[%row, %k] to %w_stage, %bars[%stage] {linear}
        : memref<2048x2048xbf16> to memref<16x512xbf16, strided<[512, 1], offset: ?>, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>
    ```
  }];
  let arguments = (ins
    Arg<Tile_Buffer, "source", [MemRead]>:$src,
    Variadic<Index>:$src_offsets,
    DenseI64ArrayAttr:$static_src_offsets,
    Arg<Tile_SharedBuffer, "destination", [MemWrite]>:$dst,
    Arg<Tile_Barriers, "mbarriers", [MemWrite]>:$barriers,
    Index:$index,
    OptionalAttr<I64Attr>:$multicast,
    UnitAttr:$linear);
  let assemblyFormat = [{
    $src `` custom<DynamicIndexList>($src_offsets, $static_src_offsets)
    `to` $dst `,` $barriers `[` $index `]`
    attr-dict `:` type($src) `to` type($dst) `,` type($barriers)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::llvm::SmallVector<::mlir::OpFoldResult> getMixedSrcOffsets();
    /// The bytes one copy delivers (the destination tile's).
    int64_t getBytes();
  }];
}

//===----------------------------------------------------------------------===//
// Lowered forms (created by convert-tile-to-gpu, outside tile.kernel)
//===----------------------------------------------------------------------===//

// Read and write effects: it reads B's shared tile and must keep its place
// between the warpgroup's wgmma.fence and commit.
def Tile_WgmmaRegisterAOp : Op<Tile_Dialect, "wgmma_register_a", [
    AllTypesMatch<["d", "result"]>, MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "One wgmma.mma_async k-step with A from registers";
  let description = [{
    One step of `wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T` with the
    A operand in registers: `a0`..`a3` are the thread's four 32-bit
    registers of A's 64 x 16 slice (two 16-bit elements each, the first in
    the low half: rows l / 4 and l / 4 + 8 of the warp's 16, columns
    2 (l % 4) + {0, 1} and the same plus 8 - the mma accumulator layout of
    those 16 columns), `b_desc` the shared-memory matrix descriptor of B,
    `d` the accumulator (an LLVM struct of N / 2 f32, wgmma's D fragment).
    `scale_d` false starts from zero rather than from `d`; `transpose_b`
    reads B N-major (imm-trans-b). NVVM's `nvvm.wgmma.mma_async` has only
    the shared x shared form, so this op lowers to the instruction's PTX
    (TileToLLVM, its one place), as FlashAttention-3's P @ V needs: P
    stays in the registers softmax computed it in.

    ```mlir
    %d1 = tile.wgmma_register_a %d0, [%a0, %a1, %a2, %a3], %desc
        {input_type = bf16, scale_d = true, transpose_b = true}
        : !llvm.struct<(f32, f32, ...)>
    ```
  }];
  let arguments = (ins AnyType:$d, I32:$a0, I32:$a1, I32:$a2, I32:$a3,
                       I64:$b_desc, TypeAttr:$input_type, BoolAttr:$scale_d,
                       BoolAttr:$transpose_b);
  let results = (outs AnyType:$result);
  let assemblyFormat = [{
    $d `,` `[` $a0 `,` $a1 `,` $a2 `,` $a3 `]` `,` $b_desc attr-dict `:` type($d)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// wgmma's N: two columns per f32 of the thread's D fragment.
    int64_t getN();
  }];
}

// Read and write effects: it is the warpgroup's wgmma.fence, ordered with
// every other memory and wgmma operation.
def Tile_WgmmaFenceRegistersOp : Op<Tile_Dialect, "wgmma_fence_registers", [
    DeclareOpInterfaceMethods<InferTypeOpInterface>,
    MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "wgmma.fence, after which the given A registers are written";
  let description = [{
    The warpgroup's `wgmma.fence.sync.aligned` with the 32-bit registers a
    register-A wgmma will read passed through it: its results are the same
    values, so they are computed before the fence and nothing rewrites them
    between the fence and the wgmma (PTX requires the fence between a
    register's last write and the wgmma that reads it as A; packed after
    the fence, as LLVM otherwise sinks them to their use, ptxas must
    serialise). Lowered with `tile.wgmma_register_a` (TileToLLVM) to the
    instruction as inline PTX whose outputs are tied to these inputs.

    ```mlir
    %r0, %r1 = tile.wgmma_fence_registers %a0, %a1
    ```
  }];
  let arguments = (ins Variadic<I32>:$registers);
  let results = (outs Variadic<I32>:$fenced);
  let assemblyFormat = "$registers attr-dict";
}

// Read and write effects: it is the warpgroup's wgmma.wait_group, ordered
// with every other memory and wgmma operation.
def Tile_WgmmaWaitRegistersOp : Op<Tile_Dialect, "wgmma_wait_registers", [
    DeclareOpInterfaceMethods<InferTypeOpInterface>,
    MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "wgmma.wait_group, after which the given accumulators are read";
  let description = [{
    `wgmma.wait_group.sync.aligned pending` with the f32 accumulator
    registers of the gemms it completes passed through it: its results are
    the same registers, so whatever reads them comes after the wait (a
    plain wait has no operands, and LLVM would hoist arithmetic on an
    accumulator above it: ptxas then serialises the wgmma pipeline).
    Created by `tile.wgmma_wait`'s lowering; TileToLLVM writes it as inline
    PTX whose outputs are tied to these inputs.

    ```mlir
    %r0, %r1 = tile.wgmma_wait_registers %a0, %a1 pending 1 : f32, f32
    ```
  }];
  let arguments = (ins Variadic<F32>:$registers, I64Attr:$pending);
  let results = (outs Variadic<F32>:$waited);
  let assemblyFormat = [{
    ($registers^)? `pending` $pending attr-dict (`:` type($registers)^)?
  }];
  let hasVerifier = 1;
}

#endif // TILEMEGA_DIALECT_TILE_IR_TILEOPS_TD
