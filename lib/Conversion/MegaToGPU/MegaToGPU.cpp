//===- MegaToGPU.cpp - a scheduled mega.graph to one persistent kernel ----===//
//
// The pass builds the persistent kernel as a tile function: its runtime
// (picking entries, waiting, signalling, the scheduler CTA, the watchdog)
// is plain scf/arith/gpu code plus the PTX memory operations of
// SyncPrimitives, and the task bodies stay tile IR, cloned into a switch, so
// that the tile pipeline lowers them exactly as it lowers their kernels.
//
//===----------------------------------------------------------------------===//

#include "tilemega/Conversion/Passes.h"

#include "SyncPrimitives.h"
#include "TaskTables.h"

#include "tilemega/Dialect/Mega/IR/MegaDialect.h"
#include "tilemega/Dialect/Tile/IR/TileSharedMemory.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::tilemega {
#define GEN_PASS_DEF_CONVERTMEGATOGPU
#include "tilemega/Conversion/Passes.h.inc"
} // namespace mlir::tilemega

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::mega;
using namespace mlir::tilemega::mega_to_gpu;

namespace {

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
  kJitRing = 16,
};

enum ErrorCode : int64_t {
  kWorkerWaitTimeout = 1,
  kSchedulerWaitTimeout = 2,
  kJitWaitTimeout = 3,
};

/// Emits the persistent kernel of one graph.
class PersistentKernelBuilder {
public:
  PersistentKernelBuilder(OpBuilder &b, Location loc, const TaskTables &t,
                          bool timeline, int64_t watchdogNs)
      : b(b), loc(loc), t(t), sync(b, loc), timeline(timeline),
        watchdogNs(watchdogNs) {}

