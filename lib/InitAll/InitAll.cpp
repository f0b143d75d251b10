//===- InitAll.cpp - register TileMega and what it builds on ---------------===//

#include "tilemega/InitAll.h"

#include "tilemega/Conversion/MegaToLLVM/MegaToLLVM.h"
#include "tilemega/Conversion/TileToLLVM/TileToLLVM.h"
#include "tilemega/Conversion/Passes.h"
#include "tilemega/Dialect/Mega/IR/MegaDialect.h"
#include "tilemega/Dialect/Mega/Transforms/Passes.h"
#include "tilemega/Dialect/Tile/IR/TileDialect.h"
#include "tilemega/Dialect/Tile/Transforms/Passes.h"
#include "tilemega/Pipelines/Pipelines.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/LLVMIR/Transforms/Passes.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void tilemega::registerAllTileMegaDialects(DialectRegistry &registry) {
  registry.insert<tile::TileDialect, mega::MegaDialect>();
  registry.insert<affine::AffineDialect, arith::ArithDialect,
                  cf::ControlFlowDialect, func::FuncDialect, gpu::GPUDialect,
                  index::IndexDialect, LLVM::LLVMDialect, math::MathDialect,
                  memref::MemRefDialect, nvgpu::NVGPUDialect,
                  NVVM::NVVMDialect, scf::SCFDialect, ub::UBDialect,
                  vector::VectorDialect>();
  // convert-gpu-to-nvvm lowers every dialect that implements the
  // ConvertToLLVM interface; these are the ones our kernels contain.
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  index::registerConvertIndexToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  vector::registerConvertVectorToLLVMInterface(registry);
  mega::registerConvertMegaToLLVMInterface(registry);
  tile::registerConvertTileToLLVMInterface(registry);
  // gpu-module-to-binary: the NVVM target and the LLVM IR translations.
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
}

void tilemega::registerAllTileMegaPassesAndPipelines() {
  // Ours.
  tile::registerTilePasses();
  mega::registerMegaPasses();
  registerTileMegaConversionPasses();
  registerTileMegaPipelines();

  // Upstream passes of the GPU lowering, for hand-written pipelines.
  registerCanonicalizerPass();
  registerCSEPass();
  registerMem2RegPass();
  registerSymbolDCEPass();
  registerLoopInvariantCodeMotionPass();
  registerGpuNVVMAttachTarget();
  registerGpuModuleToBinaryPass();
  registerGpuKernelOutliningPass();
  registerSCFToControlFlowPass();
  registerLowerAffinePass();
  memref::registerExpandStridedMetadataPass();
  registerConvertGpuOpsToNVVMOpsPass();
  registerConvertNVGPUToNVVMPass();
  registerConvertNVVMToLLVMPass();
  registerArithToLLVMConversionPass();
  registerConvertFuncToLLVMPass();
  registerConvertIndexToLLVMPass();
  registerConvertMathToLLVMPass();
  registerConvertControlFlowToLLVMPass();
  registerConvertVectorToLLVMPass();
  registerConvertVectorToSCFPass();
  registerFinalizeMemRefToLLVMConversionPass();
  registerReconcileUnrealizedCastsPass();
  LLVM::registerNVVMOptimizeForTargetPass();
}
