//===- BulkCopyPatterns.cpp - TMA bulk copies and mbarriers ----------------===//
//
// What tile-pipeline's TMA schedule emits, lowered to NVVM:
//
//   tile.mbarrier_init %bars          thread 0: mbarrier.init(bar k, 1) for
//                                     every k; fence.mbarrier_init
//   tile.mbarrier_arrive_expect_tx    thread 0: mbarrier.arrive.expect_tx
//   tile.bulk_copy                    thread 0: cp.async.bulk.tensor (the
//                                     box at the source offsets, innermost
//                                     coordinate first, through the kernel's
//                                     tensor-map parameter) completing on
//                                     the barrier; a tile split into column
//                                     blocks takes one box per block
//                                     (tile::chooseBulkCopy); the
//                                     destination is named in the
//                                     shared::cluster window (which holds
//                                     the CTA's own), the form PTX 8.0 has
//   tile.bulk_copy {linear}           the first warp, a row of the box a
//                                     lane: mbarrier.expect_tx +
//                                     cp.async.bulk (1-D, no tensor map);
//                                     zeros for a row outside the tensor
//   tile.mbarrier_arrive_expect_tx 0  thread 0: mbarrier.arrive (after
//                                     linear copies)
//   tile.mbarrier_wait                every thread: mbarrier.try_wait.parity
//                                     until the phase completes
//   tile.mbarrier_arrive              each warp's first lane: mbarrier.arrive
//                                     (with `cluster`: on the barrier of
//                                     every block of the cluster: mapa +
//                                     mbarrier.arrive.shared::cluster)
//   tile.bulk_copy {multicast = N}    thread 0: its block's N-th of the
//                                     box's pieces, each into every block
//                                     of the cluster (.multicast::cluster)
//   tile.cluster_sync                 barrier.cluster.arrive + wait
//
// In a region one thread runs (a warp-specialised kernel's producer,
// WarpSpecialize.cpp) the thread-0 guards are left out.
//
// An mbarrier is the i64 word k of its shared buffer; its shared address is
// the buffer's (as wgmma's descriptors take it) plus 8 k. Coordinates out of
// the tensor are TMA's to zero-fill, so tiles that overhang need no masks.
//
//===----------------------------------------------------------------------===//

#include "TileToGPUInternal.h"

#include "tilemega/Dialect/Tile/IR/TileBulkCopies.h"
#include "tilemega/Dialect/Tile/IR/TileTensorCores.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile_to_gpu;

namespace {

/// Suspend-time hint of one try_wait, in ns (CUTLASS uses the same).
constexpr int32_t kTryWaitTicks = 0x989680;

/// The shared-space address (`!llvm.ptr<3>`, or with `cluster` the same
/// address in the shared::cluster window, `!llvm.ptr<7>`, which contains the
/// CTA's own window) of element `index` of the lowered shared buffer
/// `buffer` (null index: its first element).
Value sharedPointer(OpBuilder &b, Location loc, Value buffer, Value index,
                    bool cluster = false) {
  auto shared = LLVM::LLVMPointerType::get(
      b.getContext(),
      static_cast<unsigned>(cluster ? NVVM::NVVMMemorySpace::SharedCluster
                                    : NVVM::NVVMMemorySpace::Shared));
  return LLVM::IntToPtrOp::create(b, loc, shared,
                                  sharedAddress(b, loc, buffer, index));
}

/// Emits `body` in the block's first thread only (as it stands, inside a
/// region one thread runs: a warp-specialised kernel's producer).
void inFirstThread(Operation *op, OpBuilder &b, Location loc,
                   function_ref<void(OpBuilder &)> body) {
  if (inSingleThreadRegion(op)) {
    body(b);
    return;
  }
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  emitGuarded(b, loc,
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                                    arith::ConstantIndexOp::create(b, loc, 0)),
              body);
}

Value i32(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, v, 32);
}

