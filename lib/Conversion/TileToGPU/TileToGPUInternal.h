//===- TileToGPUInternal.h - shared pieces of the tile lowering -*- C++ -*-===//

#ifndef TILEMEGA_LIB_CONVERSION_TILETOGPU_TILETOGPUINTERNAL_H
#define TILEMEGA_LIB_CONVERSION_TILETOGPU_TILETOGPUINTERNAL_H

#include "tilemega/Dialect/Tile/IR/TileBulkCopies.h"
#include "tilemega/Dialect/Tile/IR/TileDialect.h"
#include "tilemega/Dialect/Tile/IR/TileLayouts.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::tilemega::tile_to_gpu {

using tile::BlockedLayoutAttr;
using tile::ThreadOwnership;

/// What the patterns of one kernel share.
struct KernelLoweringState {
  int64_t numThreads = 0;
  /// The kernel has a producer warpgroup (tile.producer) after its
  /// numThreads threads (WarpSpecialize.cpp).
  bool producer = false;
  /// convert-tile-to-gpu's `wgmma` option: the Hopper gemm lowering is on.
  bool wgmma = false;
  /// Byte offset of every tile.alloc_shared in the dynamic shared memory.
  DenseMap<Operation *, int64_t> sharedOffsets;
  /// The tensor-map parameter (an !llvm.ptr argument of the kernel) each
  /// tile.bulk_copy reads its box through.
  DenseMap<Operation *, Value> tensorMaps;
  /// The shared tiles (allocations) only TMA writes: the destinations of the
  /// bulk copies (tile-pipeline gives every pipelined loop its own buffers
  /// and lets nothing else write them).
  llvm::SmallPtrSet<Operation *, 4> bulkCopyTiles;
  /// The tile.copy ops that become TMA bulk stores (their tensor maps are in
  /// `tensorMaps`), and the shared tiles they read: threads' writes to
  /// those must be fenced for the async proxy before the hand-over.
  llvm::SmallPtrSet<Operation *, 4> bulkStores;
  llvm::SmallPtrSet<Operation *, 4> bulkStoreTiles;
  /// The wgmma gemms whose operand tiles an earlier fence.proxy.async +
  /// barrier already handed to the async proxy, with nothing written to
  /// shared memory since (insertSharedMemoryBarriers): they fence nothing.
  llvm::SmallPtrSet<Operation *, 4> publishedGemms;

  /// The shared tile allocation behind `tile` (a tile or one stage of a
  /// multi-buffered one), or null.
  static tile::AllocSharedOp sharedAlloc(Value tile);
  /// Whether only TMA writes `tile`: its data is async-proxy data already,
  /// visible to each thread once its mbarrier wait returned.
  bool onlyTmaWrites(Value tile) const;
};

/// Base class of the tile lowering patterns: the kernel's state travels along.
template <typename OpTy>
struct TileLoweringPattern : public OpConversionPattern<OpTy> {
  TileLoweringPattern(TypeConverter &converter, MLIRContext *ctx,
                      KernelLoweringState &state, PatternBenefit benefit = 1)
      : OpConversionPattern<OpTy>(converter, ctx, benefit), state(state) {}
  KernelLoweringState &state;
};

/// The layout of a fragment (null when layout inference has not run).
Attribute getFragmentLayout(Value original);

//===- Kernel outlining (OutlineKernels.cpp) ------------------------------===//

/// Moves every func.func holding a tile.kernel into a gpu.func kernel, lays
/// out its shared memory and records the launch metadata on the module.
/// `states` receives one entry per kernel.
LogicalResult
outlineTileKernels(ModuleOp module,
                   DenseMap<Operation *, KernelLoweringState> &states,
                   bool wgmma, bool tma);

/// The gpu.module attribute (i64) holding the alignment its dynamic shared
/// memory needs beyond the default (tilemega-align-dynamic-shared-memory).
inline constexpr llvm::StringLiteral kSharedAlignmentAttrName =
    "tilemega.shared_alignment";

