//===- MegaDialect.h - mega dialect -----------------------------*- C++ -*-===//

#ifndef TILEMEGA_DIALECT_MEGA_IR_MEGADIALECT_H
#define TILEMEGA_DIALECT_MEGA_IR_MEGADIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tilemega/Dialect/Tile/IR/TileDialect.h"

#include "tilemega/Dialect/Mega/IR/MegaOpsDialect.h.inc"
#include "tilemega/Dialect/Mega/IR/MegaEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "tilemega/Dialect/Mega/IR/MegaAttrs.h.inc"

namespace mlir::tilemega::mega {

/// The rule every runtime-protocol op's word obeys: one element of a global
/// memref (the CTAs of a persistent kernel share nothing else), named by
/// one index per dimension.
LogicalResult verifyProtocolWord(Operation *op, MemRefType memory, size_t indices);

/// Trait of the runtime-protocol ops (ODS `Mega_ProtocolWord`): checks the
/// word an op with `getMemory()` and `getIndices()` accesses.
template <typename ConcreteType>
class ProtocolWord : public OpTrait::TraitBase<ConcreteType, ProtocolWord> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    auto concrete = cast<ConcreteType>(op);
    return verifyProtocolWord(op, concrete.getMemory().getType(),
                              concrete.getIndices().size());
  }
};

} // namespace mlir::tilemega::mega

#define GET_OP_CLASSES
#include "tilemega/Dialect/Mega/IR/MegaOps.h.inc"

namespace mlir::tilemega::mega {

/// The tile.kernel ops directly in the body of a tile function. A well-formed
/// tile function has exactly one.
SmallVector<tile::KernelOp> getTileKernels(func::FuncOp func);

/// The one tile.kernel of a tile function, or null if it has none or several.
tile::KernelOp getTileKernel(func::FuncOp func);

/// True for the types a persistent kernel's argument table can hold: a
/// kernel tensor (its address) or a kernel scalar of at most 64 bits (its
/// bits).
bool isGraphArgType(Type type);

/// What the diagnostics say graph arguments must be.
inline constexpr llvm::StringLiteral kGraphArgRule =
    "a persistent kernel reaches its graph arguments through its argument "
    "table, which holds global, statically shaped, row-major memrefs of "
    "f16, bf16, f32, f64 or i8-i64 (their addresses) and scalars of those "
    "types or index (their bits)";

/// The most ranks (GPUs of one node, through NVLink) a graph may span.
inline constexpr int64_t kMaxRanks = 8;

/// The number of blocks of a tile.kernel (the product of its grid), or
/// std::nullopt if its grid is missing, empty or has a size below 1.
std::optional<int64_t> getNumBlocks(tile::KernelOp kernel);

} // namespace mlir::tilemega::mega

#endif // TILEMEGA_DIALECT_MEGA_IR_MEGADIALECT_H
