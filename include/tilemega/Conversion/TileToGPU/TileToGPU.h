//===- TileToGPU.h - tile to gpu conversion ---------------------*- C++ -*-===//

#ifndef TILEMEGA_CONVERSION_TILETOGPU_TILETOGPU_H
#define TILEMEGA_CONVERSION_TILETOGPU_TILETOGPU_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class ModuleOp;
namespace tilemega {

#define GEN_PASS_DECL_CONVERTTILETOGPU
#define GEN_PASS_DECL_ALIGNDYNAMICSHAREDMEMORY
#define GEN_PASS_DECL_MARKTENSORMAPPARAMS
#define GEN_PASS_DECL_VERIFYNVPTXADDRESSSPACES
#define GEN_PASS_DECL_VERIFYLLVMTRANSLATABLE
#define GEN_PASS_DECL_RECORDALIGNEDBARRIERS
#include "tilemega/Conversion/Passes.h.inc"

} // namespace tilemega
} // namespace mlir

#endif // TILEMEGA_CONVERSION_TILETOGPU_TILETOGPU_H