  /// Fills the kernel body. `globals` are the graph's arguments as kernel
  /// values; the four runtime buffers follow.
  void build(Value blockId, ValueRange globals, Value tables, Value events,
             Value state, Value timelineBuf);

private:
  // Constants and small arithmetic.
  Value i32(int64_t v) { return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v); }
  Value i64(int64_t v) { return arith::ConstantIntOp::create(b, loc, b.getI64Type(), v); }
  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
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
  Value stateAddr(int64_t word) { return add(stateBase, i64(word * 4)); }
  Value stateAddr(Value word) { return sync.address(stateBase, word, 4); }

  /// Whether every event entry `e` waits on has fired in this epoch; also
  /// the first event that has not, its counter and the counter it needs
  /// (-1, 0, 0 when all fired).
  struct Readiness {
    Value ready, event, seen, expected;
  };
  Readiness checkReady(Value entry);
  /// Thread 0 of a worker: the next entry to run (or -1 to exit) and the
  /// next AOT position.
  std::pair<Value, Value> pickEntry(Value pos, Value aotEnd);
  /// Records a watchdog error once (the first CTA to time out wins) and
  /// raises the abort flag.
  void recordError(int64_t code, Value entry, const Readiness &r);
  Value aborted() {
    return cmp(arith::CmpIPredicate::ne, sync.loadVolatile(stateAddr(kAbort)), i32(0));
  }
  Value timedOut(Value start) {
    Value elapsed = arith::SubIOp::create(b, loc, sync.globalTimer(), start);
    return cmp(arith::CmpIPredicate::sgt, elapsed, i64(watchdogNs));
  }

  void buildWorker(Value blockId);
  void runEntry(Value entry, Value blockId);
  void emitCase(int64_t caseIndex, Value task, Value instance);
  void buildScheduler();
  void buildExit();
  void ifThread0(function_ref<void()> body) {
    auto op = scf::IfOp::create(b, loc, isThread0, /*withElse=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(op.thenBlock());
    body();
  }

  OpBuilder &b;
  Location loc;
  const TaskTables &t;
  SyncPrimitives sync;
  bool timeline;
  int64_t watchdogNs;

  SmallVector<Value> globals;
  Value tablesBuf, eventsBase, stateBase, timelineBase;
  Value threadId, isThread0, control, epochTarget;
  /// Where allocations hoisted out of the bodies go.
  Operation *hoistPoint = nullptr;
};

} // namespace

PersistentKernelBuilder::Readiness
PersistentKernelBuilder::checkReady(Value entry) {
  Value begin = toIndex(table("wait_offsets", entry));
  Value end = toIndex(table("wait_offsets", add(entry, i32(1))));
  Value yes = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1);
  auto loop = scf::ForOp::create(b, loc, begin, end, idx(1),
                                 ValueRange{yes, i32(-1), i32(0), i32(0)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value w = loop.getInductionVar();
    ValueRange acc = loop.getRegionIterArgs();
    Value event = table("waits", w);
    Value need = mul(table("triggers", event), epochTarget);
    Value seen = sync.loadAcquire(sync.address(eventsBase, event, 4));
    // Counters wrap after 2^32 signals; compare the difference.
    Value fired = cmp(arith::CmpIPredicate::sge,
                      arith::SubIOp::create(b, loc, seen, need), i32(0));
    Value firstMiss = andI(acc[0], notI(fired));
    scf::YieldOp::create(b, loc,
                         ValueRange{andI(acc[0], fired),
                                    select(firstMiss, event, acc[1]),
                                    select(firstMiss, seen, acc[2]),
                                    select(firstMiss, need, acc[3])});
  }
  return {loop.getResult(0), loop.getResult(1), loop.getResult(2),
          loop.getResult(3)};
}

void PersistentKernelBuilder::recordError(int64_t code, Value entry,
                                          const Readiness &r) {
  Value old = sync.atomicCas(stateAddr(kAbort), i32(0), i32(1));
  auto first = scf::IfOp::create(b, loc, cmp(arith::CmpIPredicate::eq, old, i32(0)),
                                 /*withElse=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(first.thenBlock());
  Value cta = arith::IndexCastOp::create(
      b, loc, b.getI32Type(),
      gpu::BlockIdOp::create(b, loc, gpu::Dimension::x));
  sync.storeVolatile(stateAddr(kErrorEntry), entry);
  sync.storeVolatile(stateAddr(kErrorEvent), r.event);
  sync.storeVolatile(stateAddr(kErrorCta), cta);
  sync.storeVolatile(stateAddr(kErrorSeen), r.seen);
  sync.storeVolatile(stateAddr(kErrorExpected), r.expected);
  sync.fence();
  sync.storeVolatile(stateAddr(kErrorCode), i32(code));
}

std::pair<Value, Value> PersistentKernelBuilder::pickEntry(Value pos,
                                                           Value aotEnd) {
  Type i32Type = b.getI32Type();
  Value start = sync.globalTimer();
  auto loop = scf::WhileOp::create(b, loc, TypeRange{i32Type, i32Type},
                                   ValueRange{pos});
  OpBuilder::InsertionGuard outer(b);
  Block *before = b.createBlock(&loop.getBefore(), {}, {i32Type}, {loc});
  Block *after =
      b.createBlock(&loop.getAfter(), {}, {i32Type, i32Type}, {loc, loc});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(before);
    Value p = before->getArgument(0);
    Value hasAot = cmp(arith::CmpIPredicate::slt, p, aotEnd);

    // The next AOT entry, if its events fired.
    auto aot = scf::IfOp::create(b, loc, TypeRange{i32Type}, hasAot, true);
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(aot.thenBlock());
      Value e = table("aot", p);
      Readiness r = checkReady(e);
      scf::YieldOp::create(b, loc, select(r.ready, e, i32(-1)));
      b.setInsertionPointToStart(aot.elseBlock());
      scf::YieldOp::create(b, loc, i32(-1));
    }
    Value aotEntry = aot.getResult(0);
    Value gotAot = cmp(arith::CmpIPredicate::sge, aotEntry, i32(0));

    // Otherwise a published JIT slot, claimed by compare-and-swap.
    Value entry = aotEntry, jitDone = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1);
    if (t.numJit > 0) {
      Value head = sync.loadVolatile(stateAddr(kJitHead));
      jitDone = cmp(arith::CmpIPredicate::sge, head, i32(t.numJit));
      Value tryJit = andI(notI(gotAot), notI(jitDone));
      auto jit = scf::IfOp::create(b, loc, TypeRange{i32Type}, tryJit, true);
      {
        OpBuilder::InsertionGuard g2(b);
        b.setInsertionPointToStart(jit.thenBlock());
        Value slot = sync.loadAcquire(stateAddr(add(head, i32(kJitRing))));
        Value published = cmp(arith::CmpIPredicate::ne, slot, i32(0));
        auto claim = scf::IfOp::create(b, loc, TypeRange{i32Type}, published, true);
        {
          OpBuilder::InsertionGuard g3(b);
          b.setInsertionPointToStart(claim.thenBlock());
          Value old = sync.atomicCas(stateAddr(kJitHead), head, add(head, i32(1)));
          Value won = cmp(arith::CmpIPredicate::eq, old, head);
          scf::YieldOp::create(b, loc, select(won, add(slot, i32(-1)), i32(-1)));
          b.setInsertionPointToStart(claim.elseBlock());
          scf::YieldOp::create(b, loc, i32(-1));
        }
        scf::YieldOp::create(b, loc, claim.getResult(0));
        b.setInsertionPointToStart(jit.elseBlock());
        scf::YieldOp::create(b, loc, aotEntry);
      }
      entry = jit.getResult(0);
    }
    Value got = cmp(arith::CmpIPredicate::sge, entry, i32(0));
    Value nextPos = select(gotAot, add(p, i32(1)), p);
    Value finished = andI(notI(got), andI(notI(hasAot), jitDone));
    Value stuck = andI(notI(got), notI(finished));
    Value abort = andI(stuck, aborted());
    Value late = andI(andI(stuck, notI(abort)), timedOut(start));
    auto report = scf::IfOp::create(b, loc, late, /*withElse=*/false);
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(report.thenBlock());
      // Name the AOT entry and its first unfired event, or the JIT wait.
      auto which = scf::IfOp::create(b, loc, hasAot, true);
      b.setInsertionPointToStart(which.thenBlock());
      Value e = table("aot", p);
      recordError(kWorkerWaitTimeout, e, checkReady(e));
      b.setInsertionPointToStart(which.elseBlock());
      Value head = sync.loadVolatile(stateAddr(kJitHead));
      recordError(kJitWaitTimeout, i32(-1),
                  {Value(), i32(-1), head, i32(t.numJit)});
    }
    Value stop = orI(orI(got, finished), orI(abort, late));
    scf::ConditionOp::create(b, loc, notI(stop),
                             ValueRange{select(got, entry, i32(-1)), nextPos});
  }
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(after);
    scf::YieldOp::create(b, loc, after->getArgument(1));
  }
  return {loop.getResult(0), loop.getResult(1)};
}

