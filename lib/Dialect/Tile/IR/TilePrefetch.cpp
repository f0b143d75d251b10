//===- TilePrefetch.cpp - where a loop's early copies may start -----------===//

#include "tilemega/Dialect/Tile/IR/TilePrefetch.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;
using namespace mlir::tilemega;

tile::PrefetchPointOp tile::findPrefetchPoint(Operation *loop) {
  for (Operation *at = loop; at && !isa<KernelOp>(at); at = at->getParentOp())
    for (Operation *prev = at->getPrevNode(); prev; prev = prev->getPrevNode())
      if (auto point = dyn_cast<PrefetchPointOp>(prev))
        return point;
  return {};
}

Value tile::viewedBuffer(Value value) {
  while (auto view = value.getDefiningOp<ViewLikeOpInterface>())
    value = view.getViewSource();
  return value;
}

/// Whether `op` itself (not its regions) may write memory viewing `base`.
static bool writes(Operation *op, Value base) {
  if (auto copy = dyn_cast<tile::CopyOp>(op))
    return tile::viewedBuffer(copy.getDst()) == base;
  if (auto atomic = dyn_cast<tile::AtomicOp>(op))
    return tile::viewedBuffer(atomic.getDst()) == base;
  if (auto store = dyn_cast<memref::StoreOp>(op))
    return tile::viewedBuffer(store.getMemref()) == base;
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return false;
  SmallVector<MemoryEffects::EffectInstance> list;
  effects.getEffects(list);
  return llvm::any_of(list, [&](const MemoryEffects::EffectInstance &e) {
    return isa<MemoryEffects::Write>(e.getEffect()) && e.getValue() &&
           tile::viewedBuffer(e.getValue()) == base;
  });
}

Operation *tile::firstWriteIn(Operation *op, Value source) {
  Value base = viewedBuffer(source);
  Operation *found = nullptr;
  op->walk<WalkOrder::PreOrder>([&](Operation *inner) {
    if (!writes(inner, base))
      return WalkResult::advance();
    found = inner;
    return WalkResult::interrupt();
  });
  return found;
}

Operation *tile::writeBetween(PrefetchPointOp point, Operation *loop,
                              Value source) {
  Value base = viewedBuffer(source);
  Operation *holder = point->getBlock()->findAncestorOpInBlock(*loop);
  for (Operation *op = point->getNextNode(); op && op != holder;
       op = op->getNextNode())
    if (Operation *found = firstWriteIn(op, base))
      return found;
  // Inside the ops holding the loop, what comes before it runs between the
  // point and the loop too.
  for (Operation *at = loop; at && at != holder; at = at->getParentOp())
    for (Operation *prev = at->getPrevNode(); prev; prev = prev->getPrevNode())
      if (Operation *found = firstWriteIn(prev, base))
        return found;
  return nullptr;
}
