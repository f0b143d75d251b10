//===- TileSharedMemory.cpp - live ranges of a kernel's shared tiles -------===//

#include "tilemega/Dialect/Tile/IR/TileSharedMemory.h"

#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile;

SharedLiveness::SharedLiveness(Block &body, bool persistent)
    : body(body), shares(!persistent) {
  for (Operation &op : body) {
    positions[&op] = static_cast<int64_t>(ops.size());
    ops.push_back(&op);
  }
  body.walk([&](Operation *op) {
    if (getExclusiveGroupAttr(op))
      shares = false;
  });
}

int64_t SharedLiveness::positionOf(Operation *op) const {
  Operation *top = body.findAncestorOpInBlock(*op);
  return top ? positions.lookup(top) : 0;
}

/// Whether `use` is an mbarrier operand (the words must stay mbarriers).
static bool isMbarrierUse(OpOperand &use) {
  Operation *user = use.getOwner();
  if (auto copy = dyn_cast<BulkCopyOp>(user))
    return use.get() == copy.getBarriers();
  return isa<MbarrierInitOp, MbarrierArriveExpectTxOp, MbarrierWaitOp>(user);
}

LiveRange SharedLiveness::of(Operation *op) const {
  if (!shares)
    return LiveRange();
  auto alloc = dyn_cast<AllocSharedOp>(op);
  if (!alloc) {
    int64_t at = positionOf(op);
    return {at, at};
  }
  LiveRange range{std::numeric_limits<int64_t>::max(), -1};
  SmallVector<Value> worklist = {alloc.getResult()};
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    for (OpOperand &use : value.getUses()) {
      if (isMbarrierUse(use))
        return LiveRange();
      Operation *user = use.getOwner();
      int64_t at = positionOf(user);
      range.first = std::min(range.first, at);
      range.last = std::max(range.last, at);
      if (auto view = dyn_cast<ViewLikeOpInterface>(user))
        if (view.getViewSource() == value)
          llvm::append_range(worklist, user->getResults());
    }
  }
  if (range.last < 0) // Unused: kept apart, as written.
    return LiveRange();
  return range;
}