/// The gpu.func / llvm.func attribute listing the kernel's tensor-map
/// parameters (tilemega-mark-tensor-map-params), and their form: a
/// CUtensorMap is 128 bytes, 64-byte aligned.
inline constexpr llvm::StringLiteral kTensorMapParamsAttrName =
    "tilemega.tensor_map_params";
inline constexpr int64_t kTensorMapBytes = 128, kTensorMapAlign = 64;

/// Inserts gpu.barrier around tile ops that write shared memory (with a
/// fence.proxy.async before the barrier after a write to a wgmma operand
/// tile), and records in `state` the wgmma gemms that need no fence of
/// their own.
//===- Warp specialisation (WarpSpecialize.cpp) ---------------------------===//

/// Marks the scf.if whose region one thread runs (the producer's): the
/// thread-0 guards of its bulk copies and mbarrier arrivals are left out.
inline constexpr llvm::StringLiteral kSingleThreadAttrName =
    "tilemega.single_thread";
/// Marks the scf.if that holds the consumers' part of the kernel.
inline constexpr llvm::StringLiteral kConsumersAttrName = "tilemega.consumers";

/// Whether `op` runs in one thread only (inside a kSingleThreadAttrName
/// region).
bool inSingleThreadRegion(Operation *op);

/// A kernel with a tile.producer: everything after it becomes the
/// consumers' branch (threads < numThreads, setmaxnreg.inc) and its region
/// the producer's (the warpgroup after them, setmaxnreg.dec, one thread
/// running it).
void splitWarpSpecializedKernel(gpu::GPUFuncOp func, KernelLoweringState &state);

/// The block barriers in the consumers' branch become named barriers of the
/// consumers' threads (the producer warpgroup has left the kernel).
void nameConsumerBarriers(gpu::GPUFuncOp func, const KernelLoweringState &state);

void insertSharedMemoryBarriers(gpu::GPUFuncOp func,
                                KernelLoweringState &state);

//===- Thread mapping (ThreadMapping.cpp) ---------------------------------===//

/// One run of `width` consecutive (innermost-dimension) elements a thread
/// owns under a layout.
struct OwnedChunk {
  /// Position in the tile, one index per dimension.
  SmallVector<Value> indices;
  /// The static part of `indices` (offsets from the thread's base).
  ArrayRef<int64_t> offsets;
  /// Register slot of the first element in the thread's fragment storage.
  int64_t slot;
  /// i1 that is false when the chunk lies outside the tile (layouts that do
  /// not cover it exactly); null when always inside.
  Value inTile;
};

/// The thread's first index in every dimension under `ownership`.
SmallVector<Value> getThreadBase(OpBuilder &b, Location loc,
                                 const ThreadOwnership &ownership);

/// Calls `fn` for every chunk the current thread owns of a tile of `shape`
/// under a fragment layout. `width` divides the ownership's contiguity.
void forEachOwnedChunk(OpBuilder &b, Location loc,
                       const ThreadOwnership &ownership,
                       ArrayRef<int64_t> shape, int64_t width,
                       function_ref<void(const OwnedChunk &)> fn);

/// The ownership of a tile under a layout that the verifier and layout
/// inference have accepted.
ThreadOwnership getOwnership(Attribute layout, ArrayRef<int64_t> shape);

/// The shared-space byte address (i64) of element `index` of a lowered
/// shared tile (null index: its first element), as wgmma descriptors and
/// mbarrier / bulk-copy pointers take it.
Value sharedAddress(OpBuilder &b, Location loc, Value tile,
                    Value index = Value());

/// Emits `body` under `cond` (directly when `cond` is null).
void emitGuarded(OpBuilder &b, Location loc, Value cond,
                 function_ref<void(OpBuilder &)> body);

/// The largest power of two known to divide `value` (TileBulkCopies.h).
using tile::knownDivisor;

/// i1 AND of `a` and `b` where either may be null (meaning true).
Value andConditions(OpBuilder &b, Location loc, Value a, Value c);

