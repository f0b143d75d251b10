//===- PersistentKernel.cpp - the body of a persistent mega-kernel --------===//

#include "PersistentKernel.h"

#include "tilemega/Dialect/Mega/IR/MegaDialect.h"
#include "tilemega/Dialect/Mega/IR/MegaPairs.h"
#include "tilemega/Dialect/Tile/IR/TilePrefetch.h"
#include "tilemega/Dialect/Tile/IR/TileSharedMemory.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::mega;
using namespace mlir::tilemega::mega_to_gpu;

PersistentKernelBuilder::Readiness
PersistentKernelBuilder::checkReady(const Record &r) {
  // The common case, at most one event, needs one acquire load; entries
  // with several events walk their wait list.
  Value entry = r.entry;
  Type i32Type = b.getI32Type();
  auto fast = scf::IfOp::create(
      b, loc, TypeRange{b.getI1Type(), i32Type, i32Type, i32Type},
      cmp(arith::CmpIPredicate::sle, r.numWaits, i32(1)), true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(fast.thenBlock());
    Value none = cmp(arith::CmpIPredicate::eq, r.numWaits, i32(0));
    Value event = arith::MaxSIOp::create(b, loc, r.wait0, i32(0));
    Value need = mul(r.trigger0, epochTarget);
    Value seen = pollEvent(event);
    // Counters wrap after 2^32 signals; compare the difference.
    Value fired = orI(none, cmp(arith::CmpIPredicate::sge,
                                arith::SubIOp::create(b, loc, seen, need), i32(0)));
    scf::YieldOp::create(b, loc, ValueRange{fired, select(fired, i32(-1), r.wait0),
                                            seen, need});
    b.setInsertionPointToStart(fast.elseBlock());
    Value begin = toIndex(table("wait_offsets", entry));
    Value end = toIndex(table("wait_offsets", add(entry, i32(1))));
    Value yes = bit(true);
    auto loop = scf::ForOp::create(b, loc, begin, end, idx(1),
                                   ValueRange{yes, i32(-1), i32(0), i32(0)});
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(loop.getBody());
      Value w = loop.getInductionVar();
      ValueRange acc = loop.getRegionIterArgs();
      Value ev = table("waits", w);
      Value needW = mul(table("triggers", ev), epochTarget);
      Value seenW = pollEvent(ev);
      Value firedW = cmp(arith::CmpIPredicate::sge,
                         arith::SubIOp::create(b, loc, seenW, needW), i32(0));
      Value firstMiss = andI(acc[0], notI(firedW));
      scf::YieldOp::create(b, loc,
                           ValueRange{andI(acc[0], firedW),
                                      select(firstMiss, ev, acc[1]),
                                      select(firstMiss, seenW, acc[2]),
                                      select(firstMiss, needW, acc[3])});
    }
    scf::YieldOp::create(b, loc, loop.getResults());
  }
  return {fast.getResult(0), fast.getResult(1), fast.getResult(2),
          fast.getResult(3)};
}

void PersistentKernelBuilder::signalEvent(Value entry) {
  if (t.ranks == 1) {
    mega::SignalOp::create(b, loc, eventsBuf, ValueRange{toIndex(entry)});
    return;
  }
  Value bit = i32(kPeerSignalBit);
  Value word = arith::AndIOp::create(b, loc, entry, i32(~kPeerSignalBit));
  Value peer = cmp(arith::CmpIPredicate::ne, arith::AndIOp::create(b, loc, entry, bit),
                   i32(0));
  auto branch = scf::IfOp::create(b, loc, peer, /*withElse=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(branch.thenBlock());
  // The argument table's last ranks + 1 words: this rank, then every
  // rank's events buffer address (the runtime writes them at bind).
  int64_t peerWords = globalTypes.size();
  Value rank = arith::TruncIOp::create(
      b, loc, b.getI32Type(), memref::LoadOp::create(b, loc, sharedArgs, idx(peerWords)));
  Value mine = toIndex(add(word, rank));
  auto ranks = scf::ForOp::create(b, loc, idx(0), idx(t.ranks), idx(1));
  {
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(ranks.getBody());
    Value slot = arith::AddIOp::create(b, loc, ranks.getInductionVar(), idx(peerWords + 1));
    Value base = memref::LoadOp::create(b, loc, sharedArgs, slot);
    mega::SignalPeerOp::create(b, loc, base, mine);
  }
  b.setInsertionPointToStart(branch.elseBlock());
  mega::SignalOp::create(b, loc, eventsBuf, ValueRange{toIndex(word)});
}

void PersistentKernelBuilder::recordError(int64_t code, Value entry,
                                          const Readiness &r, Value cta) {
  Value raised = mega::RaiseFlagOp::create(b, loc, b.getI1Type(), stateBuf, ValueRange{idx(kAbort)});
  auto first = scf::IfOp::create(b, loc, raised, /*withElse=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(first.thenBlock());
  // The worker index: the block index, or, by SM, the index claimed,
  // read again here (a value kept live for this cold path cost the
  // Qwen2-shaped kernel 52 registers and a spill).
  if (!cta)
    cta = claimedIndex
              ? memref::LoadOp::create(b, loc, claimedIndex, ValueRange{idx(0)}).getResult()
              : arith::IndexCastOp::create(b, loc, b.getI32Type(),
                                           gpu::BlockIdOp::create(b, loc, gpu::Dimension::x))
                    .getResult();
  postState(kErrorEntry, entry);
  postState(kErrorEvent, r.event);
  postState(kErrorCta, cta);
  postState(kErrorSeen, r.seen);
  postState(kErrorExpected, r.expected);
  mega::FenceOp::create(b, loc);
  postState(kErrorCode, i32(code));
}

PersistentKernelBuilder::Pick
PersistentKernelBuilder::pickNextAot(Value pos, Value aotBegin, Value aotEnd) {
  // No abort read: the entry's wait reads the flag (an entry whose events
  // fired may still run after an abort; the list is finite), and a global
  // read here would put a round trip before every entry.
  Value go = cmp(arith::CmpIPredicate::slt, pos, aotEnd);
  Value slot = arith::SubIOp::create(b, loc, pos, aotBegin);
  auto pick = scf::IfOp::create(b, loc, TypeRange{b.getI32Type()}, go, true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(pick.thenBlock());
    scf::YieldOp::create(b, loc, sharedRecord(slot).entry);
    b.setInsertionPointToStart(pick.elseBlock());
    scf::YieldOp::create(b, loc, i32(-1));
  }
  return {pick.getResult(0), add(pos, i32(1)), i32(-1), select(go, slot, i32(-1))};
}

PersistentKernelBuilder::Pick
PersistentKernelBuilder::pickEntry(Value pos, Value aotBegin, Value aotEnd,
                                   Value ticket) {
  // The worker's JIT ticket: -1 none; k < numJit the JIT-list position it
  // will run once published; numJit: the JIT list is used up for it.
  // Tickets come from one atomic add, so idle workers never contend on a
  // compare-and-swap; a worker holding an unpublished ticket keeps running
  // its AOT entries (it never blocks on the ticket), which keeps the kernel
  // deadlock-free.
  Type i32Type = b.getI32Type();
  Value start = now();
  auto loop = scf::WhileOp::create(b, loc, TypeRange{i32Type, i32Type, i32Type, i32Type},
                                   ValueRange{pos, ticket});
  OpBuilder::InsertionGuard outer(b);
  Block *before = b.createBlock(&loop.getBefore(), {}, {i32Type, i32Type}, {loc, loc});
  Block *after = b.createBlock(&loop.getAfter(), {}, {i32Type, i32Type, i32Type, i32Type},
                               {loc, loc, loc, loc});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(before);
    Value p = before->getArgument(0), k = before->getArgument(1);
    // The abort flag is read first: a relaxed load issued ahead of the
    // acquire loads below is in flight with them, where one issued after
    // them would wait for them and add a round trip to every pick (an
    // acquire load holds back the loads after it, not those before).
    Value abortRaised = aborted();
    Value hasAot = cmp(arith::CmpIPredicate::slt, p, aotEnd);
    Value numJit = i32(t.numJit);
    Value none = i32(-1);

    // 1. A held ticket whose entry is published runs first.
    Value tail = t.numJit > 0 ? pollState(kJitTail) : i32(0);
    Value held = andI(cmp(arith::CmpIPredicate::sge, k, i32(0)),
                      cmp(arith::CmpIPredicate::slt, k, numJit));
    Value heldReady = andI(held, cmp(arith::CmpIPredicate::slt, k, tail));
    // 2. Else the next AOT entry, if its events fired.
    auto aot = scf::IfOp::create(b, loc, TypeRange{i32Type},
                                 andI(notI(heldReady), hasAot), true);
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(aot.thenBlock());
      Record r = sharedRecord(arith::SubIOp::create(b, loc, p, aotBegin));
      scf::YieldOp::create(b, loc, select(checkReady(r).ready, r.entry, none));
      b.setInsertionPointToStart(aot.elseBlock());
      scf::YieldOp::create(b, loc, none);
    }
    Value aotEntry = aot.getResult(0);
    Value gotAot = cmp(arith::CmpIPredicate::sge, aotEntry, i32(0));
    // 3. Else, holding no ticket, take one.
    Value newTicket = k;
    if (t.numJit > 0) {
      Value take = andI(andI(notI(heldReady), notI(gotAot)),
                        cmp(arith::CmpIPredicate::slt, k, i32(0)));
      auto ticketOp = scf::IfOp::create(b, loc, TypeRange{i32Type}, take, true);
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(ticketOp.thenBlock());
      Value head = peekState(kJitHead);
      auto draw = scf::IfOp::create(b, loc, TypeRange{i32Type},
                                    cmp(arith::CmpIPredicate::slt, head, numJit), true);
      {
        OpBuilder::InsertionGuard g3(b);
        b.setInsertionPointToStart(draw.thenBlock());
        Value drawn = claimState(kJitHead);
        scf::YieldOp::create(b, loc, arith::MinSIOp::create(b, loc, drawn, numJit).getResult());
        b.setInsertionPointToStart(draw.elseBlock());
        scf::YieldOp::create(b, loc, numJit);
      }
      scf::YieldOp::create(b, loc, draw.getResult(0));
      b.setInsertionPointToStart(ticketOp.elseBlock());
      scf::YieldOp::create(b, loc, k);
      b.setInsertionPointAfter(ticketOp);
      newTicket = ticketOp.getResult(0);
    }
    // A ticket drawn just now may already be published.
    Value newHeld = andI(cmp(arith::CmpIPredicate::sge, newTicket, i32(0)),
                         cmp(arith::CmpIPredicate::slt, newTicket, numJit));
    Value runJit = andI(notI(gotAot), andI(newHeld, cmp(arith::CmpIPredicate::slt, newTicket, tail)));
    Value jitPos = arith::MaxSIOp::create(b, loc, arith::MinSIOp::create(b, loc, newTicket, i32(std::max<int64_t>(0, t.numJit - 1))), i32(0));
    Value jitEntry = t.numJit > 0 ? table("jit", jitPos) : none;
    Value entry = select(gotAot, aotEntry, select(runJit, jitEntry, none));
    Value got = cmp(arith::CmpIPredicate::sge, entry, i32(0));
    Value nextPos = select(gotAot, add(p, i32(1)), p);
    Value nextTicket = select(runJit, none, newTicket);
    // Done: no AOT entry left and no JIT entry to come for this worker.
    Value jitOver = t.numJit > 0
                        ? cmp(arith::CmpIPredicate::sge, nextTicket, numJit)
                        : bit(true);
    Value finished = andI(notI(got), andI(notI(hasAot), jitOver));
    Value stuck = andI(notI(got), notI(finished));
    Value abort = andI(stuck, abortRaised);
    Value late = andI(andI(stuck, notI(abort)), timedOut(start));
    auto report = scf::IfOp::create(b, loc, late, /*withElse=*/false);
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(report.thenBlock());
      // Name the AOT entry and its first unfired event, or the JIT wait.
      auto which = scf::IfOp::create(b, loc, hasAot, true);
      b.setInsertionPointToStart(which.thenBlock());
      Record r = sharedRecord(arith::SubIOp::create(b, loc, p, aotBegin));
      recordError(kWorkerWaitTimeout, r.entry, checkReady(r));
      b.setInsertionPointToStart(which.elseBlock());
      recordError(kJitWaitTimeout, t.numJit > 0 ? jitEntry : none,
                  {Value(), none, tail, add(nextTicket, i32(1))});
    }
    Value stop = orI(orI(got, finished), orI(abort, late));
    // Where the entry's record is: its AOT slot, or -1 (the JIT: global).
    Value slot = select(gotAot, arith::SubIOp::create(b, loc, p, aotBegin), none);
    scf::ConditionOp::create(b, loc, notI(stop),
                             ValueRange{select(got, entry, none), nextPos, nextTicket, slot});
  }
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(after);
    scf::YieldOp::create(b, loc, ValueRange{after->getArgument(1), after->getArgument(2)});
  }
  return {loop.getResult(0), loop.getResult(1), loop.getResult(2),
          loop.getResult(3)};
}

