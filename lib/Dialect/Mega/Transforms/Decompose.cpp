//===- Decompose.cpp - operators into SM-sized task instances -------------===//

#include "TaskModel.h"

#include "tilemega/Dialect/Mega/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/MathExtras.h"

namespace mlir::tilemega::mega {
#define GEN_PASS_DEF_MEGADECOMPOSE
#include "tilemega/Dialect/Mega/Transforms/Passes.h.inc"
} // namespace mlir::tilemega::mega

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::mega;

namespace {

struct MegaDecomposePass
    : public mega::impl::MegaDecomposeBase<MegaDecomposePass> {
  using MegaDecomposeBase::MegaDecomposeBase;

  void runOnOperation() override {
    if (bytesPerNs <= 0 || taskOverheadNs < 0 || maxUnitsPerTask < 1) {
      getOperation().emitError()
          << "mega-decompose needs bytes-per-ns > 0, task-overhead-ns >= 0 "
             "and max-units-per-task >= 1";
      return signalPassFailure();
    }
    for (auto graph : getOperation().getOps<GraphOp>())
      for (TaskOp task : getTasks(graph))
        if (!task.getUnitsPerTaskAttr())
          decompose(task, graph.getNumWorkers());
  }

  /// Picks the number of units per instance that minimises the operator's
  /// makespan on `workers` workers (see the pass description).
  void decompose(TaskOp task, int64_t workers) {
    int64_t units = getNumUnits(task);
    if (units < 1)
      return;
    double unitNs = static_cast<double>(getUnitBytes(task)) / bytesPerNs;
    int64_t bestK = 1;
    double bestSpan = -1;
    for (int64_t k = 1; k <= std::min<int64_t>(maxUnitsPerTask, units); ++k) {
      int64_t instances = llvm::divideCeil(units, k);
      // Only k that change the instance count are worth trying.
      if (k > 1 && instances == llvm::divideCeil(units, k - 1))
        continue;
      double rounds = static_cast<double>(llvm::divideCeil(instances, workers));
      double span = rounds * (k * unitNs + taskOverheadNs);
      if (bestSpan < 0 || span < bestSpan * (1 - 1e-9)) {
        bestSpan = span;
        bestK = k;
      }
    }
    Builder b(task.getContext());
    task.setUnitsPerTaskAttr(b.getI64IntegerAttr(bestK));
    task.setCountAttr(b.getI64IntegerAttr(llvm::divideCeil(units, bestK)));
    task.setCostNsAttr(b.getF64FloatAttr(bestK * unitNs + taskOverheadNs));
    if (claimUnits && bestK > 1)
      task.setClaimsUnits(true);
  }
};

} // namespace
