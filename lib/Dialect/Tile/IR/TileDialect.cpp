//===- TileDialect.cpp - tile dialect registration -------------------------===//

#include "tilemega/Dialect/Tile/IR/TileDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::tilemega::tile;

#include "tilemega/Dialect/Tile/IR/TileOpsDialect.cpp.inc"

void TileDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "tilemega/Dialect/Tile/IR/TileOps.cpp.inc"
      >();
  registerAttributes();
}

Scope mlir::tilemega::tile::getScope(MemRefType type) {
  Attribute space = type.getMemorySpace();
  if (!space)
    return Scope::Global;
  if (isa<FragmentScopeAttr>(space))
    return Scope::Fragment;
  if (auto gpuSpace = dyn_cast<gpu::AddressSpaceAttr>(space)) {
    switch (gpuSpace.getValue()) {
    case gpu::AddressSpace::Global:
      return Scope::Global;
    case gpu::AddressSpace::Workgroup:
      return Scope::Shared;
    default:
      return Scope::Unknown;
    }
  }
  return Scope::Unknown;
}

StringRef mlir::tilemega::tile::stringifyScope(Scope scope) {
  switch (scope) {
  case Scope::Global:
    return "global";
  case Scope::Shared:
    return "shared";
  case Scope::Fragment:
    return "fragment";
  case Scope::Unknown:
    return "unknown";
  }
  llvm_unreachable("unhandled scope");
}

LogicalResult mlir::tilemega::tile::verifyInKernel(Operation *op) {
  if (!op->getParentOfType<KernelOp>())
    return op->emitOpError("must be nested in a tile.kernel");
  return success();
}

bool mlir::tilemega::tile::isSharedValue(Value value) {
  auto type = dyn_cast<MemRefType>(value.getType());
  return type && isShared(type);
}

bool mlir::tilemega::tile::isFragmentValue(Value value) {
  auto type = dyn_cast<MemRefType>(value.getType());
  return type && isFragment(type);
}

std::optional<MemRefAccess> mlir::tilemega::tile::getMemRefAccess(Operation *op) {
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return MemRefAccess{load.getMemRef(), load.getIndices()};
  if (auto store = dyn_cast<memref::StoreOp>(op))
    return MemRefAccess{store.getMemRef(), store.getIndices()};
  return std::nullopt;
}
