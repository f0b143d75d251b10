//===- TileAsyncGemms.cpp - the rule for asynchronous tile.gemm -----------===//

#include "tilemega/Dialect/Tile/IR/TileAsyncGemms.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile;

namespace {

/// True when `op` (not its nested ops) may write `value`.
bool mayWrite(Operation *op, Value value) {
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return !isPure(op);
  SmallVector<MemoryEffects::EffectInstance> list;
  effects.getEffects(list);
  return llvm::any_of(list, [&](const MemoryEffects::EffectInstance &e) {
    return isa<MemoryEffects::Write>(e.getEffect()) &&
           (!e.getValue() || e.getValue() == value);
  });
}

/// The accumulators `wait` completes when `pending` lists the gemms in
/// flight, oldest first: those of the groups older than its `pending`
/// newest that no newer group still writes, each with the last completed
/// gemm into it; the completed groups leave `pending`.
llvm::MapVector<Value, GemmOp> complete(WgmmaWaitOp wait,
                                        SmallVectorImpl<GemmOp> &pending) {
  int64_t keep = std::min<int64_t>(wait.getPendingAttr().getInt(),
                                   static_cast<int64_t>(pending.size()));
  auto done = ArrayRef<GemmOp>(pending).drop_back(keep);
  auto still = ArrayRef<GemmOp>(pending).take_back(keep);
  llvm::MapVector<Value, GemmOp> ready;
  for (GemmOp gemm : done)
    if (llvm::none_of(still, [&](GemmOp g) { return g.getC() == gemm.getC(); }))
      ready[gemm.getC()] = gemm;
  pending.erase(pending.begin(), pending.begin() + done.size());
  return ready;
}

/// The in-flight gemm whose operands `op` (or an op nested in it) touches
/// against the rule, with what it did; null when none.
std::pair<GemmOp, StringRef> conflict(Operation *op, ArrayRef<GemmOp> pending) {
  std::pair<GemmOp, StringRef> found{};
  op->walk([&](Operation *inner) {
    for (Value operand : inner->getOperands())
      for (GemmOp gemm : pending) {
        if (operand == gemm.getC()) {
          found = {gemm, "uses the accumulator"};
          return WalkResult::interrupt();
        }
        if ((operand == gemm.getA() || operand == gemm.getB()) &&
            mayWrite(inner, operand)) {
          found = {gemm, "writes an operand"};
          return WalkResult::interrupt();
        }
      }
    return WalkResult::advance();
  });
  return found;
}

LogicalResult verifyBlock(Block &block) {
  SmallVector<GemmOp> pending;
  for (Operation &op : block) {
    if (auto wait = dyn_cast<WgmmaWaitOp>(op)) {
      llvm::MapVector<Value, GemmOp> ready = complete(wait, pending);
      for (auto [i, v] : llvm::enumerate(wait.getFragments()))
        if (!ready.count(v))
          return wait.emitOpError()
                 << "lists fragment #" << i
                 << ", which no gemm it completes accumulates into (with "
                 << wait.getPendingAttr().getInt()
                 << " group(s) left pending it completes " << ready.size()
                 << " accumulator(s))";
      for (auto [v, gemm] : ready)
        if (!llvm::is_contained(wait.getFragments(), v)) {
          InFlightDiagnostic d = wait.emitOpError()
                                 << "must list every accumulator it completes, "
                                    "but not the one of the asynchronous "
                                    "tile.gemm at ";
          d << gemm.getLoc();
          return d;
        }
      continue;
    }
    auto [gemm, what] = conflict(&op, pending);
    auto asyncGemm = dyn_cast<GemmOp>(op);
    bool chains = asyncGemm && asyncGemm.getAsync() && gemm &&
                  gemm.getC() == asyncGemm.getC() &&
                  gemm.getC() != asyncGemm.getA() &&
                  gemm.getC() != asyncGemm.getB();
    if (gemm && !chains) {
      InFlightDiagnostic d = op.emitOpError()
                             << what << " of an asynchronous tile.gemm still "
                                        "in flight (";
      d << gemm.getLoc() << "); wait for it first (tile.wgmma_wait, T.wait_wgmma)";
      return d;
    }
    for (Region &region : op.getRegions())
      for (Block &inner : region)
        if (failed(verifyBlock(inner)))
          return failure();
    if (asyncGemm && asyncGemm.getAsync())
      pending.push_back(asyncGemm);
  }
  if (!pending.empty())
    return pending.front().emitOpError()
           << "is asynchronous and still in flight at the end of its block; "
              "wait for it (tile.wgmma_wait pending 0, T.wait_wgmma(0)) "
              "before the block ends";
  return success();
}

} // namespace

LogicalResult tile::verifyAsyncGemms(Region &region) {
  for (Block &block : region)
    if (failed(verifyBlock(block)))
      return failure();
  return success();
}
