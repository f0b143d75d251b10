//===- Passes.h - tile dialect transforms -----------------------*- C++ -*-===//

#ifndef TILEMEGA_DIALECT_TILE_TRANSFORMS_PASSES_H
#define TILEMEGA_DIALECT_TILE_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "tilemega/Dialect/Tile/IR/TileDialect.h"

namespace mlir::tilemega::tile {

#define GEN_PASS_DECL
#include "tilemega/Dialect/Tile/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tilemega/Dialect/Tile/Transforms/Passes.h.inc"

} // namespace mlir::tilemega::tile

#endif // TILEMEGA_DIALECT_TILE_TRANSFORMS_PASSES_H