/// Emits `body(b, lane, lanes)` in the block's first warp (`lanes` threads
/// of a smaller block), or in the one thread of a single-thread region
/// (lane 0 of 1). The warp synchronises before the body (a barrier thread
/// 0 initialised just before is seen by every lane) and after it (thread
/// 0's arrival that follows comes after every lane's expect_tx).
void inFirstWarp(Operation *op, OpBuilder &b, Location loc, int64_t threads,
                 function_ref<void(OpBuilder &, Value, int64_t)> body) {
  if (inSingleThreadRegion(op)) {
    body(b, arith::ConstantIndexOp::create(b, loc, 0), 1);
    return;
  }
  int64_t lanes = std::clamp<int64_t>(threads, 1, 32);
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  emitGuarded(b, loc,
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, tid,
                                    arith::ConstantIndexOp::create(b, loc, lanes)),
              [&](OpBuilder &wb) {
                Value mask = i32(wb, loc, lanes == 32 ? -1 : (1 << lanes) - 1);
                NVVM::SyncWarpOp::create(wb, loc, mask);
                body(wb, tid, lanes);
                NVVM::SyncWarpOp::create(wb, loc, mask);
              });
}

/// The boxes of one bulk copy of a tile whose global box starts at
/// `offsets` (`choice`: one box, or one per column block of the tile): box
/// j's TMA coordinates (element indices, innermost first; j box widths
/// further along the rows) and its first element in the tile (null for
/// box 0), handed to `emit`.
void forEachBox(OpBuilder &b, Location loc, const tile::BulkCopyChoice &choice,
                ArrayRef<OpFoldResult> offsets, int64_t tileElems,
                function_ref<void(ArrayRef<Value>, Value)> emit) {
  int64_t boxElems = tileElems / choice.boxes;
  for (int64_t j = 0; j < choice.boxes; ++j) {
    SmallVector<Value> coordinates;
    for (OpFoldResult offset : llvm::reverse(offsets)) {
      Value index = getValueOrCreateConstantIndexOp(b, loc, offset);
      if (coordinates.empty() && j > 0)
        index = arith::AddIOp::create(
            b, loc, index,
            arith::ConstantIndexOp::create(b, loc, j * choice.box.back()));
      coordinates.push_back(
          arith::IndexCastOp::create(b, loc, b.getI32Type(), index));
    }
    Value first =
        j == 0 ? Value() : arith::ConstantIndexOp::create(b, loc, j * boxElems);
    emit(coordinates, first);
  }
}

/// This block's share of a multicast copy split into `choice.pieces()`
/// pieces over a cluster of `multicast` blocks: pieces rank * k .. rank * k
/// + k - 1 (k = pieces / multicast, rank the block's in its cluster), each
/// piece's TMA coordinates (innermost first) and first element in the tile
/// handed to `emit` (choice's rowSplit: piece p is column block p /
/// rowSplit, rows (p % rowSplit) box[0] on).
void forEachPieceOfBlock(OpBuilder &b, Location loc,
                         const tile::BulkCopyChoice &choice,
                         ArrayRef<OpFoldResult> offsets, int64_t tileElems,
                         int64_t multicast,
                         function_ref<void(ArrayRef<Value>, Value)> emit) {
  auto index = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  int64_t perBlock = choice.pieces() / multicast;
  int64_t pieceElems = tileElems / choice.pieces();
  Value rank = arith::IndexCastUIOp::create(
      b, loc, b.getIndexType(),
      NVVM::ClusterId::create(b, loc, b.getI32Type()));
  Value base = arith::MulIOp::create(b, loc, rank, index(perBlock));
  for (int64_t k = 0; k < perBlock; ++k) {
    Value piece = arith::AddIOp::create(b, loc, base, index(k));
    Value block = arith::DivUIOp::create(b, loc, piece, index(choice.rowSplit));
    Value part = arith::RemUIOp::create(b, loc, piece, index(choice.rowSplit));
    SmallVector<Value> coordinates;
    for (auto [d, offset] : llvm::enumerate(llvm::reverse(offsets))) {
      Value at = getValueOrCreateConstantIndexOp(b, loc, offset);
      if (d == 0)                                  // the column block
        at = arith::AddIOp::create(
            b, loc, at,
            arith::MulIOp::create(b, loc, block, index(choice.box.back())));
      if (d + 1 == offsets.size())                 // the rows' part
        at = arith::AddIOp::create(
            b, loc, at,
            arith::MulIOp::create(b, loc, part, index(choice.box.front())));
      coordinates.push_back(
          arith::IndexCastOp::create(b, loc, b.getI32Type(), at));
    }
    emit(coordinates, arith::MulIOp::create(b, loc, piece, index(pieceElems)));
  }
}

