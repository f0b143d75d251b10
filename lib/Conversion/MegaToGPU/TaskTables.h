//===- TaskTables.h - the tables a persistent kernel runs from --*- C++ -*-===//
//
// A scheduled mega.graph flattened into int32 tables that the runtime
// uploads (`mega_tables`) and the persistent kernel reads: per entry (one
// task instance) its switch case, task and instance, the events it waits on
// and signals, every event's trigger count, each worker's AOT list and the
// JIT list. docs/mega.md describes them.
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_LIB_CONVERSION_MEGATOGPU_TASKTABLES_H
#define TILEMEGA_LIB_CONVERSION_MEGATOGPU_TASKTABLES_H

#include "tilemega/Dialect/Mega/IR/MegaDialect.h"

namespace mlir::tilemega::mega_to_gpu {

/// Words of an entry record (the `records` section, first in the tables so
/// that records stay 32-byte aligned).
inline constexpr int64_t kRecordWords = 8;

/// Words of `mega_state` (docs/mega.md) before a `workers_by_sm` graph's
/// claim words.
inline constexpr int64_t kStateWords = 16;

/// Marks a `signals` entry that names a peer event (its first counter
/// word): the instance signals the word of its own rank on every rank.
inline constexpr int32_t kPeerSignalBit = 1 << 30;


/// One case of the persistent kernel's task switch: a body function run with
/// one units-per-task, shared by every task that calls it that way (the
/// operands are picked per task at run time).
struct TaskCase {
  func::FuncOp body;
  int64_t unitsPerTask = 1;
  int64_t units = 0;
  /// Its tasks claim their units beyond the instances' own (claims_units).
  bool claimsUnits = false;
  SmallVector<unsigned> tasks;
};

/// A case that runs two consecutive AOT entries (a queue's `paired`
/// positions): the bodies of cases `first` and `second`, their shared tiles
/// apart, so the second body's early loads start before the first waits.
struct PairCase {
  unsigned first, second;
};

struct TaskTables {
  SmallVector<mega::TaskOp> tasks;
  SmallVector<mega::EventOp> events;
  /// The first counter word of each event in `mega_events`: one word a
  /// local event, one per sender rank a peer event.
  SmallVector<int32_t> eventWord;
  int64_t numEventWords = 0, ranks = 1;
  SmallVector<TaskCase> cases;
  /// Pair cases, numbered after `cases` in the records' case field: a
  /// paired entry's record names its pair case, the entry after it keeps
  /// its own (the worker reads it from the next AOT record).
  SmallVector<PairCase> pairCases;
  /// The entries that run paired with the next AOT entry of their worker.
  SmallVector<int32_t> pairedEntries;
  SmallVector<unsigned> caseOfTask, firstEntry;
  int64_t numEntries = 0, numJit = 0, threads = 0, workers = 0, schedulers = 1;
  /// The longest AOT list.
  int64_t maxAotEntries = 0;
  /// A `workers_by_sm` graph: the SMs its workers are laid over (worker w
  /// on SM w mod workerSms) and the CTAs an SM; 0 otherwise.
  int64_t workerSms = 0, ctasPerSm = 0;
  /// The kernel's CTAs: the workers and the scheduler CTA (with a JIT list).
  int64_t ctas() const { return workers + (numJit > 0 ? 1 : 0); }
  /// Tasks that claim units (claims_units): then `mega_state` holds one
  /// unit counter a task of the graph, word unitCounterBase() + task.
  bool claimsUnits = false;
  int64_t unitCounterBase() const { return kStateWords + (workerSms > 0 ? ctas() : 0); }
  int64_t unitCounters() const { return claimsUnits ? static_cast<int64_t>(tasks.size()) : 0; }
  /// Words of `mega_state`: the fixed ones, then (workers by SM) one claim
  /// word a CTA, then the unit counters.
  int64_t stateWords() const { return unitCounterBase() + unitCounters(); }
  SmallVector<int32_t> data;
  /// Offsets of the sections in `data`, in order.
  SmallVector<std::pair<std::string, int64_t>> sections;

  int64_t section(StringRef name) const;
};

/// Builds the tables of a scheduled graph; diagnoses bodies whose thread
/// counts differ and graphs that were not scheduled.
FailureOr<TaskTables> buildTaskTables(mega::GraphOp graph);

/// The `mega` dictionary of the kernel metadata (see docs/mega.md).
DictionaryAttr buildMegaMetadata(mega::GraphOp graph, const TaskTables &tables,
                                 bool timeline, int64_t watchdogNs);

} // namespace mlir::tilemega::mega_to_gpu

#endif // TILEMEGA_LIB_CONVERSION_MEGATOGPU_TASKTABLES_H
