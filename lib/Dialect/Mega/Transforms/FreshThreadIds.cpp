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
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

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
  using MegaFreshThreadIdsBase::MegaFreshThreadIdsBase;

  void runOnOperation() override {
    SmallVector<scf::IndexSwitchOp> switches;
    SmallVector<scf::WhileOp> claimLoops;
    getOperation().walk([&](Operation *op) {
      if (auto sw = dyn_cast<scf::IndexSwitchOp>(op);
          sw && sw->hasAttr(tile::TileDialect::getExclusiveCasesAttrName()))
        switches.push_back(sw);
      if (auto loop = dyn_cast<scf::WhileOp>(op);
          loop && loop->hasAttr(MegaDialect::getClaimLoopAttrName()))
        claimLoops.push_back(loop);
    });
    if (cases)
      for (scf::IndexSwitchOp op : switches)
        for (Region &region : op.getCaseRegions())
          freshen(region);
    for (scf::WhileOp loop : claimLoops)
      for (Region *region : {&loop.getBefore(), &loop.getAfter()})
        freshenInLoop(loop, *region);
  }

  /// A thread index: gpu.thread_id x, or a read of ours.
  static bool isThreadIndex(Value v) {
    if (auto tid = v.getDefiningOp<gpu::ThreadIdOp>())
      return tid.getDimension() == gpu::Dimension::x;
    return v.getDefiningOp<ThreadIndexOp>() != nullptr;
  }

  /// Whether `v`, defined outside `loop`, is computed from a thread index
  /// by side-effect-free ops without regions (memoised in `memo`).
  static bool fromThreadIndex(Value v, scf::WhileOp loop,
                              DenseMap<Value, bool> &memo) {
    if (isThreadIndex(v))
      return true;
    auto it = memo.find(v);
    if (it != memo.end())
      return it->second;
    Operation *def = v.getDefiningOp();
    bool result = false;
    memo[v] = false;   // cycles (none in SSA outside loops) read as no
    if (def && !loop->isAncestor(def) && def->getNumRegions() == 0 &&
        isMemoryEffectFree(def))
      result = llvm::any_of(def->getOperands(), [&](Value operand) {
        return fromThreadIndex(operand, loop, memo);
      });
    memo[v] = result;
    return result;
  }

  /// The uses in `region` (of the claim loop `loop`) of values computed
  /// from a thread index outside the loop take copies computed at the
  /// region's start from a thread index read there.
  static void freshenInLoop(scf::WhileOp loop, Region &region) {
    Block &block = region.front();
    OpBuilder b(&block, block.begin());
    Value fresh;
    DenseMap<Value, bool> memo;
    IRMapping copies;
    // A copy of `v` at the region's start (its operands' copies first).
    std::function<Value(Value)> copyOf = [&](Value v) -> Value {
      if (Value done = copies.lookupOrNull(v))
        return done;
      if (isThreadIndex(v)) {
        if (!fresh)
          fresh = ThreadIndexOp::create(b, v.getLoc(), b.getIndexType());
        Value id = fresh;
        if (v.getType() != id.getType())
          id = arith::IndexCastOp::create(b, v.getLoc(), v.getType(), id);
        copies.map(v, id);
        return id;
      }
      Operation *def = v.getDefiningOp();
      for (Value operand : def->getOperands())
        if (fromThreadIndex(operand, loop, memo))
          copyOf(operand);
      Operation *copy = b.clone(*def, copies);
      for (auto [old, now] : llvm::zip(def->getResults(), copy->getResults()))
        copies.map(old, now);
      return copies.lookup(v);
    };
    SmallVector<OpOperand *> uses;
    region.walk([&](Operation *user) {
      for (OpOperand &use : user->getOpOperands()) {
        Value v = use.get();
        bool outside = !v.getParentRegion() || !region.isAncestor(v.getParentRegion());
        if ((outside || isThreadIndex(v)) && fromThreadIndex(v, loop, memo))
          uses.push_back(&use);
      }
    });
    for (OpOperand *use : uses)
      use->set(copyOf(use->get()));
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
