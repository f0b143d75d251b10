//===- tilemega-opt.cpp - the TileMega optimizer driver ---------------------===//
//
// mlir-opt with the tile and mega dialects, our passes and pipelines, and the
// upstream pieces of the NVIDIA GPU lowering.
//
//===----------------------------------------------------------------------===//

#include "tilemega/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::tilemega::registerAllTileMegaDialects(registry);
  mlir::tilemega::registerAllTileMegaPassesAndPipelines();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "TileMega optimizer driver\n", registry));
}
