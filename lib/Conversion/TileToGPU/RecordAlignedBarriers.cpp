//===- RecordAlignedBarriers.cpp - Aligned barriers handed to LLVM --------===//
//
// LLVM's optimiser runs after us (gpu-module-to-binary at O3). It once
// split a loop between thread 0 and the other threads, each copy with its
// own bar.sync, and the CTA hung outside every watchdog. Counting the
// aligned barriers before and after LLVM turns that into a compile error.
//
//===----------------------------------------------------------------------===//

#include "tilemega/Conversion/Passes.h"
#include "tilemega/Dialect/Tile/IR/TileDialect.h"
#include "tilemega/Support/AlignedBarriers.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir::tilemega {
#define GEN_PASS_DEF_RECORDALIGNEDBARRIERS
#include "tilemega/Conversion/Passes.h.inc"
} // namespace mlir::tilemega

using namespace mlir;
using namespace mlir::tilemega;

/// The aligned CTA barriers `op` becomes in PTX.
static unsigned alignedBarriersOf(Operation *op) {
  if (isa<NVVM::Barrier0Op, NVVM::BarrierOp, NVVM::BarrierArriveOp>(op))
    return 1;
  if (auto asmOp = dyn_cast<LLVM::InlineAsmOp>(op))
    return countAlignedBarrierInstructions(asmOp.getAsmString());
  return 0;
}

namespace {
struct RecordAlignedBarriersPass
    : tilemega::impl::RecordAlignedBarriersBase<RecordAlignedBarriersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t count = 0;
    module.walk([&](gpu::GPUModuleOp gpuModule) {
      gpuModule.walk([&](Operation *op) { count += alignedBarriersOf(op); });
    });
    module->setAttr(tile::TileDialect::getAlignedBarriersAttrName(),
                    IntegerAttr::get(IntegerType::get(&getContext(), 64), count));
    markAllAnalysesPreserved();
  }
};
} // namespace
