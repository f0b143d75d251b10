//===- TaskModel.h - what the mega passes know about a task -----*- C++ -*-===//
//
// The facts the decomposition, event planning and scheduling passes share:
// how many units a task's tile kernel has, which units an instance runs,
// which flat element ranges of which graph argument an instance touches, and
// its estimated cost.
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_LIB_DIALECT_MEGA_TRANSFORMS_TASKMODEL_H
#define TILEMEGA_LIB_DIALECT_MEGA_TRANSFORMS_TASKMODEL_H

#include "tilemega/Dialect/Mega/IR/MegaDialect.h"

namespace mlir::tilemega::mega {

/// A half-open flat element range of one graph argument.
struct TouchedRange {
  unsigned arg;
  int64_t begin, end;
  bool write;
};

/// The number of units (tile kernel blocks) of a task; 0 if its body does
/// not resolve (the verifier reports that).
int64_t getNumUnits(TaskOp task);

/// The units [first, last) that instance `i` runs (a task that claims its
/// units: the ones it may run, unit i and every one from `count` on).
std::pair<int64_t, int64_t> getInstanceUnits(TaskOp task, int64_t i);

/// The regions instance `i` touches: each access widened over its units.
SmallVector<TouchedRange> getInstanceRegions(TaskOp task, int64_t i);

/// Bytes one unit reads and writes according to its footprint.
int64_t getUnitBytes(TaskOp task);

/// The estimated cost of one instance (`cost_ns`, or a default).
double getInstanceCost(TaskOp task);

/// The tasks of a graph, in program order.
SmallVector<TaskOp> getTasks(GraphOp graph);

} // namespace mlir::tilemega::mega

#endif // TILEMEGA_LIB_DIALECT_MEGA_TRANSFORMS_TASKMODEL_H
