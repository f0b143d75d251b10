//===- TaskModel.cpp - what the mega passes know about a task --------------===//

#include "TaskModel.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::mega;

/// Cost of an instance whose task has no estimate: about one small GEMV
/// slice, so that unannotated graphs still schedule sensibly.
static constexpr double kDefaultCostNs = 2000.0;

int64_t mega::getNumUnits(TaskOp task) {
  func::FuncOp func = task.getTileFunction();
  if (!func)
    return 0;
  tile::KernelOp kernel = getTileKernel(func);
  if (!kernel)
    return 0;
  return getNumBlocks(kernel).value_or(0);
}

std::pair<int64_t, int64_t> mega::getInstanceUnits(TaskOp task, int64_t i) {
  int64_t k = task.getNumUnitsPerTask();
  int64_t units = getNumUnits(task);
  // Claimed units: unit i, then any from `count` on (the range covers both).
  if (task.getClaimsUnits())
    return {std::min(units, i), units};
  return {i * k, std::min(units, (i + 1) * k)};
}

SmallVector<TouchedRange> mega::getInstanceRegions(TaskOp task, int64_t i) {
  SmallVector<TouchedRange> regions;
  std::optional<ArrayAttr> footprint = task.getFootprint();
  if (!footprint)
    return regions;
  auto [first, last] = getInstanceUnits(task, i);
  if (first >= last)
    return regions;
  for (auto access : footprint->getAsRange<AccessAttr>()) {
    // The instance's units that touch this range.
    int64_t lo = std::max(first, access.getFirst());
    int64_t hi = access.getLast() < 0 ? last : std::min(last, access.getLast());
    if (lo >= hi)
      continue;
    auto arg = cast<BlockArgument>(task.getArgs()[access.getOperand()]);
    regions.push_back({arg.getArgNumber(), access.getBegin(lo),
                       access.getBegin(hi - 1) + access.getSize(),
                       access.isWrite()});
  }
  return regions;
}

int64_t mega::getUnitBytes(TaskOp task) {
  int64_t bytes = 0;
  if (std::optional<ArrayAttr> footprint = task.getFootprint())
    for (auto access : footprint->getAsRange<AccessAttr>()) {
      auto type = cast<MemRefType>(task.getArgs()[access.getOperand()].getType());
      // Averaged over the units: a range only some units touch counts for
      // its share.
      int64_t units = std::max<int64_t>(1, getNumUnits(task));
      int64_t touching =
          (access.getLast() < 0 ? units : std::min(units, access.getLast())) -
          std::min(units, access.getFirst());
      bytes += access.getSize() *
               std::max<int64_t>(1, type.getElementTypeBitWidth() / 8) *
               std::max<int64_t>(touching, 0) / units;
    }
  return bytes;
}

double mega::getInstanceCost(TaskOp task) {
  if (std::optional<APFloat> cost = task.getCostNs())
    return cost->convertToDouble();
  return kDefaultCostNs;
}

SmallVector<TaskOp> mega::getTasks(GraphOp graph) {
  return llvm::to_vector(graph.getBodyBlock().getOps<TaskOp>());
}
