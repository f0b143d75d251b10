//===- Passes.h - TileMega conversions --------------------------*- C++ -*-===//

#ifndef TILEMEGA_CONVERSION_PASSES_H
#define TILEMEGA_CONVERSION_PASSES_H

#include "tilemega/Conversion/MegaToGPU/MegaToGPU.h"
#include "tilemega/Conversion/TileToGPU/TileToGPU.h"

namespace mlir::tilemega {

#define GEN_PASS_REGISTRATION
#include "tilemega/Conversion/Passes.h.inc"

} // namespace mlir::tilemega

#endif // TILEMEGA_CONVERSION_PASSES_H
