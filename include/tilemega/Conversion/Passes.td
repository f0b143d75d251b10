//===- Passes.td - TileMega conversions --------------------*- tablegen -*-===//

#ifndef TILEMEGA_CONVERSION_PASSES_TD
#define TILEMEGA_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertTileToGPU : Pass<"convert-tile-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Lower tile kernels to gpu.func kernels over scf/memref/vector";
  let description = [{
    Turns every `func.func` that holds a `tile.kernel` into a `gpu.func`
    kernel in the `gpu.module @tilemega_kernels`, and records its launch
    configuration (grid, block, dynamic shared memory, parameters) in the
    module attribute `tilemega.kernels`, which the artifact writer reads.

    Inside the kernel, tile ops become per-thread code: `tile.alloc_shared`
    becomes a view into the dynamic shared memory, `tile.alloc_fragment` a
    per-thread register array sized by its layout, `tile.copy` /
    `tile.parallel` / `tile.fill` loops over the elements each thread owns
    (vectorised and, for global memory, masked), with `gpu.barrier`s where
    shared memory changes hands. Fragments must have layouts: run
    `tile-infer-layouts` first.

    `tile.copy async` becomes one `nvgpu.device_async_copy` (cp.async) per
    4-, 8- or 16-byte chunk a thread owns, with a source count of 0 (a
    zero-filled chunk) outside the global buffer; no barriers go around it.
    `tile.async_commit` and `tile.async_wait pending N` become
    `nvvm.cp.async.commit.group` and `nvvm.cp.async.wait.group N`.

    ```mlir
    func.func @k(%A: memref<64xf32>) {
      tile.kernel blocks(%b) in [1] threads 32 { ... }
      return
    }
    // becomes
    gpu.module @tilemega_kernels {
      gpu.func @k(%A: memref<64xf32>) kernel attributes {...} { ... }
    }
    ```
  }];
  let options = [
    Option<"wgmma", "wgmma", "bool", /*default=*/"false",
           "Lower the tile.gemm ops that tile::chooseWgmma accepts to Hopper's "
           "wgmma.mma_async (sm_90a only), their operand tiles aligned to the "
           "1024-byte swizzle period (the pass's default is off; "
           "tilemega.compile turns it on for sm_90a).">,
    Option<"tma", "tma", "bool", /*default=*/"false",
           "Lower a tile.copy of a whole shared tile into a box of a kernel "
           "argument that tile::chooseBulkCopy accepts to TMA bulk stores "
           "(sm_90a; tilemega.compile's tma).">
  ];
  let dependentDialects = [
    "::mlir::gpu::GPUDialect", "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect", "::mlir::vector::VectorDialect",
    "::mlir::arith::ArithDialect", "::mlir::nvgpu::NVGPUDialect",
    "::mlir::NVVM::NVVMDialect"
  ];
}

