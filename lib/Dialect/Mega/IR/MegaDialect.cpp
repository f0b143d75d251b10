//===- MegaDialect.cpp - mega dialect registration -------------------------===//

#include "tilemega/Dialect/Mega/IR/MegaDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::mega;

#include "tilemega/Dialect/Mega/IR/MegaOpsDialect.cpp.inc"
#include "tilemega/Dialect/Mega/IR/MegaEnums.cpp.inc"

// `units F to L` of #mega.access, absent for the default (all units).
static ParseResult parseUnitRange(AsmParser &parser, int64_t &first,
                                  int64_t &last) {
  first = 0;
  last = -1;
  if (failed(parser.parseOptionalKeyword("units")))
    return success();
  if (parser.parseInteger(first) || parser.parseKeyword("to") ||
      parser.parseInteger(last))
    return failure();
  return success();
}

static void printUnitRange(AsmPrinter &printer, int64_t first, int64_t last) {
  if (first == 0 && last == -1)
    return;
  printer << " units " << first << " to " << last;
}

#define GET_ATTRDEF_CLASSES
#include "tilemega/Dialect/Mega/IR/MegaAttrs.cpp.inc"

void MegaDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "tilemega/Dialect/Mega/IR/MegaOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tilemega/Dialect/Mega/IR/MegaAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Tile function helpers
//===----------------------------------------------------------------------===//

// These run inside the verifier of a graph, possibly while (or before) the
// tile function itself is verified on another thread, so they read only
// attributes and regions that are known to exist and never assume the
// function or its kernel is valid.

SmallVector<tile::KernelOp> mlir::tilemega::mega::getTileKernels(func::FuncOp func) {
  SmallVector<tile::KernelOp> kernels;
  for (Region &region : func->getRegions())
    for (Block &block : region)
      for (auto kernel : block.getOps<tile::KernelOp>())
        kernels.push_back(kernel);
  return kernels;
}

tile::KernelOp mlir::tilemega::mega::getTileKernel(func::FuncOp func) {
  SmallVector<tile::KernelOp> kernels = getTileKernels(func);
  return kernels.size() == 1 ? kernels.front() : tile::KernelOp();
}

std::optional<int64_t> mlir::tilemega::mega::getNumBlocks(tile::KernelOp kernel) {
  auto grid = kernel->getAttrOfType<DenseI64ArrayAttr>(
      kernel.getGridAttrName());
  if (!grid || grid.empty())
    return std::nullopt;
  int64_t blocks = 1;
  for (int64_t size : grid.asArrayRef()) {
    if (size < 1 || llvm::MulOverflow(blocks, size, blocks))
      return std::nullopt;
  }
  return blocks;
}