struct ClusterSyncLowering : TileLoweringPattern<tile::ClusterSyncOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::ClusterSyncOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    // Default semantics: arrive releases, wait acquires (the barriers'
    // initialisation is seen by the cluster's other blocks).
    NVVM::ClusterArriveOp::create(rewriter, loc, UnitAttr());
    NVVM::ClusterWaitOp::create(rewriter, loc, UnitAttr());
    rewriter.eraseOp(op);
    return success();
  }
};

struct MbarrierInitLowering : TileLoweringPattern<tile::MbarrierInitOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::MbarrierInitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    int64_t count = op.getBarriers().getType().getDimSize(0);
    int64_t arrivals = op.getCountAttr().getInt();
    inFirstThread(op, rewriter, loc, [&](OpBuilder &b) {
      for (int64_t k = 0; k < count; ++k)
        NVVM::MBarrierInitOp::create(
            b, loc,
            sharedPointer(b, loc, adaptor.getBarriers(),
                          arith::ConstantIndexOp::create(b, loc, k)),
            i32(b, loc, arrivals), Value());
      // The initialisation is visible to the async proxy (the TMA unit's
      // complete_tx) before any copy signals the barriers.
      NVVM::FenceMbarrierInitOp::create(b, loc);
    });
    rewriter.eraseOp(op);
    return success();
  }
};

struct MbarrierArriveExpectTxLowering
    : TileLoweringPattern<tile::MbarrierArriveExpectTxOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::MbarrierArriveExpectTxOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    int64_t bytes = op.getBytes();
    inFirstThread(op, rewriter, loc, [&](OpBuilder &b) {
      if (bytes == 0) {                 // linear copies expected their own
        NVVM::MBarrierArriveOp::create(
            b, loc, Type(),
            sharedPointer(b, loc, adaptor.getBarriers(), adaptor.getIndex()),
            Value(), NVVM::MemScopeKind::CTA, /*relaxed=*/false);
        return;
      }
      NVVM::MBarrierArriveExpectTxOp::create(
          b, loc, Type(),
          sharedPointer(b, loc, adaptor.getBarriers(), adaptor.getIndex()),
          i32(b, loc, bytes), NVVM::MemScopeKind::CTA, /*relaxed=*/false,
          Value());
    });
    rewriter.eraseOp(op);
    return success();
  }
};

/// One arrival per warp: its first lane, once the warp reached the op
/// (the warp's earlier shared-memory reads are done; mbarrier.arrive
/// releases them to the waiter).
struct MbarrierArriveLowering : TileLoweringPattern<tile::MbarrierArriveOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::MbarrierArriveOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    NVVM::SyncWarpOp::create(rewriter, loc, i32(rewriter, loc, -1));
    Value lane = NVVM::LaneIdOp::create(rewriter, loc, rewriter.getI32Type());
    emitGuarded(rewriter, loc,
                arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                      lane, i32(rewriter, loc, 0)),
                [&](OpBuilder &b) {
                  Value barrier = sharedPointer(b, loc, adaptor.getBarriers(),
                                                adaptor.getIndex());
                  std::optional<int64_t> cluster = op.getCluster();
                  if (!cluster) {
                    NVVM::MBarrierArriveOp::create(
                        b, loc, Type(), barrier, Value(),
                        NVVM::MemScopeKind::CTA, /*relaxed=*/false);
                    return;
                  }
                  // The same barrier in every block of the cluster (this
                  // one's too). Released at CTA scope, as CUTLASS's cluster
                  // barriers arrive: the warp's reads of the stage (wgmma's,
                  // waited for) are done before the arrival, which is all a
                  // producer's later copy into the stage needs. At cluster
                  // scope (.release.cluster) the same GEMM ran 2.3x slower
                  // (H100, 4096^3: 0.436 against 0.189 ms).
                  auto remote = LLVM::LLVMPointerType::get(
                      b.getContext(), static_cast<unsigned>(
                                          NVVM::NVVMMemorySpace::SharedCluster));
                  for (int64_t rank = 0; rank < *cluster; ++rank)
                    NVVM::MBarrierArriveOp::create(
                        b, loc, Type(),
                        NVVM::MapaOp::create(b, loc, remote, barrier,
                                             i32(b, loc, rank)),
                        Value(), NVVM::MemScopeKind::CTA, /*relaxed=*/false);
                });
    rewriter.eraseOp(op);
    return success();
  }
};