def AlignDynamicSharedMemory
    : Pass<"tilemega-align-dynamic-shared-memory", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Raise the dynamic shared memory's alignment to what its tiles need";
  let description = [{
    `convert-tile-to-gpu` places shared tiles at offsets of the one dynamic
    shared-memory buffer; tiles that the hardware addresses by their absolute
    shared address (wgmma's 128-byte swizzle repeats every 1024 bytes) need
    the buffer itself aligned as their offsets are. The conversion records
    that alignment as `tilemega.shared_alignment` on the gpu.module; after
    `convert-gpu-to-nvvm`, this pass sets it on the buffer's
    `llvm.mlir.global` (`.extern .shared .align N` in the PTX). Modules
    without the attribute are left alone.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def MarkTensorMapParams
    : Pass<"tilemega-mark-tensor-map-params", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Pass the kernels' TMA tensor maps by value as grid constants";
  let description = [{
    `convert-tile-to-gpu` gives a kernel with `tile.bulk_copy` ops one
    `!llvm.ptr` parameter per tensor map after its own, listed by index in
    the kernel's `tilemega.tensor_map_params` attribute. The TMA unit reads a
    CUtensorMap in kernel-parameter space, so after `convert-gpu-to-nvvm`
    this pass makes each of those parameters of the `llvm.func` a 128-byte
    by-value one (`llvm.byval = !llvm.array<128 x i8>`, `llvm.align = 64`,
    `nvvm.grid_constant`): `.param .align 64 .b8 name[128]` in the PTX,
    whose address the copies take in place. (`gpu.func` refuses these
    attributes and `convert-gpu-to-nvvm` would drop them: hence a pass of
    its own after the conversion.)
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect"];
}

def ConvertMegaToGPU : Pass<"convert-mega-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Turn a scheduled mega.graph into one persistent kernel";
  let description = [{
    Replaces every scheduled `mega.graph` (after `mega-schedule`) by one tile
    function of the same name whose `tile.kernel` is the persistent kernel:
    `workers` worker CTAs, plus one scheduler CTA when the graph has a JIT
    queue. The tile bodies of the tasks are cloned into it, one copy per
    (body, units per task) pair in an `scf.index_switch` whose cases share
    shared memory (`tile.exclusive_group`); the tile pipeline then lowers
    them like any kernel ("the same passes").

    The kernel takes the graph's arguments followed by `mega_tables`,
    `mega_events`, `mega_state` and `mega_timeline` (docs/mega.md) and runs:

    * **Workers.** Thread 0 picks the next entry: the JIT entry of the
      worker's ticket once the scheduler published it, else the next one of
      the worker's AOT list once every event it waits on has fired (an
      acquire load of the counter against `trigger * (epoch + 1)`), else,
      holding no ticket, it draws one (an atomic add on the queue's head;
      the ticket is the JIT-list position it will run). A worker never
      blocks on its ticket, so AOT progress never waits on the JIT queue.
      A block barrier hands the entry to all threads, which run the body with
      the block index set to each of the instance's units; a barrier, then
      thread 0 signals the entry's events (`mega.signal`: a release
      increment). Waiting is bounded by a `%globaltimer` watchdog: past
      `watchdog-ms`, thread 0 records the entry, the event and the counter in
      `mega_state`, raises the abort flag that stops every other CTA, and the
      worker exits.
    * **Prefetch.** Before waiting for its next AOT entry (and the
      `prefetch-depth - 1` after it), thread 0 issues
      `cp.async.bulk.prefetch.L2` for the entry's read-only inputs (ranges
      of graph arguments no task writes, typically weights; ranges of at
      most `prefetch-bytes`), so that DRAM latency overlaps the wait, and
      only for tasks whose awaited stages are all estimated cheaper than
      their own (behind a heavier stage the prefetch competes with it for
      DRAM). Off by default: on the H200 decode step it still cost 1.4 %.
    * **Streamed units.** With `stream-units` (off by default: no faster
      on the H100, 1.095 against 1.098 ms/token on the Llama-3.2-1B
      generation, 2026-12-05), a case whose task runs several units
      marks its loop over them `tile.stream_units`: `tile-pipeline` then
      keeps one ring of stages across the units (the next unit's first
      copies go out during the current unit's last iterations), so the
      pipeline does not drain and refill at every unit (the LM head's
      tasks run 8 units each on the Llama-3.2-1B step).
    * **Early loads.** With `early-loads` (on by default: 1.100 against
      1.179 ms/token on the Llama-3.2-1B generation, H100, 2026-12-05)
      and no JIT queue,
      thread 0 picks its next AOT entry without waiting for it; the CTA
      enters the entry's case, where a `tile.prefetch_point` comes before
      thread 0's wait (same watchdog) and the body runs once the events
      fired. Every `tile.copy` of the body whose source (through views) is a
      graph argument no task writes (footprints; a task without one writes
      all its arguments) is marked `tile.early`, so `tile-pipeline` issues
      the prologue of its pipelined loop at the prefetch point: a task's
      first weight tiles are in flight while its inputs are still being
      computed elsewhere. Only the activation reads wait. A body that marks
      `tile.early` itself on a copy of a tensor some task writes is an
      error naming the writer (it would read data from before it ran).
    * **Two barriers an entry.** With early loads every thread reads its
      next AOT entry from the worker's records in shared memory (no
      hand-over barrier, no global read): the entry's closing barrier has
      freed the shared memory, thread 0 signals the finished entry's events
      (a device-scope fence and an add) while the other threads already
      issue the next entry's early loads, and the wait's barrier hands its
      verdict to the CTA. The wait reads `%globaltimer` only after its
      first miss.
    * **Scheduler CTA.** Every warp checks 32 JIT entries at a time, in
      order (warp w the window 32 w ahead of the head): each lane checks
      one entry's events and a ballot finds the run of ready entries at the
      head of the warp's window; thread 0 joins the windows' runs and
      publishes the whole run by advancing the queue's tail with one
      release store (bounded by the same watchdog). A worker runs its
      ticket's entry once the ticket is below the published tail.
    * **The protocol's steps are ops** of the mega dialect, each with its
      ordering in its name (`mega.poll`, `mega.peek`, `mega.signal`,
      `mega.claim`, `mega.arrive`, `mega.publish`, `mega.post`, `mega.raise_flag`,
      `mega.fence`, `mega.watchdog_expired`, `mega.prefetch_l2`), lowered
      with the tile pipeline's LLVM conversion to device-scope LLVM atomics,
      fences and NVVM ops: no inline assembly.
    * **Epochs.** Events are never reset; the last CTA to finish resets the
      JIT ring and increments the epoch, so the next launch needs no host
      work.

    With `timeline`, thread 0 records each entry's start and end
    `%globaltimer`, its CTA and SM in `mega_timeline`. The launch metadata
    goes to the function attribute `tilemega.mega`, which
    `convert-tile-to-gpu` passes on to the artifact.

    A graph needs all its CTAs resident at once: more than `max-ctas` CTAs
    (by default the SM count of `chip`, 132 on sm_90a) is an error.
  }];
  let options = [
    Option<"timeline", "timeline", "bool", "false",
           "Record per-entry %globaltimer timestamps">,
    Option<"watchdogMs", "watchdog-ms", "int64_t", "2000",
           "Longest wait on one event before the kernel gives up (ms)">,
    Option<"chip", "chip", "std::string", "\"sm_90a\"",
           "Target GPU (its SM count bounds the resident CTAs)">,
    Option<"maxCtas", "max-ctas", "int64_t", "0",
           "CTAs that can be resident at once (0: the SM count of chip)">,
    Option<"prefetchBytes", "prefetch-bytes", "int64_t", "0",
           "Bytes of an entry's read-only inputs prefetched into L2 while "
           "it waits (0: none)">,
    Option<"prefetchDepth", "prefetch-depth", "int64_t", "1",
           "How many of a worker's next AOT entries are prefetched">,
    Option<"streamUnits", "stream-units", "bool", "false",
           "Mark each task's loop over its units tile.stream_units, so that "
           "tile-pipeline streams the units' copies through one ring of "
           "stages (the next unit's first copies under the current unit's "
           "last iterations)">,
    Option<"earlyLoads", "early-loads", "bool", "true",
           "In graphs without a JIT queue, wait for an entry's events inside "
           "its case, after a tile.prefetch_point, and mark its copies of "
           "tensors no task writes tile.early">,
  ];
  let dependentDialects = [
    "::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
    "::mlir::memref::MemRefDialect", "::mlir::arith::ArithDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::tilemega::tile::TileDialect",
    "::mlir::vector::VectorDialect",
    // %globaltimer, %smid and vote.sync next to the protocol's mega ops.
    "::mlir::NVVM::NVVMDialect"
  ];
}

