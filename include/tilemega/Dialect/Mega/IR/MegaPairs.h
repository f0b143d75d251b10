//===- MegaPairs.h - which entries may run as a pair ------------*- C++ -*-===//
//
// The rules `mega-pair-entries` decides by and the mega.graph verifier
// checks a `paired` queue against (one rule, one function): what a task
// writes, what it may load before its events fire, whether its wait leaves
// DRAM idle, and how much shared memory its body's tiles take.
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_DIALECT_MEGA_IR_MEGAPAIRS_H
#define TILEMEGA_DIALECT_MEGA_IR_MEGAPAIRS_H

#include "tilemega/Dialect/Mega/IR/MegaDialect.h"

#include "llvm/ADT/DenseSet.h"

#include <string>

namespace mlir::tilemega::mega {

/// Whether `task` writes its operand `operand`: per its footprint, or
/// every operand of a task without one.
bool taskWritesOperand(TaskOp task, unsigned operand);

/// The graph arguments (block argument numbers) some task of `graph` writes.
llvm::DenseSet<unsigned> getWrittenGraphArgs(GraphOp graph);

/// Whether `task` reads an operand that no task of the graph writes (a
/// weight): something its body may load before its events fire.
bool readsStableOperand(TaskOp task, const llvm::DenseSet<unsigned> &written);

/// Whether every event `task` waits on is signalled only by tasks whose
/// stage (cost_ns x instances) is at most half its own: while it waits,
/// DRAM is mostly idle (the output projection behind the attention). False
/// when a stage has no estimate.
bool waitsOnLighterStage(TaskOp task);

/// Why an entry of `second` cannot run paired after one of `first` (one
/// persistent-kernel case holding both bodies), or the empty string when it
/// can. `written`: getWrittenGraphArgs of their graph.
std::string getPairProblem(TaskOp first, TaskOp second,
                           const llvm::DenseSet<unsigned> &written);

/// Shared memory of `task`'s body tiles as the tile pipeline lays them out
/// (each tile 128-byte aligned, the destination of a pipelined copy once
/// per stage, a reduction's scratch): an estimate, the residency check
/// after the pipeline has the last word.
int64_t estimateBodySharedBytes(TaskOp task);

} // namespace mlir::tilemega::mega

#endif // TILEMEGA_DIALECT_MEGA_IR_MEGAPAIRS_H