struct MbarrierWaitLowering : TileLoweringPattern<tile::MbarrierWaitOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::MbarrierWaitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value parity = arith::IndexCastUIOp::create(
        rewriter, loc, rewriter.getI32Type(),
        arith::AndIOp::create(rewriter, loc, adaptor.getParity(),
                              arith::ConstantIndexOp::create(rewriter, loc, 1)));
    NVVM::MBarrierTryWaitParityOp::create(
        rewriter, loc,
        sharedPointer(rewriter, loc, adaptor.getBarriers(), adaptor.getIndex()),
        parity, i32(rewriter, loc, kTryWaitTicks));
    rewriter.eraseOp(op);
    return success();
  }
};

/// A `linear` bulk copy: the first warp's lanes, a row each in turn (an
/// scf.for over the box's rows from the lane, step 32), add the row's bytes
/// to the barrier's expected ones and issue one 1-D bulk copy of it (thread
/// 0 alone issued them first: its serial loop held every stage's refill,
/// 2.6x slower over a generation); a row outside the tensor (an outer index past
/// its extent, or the column offset past the row: chooseLinearBulkCopy
/// makes a row wholly in or out) gets zeros from the thread instead, then
/// an async-proxy fence (a later bulk copy into the same bytes comes after
/// them). The arrival that follows the copies releases those zeros to the
/// waiters.
LogicalResult lowerLinearBulkCopy(tile::BulkCopyOp op,
                                  tile::BulkCopyOp::Adaptor adaptor,
                                  ConversionPatternRewriter &rewriter,
                                  int64_t threads) {
  Location loc = op.getLoc();
  MemRefType srcType = op.getSrc().getType(), dstType = op.getDst().getType();
  SmallVector<OpFoldResult> offsets = op.getMixedSrcOffsets();
  tile::LinearBulkCopyChoice choice = tile::chooseLinearBulkCopy(
      srcType, dstType, dstType.getShape(), tile::getSharedSwizzle(op.getDst()),
      offsets);
  if (!choice.ok())
    return op.emitOpError() << "cannot be linear bulk copies: " << choice.whyNot;
  SmallVector<int64_t> strides;
  int64_t unusedOffset;
  (void)srcType.getStridesAndOffset(strides, unusedOffset);
  ArrayRef<int64_t> sizes = dstType.getShape();
  int64_t rank = sizes.size(), inner = sizes.back();
  int64_t elemBytes = dstType.getElementTypeBitWidth() / 8;
  auto index = [&](OpBuilder &b, int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  inFirstWarp(op, rewriter, loc, threads, [&](OpBuilder &b, Value lane,
                                               int64_t lanes) {
    Value barrier =
        sharedPointer(b, loc, adaptor.getBarriers(), adaptor.getIndex());
    auto rows = scf::ForOp::create(b, loc, lane, index(b, choice.rows),
                                   index(b, lanes));
    OpBuilder rb = OpBuilder::atBlockTerminator(rows.getBody());
    Value row = rows.getInductionVar();
    // The row's indices in the box (innermost outer dimension fastest) and
    // in the tensor, its first element there, and whether it is inside.
    SmallVector<Value> boxIndices(rank), srcIndices(rank);
    boxIndices[rank - 1] = index(rb, 0);
    Value rest = row, inBounds;
    for (int64_t d = rank - 2; d >= 0; --d) {
      boxIndices[d] = rb.createOrFold<arith::RemUIOp>(loc, rest, index(rb, sizes[d]));
      rest = rb.createOrFold<arith::DivUIOp>(loc, rest, index(rb, sizes[d]));
    }
    Value element = index(rb, 0);
    for (int64_t d = 0; d < rank; ++d) {
      Value offset = getValueOrCreateConstantIndexOp(rb, loc, offsets[d]);
      srcIndices[d] = rb.createOrFold<arith::AddIOp>(loc, offset, boxIndices[d]);
      std::optional<int64_t> known = getConstantIntValue(srcIndices[d]);
      if (!known || *known >= srcType.getDimSize(d))
        inBounds = andConditions(
            rb, loc, inBounds,
            arith::CmpIOp::create(rb, loc, arith::CmpIPredicate::ult,
                                  srcIndices[d],
                                  index(rb, srcType.getDimSize(d))));
      element = rb.createOrFold<arith::AddIOp>(
          loc, element,
          rb.createOrFold<arith::MulIOp>(loc, srcIndices[d],
                                         index(rb, strides[d])));
    }
    auto copyRow = [&](OpBuilder &cb) {
      Value bytes = i32(cb, loc, choice.rowBytes);
      NVVM::MBarrierExpectTxOp::create(cb, loc, barrier, bytes,
                                       NVVM::MemScopeKind::CTA);
      Value src = LLVM::IntToPtrOp::create(
          cb, loc,
          LLVM::LLVMPointerType::get(
              cb.getContext(),
              static_cast<unsigned>(NVVM::NVVMMemorySpace::Global)),
          sharedAddress(cb, loc, adaptor.getSrc(), element));
      Value first = arith::MulIOp::create(cb, loc, row, index(cb, inner));
      NVVM::CpAsyncBulkGlobalToSharedClusterOp::create(
          cb, loc,
          sharedPointer(cb, loc, adaptor.getDst(), first, /*cluster=*/true),
          src, barrier, bytes, Value(), Value());
    };
    if (!inBounds) {
      copyRow(rb);
      return;
    }
    auto ifOp = scf::IfOp::create(rb, loc, inBounds, /*withElseRegion=*/true);
    OpBuilder tb = OpBuilder::atBlockTerminator(ifOp.thenBlock());
    copyRow(tb);
    OpBuilder eb = OpBuilder::atBlockTerminator(ifOp.elseBlock());
    int64_t width = std::max<int64_t>(1, 16 / elemBytes);
    auto zeros = arith::ConstantOp::create(
        eb, loc, DenseElementsAttr::get(
                     VectorType::get({width}, dstType.getElementType()),
                     eb.getZeroAttr(dstType.getElementType())));
    auto columns = scf::ForOp::create(eb, loc, index(eb, 0), index(eb, inner),
                                      index(eb, width));
    OpBuilder zb = OpBuilder::atBlockTerminator(columns.getBody());
    SmallVector<Value> at(boxIndices);
    at[rank - 1] = columns.getInductionVar();
    vector::StoreOp::create(zb, loc, zeros, adaptor.getDst(), at);
    NVVM::FenceProxyOp::create(
        eb, loc, NVVM::ProxyKind::async_shared,
        NVVM::SharedSpaceAttr::get(eb.getContext(),
                                   NVVM::SharedSpace::shared_cta));
  });
  rewriter.eraseOp(op);
  return success();
}

struct BulkCopyLowering : TileLoweringPattern<tile::BulkCopyOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::BulkCopyOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (op.getLinear())
      return lowerLinearBulkCopy(op, adaptor, rewriter, state.numThreads);
    Value tensorMap = state.tensorMaps.lookup(op);
    if (!tensorMap)
      return op.emitOpError("has no tensor-map parameter (the kernel was not "
                            "outlined by convert-tile-to-gpu)");
    Location loc = op.getLoc();
    SmallVector<OpFoldResult> offsets = op.getMixedSrcOffsets();
    MemRefType dstType = op.getDst().getType();
    int64_t multicast = op.getMulticast().value_or(1);
    tile::BulkCopyChoice choice = tile::chooseBulkCopy(
        op.getSrc().getType(), dstType, dstType.getShape(),
        tile::getSharedSwizzle(op.getDst()), multicast);
    if (!choice.ok())
      return op.emitOpError() << "cannot be one TMA box: " << choice.whyNot;
    auto issue = [&](OpBuilder &b, ArrayRef<Value> coordinates, Value first,
                     Value mask) {
      NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
          b, loc,
          sharedPointer(b, loc, adaptor.getDst(), first, /*cluster=*/true),
          tensorMap, coordinates,
          sharedPointer(b, loc, adaptor.getBarriers(), adaptor.getIndex()),
          ValueRange(), mask, Value(), NVVM::TMALoadMode::TILE,
          /*isCTAOnly=*/false, NVVM::CTAGroupKindAttr(), Value());
    };
    inFirstThread(op, rewriter, loc, [&](OpBuilder &b) {
      if (multicast == 1) {
        forEachBox(b, loc, choice, offsets, dstType.getNumElements(),
                   [&](ArrayRef<Value> coordinates, Value first) {
                     issue(b, coordinates, first, Value());
                   });
        return;
      }
      Value mask = LLVM::ConstantOp::create(
          b, loc, b.getI16Type(),
          b.getI16IntegerAttr((int64_t(1) << multicast) - 1));
      forEachPieceOfBlock(b, loc, choice, offsets, dstType.getNumElements(),
                          multicast,
                          [&](ArrayRef<Value> coordinates, Value first) {
                            issue(b, coordinates, first, mask);
                          });
    });
    rewriter.eraseOp(op);
    return success();
  }
};

