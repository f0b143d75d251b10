//===- InferLayouts.cpp - assign fragment and parallel layouts -------------===//

#include "tilemega/Dialect/Tile/IR/TileLayouts.h"
#include "tilemega/Dialect/Tile/Transforms/Passes.h"

#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::tilemega::tile {
#define GEN_PASS_DEF_TILEINFERLAYOUTS
#include "tilemega/Dialect/Tile/Transforms/Passes.h.inc"
} // namespace mlir::tilemega::tile

using namespace mlir;
using namespace mlir::tilemega::tile;

namespace {

/// Fragments a parallel body touches through memref.load / memref.store.
static SmallVector<AllocFragmentOp> getTouchedFragments(ParallelOp parallel) {
  SmallVector<AllocFragmentOp> result;
  parallel.getBody().walk([&](Operation *op) {
    Value memref;
    if (auto load = dyn_cast<memref::LoadOp>(op))
      memref = load.getMemRef();
    else if (auto store = dyn_cast<memref::StoreOp>(op))
      memref = store.getMemRef();
    if (auto alloc = memref ? memref.getDefiningOp<AllocFragmentOp>() : nullptr)
      if (!llvm::is_contained(result, alloc))
        result.push_back(alloc);
  });
  return result;
}

static std::string formatShape(ArrayRef<int64_t> shape) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(shape, os);
  return s + "]";
}

struct TileInferLayoutsPass
    : public mlir::tilemega::tile::impl::TileInferLayoutsBase<TileInferLayoutsPass> {
  void runOnOperation() override {
    getOperation().walk([&](KernelOp kernel) {
      if (failed(inferKernel(kernel)))
        signalPassFailure();
    });
  }

  LogicalResult inferKernel(KernelOp kernel) {
    MLIRContext *ctx = kernel.getContext();
    int64_t threads = kernel.getThreads();

    // Fragments touched by one parallel must share a layout: group them.
    llvm::EquivalenceClasses<Operation *> groups;
    SmallVector<ParallelOp> parallels;
    kernel.walk([&](AllocFragmentOp alloc) { groups.insert(alloc); });
    kernel.walk([&](ParallelOp parallel) {
      parallels.push_back(parallel);
      SmallVector<AllocFragmentOp> touched = getTouchedFragments(parallel);
      for (size_t i = 1; i < touched.size(); ++i)
        groups.unionSets(touched[0], touched[i]);
    });

    // One layout per group: the user's annotation if any, else the default
    // for the group's shape and its widest element type.
    DenseMap<Operation *, BlockedLayoutAttr> leaderLayout;
    DenseMap<Operation *, Operation *> leaderAnnotatedBy;
    DenseMap<Operation *, int64_t> leaderVector;
    for (auto it = groups.begin(); it != groups.end(); ++it) {
      if (!(*it)->isLeader())
        continue;
      Operation *leader = (*it)->getData();
      int64_t maxVec = 16;
      for (auto member = groups.member_begin(**it);
           member != groups.member_end(); ++member) {
        auto alloc = cast<AllocFragmentOp>(*member);
        maxVec = std::min(maxVec,
                          getMaxVectorElems(alloc.getType().getElementType()));
        BlockedLayoutAttr annotated = alloc.getLayoutAttr();
        if (!annotated)
          continue;
        BlockedLayoutAttr &chosen = leaderLayout[leader];
        if (chosen && chosen != annotated) {
          InFlightDiagnostic diag =
              alloc.emitOpError()
              << "layout " << annotated
              << " conflicts with layout " << chosen
              << " of a fragment that shares tile.parallel bodies with it "
                 "(directly or through other fragments)";
          diag.attachNote(leaderAnnotatedBy[leader]->getLoc())
              << "the other fragment is allocated here";
          return failure();
        }
        chosen = annotated;
        leaderAnnotatedBy[leader] = alloc;
      }
      leaderVector[leader] = maxVec;
    }

    for (auto it = groups.begin(); it != groups.end(); ++it) {
      auto alloc = cast<AllocFragmentOp>((*it)->getData());
      Operation *leader = groups.getLeaderValue(alloc);
      BlockedLayoutAttr layout = leaderLayout.lookup(leader);
      ArrayRef<int64_t> shape = alloc.getType().getShape();
      if (!layout) {
        layout = getDefaultBlockedLayout(ctx, shape, leaderVector[leader],
                                         threads);
        leaderLayout[leader] = layout;
      }
      if (!layoutCoversExactly(layout, shape)) {
        SmallVector<int64_t> chunk;
        for (unsigned d = 0; d < layout.getRank(); ++d)
          chunk.push_back(layout.getChunkExtent(d));
        return alloc.emitOpError()
               << "cannot spread a fragment of shape " << formatShape(shape)
               << " evenly over " << threads
               << " threads: its layout covers tiles of "
               << formatShape(chunk)
               << "; use a larger fragment or fewer threads";
      }
      alloc.setLayoutAttr(layout);
    }

    for (ParallelOp parallel : parallels) {
      if (parallel.getLayoutAttr())
        continue;
      SmallVector<AllocFragmentOp> touched = getTouchedFragments(parallel);
      BlockedLayoutAttr layout =
          touched.empty()
              ? getDefaultBlockedLayout(ctx, parallel.getExtents(),
                                        /*maxVectorElems=*/1, threads)
              : touched.front().getLayoutAttr();
      parallel.setLayoutAttr(layout);
    }
    return success();
  }
};

} // namespace
