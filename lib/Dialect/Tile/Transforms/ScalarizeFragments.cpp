//===- ScalarizeFragments.cpp - one slot per fragment element --------------===//
//
// Splits per-thread fragments (private memref.allocas addressed with
// constant indices only) into rank-0 allocas that mem2reg promotes to SSA
// values. See the pass description in Passes.td for why this runs before
// any block merging.
//
//===----------------------------------------------------------------------===//

#include "tilemega/Dialect/Tile/Transforms/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"

namespace mlir::tilemega::tile {
#define GEN_PASS_DEF_TILESCALARIZEFRAGMENTS
#include "tilemega/Dialect/Tile/Transforms/Passes.h.inc"
} // namespace mlir::tilemega::tile

using namespace mlir;
using namespace mlir::tilemega::tile;

namespace {

/// The row-major element number of constant `indices` into `type`, or
/// nullopt when an index is not a constant in bounds.
std::optional<int64_t> constantElement(MemRefType type, ValueRange indices) {
  int64_t linear = 0;
  for (auto [index, size] : llvm::zip(indices, type.getShape())) {
    APInt value;
    if (!matchPattern(index, m_ConstantInt(&value)))
      return std::nullopt;
    int64_t i = value.getSExtValue();
    if (i < 0 || i >= size)
      return std::nullopt;
    linear = linear * size + i;
  }
  return linear;
}

/// Whether `alloca` is a fragment this pass splits: a private, statically
/// shaped buffer of at most `maxElements` elements used only as the memref
/// of loads and stores at constant indices.
bool isSplittable(memref::AllocaOp alloca, int64_t maxElements) {
  MemRefType type = alloca.getType();
  if (!type.hasStaticShape() || type.getRank() == 0 || type.getMemorySpace() ||
      !type.getLayout().isIdentity() || type.getNumElements() > maxElements)
    return false;
  for (OpOperand &use : alloca->getUses()) {
    Operation *user = use.getOwner();
    if (auto load = dyn_cast<memref::LoadOp>(user)) {
      if (!constantElement(type, load.getIndices()))
        return false;
    } else if (auto store = dyn_cast<memref::StoreOp>(user)) {
      // The fragment must be the address, not the stored value.
      if (store.getValueToStore() == alloca.getResult() ||
          !constantElement(type, store.getIndices()))
        return false;
    } else {
      return false;
    }
  }
  return true;
}

void split(memref::AllocaOp alloca) {
  MemRefType type = alloca.getType();
  OpBuilder b(alloca);
  auto scalarType = MemRefType::get({}, type.getElementType());
  // Slots are made on first use, so elements never touched cost nothing.
  DenseMap<int64_t, Value> slots;
  auto slot = [&](int64_t element) {
    Value &s = slots[element];
    if (!s)
      s = memref::AllocaOp::create(b, alloca.getLoc(), scalarType);
    return s;
  };
  for (OpOperand &use : llvm::make_early_inc_range(alloca->getUses())) {
    Operation *user = use.getOwner();
    if (auto load = dyn_cast<memref::LoadOp>(user)) {
      Value s = slot(*constantElement(type, load.getIndices()));
      load.getMemrefMutable().assign(s);
      load.getIndicesMutable().clear();
    } else {
      auto store = cast<memref::StoreOp>(user);
      Value s = slot(*constantElement(type, store.getIndices()));
      store.getMemrefMutable().assign(s);
      store.getIndicesMutable().clear();
    }
  }
  alloca.erase();
}

struct ScalarizeFragments
    : public mlir::tilemega::tile::impl::TileScalarizeFragmentsBase<ScalarizeFragments> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<memref::AllocaOp> fragments;
    getOperation()->walk([&](memref::AllocaOp alloca) {
      if (isSplittable(alloca, maxElements))
        fragments.push_back(alloca);
    });
    for (memref::AllocaOp alloca : fragments)
      split(alloca);
  }
};

} // namespace
