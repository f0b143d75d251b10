//===- TileToPTXPipeline.cpp - tile IR to PTX -------------------------------===//

#include "tilemega/Pipelines/Pipelines.h"

#include "tilemega/Conversion/Passes.h"
#include "tilemega/Dialect/Mega/Transforms/Passes.h"
#include "tilemega/Dialect/Tile/Transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/NVGPUToNVVM/NVGPUToNVVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::tilemega;

void tilemega::buildTileToPTXPipeline(OpPassManager &pm,
                                      const TileToPTXPipelineOptions &options) {
  // mega level: operators to tasks, events, queues, then one persistent
  // tile kernel per graph (nothing happens in modules without graphs).
  mega::MegaDecomposeOptions decompose;
  decompose.claimUnits = options.megaClaimUnits;
  pm.addPass(mega::createMegaDecompose(decompose));
  pm.addPass(mega::createMegaPlanEvents());
  mega::MegaScheduleOptions schedule;
  schedule.policy = options.megaPolicy;
  pm.addPass(mega::createMegaSchedule(schedule));
  if (options.megaPairEntries) {
    mega::MegaPairEntriesOptions pairs;
    pairs.chip = options.chip;
    pm.addPass(mega::createMegaPairEntries(pairs));
  }
  ConvertMegaToGPUOptions persistent;
  persistent.chip = options.chip;
  persistent.timeline = options.megaTimeline;
  persistent.watchdogMs = options.megaWatchdogMs;
  persistent.maxCtas = options.megaMaxCtas;
  persistent.prefetchBytes = options.megaPrefetchBytes;
  persistent.prefetchDepth = options.megaPrefetchDepth;
  persistent.earlyLoads = options.megaEarlyLoads;
  persistent.streamUnits = options.megaStreamUnits;
  pm.addPass(createConvertMegaToGPU(persistent));

  // tile level: decide layouts, software-pipeline the tile.pipelined loops,
  // then lower to per-thread gpu.func code.
  tile::TileInferLayoutsOptions layouts;
  layouts.wgmma = options.wgmma;
  pm.addNestedPass<func::FuncOp>(tile::createTileInferLayouts(layouts));
  tile::TilePipelineOptions pipelining;
  pipelining.chip = options.chip;
  pipelining.wgmma = options.wgmma;
  pipelining.wgmmaInFlight = options.wgmmaInFlight;
  pipelining.tma = options.tma;
  pipelining.earlyDepth = options.megaEarlyDepth;
  pipelining.linearBulk = options.megaBulkCopies;
  pm.addNestedPass<func::FuncOp>(tile::createTilePipeline(pipelining));
  ConvertTileToGPUOptions toGPU;
  toGPU.wgmma = options.wgmma;
  toGPU.tma = options.tma;
  pm.addPass(createConvertTileToGPU(toGPU));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // After the CSE that merged every body's thread id into the kernel's one.
  // Claim loops need theirs even with per-case reads off.
  if (options.megaFreshThreadIds || options.megaClaimUnits) {
    mega::MegaFreshThreadIdsOptions fresh;
    fresh.cases = options.megaFreshThreadIds;
    pm.addPass(mega::createMegaFreshThreadIds(fresh));
  }

  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = options.features;
  target.optLevel = options.optLevel;
  pm.addPass(createGpuNVVMAttachTarget(target));

  // gpu.module level: to the LLVM and NVVM dialects. Kernel memrefs are
  // passed as bare pointers: one parameter per tensor, as the runtime packs.
  OpPassManager &gpuPm = pm.nest<gpu::GPUModuleOp>();
  gpuPm.addPass(createSCFToControlFlowPass());
  // Fragments become SSA values before any greedy driver can merge the
  // identical tails of different task bodies (tile-scalarize-fragments).
  gpuPm.addPass(tile::createTileScalarizeFragments());
  gpuPm.addPass(createMem2Reg());
  gpuPm.addPass(memref::createExpandStridedMetadataPass());
  gpuPm.addPass(createLowerAffinePass());
  // cp.async (nvgpu.device_async_copy) has no ConvertToLLVM interface: it
  // gets its own pass, ahead of the rest.
  gpuPm.addPass(createConvertNVGPUToNVVMPass());
  ConvertGpuOpsToNVVMOpsOptions toNVVM;
  toNVVM.useBarePtrCallConv = true;
  toNVVM.indexBitwidth = 64;
  gpuPm.addPass(createConvertGpuOpsToNVVMOps(toNVVM));
  gpuPm.addPass(createAlignDynamicSharedMemory());
  // TMA tensor maps travel by value, as grid constants (a 128-byte byval
  // parameter the TMA unit reads in place).
  gpuPm.addPass(createMarkTensorMapParams());
  // NVVM ops that LLVM has no intrinsic for (wgmma.mma_async) become their
  // PTX, written by MLIR's own op definitions.
  gpuPm.addPass(createConvertNVVMToLLVMPass());
  gpuPm.addPass(LLVM::createNVVMOptimizeForTargetPass());
  gpuPm.addPass(createCanonicalizerPass());
  gpuPm.addPass(createCSEPass());
  gpuPm.addPass(createReconcileUnrealizedCastsPass());

  gpuPm.addPass(createVerifyNVPTXAddressSpaces());
  gpuPm.addPass(createVerifyLLVMTranslatable());

  // What LLVM gets, counted so that tilemega.compile can tell whether its
  // optimiser copied an aligned barrier (into code only some threads run).
  pm.addPass(createRecordAlignedBarriers());

  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = options.format;
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void tilemega::registerTileMegaPipelines() {
  PassPipelineRegistration<TileToPTXPipelineOptions>(
      "tilemega-tile-to-ptx-pipeline",
      "Lower tile kernels to a gpu.binary holding PTX (format=isa) or a cubin "
      "for the chosen NVIDIA chip; launch metadata lands in the module "
      "attribute tilemega.kernels",
      buildTileToPTXPipeline);
}
