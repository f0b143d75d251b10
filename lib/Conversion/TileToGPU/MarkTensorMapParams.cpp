//===- MarkTensorMapParams.cpp - TMA tensor maps as grid constants ---------===//
//
// The kernels' tensor-map parameters (tilemega.tensor_map_params, set by
// convert-tile-to-gpu) become 128-byte by-value grid constants of the
// llvm.func, aligned to 64 bytes: the CUtensorMap the host passes is then
// read by the TMA unit where the launch put it.
//
//===----------------------------------------------------------------------===//

#include "TileToGPUInternal.h"

#include "tilemega/Conversion/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir::tilemega {
#define GEN_PASS_DEF_MARKTENSORMAPPARAMS
#include "tilemega/Conversion/Passes.h.inc"
} // namespace mlir::tilemega

using namespace mlir;
using namespace mlir::tilemega;

namespace {

struct MarkTensorMapParamsPass
    : public tilemega::impl::MarkTensorMapParamsBase<MarkTensorMapParamsPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    Builder b(ctx);
    Type tensorMap =
        LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8),
                                 tile_to_gpu::kTensorMapBytes);
    WalkResult result = getOperation().walk([&](LLVM::LLVMFuncOp func) {
      auto params = func->getAttrOfType<DenseI64ArrayAttr>(
          tile_to_gpu::kTensorMapParamsAttrName);
      if (!params)
        return WalkResult::advance();
      for (int64_t index : params.asArrayRef()) {
        if (index < 0 || index >= static_cast<int64_t>(func.getNumArguments()) ||
            !isa<LLVM::LLVMPointerType>(func.getArgumentTypes()[index])) {
          func.emitOpError() << tile_to_gpu::kTensorMapParamsAttrName
                             << " names argument " << index
                             << ", which is not a pointer parameter";
          return WalkResult::interrupt();
        }
        func.setArgAttr(index, LLVM::LLVMDialect::getByValAttrName(),
                        TypeAttr::get(tensorMap));
        func.setArgAttr(index, LLVM::LLVMDialect::getAlignAttrName(),
                        b.getI64IntegerAttr(tile_to_gpu::kTensorMapAlign));
        func.setArgAttr(index, NVVM::NVVMDialect::getGridConstantAttrName(),
                        b.getUnitAttr());
      }
      func->removeAttr(tile_to_gpu::kTensorMapParamsAttrName);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