/// Absolute indices `offsets + rel` of a box access.
SmallVector<Value> addOffsets(OpBuilder &b, Location loc,
                              ArrayRef<OpFoldResult> offsets,
                              ArrayRef<Value> rel);

/// i1 that is true when `indices` (with `width` elements from the last) lie
/// inside `type`; null when that is known statically. `dynamicDims` marks the
/// dimensions whose offsets are not constants.
Value boundsCheck(OpBuilder &b, Location loc, MemRefType type,
                  ArrayRef<OpFoldResult> offsets, ArrayRef<Value> indices,
                  ArrayRef<int64_t> sizes);

/// Indices into a shared buffer after its swizzle (unchanged without one).
SmallVector<Value> swizzleIndices(OpBuilder &b, Location loc, Value original,
                                  ArrayRef<Value> indices);
/// The swizzle of a shared buffer (null when it has none).
tile::SwizzleAttr getSwizzle(Value original);

/// Loads `width` consecutive elements (a scalar when width is 1).
Value loadElements(OpBuilder &b, Location loc, Value memref,
                   ArrayRef<Value> indices, int64_t width);
/// Stores `value` (a scalar or a vector) at `indices`.
void storeElements(OpBuilder &b, Location loc, Value value, Value memref,
                   ArrayRef<Value> indices);
/// Converts a scalar or vector of one element type to another.
Value convertElements(OpBuilder &b, Location loc, Value value, Type toElement);

//===- Patterns -----------------------------------------------------------===//

void populateDataMovementPatterns(RewritePatternSet &patterns,
                                  TypeConverter &converter,
                                  KernelLoweringState &state);
void populateComputePatterns(RewritePatternSet &patterns,
                             TypeConverter &converter,
                             KernelLoweringState &state);
/// `tile.copy async` to cp.async (nvgpu.device_async_copy), commit and wait
/// to the NVVM cp.async group ops (AsyncCopyPatterns.cpp).
void populateAsyncCopyPatterns(RewritePatternSet &patterns,
                               TypeConverter &converter,
                               KernelLoweringState &state);
/// tile.bulk_copy to cp.async.bulk.tensor, the mbarrier ops to NVVM's
/// (BulkCopyPatterns.cpp).
void populateBulkCopyPatterns(RewritePatternSet &patterns,
                              TypeConverter &converter,
                              KernelLoweringState &state);
/// tile.block_atomic_add to barrier, thread 0's fenced atomic add, barrier
/// and a shared-word broadcast (BlockAtomicPatterns.cpp).
void populateBlockAtomicPatterns(RewritePatternSet &patterns,
                                 TypeConverter &converter,
                                 KernelLoweringState &state);
void populateReducePatterns(RewritePatternSet &patterns,
                            TypeConverter &converter,
                            KernelLoweringState &state);
/// tile.gemm on tensor cores: ldmatrix + mma.sync m16n8k16 for f16/bf16
/// shared A and B and a #tile.mma accumulator (MmaGemmPatterns.cpp); ahead
/// of the SIMT gemm, which takes what it declines.
void populateMmaGemmPatterns(RewritePatternSet &patterns,
                             TypeConverter &converter,
                             KernelLoweringState &state);
/// tile.gemm on Hopper's wgmma.mma_async, when the `wgmma` option is on and
/// tile::chooseWgmma accepts it (WgmmaGemmPatterns.cpp); ahead of mma.sync.
void populateWgmmaGemmPatterns(RewritePatternSet &patterns,
                               TypeConverter &converter,
                               KernelLoweringState &state);

/// Shared-memory bytes a tile.reduce needs to combine the partial results of
/// warps along the reduced dimension (0 when one warp covers it). Layouts
/// must have been inferred.
int64_t getReduceScratchBytes(tile::ReduceOp reduce);

} // namespace mlir::tilemega::tile_to_gpu

#endif // TILEMEGA_LIB_CONVERSION_TILETOGPU_TILETOGPUINTERNAL_H
