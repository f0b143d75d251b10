//===- InsertBarriers.cpp - order shared-memory hand-overs -----------------===//
//
// Threads write shared memory for other threads to read. Every tile op that
// writes shared memory is fenced by a block barrier before it (earlier readers
// are done: write-after-read) and after it (the data is complete:
// read-after-write). This is conservative but always correct. Async copies
// (`tile.copy async`) are left alone: tile-pipeline, which issues them, places
// the cp.async waits and the barriers that go with them.
//
//===----------------------------------------------------------------------===//

#include "TileToGPUInternal.h"

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

void tile_to_gpu::insertSharedMemoryBarriers(gpu::GPUFuncOp func) {
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
      gpu::BarrierOp::create(b, op->getLoc());
    }
  }
}
