//===- InitAll.h - register TileMega and what it builds on ------*- C++ -*-===//
//
// One place that both tilemega-opt and the Python module call, so the two
// always see the same dialects, passes and pipelines.
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_INITALL_H
#define TILEMEGA_INITALL_H

namespace mlir {
class DialectRegistry;
namespace tilemega {

/// Our dialects, the upstream dialects our lowering produces or consumes,
/// their LLVM-conversion interfaces and LLVM IR translations, and the NVVM
/// target that serialises to PTX.
void registerAllTileMegaDialects(DialectRegistry &registry);

/// Our passes and pipelines plus the upstream passes the GPU lowering uses.
void registerAllTileMegaPassesAndPipelines();

} // namespace tilemega
} // namespace mlir

#endif // TILEMEGA_INITALL_H