Value PersistentKernelBuilder::caseArgumentSlot(int64_t caseIndex, unsigned a,
                                                Value task) {
  const TaskCase &c = t.cases[caseIndex];
  SmallVector<int64_t> slots;
  for (unsigned ti : c.tasks) {
    TaskOp task = t.tasks[ti];
    slots.push_back(cast<BlockArgument>(task.getArgs()[a]).getArgNumber());
  }
  if (llvm::all_equal(slots))
    return idx(slots.front());
  SmallVector<int64_t> cases(c.tasks.begin() + 1, c.tasks.end());
  auto sw = scf::IndexSwitchOp::create(b, loc, TypeRange{b.getIndexType()},
                                       toIndex(task), cases, cases.size());
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&sw.getDefaultRegion().emplaceBlock());
  scf::YieldOp::create(b, loc, idx(slots.front()));
  for (auto [r, slot] : llvm::enumerate(ArrayRef(slots).drop_front())) {
    b.setInsertionPointToStart(&sw.getCaseRegions()[r].emplaceBlock());
    scf::YieldOp::create(b, loc, idx(slot));
  }
  return sw.getResult(0);
}

PersistentKernelBuilder::CaseOperands
PersistentKernelBuilder::bindCase(int64_t caseIndex, Value task) {
  const TaskCase &c = t.cases[caseIndex];
  func::FuncOp body = c.body;
  CaseOperands operands;
  // Operands: the graph tensors the task passes, from the argument table;
  // those no task of the graph writes (weights) can be read early.
  for (unsigned a = 0; a < body.getNumArguments(); ++a) {
    Value tensor = graphArg(caseArgumentSlot(caseIndex, a, task),
                            body.getArgument(a).getType());
    operands.mapping.map(body.getArgument(a), tensor);
    operands.index[tensor] = a;
    bool anyWritten = llvm::any_of(c.tasks, [&](unsigned ti) {
      return written.contains(
          cast<BlockArgument>(TaskOp(t.tasks[ti]).getArgs()[a]).getArgNumber());
    });
    if (!anyWritten)
      operands.readOnly.insert(tensor);
  }
  return operands;
}

