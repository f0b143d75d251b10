//===- tilemega-opt.cpp - the TileMega optimizer driver ---------------------===//
//
// mlir-opt with the tile and mega dialects, our passes and pipelines, and the
// upstream pieces of the NVIDIA GPU lowering. The input is checked for the
// constructs the pinned MLIR parser aborts on (ParserHazards.h) before it is
// parsed, so they get a diagnostic instead of a crash.
//
//===----------------------------------------------------------------------===//

#include "tilemega/InitAll.h"
#include "tilemega/Support/ParserHazards.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  DialectRegistry registry;
  tilemega::registerAllTileMegaDialects(registry);
  tilemega::registerAllTileMegaPassesAndPipelines();
  auto [inputFilename, outputFilename] = registerAndParseCLIOptions(
      argc, argv, "TileMega optimizer driver\n", registry);

  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  // Modes that read no input: the upstream driver handles them.
  if (config.shouldShowDialects() || config.shouldListPasses())
    return asMainReturnCode(
        MlirOptMain(argc, argv, inputFilename, outputFilename, registry));

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFilename, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (std::optional<tilemega::ParserHazard> hazard =
          tilemega::findParserHazard(input->getBuffer())) {
    llvm::SourceMgr sources;
    const char *at = input->getBufferStart() + hazard->offset;
    sources.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
    sources.PrintMessage(llvm::errs(), llvm::SMLoc::getFromPointer(at),
                         llvm::SourceMgr::DK_Error, hazard->message);
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (failed(MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
