//===- Pipelines.h - registered TileMega pipelines --------------*- C++ -*-===//

#ifndef TILEMEGA_PIPELINES_PIPELINES_H
#define TILEMEGA_PIPELINES_PIPELINES_H

#include "tilemega/Target/TargetInfo.h"

#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;
namespace tilemega {

/// Options of `tilemega-tile-to-ptx-pipeline`.
struct TileToPTXPipelineOptions
    : public PassPipelineOptions<TileToPTXPipelineOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip",
      llvm::cl::desc("Target GPU architecture (sm_90a: Hopper); its limits "
                     "(tilemega/Target/TargetInfo.h) bound the kernels"),
      llvm::cl::init(std::string(kDefaultChip))};
  PassOptions::Option<std::string> features{
      *this, "features", llvm::cl::desc("NVPTX target features (PTX ISA)"),
      llvm::cl::init("+ptx80")};
  PassOptions::Option<int> optLevel{
      *this, "opt-level", llvm::cl::desc("LLVM optimisation level (0-3)"),
      llvm::cl::init(3)};
  PassOptions::Option<std::string> format{
      *this, "format",
      llvm::cl::desc("What gpu.binary holds: isa (PTX text), bin (cubin, "
                     "needs ptxas) or fatbin"),
      llvm::cl::init("isa")};
  PassOptions::Option<bool> wgmma{
      *this, "wgmma",
      llvm::cl::desc("Lower qualifying tile.gemm ops to Hopper's "
                     "wgmma.mma_async (sm_90a)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> wgmmaInFlight{
      *this, "wgmma-in-flight",
      llvm::cl::desc("With wgmma: keep each pipelined iteration's wgmma in "
                     "flight into the next (tile-pipeline wgmma-in-flight)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> tma{
      *this, "tma",
      llvm::cl::desc("Pipeline global-to-shared tile copies with TMA bulk "
                     "copies on mbarriers where they qualify (sm_90a; "
                     "tile-pipeline tma)"),
      llvm::cl::init(false)};
  // Mega-kernels (graphs in the module): see docs/mega.md.
  PassOptions::Option<std::string> megaPolicy{
      *this, "mega-policy",
      llvm::cl::desc("mega-schedule queue policy: auto, aot or jit"),
      llvm::cl::init("auto")};
  PassOptions::Option<bool> megaTimeline{
      *this, "mega-timeline",
      llvm::cl::desc("Record per-task timestamps in mega-kernels"),
      llvm::cl::init(false)};
  PassOptions::Option<int64_t> megaWatchdogMs{
      *this, "mega-watchdog-ms",
      llvm::cl::desc("Longest event wait in a mega-kernel before it stops"),
      llvm::cl::init(2000)};
  PassOptions::Option<int64_t> megaPrefetchBytes{
      *this, "mega-prefetch-bytes",
      llvm::cl::desc("L2 prefetch per read-only range of an entry (0: off)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> megaPrefetchDepth{
      *this, "mega-prefetch-depth",
      llvm::cl::desc("Next AOT entries of a worker that are prefetched"),
      llvm::cl::init(1)};
  PassOptions::Option<bool> megaFreshThreadIds{
      *this, "mega-fresh-thread-ids",
      llvm::cl::desc("Each task body of a persistent kernel reads its thread "
                     "index itself (mega-fresh-thread-ids)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> megaStreamUnits{
      *this, "mega-stream-units",
      llvm::cl::desc("Stream a task's units through one ring of pipeline "
                     "stages (convert-mega-to-gpu stream-units)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> megaEarlyLoads{
      *this, "mega-early-loads",
      llvm::cl::desc("Start a task's loads of tensors no task writes "
                     "before its events fire (graphs without a JIT queue)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> megaClaimUnits{
      *this, "mega-claim-units",
      llvm::cl::desc("Tasks of several units an instance claim the units "
                     "beyond each instance's own at run time "
                     "(mega-decompose claim-units)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> megaPairEntries{
      *this, "mega-pair-entries",
      llvm::cl::desc("Run consecutive AOT entries as pairs whose second "
                     "body's weights load under the first (mega-pair-entries)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> megaBulkCopies{
      *this, "mega-bulk-copies",
      llvm::cl::desc("Pipeline a persistent mega-kernel's loops with 1-D "
                     "bulk copies on mbarriers where every copy allows them "
                     "(tile-pipeline linear-bulk; sm_90a)"),
      llvm::cl::init(false)};
  PassOptions::Option<int64_t> megaEarlyDepth{
      *this, "mega-early-depth",
      llvm::cl::desc("Iterations of a loop's prologue whose early loads start "
                     "before the task's wait (0: all; tile-pipeline early-depth)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> megaMaxCtas{
      *this, "mega-max-ctas",
      llvm::cl::desc("CTAs resident at once on the target (0: the SM count "
                     "of chip)"),
      llvm::cl::init(0)};
};

/// tile IR -> gpu.binary with PTX (or cubin) for the chosen chip.
void buildTileToPTXPipeline(OpPassManager &pm,
                            const TileToPTXPipelineOptions &options);

/// Registers every TileMega pipeline.
void registerTileMegaPipelines();

} // namespace tilemega
} // namespace mlir

#endif // TILEMEGA_PIPELINES_PIPELINES_H