void PersistentKernelBuilder::emitCase(int64_t caseIndex, CaseOperands operands,
                                       Value task, Value instance, const Record *waitFor,
                                       Value entry,
                                       function_ref<void()> stampStart,
                                       int64_t group, bool ownPoint) {
  const TaskCase &c = t.cases[caseIndex];
  func::FuncOp body = c.body;
  tile::KernelOp kernel = getTileKernel(body);
  IRMapping &mapping = operands.mapping;
  const DenseSet<Value> &readOnly = operands.readOnly;
  // A pair's second body keeps the first one's point: its early copies
  // start there.
  if (ownPoint) {
    casePoint = {};
    pointsBeforeWait.clear();
  }
  caseOperands = operands.index;
  // The point before the wait: the body's early copies may start here.
  auto pointBeforeWait = [&]() {
    if (!ownPoint)
      return;
    casePoint = tile::PrefetchPointOp::create(b, loc);
    pointsBeforeWait.insert(casePoint);
  };
  // Thread 0 waits for the entry's events here; the body runs if they fired.
  auto waitAndRun = [&]() {
    Value ok = waitInsideCase(*waitFor, entry);
    stampStart();
    auto run = scf::IfOp::create(b, loc, ok, /*withElse=*/false);
    b.setInsertionPoint(run.thenBlock()->getTerminator());
  };
  auto waitHere = [&]() {
    pointBeforeWait();
    waitAndRun();
  };
  // An entry of one unit waits in that unit, so its early copies start
  // before the wait.
  bool ownUnitFirst = c.unitsPerTask == 1;
  // A body's tile.task_wait places the wait (in the first unit only: a
  // loop over units would repeat it); the ops before it run first.
  bool waitAtBody = waitFor && ownUnitFirst &&
                    !kernel.getBody().front().getOps<tile::TaskWaitOp>().empty();

  // Units: instance * k + j for j < k, clipped to the kernel's grid (or,
  // claimed, the instance's own unit and then the claimed ones). `first`:
  // the entry's first unit, which waits for its events.
  auto cloneBody = [&](Value unit, bool first) {
    Block &src = kernel.getBody().front();
    ArrayRef<int64_t> grid = kernel.getGrid();
    // A mapping of this clone's own: cloning a region again through a
    // mapping that holds its block arguments would drop them.
    IRMapping unitMapping = mapping;
    // Block indices from the linear unit, the last grid dimension fastest.
    Value rest = unit;
    for (int d = grid.size() - 1; d >= 0; --d) {
      Value size = idx(grid[d]);
      Value coord = d == 0 ? rest : arith::RemUIOp::create(b, loc, rest, size).getResult();
      unitMapping.map(src.getArgument(d), coord);
      if (d > 0)
        rest = arith::DivUIOp::create(b, loc, rest, size);
    }
    OpBuilder::InsertionGuard guard(b);
    if (first && waitAtBody)
      pointBeforeWait();
    else if (first && waitFor && ownUnitFirst)
      waitHere();
    bool beforeWait = first && waitAtBody;
    for (Operation &op : src) {
      if (isa<tile::TaskWaitOp>(op)) {
        if (beforeWait)
          waitAndRun();
        beforeWait = false;
        continue;
      }
      Operation *clone = b.clone(op, unitMapping);
      if (beforeWait) {
        checkBeforeWait(clone, caseIndex, body);
        clone->walk([&](tile::PrefetchPointOp point) { pointsBeforeWait.insert(point); });
      }
      checkEarlyCopies(clone, caseIndex, body);
      // A claimed unit's copies start in its own iteration (its index is
      // known only there).
      if (waitInCase && !c.claimsUnits)
        markEarlyCopies(clone, readOnly);
      // Allocations move to the kernel's top level (they must sit directly
      // in the tile.kernel); the group lets cases share shared memory.
      if (isa<tile::AllocSharedOp, tile::AllocFragmentOp>(clone)) {
        clone->moveBefore(hoistPoint);
        clone->setAttr(tile::TileDialect::getExclusiveGroupAttrName(),
                       b.getI64IntegerAttr(group));
      }
    }
  };
  // Values the tile.kernel uses from its function around it: the body's
  // arguments are mapped above; constants are cloned into the case; any
  // other value would be left behind when the body function goes away.
  SetVector<Value> outside;
  getUsedValuesDefinedAbove(kernel.getBody(), outside);
  for (Value v : outside) {
    if (mapping.contains(v))
      continue;
    Operation *def = v.getDefiningOp();
    if (def && def->hasTrait<OpTrait::ConstantLike>() && def->getNumOperands() == 0) {
      mapping.map(v, b.clone(*def)->getResult(cast<OpResult>(v).getResultNumber()));
      continue;
    }
    auto diag = kernel.emitOpError()
                << "of task body @" << body.getSymName()
                << " uses a value defined outside it that is not a constant ("
                << (def ? def->getName().getStringRef() : StringRef("a block argument"))
                << "): a persistent kernel runs only the tile.kernel of each body; "
                   "compute it inside the tile.kernel";
    if (def)
      diag.attachNote(def->getLoc()) << "defined here";
    errors = true;
    return;
  }
  Value first = mul(toIndex(instance), idx(c.unitsPerTask));
  if (c.unitsPerTask == 1) {
    cloneBody(first, /*first=*/true);
    return;
  }
  OpBuilder::InsertionGuard guard(b);
  // Several units: the wait goes before them (the first unit's early
  // copies would need its index at the prefetch point; tile-pipeline
  // leaves such prologues at their loops).
  if (waitFor)
    waitHere();
  if (c.claimsUnits) {
    Value counter = toIndex(add(toIndex(task), idx(t.unitCounterBase())));
    emitClaimedUnits(c, instance, counter, cloneBody);
    return;
  }
  auto loop = scf::ForOp::create(b, loc, idx(0), idx(c.unitsPerTask), idx(1));
  // The units run the same body one after another: tile-pipeline may start
  // the next unit's loads under this one's last iterations.
  if (streamUnits)
    loop->setAttr(tile::TileDialect::getStreamUnitsAttrName(), b.getUnitAttr());
  b.setInsertionPointToStart(loop.getBody());
  Value unit = add(first, loop.getInductionVar());
  // The previous unit's last shared-memory reads finish before this unit's
  // (possibly asynchronous) copies overwrite them.
  gpu::BarrierOp::create(b, loc);
  if (c.units % c.unitsPerTask != 0) {
    auto inRange = scf::IfOp::create(b, loc, cmp(arith::CmpIPredicate::ult, unit, idx(c.units)), false);
    b.setInsertionPointToStart(inRange.thenBlock());
  }
  cloneBody(unit, /*first=*/false);
}

void PersistentKernelBuilder::claimUnit(Value counter, int64_t count) {
  // Thread 0 stores the unit itself: a claim handed out of the scf.if as a
  // value (0 in the other threads) let LLVM specialise the whole loop for
  // that constant, splitting its barriers between threads.
  ifThread0([&] {
    Value claim = mega::ClaimOp::create(b, loc, b.getI32Type(), stateBuf,
                                        ValueRange{counter}, i32(1));
    memref::StoreOp::create(b, loc, add(claim, i32(count)), claimedUnit, ValueRange{idx(0)});
  });
}

void PersistentKernelBuilder::emitClaimedUnits(
    const TaskCase &c, Value ownUnit, Value counter,
    function_ref<void(Value, bool)> cloneBody) {
  // One loop, one copy of the body: the instance's own unit, then unit
  // count + j for each claim j (0-based in the step: the counter is zeroed
  // when a step ends) while that is a unit. A second copy of the body (the
  // own unit's, before the loop) ended in blocks identical to the loop's,
  // which the lowering merged; LLVM then split the merged join by a
  // per-thread branch of the GEMV's reduction, and the threads of one warp
  // ran different copies of the loop's aligned barriers and shuffles: the
  // kernel hung outside every watchdog (gen_small with claimed head units,
  // H100, 2026-12-08). The loop is marked so that mega-fresh-thread-ids
  // computes every per-thread value in it from a thread index read in the
  // iteration: with one copy of the body LLVM still unswitched the loop on
  // the loop-invariant `thread 0` condition of the claim.
  int64_t count = llvm::divideCeil(c.units, c.unitsPerTask);
  Type i32Type = b.getI32Type();
  // Thread 0 claims before the own unit runs, and each next claim before
  // the unit it follows: the atomic's round trip hides under that unit.
  claimUnit(counter, count);
  auto loop = scf::WhileOp::create(b, loc, TypeRange{i32Type}, ValueRange{ownUnit});
  loop->setAttr(mega::MegaDialect::getClaimLoopAttrName(), b.getUnitAttr());
  OpBuilder::InsertionGuard guard(b);
  Block *before = b.createBlock(&loop.getBefore(), {}, {i32Type}, {loc});
  cloneBody(toIndex(before->getArgument(0)), /*first=*/false);
  // Thread 0's store of the claimed unit and the unit's last shared-memory
  // reads are done; every thread reads the word before thread 0 writes the
  // next claim and the next unit's copies overwrite the tiles.
  gpu::BarrierOp::create(b, loc);
  Value unit = memref::LoadOp::create(b, loc, claimedUnit, ValueRange{idx(0)});
  gpu::BarrierOp::create(b, loc);
  // Unsigned: a counter that wrapped reads as past the end.
  Value more = cmp(arith::CmpIPredicate::ult, unit, i32(c.units));
  scf::ConditionOp::create(b, loc, more, ValueRange{unit});
  Block *after = b.createBlock(&loop.getAfter(), {}, {i32Type}, {loc});
  claimUnit(counter, count);
  scf::YieldOp::create(b, loc, ValueRange{after->getArgument(0)});
}

bool PersistentKernelBuilder::waitsOnLighterStage(unsigned taskIndex) {
  return mega::waitsOnLighterStage(t.tasks[taskIndex]);
}

llvm::SmallDenseMap<unsigned, Operation *>
PersistentKernelBuilder::writtenGraphArgs() const {
  llvm::SmallDenseMap<unsigned, Operation *> result;
  // In a graph of several ranks a peer's task may write any argument (an
  // inbox bound to another rank's `to` tensor): none is known read-only.
  if (t.ranks > 1) {
    for (unsigned a = 0; a < globalTypes.size(); ++a)
      result.try_emplace(a, nullptr);
    return result;
  }
  // The first task that writes each (buildTaskOrder lists them in order).
  for (const auto &[arg, tasks] : writerTasks)
    result.try_emplace(arg, t.tasks[tasks.front()]);
  return result;
}

