//===- TileToGPU.cpp - the convert-tile-to-gpu pass -------------------------===//

#include "tilemega/Conversion/TileToGPU/TileToGPU.h"

#include "TileToGPUInternal.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::tilemega {
#define GEN_PASS_DEF_CONVERTTILETOGPU
#include "tilemega/Conversion/Passes.h.inc"
} // namespace mlir::tilemega

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile_to_gpu;

namespace {

struct ConvertTileToGPUPass
    : public tilemega::impl::ConvertTileToGPUBase<ConvertTileToGPUPass> {
  using ConvertTileToGPUBase::ConvertTileToGPUBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    DenseMap<Operation *, KernelLoweringState> states;
    if (failed(outlineTileKernels(module, states, wgmma, tma)))
      return signalPassFailure();

    for (auto &[op, state] : states) {
      auto func = cast<gpu::GPUFuncOp>(op);
      if (state.producer)
        splitWarpSpecializedKernel(func, state);
      insertSharedMemoryBarriers(func, state);
      if (failed(lowerKernelBody(func, state)))
        return signalPassFailure();
      if (state.producer)
        nameConsumerBarriers(func, state);
    }
  }

  LogicalResult lowerKernelBody(gpu::GPUFuncOp func,
                                KernelLoweringState &state) {
    MLIRContext *ctx = func.getContext();
    // A fragment becomes each thread's share of it: a small private array
    // (sized by its layout, so the type leaves the size open) that LLVM
    // promotes to registers.
    TypeConverter converter;
    converter.addConversion([](Type type) { return type; });
    converter.addConversion([](MemRefType type) -> Type {
      if (!tile::isFragment(type))
        return type;
      return MemRefType::get({ShapedType::kDynamic}, type.getElementType());
    });

    ConversionTarget target(*ctx);
    target.addIllegalDialect<tile::TileDialect>();
    // The lowered form of a register-A wgmma (TileToLLVM lowers it).
    target.addLegalOp<tile::WgmmaRegisterAOp, tile::WgmmaFenceRegistersOp,
                      tile::WgmmaWaitRegistersOp>();
    target.addLegalDialect<arith::ArithDialect, gpu::GPUDialect,
                           math::MathDialect, memref::MemRefDialect,
                           scf::SCFDialect, vector::VectorDialect>();
    auto noFragmentOperand = [](Operation *op) {
      return llvm::none_of(op->getOperandTypes(), [](Type t) {
        auto memref = dyn_cast<MemRefType>(t);
        return memref && tile::isFragment(memref);
      });
    };
    target.markUnknownOpDynamicallyLegal(noFragmentOperand);
    target.addDynamicallyLegalOp<memref::LoadOp, memref::StoreOp>(
        noFragmentOperand);

    RewritePatternSet patterns(ctx);
    populateDataMovementPatterns(patterns, converter, state);
    populateComputePatterns(patterns, converter, state);
    populateAsyncCopyPatterns(patterns, converter, state);
    populateBulkCopyPatterns(patterns, converter, state);
    populateReducePatterns(patterns, converter, state);
    populateBlockAtomicPatterns(patterns, converter, state);
    populateMmaGemmPatterns(patterns, converter, state);
    populateWgmmaGemmPatterns(patterns, converter, state);
    return applyPartialConversion(func, target, std::move(patterns));
  }
};

} // namespace
