//===- PersistentKernel.h - the body of a persistent mega-kernel -*- C++ -*-===//
//
// Builds the tile.kernel body of a scheduled graph's persistent kernel: the
// worker loop (pick an entry, wait, run its body, signal), the scheduler CTA
// that publishes JIT entries, the watchdogs, and the epoch/reset protocol at
// exit. docs/mega.md describes the protocol; MegaToGPU.cpp drives it.
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_LIB_CONVERSION_MEGATOGPU_PERSISTENTKERNEL_H
#define TILEMEGA_LIB_CONVERSION_MEGATOGPU_PERSISTENTKERNEL_H

#include "TaskTables.h"

#include "tilemega/Dialect/Mega/IR/MegaDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::tilemega::mega_to_gpu {

/// Words of `mega_state` (docs/mega.md).
enum StateWord : int64_t {
  kEpoch = 0,
  kJitHead = 1,
  kJitTail = 2,
  kDoneCtas = 3,
  kErrorCode = 4,
  kErrorEntry = 5,
  kErrorEvent = 6,
  kErrorCta = 7,
  kErrorSeen = 8,
  kErrorExpected = 9,
  kAbort = 10,
  /// Repeating graphs: the most steps the next launch may run (set by the
  /// host; outside [1, max_steps] means max_steps) and the steps the
  /// current launch has completed.
  kStepLimit = 11,
  kStepsDone = 12,
  /// Workers by SM: the first of the CTAs' claim words (TaskTables::stateWords).
  kClaimWords = kStateWords,
};

enum ErrorCode : int64_t {
  kWorkerWaitTimeout = 1,
  kSchedulerWaitTimeout = 2,
  kJitWaitTimeout = 3,
  kStepBarrierTimeout = 4,
  kWorkerIndexUnclaimed = 5,
};

/// How a repeating graph (mega.graph stop_word / max_steps) loops: the
/// argument and element of its stop word and the step bound.
struct StepLoop {
  int64_t stopArgument = -1, stopElement = 0, maxSteps = 1;
  bool enabled() const { return stopArgument >= 0; }
};

/// Emits the persistent kernel of one graph.
class PersistentKernelBuilder {
public:
  PersistentKernelBuilder(OpBuilder &b, Location loc, const TaskTables &t,
                          bool timeline, int64_t watchdogNs,
                          int64_t prefetchBytes, int64_t prefetchDepth,
                          bool earlyLoads, bool streamUnits,
                          StepLoop stepLoop = {})
      : b(b), loc(loc), t(t), timeline(timeline),
        watchdogNs(watchdogNs), prefetchBytes(prefetchBytes),
        prefetchDepth(prefetchDepth),
        // A worker may commit to its next AOT entry before its events fire
        // only where no JIT entry can be what they wait for; in a graph of
        // several ranks no tensor is known read-only (writtenGraphArgs).
        waitInCase(earlyLoads && t.numJit == 0 && t.ranks == 1),
        streamUnits(streamUnits), stepLoop(stepLoop) {}