void PersistentKernelBuilder::buildTaskOrder() {
  unsigned n = t.tasks.size();
  for (unsigned i = 0; i < n; ++i) {
    TaskOp task = t.tasks[i];
    std::optional<ArrayAttr> footprint = task.getFootprint();
    for (auto [a, arg] : llvm::enumerate(task.getArgs())) {
      bool writes = !footprint || llvm::any_of(footprint->getAsRange<AccessAttr>(),
                                               [&](AccessAttr access) {
                                                 return access.isWrite() &&
                                                        access.getOperand() == int64_t(a);
                                               });
      if (!writes)
        continue;
      SmallVector<unsigned> &list = writerTasks[cast<BlockArgument>(arg).getArgNumber()];
      if (list.empty() || list.back() != i)
        list.push_back(i);
    }
    for (int64_t k = 0; k < task.getNumInstances(); ++k)
      for (FlatSymbolRefAttr ref : task.getInstanceSignalRefs(k))
        signalers[ref.getAttr()].push_back({i, k});
  }
}

bool PersistentKernelBuilder::allInstancesBefore(unsigned first, unsigned later) const {
  auto [cached, fresh] = instancesBefore.try_emplace({first, later}, false);
  if (!fresh)
    return cached->second;
  // Every instance of `later` must wait (transitively, through the events
  // it waits on and the instances that signal those) for every instance of
  // `first`: one that does not could write before `first` reads.
  int64_t needed = TaskOp(t.tasks[first]).getNumInstances();
  TaskOp last = t.tasks[later];
  bool all = true;
  for (int64_t k = 0; all && k < last.getNumInstances(); ++k) {
    DenseSet<std::pair<unsigned, int64_t>> seen;
    SmallVector<std::pair<unsigned, int64_t>> work = {{later, k}};
    int64_t found = 0;
    while (!work.empty() && found < needed) {
      auto [ti, i] = work.pop_back_val();
      for (FlatSymbolRefAttr ref : TaskOp(t.tasks[ti]).getInstanceWaitRefs(i)) {
        auto producers = signalers.find(ref.getAttr());
        if (producers == signalers.end())
          continue;
        for (auto producer : producers->second)
          if (seen.insert(producer).second) {
            found += producer.first == first;
            work.push_back(producer);
          }
      }
    }
    all = found == needed;
  }
  return instancesBefore[{first, later}] = all;
}

bool PersistentKernelBuilder::stableBeforeTask(unsigned arg, unsigned task, bool self,
                                               Operation *&breaker) const {
  breaker = nullptr;
  // A peer rank's task may write any argument, at any time.
  if (t.ranks > 1)
    return false;
  auto it = writerTasks.find(arg);
  if (it == writerTasks.end())
    return true;
  for (unsigned w : it->second) {
    // The task's own writes: a body vouches (tile.early) that a unit reads
    // no element another unit writes. Any other writer must come after
    // every instance of the task in the step (the step barrier orders the
    // writes of the steps before).
    if (w == task ? self : allInstancesBefore(task, w))
      continue;
    breaker = t.tasks[w];
    return false;
  }
  return true;
}

bool PersistentKernelBuilder::stableForCase(Value tensor, int64_t caseIndex, bool self,
                                            unsigned &arg, Operation *&breaker) const {
  auto operand = caseOperands.find(tensor);
  if (operand == caseOperands.end())
    return true;                          // not a graph tensor
  for (unsigned ti : t.cases[caseIndex].tasks) {
    arg = cast<BlockArgument>(TaskOp(t.tasks[ti]).getArgs()[operand->second]).getArgNumber();
    if (!stableBeforeTask(arg, ti, self, breaker))
      return false;
  }
  return true;
}

void PersistentKernelBuilder::reportUnstable(Operation *op, StringRef what, unsigned arg,
                                             Operation *breaker, Operation *body) {
  auto diag = op->emitOpError() << what << " graph argument " << arg;
  if (breaker)
    diag << ", which task @" << cast<TaskOp>(breaker).getSymName()
         << " writes before the task runs (or alongside it)";
  else
    diag << ", which another rank's tasks may write";
  diag << ": it would read data from before they ran (before its events fire, a task "
          "may read tensors no task writes, tensors only tasks after it write, and, "
          "in copies marked tile.early, tensors it writes itself)";
  diag.attachNote(body->getLoc()) << "in this task body";
  errors = true;
}

void PersistentKernelBuilder::checkEarlyCopies(Operation *op, int64_t caseIndex,
                                               Operation *body) {
  op->walk([&](tile::CopyOp copy) {
    if (!copy->hasAttr(tile::TileDialect::getEarlyAttrName()))
      return;
    // A body's own prefetch point after the task's wait: the copy's loop
    // starts there and reads what the task's events made ready.
    auto loop = copy->getParentOfType<tile::PipelinedOp>();
    tile::PrefetchPointOp point = loop ? tile::findPrefetchPoint(loop) : nullptr;
    if (point && !pointsBeforeWait.contains(point))
      return;
    unsigned arg = 0;
    Operation *breaker = nullptr;
    if (!stableForCase(tile::viewedBuffer(copy.getSrc()), caseIndex, /*self=*/true, arg,
                       breaker))
      reportUnstable(copy, "is marked tile.early (load before the task's events fire), "
                           "but it reads", arg, breaker, body);
  });
}

void PersistentKernelBuilder::checkBeforeWait(Operation *op, int64_t caseIndex,
                                              Operation *body) {
  op->walk([&](Operation *inner) {
    // A view reads nothing; its users do.
    if (isa<ViewLikeOpInterface>(inner))
      return;
    for (Value operand : inner->getOperands()) {
      Value tensor = tile::viewedBuffer(operand);
      if (!caseOperands.contains(tensor))
        continue;
      // Writes: a tile.copy or tile.atomic into it, a store, or an op
      // declaring a write effect on it; an op declaring no effect on it
      // neither reads nor writes it, and any other op reads it.
      bool writes = false;
      if (auto copy = dyn_cast<tile::CopyOp>(inner)) {
        writes = operand == copy.getDst();
      } else if (isa<tile::AtomicOp>(inner)) {
        writes = true;
      } else if (auto store = dyn_cast<memref::StoreOp>(inner)) {
        writes = operand == store.getMemRef();
      } else if (auto effects = dyn_cast<MemoryEffectOpInterface>(inner)) {
        writes = effects.getEffectOnValue<MemoryEffects::Write>(operand).has_value();
        if (!writes && !effects.getEffectOnValue<MemoryEffects::Read>(operand))
          continue;
      }
      if (writes) {
        // The case's first task names it (its tasks share the body; each
        // passes its own graph argument for the operand).
        TaskOp first = t.tasks[t.cases[caseIndex].tasks.front()];
        auto diag = inner->emitOpError()
                    << "writes graph argument "
                    << cast<BlockArgument>(first.getArgs()[caseOperands.lookup(tensor)])
                           .getArgNumber()
                    << " before the body's tile.task_wait: a task writes only after its "
                       "events fire (body operand "
                    << caseOperands.lookup(tensor) << ", task @" << first.getSymName()
                    << (t.cases[caseIndex].tasks.size() > 1 ? " and the others of this body"
                                                            : "")
                    << ")";
        diag.attachNote(body->getLoc()) << "in this task body";
        errors = true;
        continue;
      }
      // A copy marked tile.early: checkEarlyCopies' (the task's own writes
      // allowed).
      if (isa<tile::CopyOp>(inner) && inner->hasAttr(tile::TileDialect::getEarlyAttrName()))
        continue;
      unsigned arg = 0;
      Operation *breaker = nullptr;
      if (!stableForCase(tensor, caseIndex, /*self=*/false, arg, breaker))
        reportUnstable(inner, "reads, before the body's tile.task_wait,", arg, breaker, body);
    }
  });
}

void PersistentKernelBuilder::markEarlyCopies(Operation *op,
                                              const DenseSet<Value> &readOnly) {
  op->walk([&](tile::CopyOp copy) {
    // The copy's source, through views, is one of the read-only tensors.
    if (readOnly.contains(tile::viewedBuffer(copy.getSrc())))
      copy->setAttr(tile::TileDialect::getEarlyAttrName(), b.getUnitAttr());
  });
}

