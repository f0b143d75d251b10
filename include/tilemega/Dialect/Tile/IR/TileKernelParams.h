//===- TileKernelParams.h - how a kernel's parameters are described -*- C++ -*-===//
//
// The artifact describes each tensor a kernel reaches (a kernel parameter,
// or a persistent kernel's graph tensor reached through its argument table)
// by name, role, dtype, shape, strides and alignment; the runtime checks
// bound tensors against it. Both descriptions come from here.
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_DIALECT_TILE_IR_TILEKERNELPARAMS_H
#define TILEMEGA_DIALECT_TILE_IR_TILEKERNELPARAMS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlir::tilemega::tile {

/// The artifact's name for an element type ("bfloat16", "int32", ...), or ""
/// when it has none.
StringRef getDTypeName(Type type);

/// True for the memrefs a kernel can reach in global memory: global,
/// statically shaped, row-major, of an element type with an artifact dtype.
bool isKernelTensorType(MemRefType type);

/// What the diagnostics say kernel tensors must be.
inline constexpr llvm::StringLiteral kKernelTensorRule =
    "kernel tensors must be global, statically shaped, row-major memrefs of "
    "f16, bf16, f32, f64 or i8-i64";

/// The artifact entry of one parameter (a tensor or a scalar).
DictionaryAttr buildParamMetadata(Builder &b, StringRef name, StringAttr role,
                                  Type type);

} // namespace mlir::tilemega::tile

#endif // TILEMEGA_DIALECT_TILE_IR_TILEKERNELPARAMS_H