/// A tile.copy the outlining chose as a TMA bulk store (chooseBulkStore in
/// OutlineKernels.cpp): thread 0 stores the tile box by box (one per column
/// block) through the destination's tensor map, commits the bulk group and
/// waits until the tile has been read (`wait_group.read 0`), so the barrier
/// before the tile's next writer also orders that read; the global writes
/// complete on their own (out-of-bounds parts of a box are not written).
/// Benefit 4: ahead of the thread copies.
struct BulkStoreLowering : TileLoweringPattern<tile::CopyOp> {
  BulkStoreLowering(TypeConverter &converter, MLIRContext *ctx,
                    KernelLoweringState &state)
      : TileLoweringPattern(converter, ctx, state, /*benefit=*/4) {}
  LogicalResult
  matchAndRewrite(tile::CopyOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!state.bulkStores.contains(op))
      return rewriter.notifyMatchFailure(op, "not a bulk store");
    Value tensorMap = state.tensorMaps.lookup(op);
    Location loc = op.getLoc();
    MemRefType srcType = op.getSrc().getType();
    tile::BulkCopyChoice choice = tile::chooseBulkCopy(
        op.getDst().getType(), srcType, srcType.getShape(),
        tile::getSharedSwizzle(op.getSrc()));
    if (!choice.ok())
      return op.emitOpError() << "cannot be one TMA box: " << choice.whyNot;
    SmallVector<OpFoldResult> offsets = op.getMixedDstOffsets();
    inFirstThread(op, rewriter, loc, [&](OpBuilder &b) {
      forEachBox(b, loc, choice, offsets, srcType.getNumElements(),
                 [&](ArrayRef<Value> coordinates, Value first) {
                   NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp::create(
                       b, loc, tensorMap,
                       sharedPointer(b, loc, adaptor.getSrc(), first),
                       coordinates, Value(), NVVM::TMAStoreMode::TILE, Value());
                 });
      NVVM::CpAsyncBulkCommitGroupOp::create(b, loc);
      NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, 0, b.getUnitAttr());
    });
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void tile_to_gpu::populateBulkCopyPatterns(RewritePatternSet &patterns,
                                           TypeConverter &converter,
                                           KernelLoweringState &state) {
  patterns.add<ClusterSyncLowering, MbarrierInitLowering,
               MbarrierArriveExpectTxLowering,
               MbarrierArriveLowering, MbarrierWaitLowering, BulkCopyLowering,
               BulkStoreLowering>(
      converter, patterns.getContext(), state);
}
