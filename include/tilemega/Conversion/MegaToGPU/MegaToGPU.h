//===- MegaToGPU.h - mega graph to persistent kernel ------------*- C++ -*-===//

#ifndef TILEMEGA_CONVERSION_MEGATOGPU_MEGATOGPU_H
#define TILEMEGA_CONVERSION_MEGATOGPU_MEGATOGPU_H

#include "mlir/Pass/Pass.h"

namespace mlir {
class ModuleOp;
namespace tilemega {

#define GEN_PASS_DECL_CONVERTMEGATOGPU
#include "tilemega/Conversion/Passes.h.inc"

} // namespace tilemega
} // namespace mlir

#endif // TILEMEGA_CONVERSION_MEGATOGPU_MEGATOGPU_H
