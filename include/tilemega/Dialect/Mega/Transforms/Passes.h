//===- Passes.h - mega dialect transforms -----------------------*- C++ -*-===//

#ifndef TILEMEGA_DIALECT_MEGA_TRANSFORMS_PASSES_H
#define TILEMEGA_DIALECT_MEGA_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "tilemega/Dialect/Mega/IR/MegaDialect.h"

namespace mlir::tilemega::mega {

#define GEN_PASS_DECL
#include "tilemega/Dialect/Mega/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tilemega/Dialect/Mega/Transforms/Passes.h.inc"

} // namespace mlir::tilemega::mega

#endif // TILEMEGA_DIALECT_MEGA_TRANSFORMS_PASSES_H
