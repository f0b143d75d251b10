//===- TileToGPU.h - tile to gpu conversion ---------------------*- C++ -*-===//

#ifndef TILEMEGA_CONVERSION_TILETOGPU_TILETOGPU_H
#define TILEMEGA_CONVERSION_TILETOGPU_TILETOGPU_H

#include "mlir/Pass/Pass.h"

namespace mlir {
class ModuleOp;
namespace tilemega {

#define GEN_PASS_DECL_CONVERTTILETOGPU
#include "tilemega/Conversion/Passes.h.inc"

} // namespace tilemega
} // namespace mlir

#endif // TILEMEGA_CONVERSION_TILETOGPU_TILETOGPU_H