def VerifyNVPTXAddressSpaces
    : Pass<"tilemega-verify-nvptx-address-spaces", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Reject address spaces the NVPTX backend cannot emit";
  let description = [{
    Before PTX is emitted, every `llvm.mlir.global` of the gpu.module must
    live in an address space NVPTX has for globals (0 generic, 1 global,
    3 shared, 4 const, 5 local) and every pointer an op uses or defines in
    one NVPTX knows (also 6 tensor, 7 shared::cluster, 101 param). Anything
    else is a diagnostic at the op instead of an abort inside LLVM.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def VerifyLLVMTranslatable
    : Pass<"tilemega-verify-llvm-translatable", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Reject LLVM dialect IR that the translation to LLVM IR aborts on";
  let description = [{
    The LLVM dialect's verifiers accept three things the translation to
    LLVM IR or the NVPTX backend then aborts the process on (all found by
    scripts/fuzz in gpu.modules given to tilemega-opt): a type that is no
    LLVM type inside an LLVM one (`!llvm.array<4 x index>`, as a global's
    type or any type an LLVM op uses, defines or holds in an attribute), an
    `alignment` that is not a power of two of at most 2^32 bytes, LLVM's
    largest, and a value of a vector type larger than one thread's
    registers (the chip's registers per thread x 32 bits; a
    `vector<2147483648xf32>` argument overflowed the calling convention's
    alignment bitfield; a global's type is exempt, memory holds it). This
    check turns each into a diagnostic at the op, before PTX is emitted.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def RecordAlignedBarriers
    : Pass<"tilemega-record-aligned-barriers", "::mlir::ModuleOp"> {
  let summary = "Record how many aligned CTA barriers the gpu.modules hand to LLVM";
  let description = [{
    Counts the aligned CTA barriers in the LLVM dialect code of every
    gpu.module (`nvvm.barrier0`, `nvvm.barrier`, `nvvm.barrier.arrive`, and
    the bar.sync / bar.red / bar.arrive / barrier.*.aligned statements of
    `llvm.inline_asm` strings: `countAlignedBarrierInstructions`, the rule
    tilemega.compile applies to the PTX) and stores the sum as the module's
    `tilemega.aligned_barriers` (i64). Every thread of a CTA must execute
    the same aligned barrier; LLVM's optimiser may not make one
    control-dependent on a per-thread value, yet it did (unswitching a loop
    on a per-thread condition that was loop-invariant: the first form of
    the claim loop, which hung on the GPU). tilemega.compile compares the
    count with the PTX's and refuses a kernel whose PTX has more.
  }];
}

#endif // TILEMEGA_CONVERSION_PASSES_TD
