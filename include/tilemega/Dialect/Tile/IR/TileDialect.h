//===- TileDialect.h - tile dialect -----------------------------*- C++ -*-===//

#ifndef TILEMEGA_DIALECT_TILE_IR_TILEDIALECT_H
#define TILEMEGA_DIALECT_TILE_IR_TILEDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "tilemega/Dialect/Tile/IR/TileOpsDialect.h.inc"
#include "tilemega/Dialect/Tile/IR/TileEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "tilemega/Dialect/Tile/IR/TileAttrs.h.inc"

namespace mlir::tilemega::tile {

/// The memory scope of a tile, read off its memref memory space.
enum class Scope { Global, Shared, Fragment, Unknown };

Scope getScope(MemRefType type);
inline bool isGlobal(MemRefType t) { return getScope(t) == Scope::Global; }
inline bool isShared(MemRefType t) { return getScope(t) == Scope::Shared; }
inline bool isFragment(MemRefType t) { return getScope(t) == Scope::Fragment; }
StringRef stringifyScope(Scope scope);

/// True for memref values in the shared / fragment scope.
bool isSharedValue(Value value);
bool isFragmentValue(Value value);

/// The memref and indices a memref.load or memref.store accesses.
struct MemRefAccess {
  Value memref;
  ValueRange indices;
};
std::optional<MemRefAccess> getMemRefAccess(Operation *op);

/// Verifies that an op sits somewhere inside a tile.kernel body.
template <typename ConcreteType>
class InKernel : public OpTrait::TraitBase<ConcreteType, InKernel> {
public:
  static LogicalResult verifyTrait(Operation *op);
};

/// Shared implementation of the InKernel trait.
LogicalResult verifyInKernel(Operation *op);

template <typename ConcreteType>
LogicalResult InKernel<ConcreteType>::verifyTrait(Operation *op) {
  return verifyInKernel(op);
}

} // namespace mlir::tilemega::tile

#define GET_OP_CLASSES
#include "tilemega/Dialect/Tile/IR/TileOps.h.inc"

namespace mlir::tilemega::tile {

/// When `value` is one stage of a multi-buffered shared tile (what
/// tile-pipeline makes), the alloc it belongs to; null otherwise. A stage is a
/// rank-reducing `memref.subview %buf[%stage, 0, ...] [1, d0, ...] [1, ...]`
/// of a `tile.alloc_shared : memref<N x d0 x ...>`: a contiguous row-major
/// tile whose layout only carries the stage's offset. Tile ops accept it like
/// the tile itself, and it is swizzled like the alloc, as a tile of its own.
AllocSharedOp getMultiBufferedAlloc(Value value);

} // namespace mlir::tilemega::tile

#endif // TILEMEGA_DIALECT_TILE_IR_TILEDIALECT_H
