//===- InsertBarriers.cpp - order shared-memory hand-overs -----------------===//
//
// Threads write shared memory for other threads to read. Every tile op that
// writes shared memory is fenced by a block barrier before it (earlier readers
// are done: write-after-read) and after it (the data is complete:
// read-after-write). This is conservative but always correct. Async copies
// (`tile.copy async`) are left alone: tile-pipeline, which issues them, places
// the cp.async waits and the barriers that go with them.
//
// wgmma (and a TMA bulk store) reads through the async proxy: a tile threads wrote
// must be fenced (fence.proxy.async) by its writers before the barrier that
// hands it over. The barrier after a write to a wgmma operand tile gets that
// fence, and a wgmma gemm reached from such a barrier (or from another wgmma
// gemm that fenced) with no shared-memory write in between is "published":
// its lowering fences nothing again (flash attention's P tile, and the
// second half of a K = 128 product, would otherwise pay a barrier each).
//
//===----------------------------------------------------------------------===//

#include "TileToGPUInternal.h"

#include "tilemega/Dialect/Tile/IR/TileTensorCores.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile_to_gpu;
using tile::isSharedValue;

static bool writesShared(Operation *op) {
  // An async copy has only been issued when the op is done: a barrier after
  // it orders nothing. Whoever issues it places the wait and the barrier.
  if (auto copy = dyn_cast<tile::CopyOp>(op))
    return !copy.getAsync() && isSharedValue(copy.getDst());
  if (auto fill = dyn_cast<tile::FillOp>(op))
    return isSharedValue(fill.getDst());
  if (auto clear = dyn_cast<tile::ClearOp>(op))
    return isSharedValue(clear.getDst());
  if (auto reduce = dyn_cast<tile::ReduceOp>(op))
    return isSharedValue(reduce.getDst());
  if (auto parallel = dyn_cast<tile::ParallelOp>(op)) {
    WalkResult walk = parallel.getBody().walk([](memref::StoreOp store) {
      return isSharedValue(store.getMemRef()) ? WalkResult::interrupt()
                                              : WalkResult::advance();
    });
    return walk.wasInterrupted();
  }
  return false;
}

tile::AllocSharedOp KernelLoweringState::sharedAlloc(Value tile) {
  if (auto alloc = tile.getDefiningOp<tile::AllocSharedOp>())
    return alloc;
  return tile::getMultiBufferedAlloc(tile);
}

bool KernelLoweringState::onlyTmaWrites(Value tile) const {
  tile::AllocSharedOp alloc = sharedAlloc(tile);
  return alloc && bulkCopyTiles.contains(alloc);
}

static bool isWgmmaGemm(Operation *op, const KernelLoweringState &state) {
  auto gemm = dyn_cast<tile::GemmOp>(op);
  return gemm && state.wgmma &&
         tile::chooseWgmma(gemm, getFragmentLayout(gemm.getC()))
             .usesTensorCores();
}

static Value writtenTile(Operation *op) {
  if (auto copy = dyn_cast<tile::CopyOp>(op))
    return copy.getDst();
  if (auto fill = dyn_cast<tile::FillOp>(op))
    return fill.getDst();
  if (auto clear = dyn_cast<tile::ClearOp>(op))
    return clear.getDst();
  if (auto reduce = dyn_cast<tile::ReduceOp>(op))
    return reduce.getDst();
  return nullptr;
}

static bool isProxyFence(Operation *op) {
  auto fence = dyn_cast_or_null<NVVM::FenceProxyOp>(op);
  return fence && fence.getKind() == NVVM::ProxyKind::async_shared;
}

/// Whether `op` (between a hand-over and a wgmma gemm) leaves shared memory
/// unwritten: a tile op that writes none, or an op with no regions and no
/// memory effects.
static bool leavesSharedAlone(Operation *op) {
  if (writesShared(op) || isa<tile::BulkCopyOp>(op))
    return false;
  if (auto copy = dyn_cast<tile::CopyOp>(op))
    return !copy.getAsync();
  if (isa<tile::ParallelOp, tile::ReduceOp, tile::FillOp, tile::ClearOp>(op))
    return true;
  return op->getNumRegions() == 0 && isMemoryEffectFree(op);
}

void tile_to_gpu::insertSharedMemoryBarriers(gpu::GPUFuncOp func,
                                             KernelLoweringState &state) {
  // Tiles the async proxy reads: wgmma operands and bulk-store sources.
  llvm::SmallPtrSet<Operation *, 8> wgmmaTiles(state.bulkStoreTiles.begin(),
                                               state.bulkStoreTiles.end());
  func.walk([&](tile::GemmOp gemm) {
    if (isWgmmaGemm(gemm, state))
      for (Value operand : {gemm.getA(), gemm.getB()})
        if (tile::AllocSharedOp alloc =
                KernelLoweringState::sharedAlloc(operand))
          wgmmaTiles.insert(alloc);
  });
  SmallVector<Operation *> writers;
  func.walk([&](Operation *op) {
    if (writesShared(op))
      writers.push_back(op);
  });
  OpBuilder b(func.getContext());
  for (Operation *op : writers) {
    Operation *prev = op->getPrevNode();
    if (!prev || !isa<gpu::BarrierOp>(prev)) {
      b.setInsertionPoint(op);
      gpu::BarrierOp::create(b, op->getLoc());
    }
    Operation *next = op->getNextNode();
    if (!next || !isa<gpu::BarrierOp>(next)) {
      b.setInsertionPointAfter(op);
      next = gpu::BarrierOp::create(b, op->getLoc());
    }
    Value tile = writtenTile(op);
    tile::AllocSharedOp alloc =
        tile ? KernelLoweringState::sharedAlloc(tile) : nullptr;
    if (alloc && wgmmaTiles.contains(alloc) &&
        !isProxyFence(op->getNextNode())) {
      b.setInsertionPoint(next);
      NVVM::FenceProxyOp::create(
          b, op->getLoc(), NVVM::ProxyKind::async_shared,
          NVVM::SharedSpaceAttr::get(b.getContext(),
                                     NVVM::SharedSpace::shared_cta));
    }
  }

  // In program order, so that an earlier gemm is decided first.
  func.walk([&](tile::GemmOp gemm) {
    if (!isWgmmaGemm(gemm, state))
      return;
    for (Operation *prev = gemm->getPrevNode(); prev;
         prev = prev->getPrevNode()) {
      if (isa<gpu::BarrierOp>(prev) && isProxyFence(prev->getPrevNode())) {
        state.publishedGemms.insert(gemm);
        return;
      }
      if (isWgmmaGemm(prev, state)) {
        auto earlier = cast<tile::GemmOp>(prev);
        bool fenced = state.publishedGemms.contains(earlier) ||
                      !state.onlyTmaWrites(earlier.getA()) ||
                      !state.onlyTmaWrites(earlier.getB());
        if (fenced)
          state.publishedGemms.insert(gemm);
        return;
      }
      if (!leavesSharedAlone(prev))
        return;
    }
  });
}