Value PersistentKernelBuilder::waitInsideCase(const Record &r, Value entry) {
  ifThread0([&] {
    Type i32Type = b.getI32Type(), i64Type = b.getI64Type();
    // An entry without events is ready, aborted or not (as checkReady's
    // verdict says for it): it reads neither an event nor the abort flag,
    // two global loads that put a round trip before its body.
    auto gate = scf::IfOp::create(b, loc, TypeRange{i32Type},
                                  cmp(arith::CmpIPredicate::eq, r.numWaits, i32(0)), true);
    OpBuilder::InsertionGuard outer(b);
    b.setInsertionPointToStart(gate.thenBlock());
    scf::YieldOp::create(b, loc, ValueRange{i32(1)});
    b.setInsertionPointToStart(gate.elseBlock());
    // Carried: 1 ready, 0 not (an abort or the watchdog), -1 still waiting;
    // and when the wait started, 0 until its first miss: a wait whose
    // events already fired reads no timer.
    auto loop = scf::WhileOp::create(b, loc, TypeRange{i32Type, i64Type},
                                     ValueRange{i32(-1), i64(0)});
    OpBuilder::InsertionGuard guard(b);
    Block *before = b.createBlock(&loop.getBefore(), {}, {i32Type, i64Type}, {loc, loc});
    Block *after = b.createBlock(&loop.getAfter(), {}, {i32Type, i64Type}, {loc, loc});
    b.setInsertionPointToStart(before);
    // As in pickEntry: the relaxed abort read goes ahead of the acquires.
    Value abortRaised = aborted();
    Readiness ready = checkReady(r);
    Value waiting = andI(notI(ready.ready), notI(abortRaised));
    Value start = before->getArgument(1);
    auto clock = scf::IfOp::create(b, loc, TypeRange{b.getI1Type(), i64Type}, waiting, true);
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(clock.thenBlock());
      Value since = select(cmp(arith::CmpIPredicate::eq, start, i64(0)), now(), start);
      scf::YieldOp::create(b, loc, ValueRange{timedOut(since), since});
      b.setInsertionPointToStart(clock.elseBlock());
      scf::YieldOp::create(b, loc, ValueRange{bit(false), start});
    }
    Value late = clock.getResult(0);
    auto report = scf::IfOp::create(b, loc, late, /*withElse=*/false);
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(report.thenBlock());
      recordError(kWorkerWaitTimeout, entry, ready);
    }
    Value verdict = select(ready.ready, i32(1),
                           select(orI(abortRaised, late), i32(0), i32(-1)));
    scf::ConditionOp::create(b, loc, cmp(arith::CmpIPredicate::slt, verdict, i32(0)),
                             ValueRange{verdict, clock.getResult(1)});
    b.setInsertionPointToStart(after);
    scf::YieldOp::create(b, loc, after->getArguments());
    b.setInsertionPointAfter(loop);
    scf::YieldOp::create(b, loc, ValueRange{loop.getResult(0)});
    b.setInsertionPointAfter(gate);
    memref::StoreOp::create(b, loc, gate.getResult(0), control, idx(4));
  });
  gpu::BarrierOp::create(b, loc);
  return cmp(arith::CmpIPredicate::ne, memref::LoadOp::create(b, loc, control, idx(4)),
             i32(0));
}

void PersistentKernelBuilder::emitPrefetch(Value entry) {
  // Graph arguments some task writes (`written`): their data is not ready
  // before the wait, so only the others (weights) are prefetched.
  Record r = loadRecord(entry);
  Value caseId = r.caseId, task = r.task, instance = r.instance;
  SmallVector<int64_t> cases;
  for (int64_t c = 0; c < static_cast<int64_t>(t.cases.size()); ++c)
    cases.push_back(c);
  auto sw = scf::IndexSwitchOp::create(b, loc, TypeRange{}, toIndex(caseId),
                                       cases, cases.size());
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&sw.getDefaultRegion().emplaceBlock());
  scf::YieldOp::create(b, loc);
  for (auto [c, tc] : llvm::enumerate(t.cases)) {
    b.setInsertionPointToStart(&sw.getCaseRegions()[c].emplaceBlock());
    auto yield = scf::YieldOp::create(b, loc);
    b.setInsertionPoint(yield);
    TaskOp first = t.tasks[tc.tasks.front()];
    std::optional<ArrayAttr> footprint = first.getFootprint();
    if (!footprint)
      continue;
    if (!llvm::all_of(tc.tasks, [&](unsigned ti) { return waitsOnLighterStage(ti); }))
      continue;
    for (auto access : footprint->getAsRange<AccessAttr>()) {
      if (access.isWrite() || access.getFirst() != 0 || access.getLast() >= 0)
        continue;
      // The operand must be read-only for every task of the case.
      bool readOnly = true;
      for (unsigned ti : tc.tasks) {
        TaskOp task = t.tasks[ti];
        unsigned arg = cast<BlockArgument>(task.getArgs()[access.getOperand()]).getArgNumber();
        readOnly &= !written.contains(arg);
      }
      if (!readOnly)
        continue;
      unsigned operand = access.getOperand();
      func::FuncOp body = tc.body;
      auto type = dyn_cast<MemRefType>(body.getArgument(operand).getType());
      if (!type)
        continue;
      int64_t elem = std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
      int64_t tensorBytes = type.getNumElements() * elem;
      // This task's tensor, from the argument table.
      Value tensor = graphArg(caseArgumentSlot(c, operand, task), type);
      // The instance's units [u0, u0 + k) clipped to the grid (claimed
      // units: its own one, the only one known before it runs).
      int64_t spanned = tc.claimsUnits ? 1 : tc.unitsPerTask;
      Value u0 = arith::ExtSIOp::create(b, loc, b.getI64Type(), mul(instance, i32(spanned)));
      Value begin = add(mul(u0, i64(access.getStride() * elem)), i64(access.getBase() * elem));
      // Only ranges that fit the budget whole: prefetching the head of a
      // large range competes for DRAM with the stage still running and
      // measured slower.
      int64_t spanBytes = (access.getStride() * (spanned - 1) + access.getSize()) * elem;
      if (spanBytes > prefetchBytes)
        continue;
      Value span = i64(spanBytes);
      Value end = arith::MinSIOp::create(b, loc, add(begin, span), i64(tensorBytes));
      Value bytes = arith::SubIOp::create(b, loc, end, begin);
      // cp.async.bulk wants 16-byte multiples and 16-byte aligned addresses.
      Value aligned = arith::AndIOp::create(b, loc, begin, i64(~int64_t(15)));
      Value size = arith::AndIOp::create(b, loc, bytes, i64(~int64_t(15)));
      auto go = scf::IfOp::create(b, loc, cmp(arith::CmpIPredicate::sgt, size, i64(0)), false);
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(go.thenBlock());
      mega::PrefetchL2Op::create(b, loc, tensor, aligned,
                                 arith::TruncIOp::create(b, loc, b.getI32Type(), size));
    }
  }
}

