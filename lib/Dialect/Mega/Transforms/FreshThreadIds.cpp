//===- FreshThreadIds.cpp - per-body thread index reads --------------------===//
//
// The persistent kernel's task bodies each read the thread index themselves
// (mega.thread_index), so that LLVM keeps each body's per-thread address
// arithmetic inside its case instead of hoisting all of it before the
// worker loop, where it stayed live across every body.
//
//===----------------------------------------------------------------------===//

#include "tilemega/Dialect/Mega/IR/MegaDialect.h"
#include "tilemega/Dialect/Mega/Transforms/Passes.h"
#include "tilemega/Dialect/Tile/IR/TileDialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::tilemega::mega {
#define GEN_PASS_DEF_MEGAFRESHTHREADIDS
#include "tilemega/Dialect/Mega/Transforms/Passes.h.inc"
} // namespace mlir::tilemega::mega

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::mega;

namespace {

struct MegaFreshThreadIdsPass
    : public mega::impl::MegaFreshThreadIdsBase<MegaFreshThreadIdsPass> {
  void runOnOperation() override {
    SmallVector<scf::IndexSwitchOp> switches;
    getOperation().walk([&](scf::IndexSwitchOp op) {
      if (op->hasAttr(tile::TileDialect::getExclusiveCasesAttrName()))
        switches.push_back(op);
    });
    for (scf::IndexSwitchOp op : switches)
      for (Region &region : op.getCaseRegions())
        freshen(region);
  }

  /// The uses of `gpu.thread_id x` in `region` take a thread index read at
  /// its start.
  static void freshen(Region &region) {
    Block &block = region.front();
    Value fresh;
    region.walk([&](Operation *user) {
      for (OpOperand &use : user->getOpOperands()) {
        auto tid = use.get().getDefiningOp<gpu::ThreadIdOp>();
        if (!tid || tid.getDimension() != gpu::Dimension::x)
          continue;
        if (!fresh) {
          OpBuilder b(&block, block.begin());
          fresh = ThreadIndexOp::create(b, tid.getLoc(), b.getIndexType());
        }
        use.set(fresh);
      }
    });
  }
};

} // namespace