void PersistentKernelBuilder::emitCase(int64_t caseIndex, Value task,
                                       Value instance) {
  const TaskCase &c = t.cases[caseIndex];
  func::FuncOp body = c.body;
  tile::KernelOp kernel = getTileKernel(body);
  IRMapping mapping;
  // Operands: the graph argument every task of the case passes, or a switch
  // over the task when they differ (the same body on another layer's data).
  for (unsigned a = 0; a < body.getNumArguments(); ++a) {
    SmallVector<Value> choices;
    for (unsigned ti : c.tasks) {
      TaskOp task = t.tasks[ti];
      choices.push_back(
          globals[cast<BlockArgument>(task.getArgs()[a]).getArgNumber()]);
    }
    Value chosen = choices.front();
    if (!llvm::all_equal(choices)) {
      SmallVector<int64_t> cases(c.tasks.begin() + 1, c.tasks.end());
      auto sw = scf::IndexSwitchOp::create(b, loc, TypeRange{chosen.getType()},
                                           toIndex(task), cases, cases.size());
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&sw.getDefaultRegion().emplaceBlock());
      scf::YieldOp::create(b, loc, choices.front());
      for (auto [r, value] : llvm::enumerate(ArrayRef(choices).drop_front())) {
        b.setInsertionPointToStart(&sw.getCaseRegions()[r].emplaceBlock());
        scf::YieldOp::create(b, loc, value);
      }
      chosen = sw.getResult(0);
    }
    mapping.map(body.getArgument(a), chosen);
  }

  // Units: instance * k + j for j < k, clipped to the kernel's grid.
  auto cloneBody = [&](Value unit) {
    Block &src = kernel.getBody().front();
    ArrayRef<int64_t> grid = kernel.getGrid();
    // Block indices from the linear unit, the last grid dimension fastest.
    Value rest = unit;
    for (int d = grid.size() - 1; d >= 0; --d) {
      Value size = idx(grid[d]);
      Value coord = d == 0 ? rest : arith::RemUIOp::create(b, loc, rest, size).getResult();
      mapping.map(src.getArgument(d), coord);
      if (d > 0)
        rest = arith::DivUIOp::create(b, loc, rest, size);
    }
    // Case c is region c + 1 of the switch (region 0 is the default).
    int64_t group = caseIndex + 1;
    for (Operation &op : src) {
      Operation *clone = b.clone(op, mapping);
      // Allocations move to the kernel's top level (they must sit directly
      // in the tile.kernel); the group lets cases share shared memory.
      if (isa<tile::AllocSharedOp, tile::AllocFragmentOp>(clone)) {
        clone->moveBefore(hoistPoint);
        clone->setAttr(tile::kExclusiveGroupAttr, b.getI64IntegerAttr(group));
      }
    }
  };
  Value first = mul(toIndex(instance), idx(c.unitsPerTask));
  if (c.unitsPerTask == 1) {
    cloneBody(first);
    return;
  }
  auto loop = scf::ForOp::create(b, loc, idx(0), idx(c.unitsPerTask), idx(1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value unit = add(first, loop.getInductionVar());
  // The previous unit's last shared-memory reads finish before this unit's
  // (possibly asynchronous) copies overwrite them.
  gpu::BarrierOp::create(b, loc);
  if (c.units % c.unitsPerTask != 0) {
    auto inRange = scf::IfOp::create(b, loc, cmp(arith::CmpIPredicate::ult, unit, idx(c.units)), false);
    b.setInsertionPointToStart(inRange.thenBlock());
  }
  cloneBody(unit);
}

void PersistentKernelBuilder::runEntry(Value entry, Value blockId) {
  Value caseId = table("entry_case", entry);
  Value task = table("entry_task", entry);
  Value instance = table("entry_instance", entry);
  if (timeline)
    ifThread0([&] {
      Value slot = sync.address(timelineBase, mul(entry, i32(4)), 8);
      sync.storeVolatile64(slot, sync.globalTimer());
      sync.storeVolatile64(add(slot, i64(16)),
                           arith::IndexCastOp::create(b, loc, b.getI64Type(), blockId));
      sync.storeVolatile64(add(slot, i64(24)),
                           arith::ExtUIOp::create(b, loc, b.getI64Type(), sync.smId()));
    });
  SmallVector<int64_t> cases;
  for (int64_t c = 0; c < static_cast<int64_t>(t.cases.size()); ++c)
    cases.push_back(c);
  auto sw = scf::IndexSwitchOp::create(b, loc, TypeRange{}, toIndex(caseId),
                                       cases, cases.size());
  sw->setAttr("tile.exclusive_cases", b.getUnitAttr());
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&sw.getDefaultRegion().emplaceBlock());
    scf::YieldOp::create(b, loc);
    for (int64_t c = 0; c < static_cast<int64_t>(t.cases.size()); ++c) {
      Block &block = sw.getCaseRegions()[c].emplaceBlock();
      b.setInsertionPointToStart(&block);
      auto yield = scf::YieldOp::create(b, loc);
      b.setInsertionPoint(yield);
      emitCase(c, task, instance);
    }
  }
  // Everyone is done with the body's data (and its shared memory) before
  // thread 0 signals and picks the next entry.
  gpu::BarrierOp::create(b, loc);
  ifThread0([&] {
    if (timeline) {
      Value slot = sync.address(timelineBase, add(mul(entry, i32(4)), i32(1)), 8);
      sync.storeVolatile64(slot, sync.globalTimer());
    }
    Value begin = toIndex(table("signal_offsets", entry));
    Value end = toIndex(table("signal_offsets", add(entry, i32(1))));
    auto loop = scf::ForOp::create(b, loc, begin, end, idx(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value event = table("signals", loop.getInductionVar());
    sync.releaseIncrement(sync.address(eventsBase, event, 4));
  });
}

void PersistentKernelBuilder::buildWorker(Value blockId) {
  Type i32Type = b.getI32Type();
  Value w = arith::IndexCastOp::create(b, loc, i32Type, blockId);
  Value aotBegin = table("aot_offsets", w);
  Value aotEnd = table("aot_offsets", add(w, i32(1)));
  auto loop = scf::WhileOp::create(b, loc, TypeRange{i32Type, i32Type},
                                   ValueRange{aotBegin});
  OpBuilder::InsertionGuard guard(b);
  Block *before = b.createBlock(&loop.getBefore(), {}, {i32Type}, {loc});
  Block *after =
      b.createBlock(&loop.getAfter(), {}, {i32Type, i32Type}, {loc, loc});
  b.setInsertionPointToStart(before);
  ifThread0([&] {
    auto [entry, next] = pickEntry(before->getArgument(0), aotEnd);
    memref::StoreOp::create(b, loc, entry, control, idx(0));
    memref::StoreOp::create(b, loc, next, control, idx(1));
  });
  gpu::BarrierOp::create(b, loc);
  Value entry = memref::LoadOp::create(b, loc, control, idx(0));
  Value next = memref::LoadOp::create(b, loc, control, idx(1));
  scf::ConditionOp::create(b, loc, cmp(arith::CmpIPredicate::sge, entry, i32(0)),
                           ValueRange{entry, next});
  b.setInsertionPointToStart(after);
  auto yield = scf::YieldOp::create(b, loc, after->getArgument(1));
  b.setInsertionPoint(yield);
  runEntry(after->getArgument(0), blockId);
}

void PersistentKernelBuilder::buildScheduler() {
  if (t.numJit == 0)
    return;
  // Lane 0 of scheduler warp s publishes JIT entries s, s + S, ...
  int64_t schedulerWarps = std::clamp<int64_t>(t.schedulers, 1, t.threads / 32);
  Value tid = toIndex(threadId);
  Value warp = arith::DivUIOp::create(b, loc, tid, idx(32));
  Value lane0 = cmp(arith::CmpIPredicate::eq,
                    arith::RemUIOp::create(b, loc, tid, idx(32)), idx(0));
  Value active = andI(lane0, cmp(arith::CmpIPredicate::ult, warp, idx(schedulerWarps)));
  auto guardOp = scf::IfOp::create(b, loc, active, false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(guardOp.thenBlock());
  auto loop = scf::ForOp::create(b, loc, warp, idx(t.numJit), idx(schedulerWarps));
  b.setInsertionPointToStart(loop.getBody());
  Value j = loop.getInductionVar();
  Value entry = table("jit", j);
  Value start = sync.globalTimer();
  auto wait = scf::WhileOp::create(b, loc, TypeRange{}, ValueRange{});
  Block *before = b.createBlock(&wait.getBefore());
  Block *after = b.createBlock(&wait.getAfter());
  b.setInsertionPointToStart(before);
  Readiness r = checkReady(entry);
  Value abort = andI(notI(r.ready), aborted());
  Value late = andI(andI(notI(r.ready), notI(abort)), timedOut(start));
  auto report = scf::IfOp::create(b, loc, late, false);
  {
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(report.thenBlock());
    recordError(kSchedulerWaitTimeout, entry, r);
  }
  Value stop = orI(r.ready, orI(abort, late));
  auto publish = scf::IfOp::create(b, loc, r.ready, false);
  {
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(publish.thenBlock());
    sync.storeRelease(stateAddr(add(toI32(j), i32(kJitRing))), add(entry, i32(1)));
  }
  scf::ConditionOp::create(b, loc, notI(stop), ValueRange{});
  b.setInsertionPointToStart(after);
  scf::YieldOp::create(b, loc);
}

void PersistentKernelBuilder::buildExit() {
  // The last CTA to finish resets the JIT ring and opens the next epoch.
  gpu::BarrierOp::create(b, loc);
  ifThread0([&] {
    int64_t ctas = t.workers + (t.numJit > 0 ? 1 : 0);
    Value done = sync.atomicAdd(stateAddr(kDoneCtas), i32(1));
    auto last = scf::IfOp::create(
        b, loc, cmp(arith::CmpIPredicate::eq, done, i32(ctas - 1)), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(last.thenBlock());
    if (t.numJit > 0) {
      auto loop = scf::ForOp::create(b, loc, idx(0), idx(t.numJit), idx(1));
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(loop.getBody());
      sync.storeVolatile(stateAddr(add(toI32(loop.getInductionVar()), i32(kJitRing))),
                         i32(0));
    }
    for (int64_t word : {kJitHead, kJitTail, kDoneCtas})
      sync.storeVolatile(stateAddr(word), i32(0));
    sync.fence();
    sync.storeVolatile(stateAddr(kEpoch), epochTarget);
  });
}

void PersistentKernelBuilder::build(Value blockId, ValueRange graphGlobals,
                                    Value tables, Value events, Value state,
                                    Value timelineBuf) {
  globals.assign(graphGlobals.begin(), graphGlobals.end());
  tablesBuf = tables;
  // The word thread 0 hands the next entry to the CTA through.
  auto shared = gpu::AddressSpaceAttr::get(b.getContext(),
                                           gpu::AddressSpace::Workgroup);
  control = tile::AllocSharedOp::create(
      b, loc, MemRefType::get({2}, b.getI32Type(), nullptr, shared),
      tile::SwizzleAttr());
  // Allocations hoisted out of the bodies go right after the control word.
  auto anchor = arith::ConstantIndexOp::create(b, loc, 0);
  hoistPoint = anchor;
  threadId = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  isThread0 = cmp(arith::CmpIPredicate::eq, threadId, idx(0));
  eventsBase = sync.baseAddress(events);
  stateBase = sync.baseAddress(state);
  timelineBase = sync.baseAddress(timelineBuf);
  // Launch n waits for counters at trigger * (n + 1); n is stable during a
  // launch (only the last CTA to finish changes it).
  epochTarget = add(sync.loadVolatile(stateAddr(kEpoch)), i32(1));

  Value isWorker = cmp(arith::CmpIPredicate::ult, blockId, idx(t.workers));
  auto role = scf::IfOp::create(b, loc, isWorker, /*withElse=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(role.thenBlock()->getTerminator());
    buildWorker(blockId);
    b.setInsertionPoint(role.elseBlock()->getTerminator());
    buildScheduler();
  }
  buildExit();
}

namespace {

struct ConvertMegaToGPUPass
    : public tilemega::impl::ConvertMegaToGPUBase<ConvertMegaToGPUPass> {
  using ConvertMegaToGPUBase::ConvertMegaToGPUBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<GraphOp> graphs(module.getOps<GraphOp>());
    DenseSet<Operation *> bodies;
    for (GraphOp graph : graphs) {
      if (failed(convert(graph, bodies)))
        return signalPassFailure();
    }
    for (GraphOp graph : graphs)
      graph.erase();
    // Bodies live on inside the persistent kernels; as kernels of their own
    // they would only bloat the artifact.
    for (Operation *body : bodies)
      if (SymbolTable::symbolKnownUseEmpty(body, module))
        body->erase();
  }

  LogicalResult convert(GraphOp graph, DenseSet<Operation *> &bodies) {
    FailureOr<TaskTables> tables = buildTaskTables(graph);
    if (failed(tables))
      return failure();
    tables->schedulers = graph.getNumSchedulers();
    int64_t ctas = tables->workers + (tables->numJit > 0 ? 1 : 0);
    if (ctas > maxCtas)
      return graph.emitOpError()
             << "needs " << ctas << " CTAs (" << tables->workers
             << " workers" << (tables->numJit > 0 ? " + 1 scheduler CTA" : "")
             << ") but only " << maxCtas
             << " can be resident at once (max-ctas, the GPU's SM count), and "
                "a persistent kernel needs all of them resident: use at most "
             << maxCtas - (tables->numJit > 0 ? 1 : 0) << " workers";
    if (tables->numEntries == 0)
      return graph.emitOpError() << "has no tasks to run";
    for (const TaskCase &c : tables->cases)
      bodies.insert(c.body);

    Location loc = graph.getLoc();
    OpBuilder b(graph);
    MLIRContext *ctx = b.getContext();
    SmallVector<Type> argTypes(graph.getBody().getArgumentTypes());
    auto buffer = [&](int64_t n, Type type) {
      return MemRefType::get({std::max<int64_t>(1, n)}, type);
    };
    argTypes.push_back(buffer(tables->data.size(), b.getI32Type()));
    argTypes.push_back(buffer(tables->events.size(), b.getI32Type()));
    argTypes.push_back(buffer(16 + std::max<int64_t>(1, tables->numJit), b.getI32Type()));
    argTypes.push_back(buffer(4 * tables->numEntries, b.getI64Type()));
    auto func = func::FuncOp::create(b, loc, graph.getSymName(),
                                     b.getFunctionType(argTypes, {}));

    // Parameter names and roles for the artifact.
    auto names = graph->getAttrOfType<ArrayAttr>("mega.arg_names");
    auto roles = graph->getAttrOfType<ArrayAttr>("mega.arg_roles");
    unsigned numGlobals = graph.getGlobals().size();
    for (unsigned i = 0; i < numGlobals; ++i) {
      if (names && i < names.size())
        func.setArgAttr(i, "tile.name", names[i]);
      if (roles && i < roles.size())
        func.setArgAttr(i, "mega.role", roles[i]);
    }
    const char *runtimeNames[] = {"mega_tables", "mega_events", "mega_state",
                                  "mega_timeline"};
    for (unsigned i = 0; i < 4; ++i) {
      func.setArgAttr(numGlobals + i, "tile.name", b.getStringAttr(runtimeNames[i]));
      func.setArgAttr(numGlobals + i, "mega.role", b.getStringAttr("runtime"));
    }
    int64_t watchdogNs = watchdogMs * 1000000;
    func->setAttr("tilemega.mega",
                  buildMegaMetadata(graph, *tables, timeline, watchdogNs));

    Block *entry = func.addEntryBlock();
    b.setInsertionPointToStart(entry);
    auto kernel = tile::KernelOp::create(b, loc, ArrayRef<int64_t>{ctas},
                                         tables->threads);
    func::ReturnOp::create(b, loc);
    Block &body = kernel.getBody().front();
    b.setInsertionPointToStart(&body);
    PersistentKernelBuilder builder(b, loc, *tables, timeline, watchdogNs);
    ValueRange args = entry->getArguments();
    builder.build(body.getArgument(0), args.take_front(numGlobals),
                  args[numGlobals], args[numGlobals + 1], args[numGlobals + 2],
                  args[numGlobals + 3]);
    (void)ctx;
    return success();
  }
};

} // namespace