Value PersistentKernelBuilder::runEntry(Value entry, Value slot, Value blockId) {
  // AOT entries read their record from the worker's shared copy.
  auto vecType = VectorType::get({kRecordWords}, b.getI32Type());
  auto where = scf::IfOp::create(b, loc, TypeRange{vecType},
                                 cmp(arith::CmpIPredicate::sge, slot, i32(0)), true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(where.thenBlock());
    scf::YieldOp::create(b, loc, recordVector(aotRecords, mul(slot, i32(kRecordWords))));
    b.setInsertionPointToStart(where.elseBlock());
    scf::YieldOp::create(b, loc, recordVector(
        tablesBuf, add(mul(entry, i32(kRecordWords)), i32(t.section("records")))));
  }
  Record r = unpackRecord(where.getResult(0));
  Value caseId = r.caseId, task = r.task, instance = r.instance;
  // A pair case (its id after the body cases) runs this entry and the
  // worker's next AOT entry, whose record follows this one; otherwise the
  // entry that signals last is this one.
  int64_t numCases = t.cases.size();
  Value paired;
  Record last = r;
  if (!t.pairCases.empty()) {
    paired = cmp(arith::CmpIPredicate::sge, caseId, i32(numCases));
    auto next = scf::IfOp::create(b, loc, TypeRange{vecType}, paired, true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(next.thenBlock());
    scf::YieldOp::create(b, loc, recordVector(aotRecords, mul(add(slot, i32(1)),
                                                              i32(kRecordWords))));
    b.setInsertionPointToStart(next.elseBlock());
    scf::YieldOp::create(b, loc, where.getResult(0));
    b.setInsertionPointAfter(next);
    last = unpackRecord(next.getResult(0));
  }
  // The start stamp of `e`: when the entry may run (its events fired).
  auto stampStartOf = [&](Value e) {
    if (!timeline)
      return;
    ifThread0([&] {
      // Four words an entry: start, end, CTA, SM.
      Value slot = mul(e, i32(4));
      postTimeline(slot, now());
      postTimeline(add(slot, i32(2)),
                   arith::IndexCastOp::create(b, loc, b.getI64Type(), blockId));
      postTimeline(add(slot, i32(3)),
                   arith::ExtUIOp::create(b, loc, b.getI64Type(),
                                          NVVM::SmIdOp::create(b, loc, b.getI32Type())));
    });
  };
  auto stampStart = [&]() { stampStartOf(entry); };
  if (!waitInCase)
    stampStart();
  SmallVector<int64_t> cases;
  for (int64_t c = 0; c < numCases + static_cast<int64_t>(t.pairCases.size()); ++c)
    cases.push_back(c);
  auto sw = scf::IndexSwitchOp::create(b, loc, TypeRange{}, toIndex(caseId),
                                       cases, cases.size());
  sw->setAttr(tile::TileDialect::getExclusiveCasesAttrName(), b.getUnitAttr());
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&sw.getDefaultRegion().emplaceBlock());
    scf::YieldOp::create(b, loc);
    for (int64_t c = 0; c < static_cast<int64_t>(cases.size()); ++c) {
      Block &block = sw.getCaseRegions()[c].emplaceBlock();
      b.setInsertionPointToStart(&block);
      auto yield = scf::YieldOp::create(b, loc);
      b.setInsertionPoint(yield);
      // Case c is region c + 1 of the switch (region 0 is the default): its
      // tiles' exclusive group.
      int64_t group = c + 1;
      if (c < numCases) {
        emitCase(c, bindCase(c, task), task, instance, waitInCase ? &r : nullptr, entry,
                 stampStart, group, /*ownPoint=*/true);
        continue;
      }
      // A pair: both bodies' operands are bound before the point (the
      // second one's early copies start there), the first runs and
      // signals, then the second waits and runs; the tiles of both share
      // one group, so they never overlap.
      const PairCase &pc = t.pairCases[c - numCases];
      CaseOperands first = bindCase(pc.first, task);
      CaseOperands second = bindCase(pc.second, last.task);
      emitCase(pc.first, std::move(first), task, instance, &r, entry, stampStart, group,
               /*ownPoint=*/true);
      gpu::BarrierOp::create(b, loc);
      ifThread0([&] { finishEntry(r, entry); });
      emitCase(pc.second, std::move(second), last.task, last.instance, &last, last.entry,
               [&] { stampStartOf(last.entry); }, group, /*ownPoint=*/false);
    }
  }
  // Everyone is done with the body's data (and its shared memory) before
  // thread 0 signals and the next entry's copies may overwrite it.
  gpu::BarrierOp::create(b, loc);
  if (t.pairCases.empty()) {
    ifThread0([&] { finishEntry(r, entry); });
    return {};
  }
  ifThread0([&] { finishEntry(last, last.entry); });
  return arith::ExtUIOp::create(b, loc, b.getI32Type(), paired);
}

void PersistentKernelBuilder::finishEntry(const Record &r, Value entry) {
  if (timeline) {
    postTimeline(add(mul(entry, i32(4)), i32(1)), now());
  }
  // The first event comes with the record; more walk the signal list.
  // An entry that waited in its case signals only if it ran.
  Value signals = cmp(arith::CmpIPredicate::sgt, r.numSignals, i32(0));
  if (waitInCase)
    signals = andI(signals, cmp(arith::CmpIPredicate::ne,
                                memref::LoadOp::create(b, loc, control, idx(4)), i32(0)));
  auto any = scf::IfOp::create(b, loc, signals, false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(any.thenBlock());
  signalEvent(r.signal0);
  Value begin = toIndex(add(table("signal_offsets", entry), i32(1)));
  Value end = toIndex(table("signal_offsets", add(entry, i32(1))));
  auto loop = scf::ForOp::create(b, loc, begin, end, idx(1));
  b.setInsertionPointToStart(loop.getBody());
  Value event = table("signals", loop.getInductionVar());
  signalEvent(event);
}

void PersistentKernelBuilder::buildWorker(Value blockId) {
  Type i32Type = b.getI32Type();
  Value w = arith::IndexCastOp::create(b, loc, i32Type, blockId);
  Value aotBegin = table("aot_offsets", w);
  Value aotEnd = table("aot_offsets", add(w, i32(1)));
  // The worker's AOT records go to shared memory once (all threads copy).
  {
    Value first = mul(aotBegin, i32(kRecordWords));
    Value words = toIndex(mul(arith::SubIOp::create(b, loc, aotEnd, aotBegin),
                              i32(kRecordWords)));
    auto copy = scf::ForOp::create(b, loc, toIndex(threadId), words, idx(t.threads));
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(copy.getBody());
    Value i = copy.getInductionVar();
    Value word = memref::LoadOp::create(
        b, loc, tablesBuf,
        ValueRange{toIndex(add(add(toI32(i), first), i32(t.section("aot_records"))))});
    memref::StoreOp::create(b, loc, word, aotRecords, ValueRange{i});
  }
  gpu::BarrierOp::create(b, loc);
  // Carried: the AOT position and the JIT ticket (pickEntry).
  SmallVector<Type> carried(2, i32Type);
  auto loop = scf::WhileOp::create(b, loc, TypeRange{i32Type, i32Type, i32Type, i32Type},
                                   ValueRange{aotBegin, i32(-1)});
  OpBuilder::InsertionGuard guard(b);
  Block *before = b.createBlock(&loop.getBefore(), {}, carried,
                                SmallVector<Location>(carried.size(), loc));
  Block *after = b.createBlock(&loop.getAfter(), {}, {i32Type, i32Type, i32Type, i32Type},
                               {loc, loc, loc, loc});
  b.setInsertionPointToStart(before);
  ifThread0([&] {
    // While it waits for the next entries' inputs, their read-only data
    // (the weights) is already on its way to L2.
    Value pos = before->getArgument(0);
    for (int64_t ahead = 0; prefetchBytes > 0 && ahead < prefetchDepth; ++ahead) {
      Value at = add(pos, i32(ahead));
      auto has = scf::IfOp::create(b, loc, cmp(arith::CmpIPredicate::slt, at, aotEnd), false);
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(has.thenBlock());
      emitPrefetch(table("aot", at));
    }
  });
  Value entry, next, ticket, slot;
  if (waitInCase) {
    // Waiting inside the case: the next AOT entry, ready or not (the
    // worker's list is in the global topological order, so waiting for it
    // is what pickEntry would do without a JIT queue). Every thread reads
    // it from the shared records: no hand-over barrier (the last entry's
    // closing barrier already freed its shared memory).
    Pick pick = pickNextAot(before->getArgument(0), aotBegin, aotEnd);
    entry = pick.entry, next = pick.nextPos, ticket = pick.ticket, slot = pick.slot;
  } else {
    // The next entry whose events fired, AOT or JIT: thread 0 finds it and
    // hands it to the CTA.
    ifThread0([&] {
      Pick pick = pickEntry(before->getArgument(0), aotBegin, aotEnd,
                            before->getArgument(1));
      memref::StoreOp::create(b, loc, pick.entry, control, idx(0));
      memref::StoreOp::create(b, loc, pick.nextPos, control, idx(1));
      memref::StoreOp::create(b, loc, pick.ticket, control, idx(2));
      memref::StoreOp::create(b, loc, pick.slot, control, idx(3));
    });
    gpu::BarrierOp::create(b, loc);
    entry = memref::LoadOp::create(b, loc, control, idx(0));
    next = memref::LoadOp::create(b, loc, control, idx(1));
    ticket = memref::LoadOp::create(b, loc, control, idx(2));
    slot = memref::LoadOp::create(b, loc, control, idx(3));
  }
  scf::ConditionOp::create(b, loc, cmp(arith::CmpIPredicate::sge, entry, i32(0)),
                           ValueRange{entry, next, ticket, slot});
  b.setInsertionPointToStart(after);
  // A pair case ran the next AOT entry too: the position moves past it.
  Value nextPos = after->getArgument(1);
  if (Value skip = runEntry(after->getArgument(0), after->getArgument(3), blockId))
    nextPos = add(nextPos, skip);
  scf::YieldOp::create(b, loc, ValueRange{nextPos, after->getArgument(2)});
}

void PersistentKernelBuilder::buildScheduler() {
  if (t.numJit == 0)
    return;
  // Every warp of the scheduler CTA checks 32 JIT entries at a time: lane i
  // of warp w checks entry j + 32 w + i, and a ballot gives the run of
  // ready entries at the head of the warp's window. Thread 0 joins the runs
  // (a window counts only if every window before it was all ready) and
  // publishes the whole run by advancing the queue's tail with one release
  // store. Readiness checks are acquire loads whose latency would dominate
  // if one thread (or one warp, for a stage of hundreds of entries that
  // fire together) checked the entries in turn.
  Type i32Type = b.getI32Type();
  int64_t warps = schedulerWarps();
  OpBuilder::InsertionGuard guard(b);
  Value lane = toI32(arith::RemUIOp::create(b, loc, toIndex(threadId), idx(32)));
  Value warp = toI32(arith::DivUIOp::create(b, loc, toIndex(threadId), idx(32)));
  Value isLane0 = cmp(arith::CmpIPredicate::eq, lane, i32(0));
  auto loop = scf::WhileOp::create(b, loc, TypeRange{i32Type, b.getI64Type()},
                                   ValueRange{i32(0), now()});
  Block *before = b.createBlock(&loop.getBefore(), {}, {i32Type, b.getI64Type()}, {loc, loc});
  Block *after = b.createBlock(&loop.getAfter(), {}, {i32Type, b.getI64Type()}, {loc, loc});
  b.setInsertionPointToStart(before);
  Value j = before->getArgument(0), since = before->getArgument(1);
  // Thread 0 decides, so only it reads the abort flag: ahead of its acquire
  // loads, as in pickEntry. The other threads' reads would be dead loads
  // that LLVM must keep (they are atomic).
  Value abortRaised = bitWhere(isThread0, [&] { return aborted(); });
  Value mine = add(j, add(mul(warp, i32(32)), lane));
  Value valid = cmp(arith::CmpIPredicate::slt, mine, i32(t.numJit));
  Value ready =
      bitWhere(valid, [&] { return checkReady(loadRecord(table("jit", mine))).ready; });
  Value mask = NVVM::VoteSyncOp::create(b, loc, b.getI32Type(), i32(-1),
                                        ready, NVVM::VoteSyncKind::ballot);
  // The run of ready entries from the window's first lane: the trailing
  // ones of the mask (cttz of its complement; 32 when all are set).
  Value run = LLVM::CountTrailingZerosOp::create(
      b, loc, b.getI32Type(), arith::XOrIOp::create(b, loc, mask, i32(-1)),
      /*is_zero_poison=*/false);
  {
    auto post = scf::IfOp::create(b, loc, isLane0, false);
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(post.thenBlock());
    memref::StoreOp::create(b, loc, run, control, toIndex(add(warp, i32(kSchedulerRuns))));
  }
  gpu::BarrierOp::create(b, loc);
  ifThread0([&] {
    Value total = i32(0);
    Value open = bit(true);
    for (int64_t w = 0; w < warps; ++w) {
      Value r = memref::LoadOp::create(b, loc, control, idx(kSchedulerRuns + w));
      total = add(total, select(open, r, i32(0)));
      open = andI(open, cmp(arith::CmpIPredicate::eq, r, i32(32)));
    }
    Value progress = cmp(arith::CmpIPredicate::sgt, total, i32(0));
    Value next = add(j, total);
    auto publish = scf::IfOp::create(b, loc, progress, false);
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(publish.thenBlock());
      mega::PublishOp::create(b, loc, stateBuf, ValueRange{idx(kJitTail)}, next);
    }
    // No progress: stop on an abort or past the watchdog (recording why).
    Value stalled = notI(progress);
    Value abort = andI(stalled, abortRaised);
    Value late = andI(andI(stalled, notI(abort)), timedOut(since));
    auto report = scf::IfOp::create(b, loc, late, false);
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(report.thenBlock());
      Record r = loadRecord(table("jit", j));
      recordError(kSchedulerWaitTimeout, r.entry, checkReady(r));
    }
    Value more = andI(cmp(arith::CmpIPredicate::slt, next, i32(t.numJit)),
                      notI(orI(abort, late)));
    // The verdict goes to every thread: one that left the loop on its own
    // reading of the abort flag or the clock would miss a barrier.
    memref::StoreOp::create(b, loc, select(more, next, i32(-1)), control, idx(0));
  });
  gpu::BarrierOp::create(b, loc);
  Value verdict = memref::LoadOp::create(b, loc, control, idx(0));
  // The runs of the next round are written only after this read.
  gpu::BarrierOp::create(b, loc);
  Value more = cmp(arith::CmpIPredicate::sge, verdict, i32(0));
  Value nextSince = select(cmp(arith::CmpIPredicate::sgt, verdict, j), now(), since);
  scf::ConditionOp::create(b, loc, more, ValueRange{verdict, nextSince});
  b.setInsertionPointToStart(after);
  scf::YieldOp::create(b, loc, after->getArguments());
}

