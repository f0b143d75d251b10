//===- AlignDynamicSharedMemory.cpp - align the dynamic shared buffer ------===//
//
// convert-tile-to-gpu lays shared tiles out at offsets of one dynamic buffer
// and records on the gpu.module the alignment some of them need by absolute
// address (tilemega.shared_alignment: wgmma's 1024-byte swizzle period);
// convert-gpu-to-nvvm declares the buffer with its own default alignment.
// This pass raises the buffer's llvm.mlir.global to the recorded alignment.
//
//===----------------------------------------------------------------------===//

#include "TileToGPUInternal.h"

#include "tilemega/Conversion/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir::tilemega {
#define GEN_PASS_DEF_ALIGNDYNAMICSHAREDMEMORY
#include "tilemega/Conversion/Passes.h.inc"
} // namespace mlir::tilemega

using namespace mlir;
using namespace mlir::tilemega;

namespace {

struct AlignDynamicSharedMemoryPass
    : public tilemega::impl::AlignDynamicSharedMemoryBase<
          AlignDynamicSharedMemoryPass> {
  void runOnOperation() override {
    gpu::GPUModuleOp module = getOperation();
    auto wanted = module->getAttrOfType<IntegerAttr>(
        tile_to_gpu::kSharedAlignmentAttrName);
    if (!wanted)
      return;
    unsigned shared =
        static_cast<unsigned>(NVVM::NVVMMemorySpace::Shared);
    for (auto global : module.getOps<LLVM::GlobalOp>()) {
      // The dynamic buffer: an external shared array of no elements.
      auto array = dyn_cast<LLVM::LLVMArrayType>(global.getGlobalType());
      if (global.getAddrSpace() != shared || !array ||
          array.getNumElements() != 0)
        continue;
      uint64_t current = global.getAlignment().value_or(1);
      uint64_t alignment = static_cast<uint64_t>(wanted.getInt());
      if (current < alignment)
        global.setAlignment(alignment);
    }
  }
};

} // namespace