  /// Fills the kernel body. `args` is the argument table of the graph
  /// arguments (of types `globalTypes`, reached with mega.graph_arg);
  /// the four runtime buffers follow.
  void build(Value blockId, Value args, ArrayRef<Type> globalTypes,
             Value tables, Value events, Value state, Value timelineBuf);

private:
  // Constants and small arithmetic.
  Value i32(int64_t v) { return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v); }
  Value i64(int64_t v) { return arith::ConstantIntOp::create(b, loc, b.getI64Type(), v); }
  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value bit(bool v) { return arith::ConstantIntOp::create(b, loc, b.getI1Type(), v); }
  Value toIndex(Value v) {
    return v.getType().isIndex()
               ? v
               : arith::IndexCastOp::create(b, loc, b.getIndexType(), v).getResult();
  }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value andI(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value orI(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value toI32(Value v) {
    return arith::IndexCastOp::create(b, loc, b.getI32Type(), v);
  }
  Value notI(Value x) { return arith::XOrIOp::create(b, loc, x, arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1)); }

  /// `tables[section + i]` as i32.
  Value table(StringRef section, Value i) {
    Value index = toIndex(add(i.getType().isIndex() ? idx(t.section(section))
                                                    : i32(t.section(section)),
                              i));
    return memref::LoadOp::create(b, loc, tablesBuf, index);
  }
  // The runtime protocol (docs/mega.md): each step is a mega op named for
  // it, on a word of the events or state buffer.
  // A graph of several ranks polls at system scope: peers advance its
  // peer events' words over NVLink.
  Value pollEvent(Value event) {
    auto poll = mega::PollOp::create(b, loc, b.getI32Type(), eventsBuf,
                                     ValueRange{toIndex(event)});
    if (t.ranks > 1)
      poll.setSystem(true);
    return poll;
  }
  /// Signals a `signals` table entry: a local event's word, or (entries
  /// with kPeerSignalBit) the word of this rank of a peer event, on every
  /// rank.
  void signalEvent(Value entry);
  Value pollState(int64_t word) {
    return mega::PollOp::create(b, loc, b.getI32Type(), stateBuf, ValueRange{idx(word)});
  }
  Value peekState(int64_t word) {
    return mega::PeekOp::create(b, loc, b.getI32Type(), stateBuf, ValueRange{idx(word)});
  }
  void postState(int64_t word, Value value) {
    mega::PostOp::create(b, loc, stateBuf, ValueRange{idx(word)}, value);
  }
  Value claimState(int64_t word) {
    return mega::ClaimOp::create(b, loc, b.getI32Type(), stateBuf, ValueRange{idx(word)}, i32(1));
  }
  Value arriveState(int64_t word) {
    return mega::ArriveOp::create(b, loc, b.getI32Type(), stateBuf, ValueRange{idx(word)}, i32(1));
  }
  void postTimeline(Value word, Value value) {
    mega::PostOp::create(b, loc, timelineBuf, ValueRange{toIndex(word)}, value);
  }
  /// %globaltimer, ns: a watchdog's start or a timeline stamp.
  Value now() { return NVVM::GlobalTimerOp::create(b, loc, b.getI64Type()); }
  /// The scheduler CTA's warps, each checking 32 JIT entries a round; their
  /// ready runs go to the control words from kSchedulerRuns on.
  int64_t schedulerWarps() const { return std::max<int64_t>(1, t.threads / 32); }
  static constexpr int64_t kSchedulerRuns = 5;

  /// Graph argument `slot` (an index value: the slot may depend on the
  /// task), of type `type`, read from the CTA's copy of the argument table
  /// in shared memory (a task's first loads then wait for a shared-memory
  /// read, not for an L2 round trip).
  Value graphArg(Value slot, Type type) {
    return mega::GraphArgOp::create(b, loc, type, sharedArgs, slot);
  }
  /// Graph argument `arg` read from the table in global memory.
  Value graphArgFromGlobal(unsigned arg) {
    return mega::GraphArgOp::create(b, loc, globalTypes[arg], argsBuf,
                                       idx(arg));
  }
  /// The slot of argument `a` of the task running case `caseIndex`: a
  /// constant when every task of the case passes the same graph argument,
  /// else a switch over `task` (the same body on another layer's data).
  Value caseArgumentSlot(int64_t caseIndex, unsigned a, Value task);

  /// An entry's record (TaskTables' `records`): one vector load from the
  /// tables, or from the worker's copy of its AOT records in shared memory.
  struct Record {
    Value caseId, task, instance, numWaits, wait0, trigger0, numSignals,
        signal0, entry;
  };
  Value recordVector(Value buffer, Value firstWord) {
    auto type = VectorType::get({kRecordWords}, b.getI32Type());
    return vector::LoadOp::create(b, loc, type, buffer, ValueRange{toIndex(firstWord)});
  }
  Record unpackRecord(Value vec) {
    SmallVector<Value, 8> f;
    for (int64_t i = 0; i < kRecordWords; ++i)
      f.push_back(vector::ExtractOp::create(b, loc, vec, ArrayRef<int64_t>{i}).getResult());
    Value caseId = arith::AndIOp::create(b, loc, f[0], i32(0xffff));
    Value task = arith::ShRUIOp::create(b, loc, f[0], i32(16));
    return {caseId, task, f[1], f[2], f[3], f[4], f[5], f[6], f[7]};
  }
  Record loadRecord(Value entry) {
    return unpackRecord(recordVector(
        tablesBuf, add(mul(entry, i32(kRecordWords)), i32(t.section("records")))));
  }
  /// The record of the worker's AOT entry at `slot` (0-based in its list).
  Record sharedRecord(Value slot) {
    return unpackRecord(recordVector(aotRecords, mul(slot, i32(kRecordWords))));
  }

  /// Whether every event entry `e` waits on has fired in this epoch; also
  /// the first event that has not, its counter and the counter it needs
  /// (-1, 0, 0 when all fired).
  struct Readiness {
    Value ready, event, seen, expected;
  };
  Readiness checkReady(const Record &r);
  /// Thread 0 of a worker: the next entry to run (or -1 to exit) and the
  /// next AOT position.
  struct Pick {
    Value entry, nextPos, ticket, slot;
  };
  Pick pickEntry(Value pos, Value aotBegin, Value aotEnd, Value ticket);
  /// Thread 0 of a worker that waits inside the case: its next AOT entry
  /// (or -1 at the end of its list or on an abort), not waited for.
  Pick pickNextAot(Value pos, Value aotBegin, Value aotEnd);
  /// Records a watchdog error once (the first CTA to time out wins) and
  /// raises the abort flag. `cta` (i32): what word 7 names; by default the
  /// CTA's worker index.
  void recordError(int64_t code, Value entry, const Readiness &r, Value cta = {});
  Value aborted() {
    return cmp(arith::CmpIPredicate::ne, peekState(kAbort), i32(0));
  }
  Value timedOut(Value start) {
    return mega::WatchdogExpiredOp::create(b, loc, b.getI1Type(), start,
                                           b.getI64IntegerAttr(watchdogNs));
  }

  /// The CTA's worker index (workers .. the scheduler CTA): its block
  /// index, or in a `workers_by_sm` graph the index it claims from its SM
  /// (mega.stake on the claim words; -1, reported, if none was free).
  Value claimWorkerIndex(Value blockId);
  void buildWorker(Value blockId);
  /// Runs `entry` (and, in a pair case, the worker's next AOT entry): the
  /// AOT positions it took beyond the first (an i32, 0 or 1), or null in a
  /// kernel without pair cases.
  Value runEntry(Value entry, Value slot, Value blockId);
  /// Thread 0: the entry's end stamp and its events, if it ran (control
  /// word 4 with waitInCase). `r` is the entry's record.
  void finishEntry(const Record &r, Value entry);
  /// The graph tensors task `task` passes to case `caseIndex`'s body (at
  /// the insertion point) and which of them no task writes.
  struct CaseOperands {
    IRMapping mapping;
    DenseSet<Value> readOnly;
    DenseMap<Value, unsigned> index;
  };
  CaseOperands bindCase(int64_t caseIndex, Value task);
  /// Case `caseIndex`'s body on `operands`, its tiles in exclusive group
  /// `group`. With `waitFor` (waitInCase), thread 0 first waits for that
  /// record's events, after a tile.prefetch_point (`ownPoint`; a pair's
  /// second body uses the first one's): the body's early copies (of
  /// tensors no task writes, marked tile.early) start before the wait.
  /// `stampStart` posts the timeline's start once the entry may run.
  void emitCase(int64_t caseIndex, CaseOperands operands, Value task, Value instance,
                const Record *waitFor, Value entry,
                function_ref<void()> stampStart, int64_t group, bool ownPoint);
  /// Thread 0 claims a unit of the task whose counter is state word
  /// `counter` and stores the unit it stands for (`count` + the claim's
  /// number in the step) into `claimedUnit`.
  void claimUnit(Value counter, int64_t count);
  /// A claiming entry's units, after its wait: its own unit `ownUnit` (the
  /// instance, an i32), then its claimed ones, one at a time, each claim's
  /// unit broadcast through `claimedUnit`, until a claim passes the last
  /// unit; one loop around one copy of the body (cloneBody).
  void emitClaimedUnits(const TaskCase &c, Value ownUnit, Value counter,
                        function_ref<void(Value, bool)> cloneBody);
  /// Thread 0 waits until `r`'s events fired (watchdog, abort), then the
  /// CTA learns whether it may run the entry (an i1, the same in every
  /// thread; control word 4 keeps it for the signals).
  Value waitInsideCase(const Record &r, Value entry);
  /// Graph arguments some task writes (writerTasks, after buildTaskOrder),
  /// each with the first task that does (null in a graph of several ranks,
  /// where a peer may write any): the rest (weights) can be read before a
  /// task's events fire.
  llvm::SmallDenseMap<unsigned, Operation *> writtenGraphArgs() const;
  /// Per graph argument, every task that writes it (per its footprint;
  /// every argument of a task without one), in task order; per event, the
  /// task instances that signal it.
  void buildTaskOrder();
  /// Whether every instance of task `later` waits (transitively, through
  /// the events) for every instance of task `first` in the step.
  bool allInstancesBefore(unsigned first, unsigned later) const;
  /// Whether graph argument `arg` holds the same data from the start of the
  /// step until task `task` runs, so that the task may read it before its
  /// events fire: no task writes it, or only tasks after `task` do (and,
  /// with `self`, `task` itself). Otherwise the first writer that breaks it
  /// (null with none known: a graph of several ranks).
  bool stableBeforeTask(unsigned arg, unsigned task, bool self,
                        Operation *&breaker) const;
  /// Reports the reads of graph tensors by `op` (a body op before the
  /// body's tile.task_wait, of case `caseIndex`) that are not stable
  /// before the task's events fire, and its writes of any.
  void checkBeforeWait(Operation *op, int64_t caseIndex, Operation *body);
  /// stableBeforeTask for every task of case `caseIndex` passing `tensor`
  /// (a cloned operand; true for anything else), with the argument and
  /// writer that break it.
  bool stableForCase(Value tensor, int64_t caseIndex, bool self, unsigned &arg,
                     Operation *&breaker) const;
  /// The error for a read of graph argument `arg` before it is stable.
  void reportUnstable(Operation *op, StringRef what, unsigned arg, Operation *breaker,
                      Operation *body);
  /// The case's cloned graph tensors and the body operand each is.
  DenseMap<Value, unsigned> caseOperands;
  /// Marks the copies of `op` (a body op just cloned into case
  /// `caseIndex`) that read a tensor no task writes with tile.early.
  void markEarlyCopies(Operation *op, const DenseSet<Value> &readOnly);
  /// The prefetch point before the wait of the case being emitted (null
  /// when its entries wait for nothing): an early copy hoisted there loads
  /// before the task's events fire; one the body's own point holds, after.
  tile::PrefetchPointOp casePoint;
  /// Reports the copies of `op` (a body op just cloned into case
  /// `caseIndex`) a body marked tile.early itself that would start at a
  /// point before the case's wait but read a tensor that is not stable
  /// before the task (stableBeforeTask, the task's own writes allowed).
  void checkEarlyCopies(Operation *op, int64_t caseIndex, Operation *body);
  /// The prefetch points of the case being emitted that come before its
  /// wait (the case's own and a body's before its tile.task_wait).
  DenseSet<Operation *> pointsBeforeWait;

public:
  /// Whether a body asked for something the kernel cannot do (reported).
  bool hasErrors() const { return errors; }

private:
  bool errors = false;
  void buildScheduler();
  void emitPrefetch(Value entry);
  /// Whether task `taskIndex`'s read-only inputs are worth prefetching: only
  /// when every stage it waits on is estimated at most half its own
  /// (mega::waitsOnLighterStage).
  bool waitsOnLighterStage(unsigned taskIndex);
  void buildExit();
  /// One step of the whole graph (the worker or the scheduler role).
  void buildStep(Value blockId);
  /// A repeating graph's launch: steps until the stop word, the limit or
  /// an abort, each closed by buildStepBarrier.
  void buildStepLoop(Value blockId);
  /// The grid barrier after a step: the last CTA to arrive resets the JIT
  /// ring and opens the next epoch; returns (uniformly over the grid)
  /// whether another step follows.
  Value buildStepBarrier(Value step, Value limit);
  /// What the last CTA of a step or launch does: reset the JIT ring and
  /// publish the epoch `epochTarget`.
  void closeEpoch();
  /// Thread 0 of a CTA arrives at the end of a step or launch (an acq_rel
  /// increment of the done counter); whether it is the last of the grid.
  Value arriveIsLast();
  void ifThread0(function_ref<void()> body) {
    auto op = scf::IfOp::create(b, loc, isThread0, /*withElse=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(op.thenBlock());
    body();
  }
  /// The bit `value()` computes where `cond` holds, false elsewhere, with
  /// value()'s ops (loads) run only where it holds.
  Value bitWhere(Value cond, function_ref<Value()> value) {
    auto op = scf::IfOp::create(b, loc, TypeRange{b.getI1Type()}, cond, /*withElse=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(op.thenBlock());
    scf::YieldOp::create(b, loc, value());
    b.setInsertionPointToStart(op.elseBlock());
    scf::YieldOp::create(b, loc, bit(false));
    return op.getResult(0);
  }

  OpBuilder &b;
  Location loc;
  const TaskTables &t;
  bool timeline;
  int64_t watchdogNs;
  int64_t prefetchBytes, prefetchDepth;
  /// Workers pick their next AOT entry without waiting and wait inside the
  /// entry's case, after its early copies (mega-early-loads).
  bool waitInCase;
  /// Mark each case's loop over its units tile.stream_units
  /// (mega-stream-units).
  bool streamUnits;
  StepLoop stepLoop;
  llvm::SmallDenseMap<unsigned, Operation *> written;
  DenseMap<unsigned, SmallVector<unsigned>> writerTasks;
  DenseMap<StringAttr, SmallVector<std::pair<unsigned, int64_t>>> signalers;
  /// allInstancesBefore's answers, per (first, later).
  mutable DenseMap<std::pair<unsigned, unsigned>, bool> instancesBefore;

  SmallVector<Type> globalTypes;
  Value argsBuf, sharedArgs, tablesBuf, eventsBuf, stateBuf, timelineBuf;
  Value threadId, isThread0, control, epochTarget, aotRecords;
  /// Workers by SM: the shared word holding the CTA's claimed index.
  Value claimedIndex;
  /// Tasks that claim units: the shared word broadcasting a claimed unit.
  Value claimedUnit;
  /// Where allocations hoisted out of the bodies go.
  Operation *hoistPoint = nullptr;
};


} // namespace mlir::tilemega::mega_to_gpu

#endif // TILEMEGA_LIB_CONVERSION_MEGATOGPU_PERSISTENTKERNEL_H