void PersistentKernelBuilder::closeEpoch() {
  for (int64_t word : {kJitHead, kJitTail, kDoneCtas})
    postState(word, i32(0));
  // Every unit was claimed and run: the next step claims from 0.
  for (int64_t word = t.unitCounterBase(); word < t.stateWords(); ++word)
    postState(word, i32(0));
  mega::FenceOp::create(b, loc);
  postState(kEpoch, epochTarget);
}

Value PersistentKernelBuilder::arriveIsLast() {
  int64_t ctas = t.workers + (t.numJit > 0 ? 1 : 0);
  Value done = arriveState(kDoneCtas);
  return cmp(arith::CmpIPredicate::eq, done, i32(ctas - 1));
}

void PersistentKernelBuilder::buildExit() {
  // The last CTA to finish resets the JIT ring and opens the next epoch.
  gpu::BarrierOp::create(b, loc);
  ifThread0([&] {
    auto last = scf::IfOp::create(b, loc, arriveIsLast(), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(last.thenBlock());
    closeEpoch();
  });
}

void PersistentKernelBuilder::buildStep(Value blockId) {
  Value isWorker = cmp(arith::CmpIPredicate::ult, blockId, idx(t.workers));
  auto role = scf::IfOp::create(b, loc, isWorker, /*withElse=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(role.thenBlock()->getTerminator());
  buildWorker(blockId);
  b.setInsertionPoint(role.elseBlock()->getTerminator());
  if (t.workerSms > 0 && t.numJit > 0) {
    // A CTA left without an index (claimWorkerIndex reported it) has no
    // role; it still meets the others at the step barrier and the exit.
    auto scheduler = scf::IfOp::create(
        b, loc, cmp(arith::CmpIPredicate::eq, blockId, idx(t.workers)), false);
    b.setInsertionPoint(scheduler.thenBlock()->getTerminator());
  }
  buildScheduler();
}

Value PersistentKernelBuilder::claimWorkerIndex(Value blockId) {
  if (t.workerSms == 0)
    return blockId;
  auto shared = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  Value claimed = claimedIndex = tile::AllocSharedOp::create(
      b, loc, MemRefType::get({1}, b.getI32Type(), nullptr, shared), tile::SwizzleAttr());
  Type i32Type = b.getI32Type();
  int64_t ctas = t.ctas();
  // Index `w` is this CTA's when its claim word held an older launch's tag.
  auto stake = [&](Value w, Value tag) {
    Value word = toIndex(add(w, i32(kClaimWords)));
    Value old = mega::StakeOp::create(b, loc, i32Type, stateBuf, ValueRange{word}, tag);
    return cmp(arith::CmpIPredicate::ult, old, tag);
  };
  ifThread0([&] {
    // Launch n (epoch n) stakes n + 1: above every earlier launch's tag.
    Value tag = add(peekState(kEpoch), i32(1));
    Value sm = NVVM::SmIdOp::create(b, loc, i32Type);
    Value onGrid = cmp(arith::CmpIPredicate::ult, sm, i32(t.workerSms));
    // First the indices this SM stands for: s, s + G, ...
    Value mine = i32(-1);
    for (int64_t k = 0; k < t.ctasPerSm; ++k) {
      Value w = add(sm, i32(k * t.workerSms));
      Value tryIt = andI(andI(onGrid, cmp(arith::CmpIPredicate::slt, mine, i32(0))),
                         cmp(arith::CmpIPredicate::ult, w, i32(ctas)));
      auto attempt = scf::IfOp::create(b, loc, TypeRange{i32Type}, tryIt, true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(attempt.thenBlock());
      scf::YieldOp::create(b, loc, select(stake(w, tag), w, i32(-1)));
      b.setInsertionPointToStart(attempt.elseBlock());
      scf::YieldOp::create(b, loc, mine);
      b.setInsertionPointAfter(attempt);
      mine = attempt.getResult(0);
    }
    // Else (another SM got more CTAs, or this one is beyond the G laid
    // out) any free index, in order: as many indices as CTAs, each CTA
    // holding at most one, so one pass finds one.
    auto scan = scf::WhileOp::create(b, loc, TypeRange{i32Type, i32Type},
                                     ValueRange{i32(0), mine});
    {
      OpBuilder::InsertionGuard guard(b);
      Block *before = b.createBlock(&scan.getBefore(), {}, {i32Type, i32Type}, {loc, loc});
      Value i = before->getArgument(0), got = before->getArgument(1);
      Value more = andI(cmp(arith::CmpIPredicate::slt, got, i32(0)),
                        cmp(arith::CmpIPredicate::slt, i, i32(ctas)));
      scf::ConditionOp::create(b, loc, more, ValueRange{i, got});
      Block *after = b.createBlock(&scan.getAfter(), {}, {i32Type, i32Type}, {loc, loc});
      Value at = after->getArgument(0);
      scf::YieldOp::create(b, loc, ValueRange{add(at, i32(1)),
                                              select(stake(at, tag), at, i32(-1))});
    }
    mine = scan.getResult(1);
    // Only a state buffer whose claim words outran its epoch gets here.
    auto none = scf::IfOp::create(b, loc, cmp(arith::CmpIPredicate::slt, mine, i32(0)),
                                  false);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(none.thenBlock());
      recordError(kWorkerIndexUnclaimed, i32(-1), {Value(), i32(-1), sm, tag},
                  arith::IndexCastOp::create(b, loc, i32Type, blockId));
    }
    memref::StoreOp::create(b, loc, mine, claimed, ValueRange{idx(0)});
  });
  gpu::BarrierOp::create(b, loc);
  // Zero-extended: -1 (no index) is past every role.
  return arith::IndexCastUIOp::create(
      b, loc, b.getIndexType(), memref::LoadOp::create(b, loc, claimed, ValueRange{idx(0)}));
}

Value PersistentKernelBuilder::buildStepBarrier(Value step, Value limit) {
  // Arrivals are acq_rel atomics, so the last CTA sees every step's
  // writes; the others acquire them from its epoch store. Everyone then
  // reads the stop word the step's tasks left, so all CTAs agree on
  // whether to go on.
  gpu::BarrierOp::create(b, loc);
  ifThread0([&] {
    auto last = scf::IfOp::create(b, loc, arriveIsLast(), true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(last.thenBlock());
      postState(kStepsDone, add(step, i32(1)));
      closeEpoch();
      b.setInsertionPointToStart(last.elseBlock());
      Value start = now();
      auto spin = scf::WhileOp::create(b, loc, TypeRange{}, ValueRange{});
      Block *before = b.createBlock(&spin.getBefore());
      // Ahead of the acquire load, as in pickEntry.
      Value abortRaised = aborted();
      Value seen = pollState(kEpoch);
      Value reached = cmp(arith::CmpIPredicate::sge,
                          arith::SubIOp::create(b, loc, seen, epochTarget), i32(0));
      Value abort = andI(notI(reached), abortRaised);
      Value late = andI(andI(notI(reached), notI(abort)), timedOut(start));
      auto report = scf::IfOp::create(b, loc, late, false);
      {
        OpBuilder::InsertionGuard g2(b);
        b.setInsertionPointToStart(report.thenBlock());
        recordError(kStepBarrierTimeout, i32(-1),
                    {Value(), i32(-1), seen, epochTarget});
      }
      scf::ConditionOp::create(b, loc, notI(orI(reached, orI(abort, late))),
                               ValueRange{});
      b.createBlock(&spin.getAfter());
      scf::YieldOp::create(b, loc);
    }
    Value stopWord = mega::PeekOp::create(
        b, loc, b.getI32Type(), graphArgFromGlobal(stepLoop.stopArgument),
        ValueRange{idx(stepLoop.stopElement)});
    Value stop = orI(cmp(arith::CmpIPredicate::ne, stopWord, i32(0)),
                     aborted());
    memref::StoreOp::create(b, loc, arith::ExtUIOp::create(b, loc, b.getI32Type(), stop),
                            control, idx(0));
  });
  gpu::BarrierOp::create(b, loc);
  Value halt = cmp(arith::CmpIPredicate::ne,
                   memref::LoadOp::create(b, loc, control, idx(0)), i32(0));
  // The next step's control words are written only after this read.
  gpu::BarrierOp::create(b, loc);
  Value next = add(step, i32(1));
  return andI(notI(halt), cmp(arith::CmpIPredicate::slt, next, limit));
}

void PersistentKernelBuilder::buildStepLoop(Value blockId) {
  Type i32Type = b.getI32Type();
  Value base = peekState(kEpoch);
  Value asked = peekState(kStepLimit);
  Value most = i32(stepLoop.maxSteps);
  Value inRange = andI(cmp(arith::CmpIPredicate::sge, asked, i32(1)),
                       cmp(arith::CmpIPredicate::sle, asked, most));
  // Unset (0) or out of range: one step, the single-step mode.
  Value limit = select(inRange, asked, i32(1));
  auto loop = scf::WhileOp::create(b, loc, TypeRange{i32Type}, ValueRange{i32(0)});
  OpBuilder::InsertionGuard guard(b);
  Block *before = b.createBlock(&loop.getBefore(), {}, {i32Type}, {loc});
  Value step = before->getArgument(0);
  // Step n of a launch waits for counters at trigger * (base + n + 1).
  epochTarget = add(base, add(step, i32(1)));
  buildStep(blockId);
  Value more = buildStepBarrier(step, limit);
  scf::ConditionOp::create(b, loc, more, ValueRange{add(step, i32(1))});
  Block *after = b.createBlock(&loop.getAfter(), {}, {i32Type}, {loc});
  scf::YieldOp::create(b, loc, after->getArguments());
}

void PersistentKernelBuilder::build(Value blockId, Value args,
                                    ArrayRef<Type> graphTypes, Value tables,
                                    Value events, Value state,
                                    Value timelineBuf) {
  argsBuf = args;
  globalTypes.assign(graphTypes.begin(), graphTypes.end());
  buildTaskOrder();
  written = writtenGraphArgs();
  tablesBuf = tables;
  // The words thread 0 hands the next entry, AOT position and JIT ticket to
  // the CTA through.
  auto shared = gpu::AddressSpaceAttr::get(b.getContext(),
                                           gpu::AddressSpace::Workgroup);
  // Word 4 (waiting inside the case only): whether the entry may run.
  // Words kSchedulerRuns...: the scheduler warps' ready runs.
  int64_t controlWords = t.numJit > 0 ? kSchedulerRuns + schedulerWarps()
                                      : (waitInCase ? 5 : 4);
  control = tile::AllocSharedOp::create(
      b, loc, MemRefType::get({controlWords}, b.getI32Type(), nullptr, shared),
      tile::SwizzleAttr());
  // Tasks that claim units: the word a claimed unit reaches the CTA in.
  if (t.claimsUnits)
    claimedUnit = tile::AllocSharedOp::create(
        b, loc, MemRefType::get({1}, b.getI32Type(), nullptr, shared),
        tile::SwizzleAttr());
  // The worker's AOT records (see buildWorker).
  aotRecords = tile::AllocSharedOp::create(
      b, loc,
      MemRefType::get({std::max<int64_t>(1, t.maxAotEntries) * kRecordWords},
                      b.getI32Type(), nullptr, shared),
      tile::SwizzleAttr());
  // Allocations hoisted out of the bodies go right after the control word.
  auto anchor = arith::ConstantIndexOp::create(b, loc, 0);
  hoistPoint = anchor;
  threadId = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  isThread0 = cmp(arith::CmpIPredicate::eq, threadId, idx(0));
  // The argument table goes to shared memory once, before anything reads it.
  int64_t numArgs = cast<MemRefType>(args.getType()).getDimSize(0);
  sharedArgs = tile::AllocSharedOp::create(
      b, loc, MemRefType::get({numArgs}, b.getI64Type(), nullptr, shared),
      tile::SwizzleAttr());
  {
    auto copy = scf::ForOp::create(b, loc, threadId, idx(numArgs), idx(t.threads));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(copy.getBody());
    Value i = copy.getInductionVar();
    memref::StoreOp::create(b, loc, memref::LoadOp::create(b, loc, args, i),
                            sharedArgs, i);
  }
  gpu::BarrierOp::create(b, loc);
  eventsBuf = events;
  stateBuf = state;
  this->timelineBuf = timelineBuf;
  blockId = claimWorkerIndex(blockId);
  if (stepLoop.enabled()) {
    buildStepLoop(blockId);
    return;
  }
  // Launch n waits for counters at trigger * (n + 1); n is stable during a
  // launch (only the last CTA to finish changes it).
  epochTarget = add(peekState(kEpoch), i32(1));
  buildStep(blockId);
  buildExit();
}
