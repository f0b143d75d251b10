//===- Pipeline.cpp - software pipelining of tile.pipelined loops ----------===//
//
// `tile.pipelined ... num_stages N` becomes an scf.for that issues the
// global-to-shared copies of iteration i + N - 1 (cp.async into one of N
// buffers of each tile) before it waits for and computes on iteration i. The
// schedule and the conditions a copy must meet are in Passes.td. With `tma`
// the copies of a loop whose every producer can be one TMA box become
// tile.bulk_copy ops completing on one mbarrier per stage instead.
//
//===----------------------------------------------------------------------===//

#include "tilemega/Dialect/Tile/Transforms/Passes.h"
#include "tilemega/Dialect/Mega/IR/MegaDialect.h"
#include "tilemega/Dialect/Tile/IR/TileBulkCopies.h"
#include "tilemega/Dialect/Tile/IR/TilePrefetch.h"
#include "tilemega/Dialect/Tile/IR/TileSharedMemory.h"
#include "tilemega/Dialect/Tile/IR/TileTensorCores.h"
#include "tilemega/Target/TargetInfo.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Iterators.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "tile-pipeline"

namespace mlir::tilemega::tile {
#define GEN_PASS_DEF_TILEPIPELINE
#include "tilemega/Dialect/Tile/Transforms/Passes.h.inc"
} // namespace mlir::tilemega::tile

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile;

static int64_t getByteSize(MemRefType type) {
  return type.getNumElements() *
         std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
}

namespace {

/// A copy the pass pipelines: it fills `alloc` from global memory once per
/// iteration.
struct Producer {
  CopyOp copy;
  AllocSharedOp alloc;
  /// Ops of the loop body the copy's operands are computed by (besides the
  /// induction variable and values from outside the loop).
  llvm::SetVector<Operation *> slice;
  /// The N-stage buffer that replaces `alloc` inside the loop.
  AllocSharedOp buffer;
};

/// Collects into `slice` the body ops `value` is computed by; false when one
/// of them may have side effects or has regions (it cannot be re-run ahead).
static bool collectSlice(Value value, PipelinedOp loop,
                         llvm::SetVector<Operation *> &slice) {
  Block &body = loop.getBody().front();
  if (value == loop.getInductionVar())
    return true;
  Operation *def = value.getDefiningOp();
  if (!def) // A block argument: of the kernel or of an enclosing region.
    return !loop->isAncestor(value.getParentBlock()->getParentOp());
  if (def->getBlock() != &body)
    return !loop->isAncestor(def);
  if (slice.contains(def))
    return true;
  if (!isPure(def) || def->getNumRegions() != 0)
    return false;
  for (Value operand : def->getOperands())
    if (!collectSlice(operand, loop, slice))
      return false;
  slice.insert(def);
  return true;
}

/// `value` recomputed at `b`: what `given` says for it where it says
/// something (a value usable there), else clones (at `b`, recorded in
/// `map`) of the side-effect-free, region-free ops it is computed by, from
/// such values; null when it cannot be (a load, another block argument).
/// With `dryRun` nothing is cloned.
static Value recompute(Value value, function_ref<Value(Value)> given,
                       OpBuilder &b, IRMapping &map, bool dryRun) {
  if (Value known = map.lookupOrNull(value))
    return known;
  if (Value leaf = given(value))
    return leaf;
  Operation *def = value.getDefiningOp();
  if (!def || !isPure(def) || def->getNumRegions() != 0)
    return {};
  for (Value operand : def->getOperands()) {
    Value at = recompute(operand, given, b, map, dryRun);
    if (!at)
      return {};
    if (!dryRun && at != operand)
      map.map(operand, at);
  }
  if (dryRun)
    return value;
  b.clone(*def, map);
  return map.lookup(value);
}

/// `value` computed before `before`: itself where it dominates that op,
/// else recomputed there (recompute); null when it depends on a load or on
/// a variable of an enclosing loop.
static Value materializeBefore(Value value, Operation *before,
                               DominanceInfo &dom, OpBuilder &b,
                               IRMapping &map, bool dryRun) {
  return recompute(
      value,
      [&](Value v) { return dom.properlyDominates(v, before) ? v : Value(); },
      b, map, dryRun);
}

/// Whether `value` is defined outside `op` (not in a region of it).
static bool isDefinedOutside(Value value, Operation *op) {
  return !op->isAncestor(value.getParentBlock()->getParentOp());
}

/// `value` as the iteration of `loop` whose induction variable is `iv`
/// computes it: itself when defined outside the loop, else recomputed at
/// `b` (recompute) with `iv` for the induction variable; null when it
/// cannot be.
static Value materializeForIteration(Value value, scf::ForOp loop, Value iv,
                                     OpBuilder &b, IRMapping &map, bool dryRun) {
  return recompute(
      value,
      [&](Value v) {
        if (v == loop.getInductionVar())
          return iv;
        return isDefinedOutside(v, loop) ? v : Value();
      },
      b, map, dryRun);
}

/// True when `use` of a shared tile only reads it.
static bool isReadOnlyUse(OpOperand &use) {
  Operation *user = use.getOwner();
  if (auto copy = dyn_cast<CopyOp>(user))
    return use.get() == copy.getSrc() && use.get() != copy.getDst();
  if (auto gemm = dyn_cast<GemmOp>(user))
    return use.get() != gemm.getC();
  if (auto reduce = dyn_cast<ReduceOp>(user))
    return use.get() != reduce.getDst();
  if (isa<AtomicOp>(user))
    return true; // Shared tiles are only ever its source.
  if (auto load = dyn_cast<memref::LoadOp>(user))
    return use.get() == load.getMemRef();
  return false;
}

/// The producer `copy` is when it qualifies locally (everything except the
/// uses of its tile outside `loop`).
static std::optional<Producer> matchProducer(CopyOp copy, PipelinedOp loop) {
  MemRefType srcType = copy.getSrc().getType(), dstType = copy.getDst().getType();
  if (!isGlobal(srcType) || !isShared(dstType) ||
      srcType.getElementType() != dstType.getElementType())
    return std::nullopt;
  auto alloc = copy.getDst().getDefiningOp<AllocSharedOp>();
  if (!alloc)
    return std::nullopt;
  // The whole tile: its other elements would otherwise carry over from
  // before the loop, which N fresh buffers do not.
  if (!copy.getDstOffsets().empty() ||
      !llvm::all_of(copy.getStaticDstOffsets(),
                    [](int64_t o) { return o == 0; }) ||
      copy.getSizes() != dstType.getShape())
    return std::nullopt;
  Producer producer{copy, alloc, {}, nullptr};
  if (!collectSlice(copy.getSrc(), loop, producer.slice))
    return std::nullopt;
  for (Value offset : copy.getSrcOffsets())
    if (!collectSlice(offset, loop, producer.slice))
      return std::nullopt;
  // In the loop, the tile is read only, and only after the copy (a read
  // before it would see the previous iteration's tile).
  Block &body = loop.getBody().front();
  for (OpOperand &use : alloc->getUses()) {
    Operation *user = use.getOwner();
    if (user == copy.getOperation() || !loop->isProperAncestor(user))
      continue;
    Operation *top = body.findAncestorOpInBlock(*user);
    if (!top || !copy->isBeforeInBlock(top) || !isReadOnlyUse(use))
      return std::nullopt;
  }
  return producer;
}

/// The gemms of `loop` whose wgmma may stay in flight into the next
/// iteration (`wgmma-in-flight`): at the top level of the body, accepted by
/// tile::chooseWgmma (the rule convert-tile-to-gpu lowers by), and whose
/// accumulator nothing else in the loop touches (its registers are the
/// pending wgmma's until the wait after the loop). Empty with fewer than 3
/// stages: the refill then has no stage that the pending wgmma is not
/// reading. Empty in a loop with asynchronous gemms (`async`): their own
/// waits count the groups in flight, which a wait_group 1 here would upset.
static SmallVector<GemmOp> findInFlightGemms(PipelinedOp loop) {
  SmallVector<GemmOp> gemms;
  if (loop.getNumStages() < 3)
    return gemms;
  WalkResult async = loop.getBody().walk([](GemmOp gemm) {
    return gemm.getAsync() ? WalkResult::interrupt() : WalkResult::advance();
  });
  if (async.wasInterrupted())
    return gemms;
  for (auto gemm : loop.getBody().front().getOps<GemmOp>()) {
    auto alloc = gemm.getC().getDefiningOp<AllocFragmentOp>();
    if (!alloc ||
        !chooseWgmma(gemm, alloc.getLayoutAttr()).usesTensorCores())
      continue;
    bool onlyGemms = llvm::all_of(gemm.getC().getUsers(), [&](Operation *user) {
      return !loop->isProperAncestor(user) || isa<GemmOp>(user);
    });
    if (onlyGemms)
      gemms.push_back(gemm);
  }
  return gemms;
}

struct TilePipelinePass
    : public mlir::tilemega::tile::impl::TilePipelineBase<TilePipelinePass> {
  using TilePipelineBase::TilePipelineBase;

  /// The chip's limits, as the kernel verifier counts shared memory.
  TargetInfo target{};

  void runOnOperation() override {
    FailureOr<TargetInfo> info = getTargetInfo(chip);
    if (failed(info)) {
      getOperation().emitError()
          << "tile-pipeline: unknown chip '" << chip
          << "' (known: " << getKnownChips() << ")";
      return signalPassFailure();
    }
    target = *info;
    getOperation().walk([&](KernelOp kernel) {
      if (failed(pipelineKernel(kernel)))
        signalPassFailure();
    });
  }

  LogicalResult pipelineKernel(KernelOp kernel) {
    // Early prologues move only where no two tiles share bytes: a tile
    // between the prefetch point and the loop might otherwise alias a
    // stage buffer the early copies already fill.
    tilesShareBytes =
        SharedLiveness(kernel.getBody().front(),
                       kernel->hasAttr(TileDialect::getPersistentAttrName()))
            .sharesBytes();
    hoistCursor.clear();
    // Inner loops first: an outer loop then only sees their scf.for.
    SmallVector<PipelinedOp> loops;
    kernel.walk([&](PipelinedOp loop) { loops.push_back(loop); });

    // Producers each loop would have on its own.
    llvm::MapVector<Operation *, SmallVector<Producer>> producers;
    DenseMap<Operation *, SmallVector<PipelinedOp>> loopsOfAlloc;
    for (PipelinedOp loop : loops) {
      SmallVector<Producer> &list = producers[loop];
      DenseMap<Operation *, unsigned> writersOf;
      for (auto copy : loop.getBody().front().getOps<CopyOp>())
        if (auto alloc = copy.getDst().getDefiningOp<AllocSharedOp>())
          ++writersOf[alloc];
      for (auto copy : loop.getBody().front().getOps<CopyOp>()) {
        std::optional<Producer> producer = matchProducer(copy, loop);
        if (producer && writersOf[producer->alloc] == 1) {
          loopsOfAlloc[producer->alloc].push_back(loop);
          list.push_back(std::move(*producer));
        }
      }
    }
    // A tile may be used outside a loop only inside other loops that
    // pipeline it as well: nothing else may see what the loop wrote.
    DenseSet<Operation *> pipelinedAllocs;
    for (auto &[alloc, allocLoops] : loopsOfAlloc) {
      bool covered = llvm::all_of(alloc->getUsers(), [&](Operation *user) {
        return llvm::any_of(allocLoops, [&](PipelinedOp loop) {
          return loop->isProperAncestor(user);
        });
      });
      if (covered)
        pipelinedAllocs.insert(alloc);
    }
    for (auto &[loop, list] : producers)
      llvm::erase_if(list, [&](const Producer &p) {
        return !pipelinedAllocs.contains(p.alloc);
      });

    for (auto &[op, list] : producers) {
      auto loop = cast<PipelinedOp>(op);
      std::optional<int64_t> step = getConstantIntValue(loop.getStep());
      if (!list.empty() && step && *step <= 0)
        return loop.emitOpError() << "step must be positive, got " << *step;
      if (failed(decideBulkCopies(loop, list)))
        return failure();
    }
    if (failed(checkSharedMemory(kernel, producers, pipelinedAllocs)))
      return failure();
    DenseSet<Operation *> existing;
    kernel.walk([&](Operation *op) { existing.insert(op); });
    multicasting = false;
    for (auto &[op, list] : producers) {
      auto loop = cast<PipelinedOp>(op);
      if (loop.getWarpSpecialize()) {
        if (list.empty())
          return loop.emitOpError("is warp-specialised, but has no "
                                  "global-to-shared copy to give a producer");
        if (failed(pipelineWarpSpecialized(kernel, loop, list)))
          return failure();
        continue;
      }
      if (!list.empty())
        pipelineLoop(loop, list);
      else if (loop.getWgmmaInFlight())
        loop.emitWarning() << "wgmma_in_flight has no effect: the loop has no "
                              "global-to-shared copy to pipeline";
      if (list.empty() && loop.getTma() == true)
        loop.emitWarning() << "tma has no effect: the loop has no "
                              "global-to-shared copy to pipeline";
    }
    if (std::optional<int64_t> cluster = kernel.getCluster();
        cluster && !multicasting)
      return kernel.emitOpError()
             << "runs clusters of " << *cluster
             << " blocks, but multicasts no copy: a cluster shares the TMA "
                "copies of a warp-specialised T.Pipelined loop whose source "
                "box is the same in all its blocks (offsets that do not "
                "depend on the first block index, but through its quotient "
                "by "
             << *cluster << ")";
    for (Operation *alloc : pipelinedAllocs)
      if (alloc->use_empty())
        alloc->erase();
    kernel.walk([](PrefetchPointOp point) { point->erase(); });
    // Constants and conditions the rewrite folded away.
    kernel.walk<WalkOrder::PostOrder, ReverseIterator>([&](Operation *op) {
      if (!existing.contains(op) && isOpTriviallyDead(op))
        op->erase();
    });
    return success();
  }

  /// The N-fold buffers must fit the block's shared memory.
  LogicalResult
  checkSharedMemory(KernelOp kernel,
                    llvm::MapVector<Operation *, SmallVector<Producer>> &producers,
                    const DenseSet<Operation *> &pipelinedAllocs) {
    SharedMemoryTally tally;
    SharedLiveness liveness(
        kernel.getBody().front(),
        kernel->hasAttr(TileDialect::getPersistentAttrName()));
    for (auto alloc : kernel.getBody().front().getOps<AllocSharedOp>())
      if (!pipelinedAllocs.contains(alloc))
        tally.add(alloc, getByteSize(alloc.getType()), liveness.of(alloc));
    PipelinedOp largest;
    int64_t largestBytes = 0;
    for (auto &[op, list] : producers) {
      auto loop = cast<PipelinedOp>(op);
      int64_t loopBytes = 0;
      for (Producer &p : list) {
        int64_t stageBytes = getByteSize(p.alloc.getType()) * loop.getNumStages();
        loopBytes += stageBytes;
        // A loop's buffers are live while the loop runs (its prologue
        // stands right before it).
        tally.add(p.alloc, stageBytes, liveness.of(loop));
      }
      // The mbarriers of a TMA pipeline: one word a stage, 128-byte aligned,
      // kept for the whole kernel.
      // A warp-specialised one has a second row, the "empty" barriers.
      if (bulkLoops.contains(loop))
        tally.add(loop, loop.getWarpSpecialize() ? 256 : 128);
      if (loopBytes > largestBytes) {
        largest = loop;
        largestBytes = loopBytes;
      }
    }
    int64_t bytes = tally.total();
    int64_t limit = target.maxSharedBytesPerBlock;
    if (bytes <= limit)
      return success();
    return largest.emitOpError()
           << "with num_stages " << largest.getNumStages() << " needs "
           << largestBytes
           << " bytes of multi-buffered shared tiles; the kernel would then "
              "allocate "
           << bytes << " bytes of shared memory, over the " << limit
           << "-byte (" << limit / 1024 << " KiB) limit of " << target.chip
           << " by " << bytes - limit
           << " bytes: use fewer stages or smaller tiles";
  }

  /// The loops whose producers become TMA bulk copies (decideBulkCopies),
  /// and among them those of linear (1-D) bulk copies.
  DenseSet<Operation *> bulkLoops, linearLoops;
  /// Whether the kernel being pipelined multicasts a copy (its cluster's
  /// reason to exist).
  bool multicasting = false;
  /// Whether the kernel being pipelined lets tiles share bytes by live range.
  bool tilesShareBytes = true;
  /// Per prefetch point, the last op hoisted to it (the next loop's early
  /// prologue goes after it, so the groups keep program order).
  DenseMap<Operation *, Operation *> hoistCursor;

  /// Issues the prologue of `loop`'s early producers (copies marked
  /// tile.early) at the prefetch point before it, when one exists and
  /// their addresses can be computed there: iterations 0 .. ahead - 1, one
  /// group each, as the loop's own prologue would. Returns whether it did;
  /// the loop's prologue then skips them. Their groups are older than every
  /// group the loop commits, and each iteration's copies stay in a group no
  /// younger than the loop's own group for it, so the loop's
  /// `async_wait pending ahead - 1` still covers them.
  bool hoistEarlyPrologue(
      PipelinedOp loop, ArrayRef<Producer *> early, int64_t ahead,
      function_ref<void(OpBuilder &, Value, Value, ArrayRef<Producer *>,
                        IRMapping &)>
          issue,
      Value barriers = Value()) {
    auto why = [&](StringRef reason) {
      LLVM_DEBUG(llvm::dbgs() << "tile-pipeline: early copies of " << loop.getLoc()
                              << " stay at the loop: " << reason << "\n");
      return false;
    };
    if (early.empty())
      return false;
    PrefetchPointOp point = findPrefetchPoint(loop);
    if (!point)
      return why("no tile.prefetch_point before it");
    if (tilesShareBytes)
      return why("the kernel's shared tiles share bytes by live range");
    // A copy issued at the point must read what it would read at the loop.
    for (Producer *p : early)
      if (Operation *writer = writeBetween(point, loop, p->copy.getSrc())) {
        LLVM_DEBUG(llvm::dbgs() << "  (" << writer->getName() << " at "
                                << writer->getLoc() << ")\n");
        return why("an op between the prefetch point and the loop writes "
                   "the memory it copies");
      }
    // Everything the copies need from outside the loop.
    SmallVector<Value> outside = {loop.getLowerBound(), loop.getUpperBound(),
                                  loop.getStep()};
    for (Producer *p : early) {
      auto use = [&](Value v) {
        if (v != loop.getInductionVar() && !loop->isAncestor(v.getParentBlock()->getParentOp()))
          outside.push_back(v);
      };
      for (Operation *op : p->slice)
        for (Value v : op->getOperands())
          use(v);
      use(p->copy.getSrc());
      for (Value v : p->copy.getSrcOffsets())
        use(v);
    }
    Operation *cursor = hoistCursor.lookup(point);
    if (!cursor)
      cursor = point;
    Operation *before = cursor->getNextNode();
    DominanceInfo dom(loop->getParentOfType<KernelOp>());
    OpBuilder hb(before);
    IRMapping outer;
    for (Value v : outside)
      if (!materializeBefore(v, before, dom, hb, outer, /*dryRun=*/true))
        return why("an address depends on a value not computable at the "
                   "prefetch point");
    for (Value v : outside)
      outer.map(v, materializeBefore(v, before, dom, hb, outer, /*dryRun=*/false));
    Location loc = loop.getLoc();
    Value lb = outer.lookup(loop.getLowerBound()),
          ub = outer.lookup(loop.getUpperBound()),
          step = outer.lookup(loop.getStep());
    Value span = hb.createOrFold<arith::SubIOp>(loc, ub, lb);
    Value trips = hb.createOrFold<arith::CeilDivSIOp>(loc, span, step);
    // Bulk copies: their barriers first (thread 0 initialises them and
    // issues the copies; the loop's gpu.barrier publishes them to the other
    // threads before they wait); no cp.async groups.
    if (barriers)
      MbarrierInitOp::create(hb, loc, barriers);
    for (int64_t j = 0; j < ahead; ++j) {
      Value cj = arith::ConstantIndexOp::create(hb, loc, j);
      Value pred = hb.createOrFold<arith::CmpIOp>(
          loc, arith::CmpIPredicate::slt, cj, trips);
      issue(hb, cj, pred, early, outer);
      if (!barriers)
        AsyncCommitOp::create(hb, loc);
    }
    hoistCursor[point] = before->getPrevNode();
    LLVM_DEBUG(llvm::dbgs() << "tile-pipeline: early copies of " << loop.getLoc()
                            << " start at the prefetch point " << point.getLoc()
                            << "\n");
    return true;
  }

  /// A pipelined loop whose ring of stages continues across the iterations
  /// of an enclosing scf.for marked tile.stream_units (findUnitStream).
  struct UnitStream {
    scf::ForOp units;
    /// The scf.if ops between the two, outermost first: an iteration of
    /// `units` runs the loop when all their conditions hold.
    SmallVector<scf::IfOp> guards;
    /// Values the producers use from outside the pipelined loop but inside
    /// `units` (recomputed for the neighbouring iteration).
    SmallVector<Value> perUnit;
  };

  /// The unit stream `loop` belongs to: its parent, through scf.if ops
  /// (then regions), is an scf.for with tile.stream_units and step 1, the
  /// loop's bounds are constants or computed outside it, it holds no other pipelined
  /// loop, the kernel's tiles never share bytes (a tile written between two
  /// units' loops would otherwise alias the stages the next unit's copies
  /// fill), cp.async producers only, and the values the copies need can be
  /// recomputed for another iteration. -debug says why not.
  std::optional<UnitStream> findUnitStream(PipelinedOp loop, bool bulk,
                                           MutableArrayRef<Producer> list) {
    auto why = [&](StringRef reason) -> std::optional<UnitStream> {
      LLVM_DEBUG(llvm::dbgs() << "tile-pipeline: " << loop.getLoc()
                              << " does not stream across units: " << reason
                              << "\n");
      return std::nullopt;
    };
    UnitStream s;
    Operation *parent = loop->getParentOp();
    while (auto guard = dyn_cast<scf::IfOp>(parent)) {
      if (guard.getNumResults() != 0 ||
          !guard.getThenRegion().isAncestor(loop->getParentRegion()))
        return std::nullopt;
      s.guards.insert(s.guards.begin(), guard);
      parent = guard->getParentOp();
    }
    s.units = dyn_cast<scf::ForOp>(parent);
    if (!s.units || !s.units->hasAttr(TileDialect::getStreamUnitsAttrName()))
      return std::nullopt;
    if (bulk)
      return why("TMA stages complete on mbarriers, not in cp.async groups");
    if (tilesShareBytes)
      return why("the kernel's shared tiles share bytes by live range");
    std::optional<int64_t> step = getConstantIntValue(s.units.getStep());
    if (!step || *step != 1)
      return why("the units loop's step is not 1");
    for (Value bound : {loop.getLowerBound(), loop.getUpperBound(), loop.getStep()})
      if (!isDefinedOutside(bound, s.units) && !getConstantIntValue(bound))
        return why("its bounds change from one unit to the next");
    int64_t loops = 0;
    s.units.walk([&](PipelinedOp) { ++loops; });
    if (loops != 1)
      return why("the units loop holds another pipelined loop");
    SetVector<Value> used;
    auto use = [&](Value v) {
      if (v != loop.getInductionVar() && isDefinedOutside(v, loop) &&
          !isDefinedOutside(v, s.units))
        used.insert(v);
    };
    for (Producer &p : list) {
      for (Operation *op : p.slice)
        for (Value v : op->getOperands())
          use(v);
      use(p.copy.getSrc());
      for (Value v : p.copy.getSrcOffsets())
        use(v);
    }
    for (scf::IfOp guard : s.guards)
      use(guard.getCondition());
    OpBuilder dry(loop);
    IRMapping none;
    for (Value v : used)
      if (!materializeForIteration(v, s.units, s.units.getInductionVar(), dry,
                                   none, /*dryRun=*/true))
        return why("an address depends on a value that cannot be recomputed "
                   "for the next unit");
    s.perUnit = used.takeVector();
    LLVM_DEBUG(llvm::dbgs() << "tile-pipeline: " << loop.getLoc()
                            << " streams across the units of "
                            << s.units.getLoc() << "\n");
    return s;
  }

  /// Whether the units-loop iteration `iv` runs the loop: iv < ub and the
  /// guards recomputed for it (clones at `b`, recorded in `map`).
  static Value unitRuns(OpBuilder &b, Location loc, UnitStream &s, Value iv,
                        IRMapping &map) {
    Value runs = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, iv,
                                       s.units.getUpperBound());
    Value atLeastLb = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge,
                                            iv, s.units.getLowerBound());
    runs = arith::AndIOp::create(b, loc, runs, atLeastLb);
    for (scf::IfOp guard : s.guards)
      runs = arith::AndIOp::create(
          b, loc, runs,
          materializeForIteration(guard.getCondition(), s.units, iv, b, map,
                                  /*dryRun=*/false));
    return runs;
  }

  /// Whether `loop`'s producers become TMA bulk copies: with `tma` (or the
  /// loop's `tma = true`, which then requires it), unless the loop says
  /// `tma = false`, outside persistent mega-kernels (whose runtime binds no
  /// tensor maps), when every producer copies from an argument of the
  /// kernel's function a box that tile::chooseBulkCopy accepts. In a
  /// persistent mega-kernel, with `linear-bulk`, when every producer's box
  /// tile::chooseLinearBulkCopy accepts: linear (1-D) bulk copies. A loop
  /// that cannot says why under -debug; one that requires TMA and cannot is
  /// an error at its line.
  LogicalResult decideBulkCopies(PipelinedOp loop, ArrayRef<Producer> list) {
    std::optional<bool> asked = loop.getTma();
    // A warp-specialised loop's producer issues TMA copies: it needs them.
    bool specialised = loop.getWarpSpecialize() && !asked;
    if (specialised)
      asked = true;
    if (asked == false || list.empty())
      return success();
    auto refuse = [&](const Twine &why) -> LogicalResult {
      if (specialised)
        return loop.emitOpError()
               << "is warp-specialised, which needs TMA, but " << why;
      if (asked)
        return loop.emitOpError() << "asks for TMA (tma = true), but " << why;
      LLVM_DEBUG(llvm::dbgs() << "tile-pipeline: cp.async for " << loop.getLoc()
                              << ": " << why << "\n");
      return success();
    };
    // A persistent mega-kernel's runtime binds no tensor maps: 1-D bulk
    // copies (linear-bulk) or cp.async.
    auto func = loop->getParentOfType<func::FuncOp>();
    if (func && func->hasAttr(mega::MegaDialect::getMegaMetadataAttrName())) {
      if (!linearBulk)
        return refuse("a persistent mega-kernel takes no tensor maps (and "
                      "linear-bulk is off)");
      for (const Producer &p : list) {
        CopyOp copy = p.copy;
        AllocSharedOp alloc = p.alloc;
        LinearBulkCopyChoice choice = chooseLinearBulkCopy(
            copy.getSrc().getType(), alloc.getType(), copy.getSizes(),
            alloc.getSwizzleAttr(), copy.getMixedSrcOffsets());
        if (!choice.ok())
          return refuse("the copy at " + locationString(copy) +
                        " cannot be linear bulk copies: " + choice.whyNot);
      }
      bulkLoops.insert(loop);
      linearLoops.insert(loop);
      return success();
    }
    if (!tma && !asked)
      return success();
    if (!tma)
      return refuse("the pipeline has no TMA path here (sm_90a with "
                    "tilemega.compile's tma is needed)");
    if (!func)
      return refuse("the loop is in no function");
    for (const Producer &p : list) {
      CopyOp copy = p.copy;
      AllocSharedOp alloc = p.alloc;
      BlockArgument arg = getBulkCopyArgument(copy.getSrc());
      if (!arg || arg.getOwner() != &func.getBody().front())
        return refuse("the copy at " + locationString(copy) +
                      " reads no argument of the kernel's function (nor a "
                      "reshape of one)");
      BulkCopyChoice choice = chooseBulkCopy(
          copy.getSrc().getType(), alloc.getType(), copy.getSizes(),
          alloc.getSwizzleAttr());
      if (!choice.ok())
        return refuse("the copy at " + locationString(copy) +
                      " cannot be one TMA box: " + choice.whyNot);
    }
    bulkLoops.insert(loop);
    return success();
  }

  static std::string locationString(Operation *op) {
    std::string text;
    llvm::raw_string_ostream os(text);
    op->getLoc().print(os);
    return text;
  }

  void pipelineLoop(PipelinedOp loop, MutableArrayRef<Producer> list) {
    Location loc = loop.getLoc();
    int64_t numStages = loop.getNumStages();
    bool bulk = bulkLoops.contains(loop);
    // Linear bulk copies expect their own bytes: the stage's one arrival
    // follows them (and may follow early ones issued at a prefetch point).
    bool linear = linearLoops.contains(loop);
    // Iterations whose copies are in flight ahead of the one computed:
    // N - 1, or N - 2 when the gemms' wgmma of the previous iteration may
    // still be reading its stage (the refill then takes the stage of two
    // iterations back, whose wgmma has been waited for).
    SmallVector<GemmOp> inFlight = inFlightGemmsOf(loop);
    int64_t ahead = numStages - (inFlight.empty() ? 1 : 2);

    // The N-stage buffers, next to the tiles they replace.
    OpBuilder b(loop);
    for (Producer &p : list) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfter(p.alloc);
      makeStageBuffer(b, p, numStages);
    }

    // A TMA pipeline's mbarriers, one per stage, initialised before the
    // prologue (kernel-level, next to the buffers).
    Value barriers;
    int64_t stageBytes = 0;
    if (bulk) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfter(list.back().buffer);
      auto space = list.front().alloc.getType().getMemorySpace();
      barriers = AllocSharedOp::create(
          b, loc, MemRefType::get({numStages}, b.getI64Type(), nullptr, space),
          SwizzleAttr());
      barriers.getDefiningOp()->setDiscardableAttrs(
          list.front().alloc->getDiscardableAttrDictionary());
      for (Producer &p : list)
        stageBytes += getByteSize(p.alloc.getType());
    }

    Value lb = loop.getLowerBound(), ub = loop.getUpperBound(),
          step = loop.getStep();
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
    Value span = b.createOrFold<arith::SubIOp>(loc, ub, lb);
    Value trips = b.createOrFold<arith::CeilDivSIOp>(loc, span, step);

    // Streaming across units: iteration i of the units loop's j-th
    // iteration (from its lower bound) is iteration j * trips + i of one
    // ring of stages.
    std::optional<UnitStream> stream;
    if (ahead >= 1)
      stream = findUnitStream(loop, bulk, list);
    Value ringBase;
    if (stream) {
      Value j = b.createOrFold<arith::SubIOp>(
          loc, stream->units.getInductionVar(), stream->units.getLowerBound());
      ringBase = b.createOrFold<arith::MulIOp>(loc, j, trips);
    }
    auto ringOf = [&](OpBuilder &ob, Value iteration, Value base) {
      return base ? ob.createOrFold<arith::AddIOp>(loc, iteration, base)
                  : iteration;
    };

    // Issues the copies of `iteration` into its stage, when `pred` holds.
    // `which` producers; `outer` maps values from outside the loop (the
    // early prologue's copies of them at the prefetch point, or the next
    // unit's); `base` is the ring position of the loop's iteration 0, or
    // `ring` that of the iteration issued.
    auto issueSome = [&](OpBuilder &ob, Value iteration, Value pred,
                         ArrayRef<Producer *> which, IRMapping &outer,
                         Value base = Value(), Value ring = Value(),
                         bool arrive = true) {
      std::optional<int64_t> known =
          pred ? getConstantIntValue(pred) : std::optional<int64_t>(1);
      if (known && *known == 0)
        return;
      OpBuilder::InsertionGuard guard(ob);
      if (!known) {
        auto ifOp = scf::IfOp::create(ob, loc, pred, /*withElseRegion=*/false);
        ob.setInsertionPoint(ifOp.thenBlock()->getTerminator());
      }
      IRMapping mapping = outer;
      Value scaled = ob.createOrFold<arith::MulIOp>(
          loc, iteration, mapping.lookupOrDefault(step));
      Value iv = ob.createOrFold<arith::AddIOp>(loc, mapping.lookupOrDefault(lb), scaled);
      Value stage = getStage(ob, loc, ring ? ring : ringOf(ob, iteration, base),
                             numStages);
      mapping.map(loop.getInductionVar(), iv);
      for (Operation &op : loop.getBody().front())
        if (llvm::any_of(which, [&](Producer *p) { return p->slice.contains(&op); }))
          ob.clone(op, mapping);
      if (bulk) {
        // One arrival expecting every tile's bytes, then the TMA boxes;
        // linear copies first, each expecting its rows, then the arrival.
        if (!linear)
          MbarrierArriveExpectTxOp::create(ob, loc, barriers, stage,
                                           ob.getI64IntegerAttr(stageBytes));
        for (Producer *pp : which) {
          Producer &p = *pp;
          CopyOp copy = p.copy;
          SmallVector<Value> offsets;
          for (Value v : copy.getSrcOffsets())
            offsets.push_back(mapping.lookupOrDefault(v));
          auto bulkCopy = BulkCopyOp::create(
              ob, copy.getLoc(), mapping.lookupOrDefault(copy.getSrc()),
              offsets, copy.getStaticSrcOffsetsAttr(),
              stageView(ob, loc, p.buffer, stage), barriers, stage,
              /*multicast=*/nullptr);
          bulkCopy.setLinear(linear);
        }
        if (linear && arrive)
          MbarrierArriveExpectTxOp::create(ob, loc, barriers, stage,
                                           ob.getI64IntegerAttr(0));
        return;
      }
      for (Producer *p : which) {
        mapping.map(p->alloc.getResult(), stageView(ob, loc, p->buffer, stage));
        auto copy = cast<CopyOp>(ob.clone(*p->copy, mapping));
        copy.setAsync(true);
      }
    };
    SmallVector<Producer *> all, early, late;
    for (Producer &p : list) {
      all.push_back(&p);
      ((!bulk || linear) && p.copy->hasAttr(TileDialect::getEarlyAttrName())
           ? early
           : late)
          .push_back(&p);
    }
    IRMapping none;
    auto issue = [&](OpBuilder &ob, Value iteration, Value pred) {
      issueSome(ob, iteration, pred, all, none, ringBase);
    };
    // The prologue's copies: all, or those not issued at a prefetch point
    // (not when streaming across units: a unit whose predecessor did not
    // run issues its whole prologue itself).
    // early-depth: only the first iterations' early copies at the point.
    int64_t hoisted = earlyDepth > 0 ? std::min<int64_t>(ahead, earlyDepth) : ahead;
    // Early linear copies signal barriers initialised at the point, before
    // them (one arrival a phase: the loop's prologue arrives for them).
    auto issueEarly = [&](OpBuilder &ob, Value iteration, Value pred,
                          ArrayRef<Producer *> which, IRMapping &outer) {
      issueSome(ob, iteration, pred, which, outer, Value(), Value(),
                /*arrive=*/false);
    };
    if (stream || !hoistEarlyPrologue(loop, early, hoisted, issueEarly,
                                      bulk ? barriers : Value()))
      hoisted = 0;
    // cp.async groups close with a commit; TMA stages need none.
    auto commit = [&](OpBuilder &ob) {
      if (!bulk)
        AsyncCommitOp::create(ob, loc);
    };
    if (bulk) {
      if (!hoisted)
        MbarrierInitOp::create(b, loc, barriers);
      gpu::BarrierOp::create(b, loc);
    }

    // Prologue: iterations 0 .. ahead - 1, one group each. Streaming, only
    // where the previous unit did not run (it issued them in its tail).
    {
      OpBuilder::InsertionGuard guard(b);
      if (stream) {
        IRMapping previousUnit;
        Value prev = arith::SubIOp::create(b, loc, stream->units.getInductionVar(), c1);
        Value first = arith::XOrIOp::create(
            b, loc, unitRuns(b, loc, *stream, prev, previousUnit),
            arith::ConstantIntOp::create(b, loc, 1, 1));
        auto ifOp = scf::IfOp::create(b, loc, first, /*withElseRegion=*/false);
        b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
      }
      for (int64_t j = 0; j < ahead; ++j) {
        Value cj = arith::ConstantIndexOp::create(b, loc, j);
        Value pred = b.createOrFold<arith::CmpIOp>(
            loc, arith::CmpIPredicate::slt, cj, trips);
        issueSome(b, cj, pred, j < hoisted ? ArrayRef<Producer *>(late) : all,
                  none, ringBase);
        commit(b);
      }
    }

    auto forOp = scf::ForOp::create(b, loc, c0, trips, c1);
    OpBuilder fb = OpBuilder::atBlockTerminator(forOp.getBody());
    Value i = forOp.getInductionVar();
    // TMA: every thread waits for stage i % N's phase (i / N) % 2 itself.
    auto waitBulk = [&](OpBuilder &ob) {
      Value n = arith::ConstantIndexOp::create(ob, loc, numStages);
      Value parity = arith::RemUIOp::create(
          ob, loc, arith::DivUIOp::create(ob, loc, i, n),
          arith::ConstantIndexOp::create(ob, loc, 2));
      MbarrierWaitOp::create(ob, loc, barriers,
                             getStage(ob, loc, i, numStages), parity);
    };
    if (numStages == 1) {
      issue(fb, i, Value());
      commit(fb);
      if (bulk)
        waitBulk(fb);
      else
        AsyncWaitOp::create(fb, loc, fb.getI64IntegerAttr(0));
      gpu::BarrierOp::create(fb, loc);
    } else {
      // Iteration i's group is complete once at most ahead - 1 are pending
      // (the refill below is not committed yet). One barrier then does two
      // jobs: every thread's copies of stage i % N are visible, and every
      // thread is done reading stage (i + ahead) % N, the one the refill
      // for iteration i + ahead overwrites: (i - 1) % N, read in iteration
      // i - 1, or with in-flight wgmma (i - 2) % N, whose wgmma every
      // warpgroup waited for in iteration i - 1 (wait_group 1).
      // With TMA the wait is the stage's mbarrier phase and the barrier
      // only does the second job (the copies are visible to every waiter).
      if (bulk)
        waitBulk(fb);
      else
        AsyncWaitOp::create(fb, loc, fb.getI64IntegerAttr(ahead - 1));
      gpu::BarrierOp::create(fb, loc);
      Value aheadValue = arith::ConstantIndexOp::create(fb, loc, ahead);
      Value next = arith::AddIOp::create(fb, loc, i, aheadValue);
      Value pred = arith::CmpIOp::create(fb, loc, arith::CmpIPredicate::slt,
                                         next, trips);
      if (!stream) {
        issue(fb, next, pred);
      } else {
        // Iteration `next` of this unit or, past its last one, iteration
        // next - trips of the next unit (when it runs), at ring position
        // ringBase + next either way: one set of copies whose unit and
        // iteration are selected, so the issue code (and the registers its
        // addresses take) is not doubled.
        Value j = stream->units.getInductionVar();
        Value j1 = arith::AddIOp::create(fb, loc, j, c1);
        Value wrap = arith::CmpIOp::create(fb, loc, arith::CmpIPredicate::sge, next, trips);
        IRMapping guards;
        Value go = arith::OrIOp::create(fb, loc, pred,
                                        unitRuns(fb, loc, *stream, j1, guards));
        Value unit = arith::SelectOp::create(fb, loc, wrap, j1, j);
        Value iteration = arith::SelectOp::create(
            fb, loc, wrap, arith::SubIOp::create(fb, loc, next, trips), next);
        IRMapping issued;
        for (Value v : stream->perUnit)
          issued.map(v, materializeForIteration(v, stream->units, unit, fb,
                                                issued, /*dryRun=*/false));
        issueSome(fb, iteration, go, all, issued, Value(),
                  arith::AddIOp::create(fb, loc, ringBase, next));
      }
      // Always a group, so that the count above stays exact.
      commit(fb);
    }
    Value stage = getStage(fb, loc, ringOf(fb, i, ringBase), numStages);
    Value scaled = fb.createOrFold<arith::MulIOp>(loc, i, step);
    Value iv = fb.createOrFold<arith::AddIOp>(loc, lb, scaled);
    useStages(fb, loop, list, stage);
    // The body (without the producers). With one stage a trailing barrier
    // lets the next iteration refill the stage just read; with more, the next
    // iteration's barrier does. After the loop, one barrier keeps later
    // writers of shared memory (a sibling loop's prologue) from overwriting
    // a stage the last iteration may still be reading.
    Operation *trailing = fb.getInsertionBlock()->getTerminator();
    if (numStages == 1)
      trailing = gpu::BarrierOp::create(fb, loc);
    b.setInsertionPointAfter(forOp);
    gpu::BarrierOp::create(b, loc);
    moveBody(loop, list, forOp, trailing, iv, inFlight);
  }

  /// Producer `p`'s N-stage buffer, at `b`, with `p.alloc`'s swizzle and
  /// discardable attributes (such as the shared-memory group a persistent
  /// kernel assigns, tile.exclusive_group).
  static AllocSharedOp makeStageBuffer(OpBuilder &b, Producer &p,
                                       int64_t numStages) {
    MemRefType type = p.alloc.getType();
    SmallVector<int64_t> shape = {numStages};
    llvm::append_range(shape, type.getShape());
    p.buffer = AllocSharedOp::create(
        b, p.alloc.getLoc(),
        MemRefType::get(shape, type.getElementType(), nullptr,
                        type.getMemorySpace()),
        p.alloc.getSwizzleAttr());
    p.buffer->setDiscardableAttrs(p.alloc->getDiscardableAttrDictionary());
    return p.buffer;
  }

  /// Inside `loop`, the producers' tiles become views of stage `stage`.
  static void useStages(OpBuilder &b, PipelinedOp loop,
                        MutableArrayRef<Producer> list, Value stage) {
    for (Producer &p : list) {
      Value view = stageView(b, loop.getLoc(), p.buffer, stage);
      p.alloc.getResult().replaceUsesWithIf(view, [&](OpOperand &use) {
        return loop->isProperAncestor(use.getOwner());
      });
    }
  }

  /// The rest of the rewrite of `loop` into `forOp`: its body (without the
  /// producers' copies) goes before `before` with `iv` for its induction
  /// variable, the in-flight gemms and `forOp` are marked (convert-tile-to-
  /// gpu leaves their wgmma pending, wait_group 1, and waits for all of them
  /// after the loop), and what only the copies needed (their address
  /// arithmetic) is erased.
  static void moveBody(PipelinedOp loop, MutableArrayRef<Producer> list,
                       scf::ForOp forOp, Operation *before, Value iv,
                       ArrayRef<GemmOp> inFlight) {
    if (!inFlight.empty()) {
      UnitAttr unit = UnitAttr::get(loop.getContext());
      forOp->setAttr(kWgmmaInFlightAttrName, unit);
      for (GemmOp gemm : inFlight)
        gemm->setAttr(kWgmmaInFlightAttrName, unit);
    }
    for (Producer &p : list)
      p.copy.erase();
    Block &body = loop.getBody().front();
    loop.getInductionVar().replaceAllUsesWith(iv);
    forOp.getBody()->getOperations().splice(Block::iterator(before),
                                            body.getOperations());
    loop.erase();
    for (Operation &op :
         llvm::make_early_inc_range(llvm::reverse(*forOp.getBody())))
      if (isOpTriviallyDead(&op))
        op.erase();
  }

  /// warp_specialize: the loop's TMA copies move to a producer warpgroup
  /// (tile.producer, right after the kernel's allocations, which all move to
  /// the top) that runs every iteration's copies ahead, each into stage
  /// i % N once the consumers handed that stage back:
  ///
  ///   producer:  for i: if i >= N: wait empty[s], parity (i / N + 1) % 2
  ///                     arrive_expect_tx full[s]; bulk copies into stage s
  ///   consumers: for i: wait full[s], parity (i / N) % 2
  ///                     body
  ///                     arrive empty[s]        (one arrival per warp)
  ///
  /// With in-flight wgmma the consumers hand back stage (i - 1) % N instead,
  /// once iteration i's wait_group 1 has seen iteration i - 1's wgmma done.
  /// No block barrier per iteration: the mbarriers order every hand-over.
  LogicalResult pipelineWarpSpecialized(KernelOp kernel, PipelinedOp loop,
                                        MutableArrayRef<Producer> list) {
    // At the kernel's top level, or inside one loop that is (a persistent
    // kernel's loop over its tiles), whose iterations then run the loop in
    // turn: iteration i of the j-th is the pipeline's iteration j * trips +
    // i, trips the same every time.
    PipelinedOp outer = dyn_cast<PipelinedOp>(loop->getParentOp());
    if (loop->getParentOp() != kernel.getOperation() &&
        (!outer || outer->getParentOp() != kernel.getOperation()))
      return loop.emitOpError("is warp-specialised, but is neither at the "
                              "kernel's top level nor in a loop that is (the "
                              "producer warpgroup runs the kernel's only "
                              "such loop, or that loop's iterations)");
    if (outer)
      for (Value bound :
           {loop.getLowerBound(), loop.getUpperBound(), loop.getStep()})
        if (outer->isAncestor(bound.getParentRegion()->getParentOp()))
          return loop.emitOpError(
              "is warp-specialised inside a loop, so its bounds must not "
              "change from one iteration of that loop to the next (they are "
              "computed inside it)");
    if (kernel->hasAttr(TileDialect::getPersistentAttrName()))
      return loop.emitOpError("is warp-specialised inside a persistent kernel");
    if (!kernel.getBody().getOps<ProducerOp>().empty())
      return loop.emitOpError("is the kernel's second warp-specialised loop; a "
                              "kernel has one producer warpgroup");
    if (kernel.getThreads() % ProducerOp::kThreads != 0)
      return loop.emitOpError()
             << "is warp-specialised, which needs whole warpgroups of "
                "consumers (threads a multiple of "
             << ProducerOp::kThreads << "), got " << kernel.getThreads();
    MLIRContext *ctx = loop.getContext();
    Location loc = loop.getLoc();
    int64_t numStages = loop.getNumStages();
    SmallVector<GemmOp> inFlight = inFlightGemmsOf(loop);
    Block &top = kernel.getBody().front();

    // In a kernel of clusters: the copies every block of a cluster makes
    // alike are multicast, each block loading 1/N of the box into all N.
    int64_t cluster = kernel.getCluster().value_or(1);
    DenseSet<Operation *> multicastCopies;
    if (cluster > 1)
      for (Producer &p : list)
        if (isMulticast(p.copy, cluster))
          multicastCopies.insert(p.copy);
    multicasting = !multicastCopies.empty();
    auto multicastOf = [&](Producer &p) -> IntegerAttr {
      if (!multicastCopies.contains(p.copy))
        return nullptr;
      return IntegerAttr::get(IntegerType::get(ctx, 64), cluster);
    };
    // A multicast stage is handed back to every block of the cluster.
    IntegerAttr arriveCluster =
        multicasting ? IntegerAttr::get(IntegerType::get(ctx, 64), cluster)
                     : nullptr;

    // The allocations first (they compute nothing), then the stage buffers
    // and the two rows of mbarriers.
    Operation *last = nullptr;
    for (Operation &op : llvm::make_early_inc_range(top)) {
      if (!isa<AllocSharedOp, AllocFragmentOp>(op))
        continue;
      if (last)
        op.moveAfter(last);
      else
        op.moveBefore(&top.front());
      last = &op;
    }
    OpBuilder b(ctx);
    int64_t stageBytes = 0;
    for (Producer &p : list) {
      b.setInsertionPointAfter(last);
      last = makeStageBuffer(b, p, numStages);
      stageBytes += getByteSize(p.alloc.getType());
    }
    auto space = list.front().alloc.getType().getMemorySpace();
    auto barrierType =
        MemRefType::get({numStages}, b.getI64Type(), nullptr, space);
    Value full = AllocSharedOp::create(b, loc, barrierType, SwizzleAttr());
    Value empty = AllocSharedOp::create(b, loc, barrierType, SwizzleAttr());
    auto initFull = MbarrierInitOp::create(b, loc, full);
    auto initEmpty = MbarrierInitOp::create(b, loc, empty);
    initFull.setCount(1);
    // Every consumer warp of every block the stage's multicasts write.
    initEmpty.setCount(kernel.getThreads() / 32 * (multicasting ? cluster : 1));
    gpu::BarrierOp::create(b, loc);
    // The cluster's barriers are initialised before any block's multicast
    // copy or remote arrival reaches them.
    if (multicasting)
      ClusterSyncOp::create(b, loc);
    auto producer = ProducerOp::create(b, loc);
    Block *producerBody = &producer.getBody().emplaceBlock();

    Value lb = loop.getLowerBound(), ub = loop.getUpperBound(),
          step = loop.getStep();
    auto tripsOf = [&](OpBuilder &ob) {
      Value span = ob.createOrFold<arith::SubIOp>(loc, ub, lb);
      return ob.createOrFold<arith::CeilDivSIOp>(loc, span, step);
    };
    // The pipeline's iterations over the whole kernel (every tile's).
    auto totalTrips = [&](OpBuilder &ob) -> Value {
      Value trips = tripsOf(ob);
      if (!outer)
        return trips;
      Value span = ob.createOrFold<arith::SubIOp>(loc, outer.getUpperBound(),
                                                  outer.getLowerBound());
      Value tiles =
          ob.createOrFold<arith::CeilDivSIOp>(loc, span, outer.getStep());
      return ob.createOrFold<arith::MulIOp>(loc, tiles, trips);
    };
    auto index = [&](OpBuilder &ob, int64_t v) -> Value {
      return arith::ConstantIndexOp::create(ob, loc, v);
    };
    // (i / N + offset) % 2: the parity of the phase iteration i waits for.
    auto parityOf = [&](OpBuilder &ob, Value i, int64_t offset) -> Value {
      Value phase = arith::DivUIOp::create(ob, loc, i, index(ob, numStages));
      if (offset)
        phase = arith::AddIOp::create(ob, loc, phase, index(ob, offset));
      return arith::RemUIOp::create(ob, loc, phase, index(ob, 2));
    };

    // The pipeline's iteration of the loop's iteration `i` in the enclosing
    // loop's iteration whose induction variable is `outerIv`.
    auto globalOf = [&](OpBuilder &ob, Value outerIv, Value i) -> Value {
      if (!outer)
        return i;
      Value span = arith::SubIOp::create(ob, loc, outerIv, outer.getLowerBound());
      Value j = arith::DivUIOp::create(ob, loc, span, outer.getStep());
      Value base = arith::MulIOp::create(ob, loc, j, tripsOf(ob));
      return arith::AddIOp::create(ob, loc, base, i);
    };

    // The producer's loop (in a copy of the enclosing loop).
    OpBuilder pb = OpBuilder::atBlockEnd(producerBody);
    Value producerOuterIv;
    if (outer) {
      auto tiles = scf::ForOp::create(pb, loc, outer.getLowerBound(),
                                      outer.getUpperBound(), outer.getStep());
      producerOuterIv = tiles.getInductionVar();
      pb.setInsertionPoint(tiles.getBody()->getTerminator());
    }
    auto produce = scf::ForOp::create(pb, loc, index(pb, 0), tripsOf(pb),
                                      index(pb, 1));
    {
      OpBuilder ib = OpBuilder::atBlockTerminator(produce.getBody());
      Value i = produce.getInductionVar();
      Value g = globalOf(ib, producerOuterIv, i);
      Value stage = getStage(ib, loc, g, numStages);
      Value refill = arith::CmpIOp::create(ib, loc, arith::CmpIPredicate::uge,
                                           g, index(ib, numStages));
      auto ifRefill = scf::IfOp::create(ib, loc, refill, false);
      {
        OpBuilder rb = OpBuilder::atBlockTerminator(ifRefill.thenBlock());
        MbarrierWaitOp::create(rb, loc, empty, stage, parityOf(rb, g, 1));
      }
      MbarrierArriveExpectTxOp::create(ib, loc, full, stage,
                                       ib.getI64IntegerAttr(stageBytes));
      IRMapping mapping;
      Value scaled = ib.createOrFold<arith::MulIOp>(loc, i, step);
      mapping.map(loop.getInductionVar(),
                  ib.createOrFold<arith::AddIOp>(loc, lb, scaled));
      for (Operation &op : loop.getBody().front())
        if (llvm::any_of(list,
                         [&](Producer &p) { return p.slice.contains(&op); }))
          ib.clone(op, mapping);
      for (Producer &p : list) {
        SmallVector<Value> offsets;
        for (Value v : p.copy.getSrcOffsets())
          offsets.push_back(mapping.lookupOrDefault(v));
        BulkCopyOp::create(ib, p.copy.getLoc(),
                           mapping.lookupOrDefault(p.copy.getSrc()), offsets,
                           p.copy.getStaticSrcOffsetsAttr(),
                           stageView(ib, loc, p.buffer, stage), full, stage,
                           multicastOf(p));
      }
    }
    if (multicasting) {
      OpBuilder tb = OpBuilder::atBlockEnd(producerBody);
      emitProducerTail(tb, loc, empty, numStages, totalTrips(tb));
    }
    IRMapping seeded;
    if (outer)
      seeded.map(outer.getInductionVar(), producerOuterIv);
    if (failed(recomputeInside(producer, top, seeded)))
      return failure();

    // The consumers' loop, where the pipelined one was.
    b.setInsertionPoint(loop);
    auto forOp = scf::ForOp::create(b, loc, index(b, 0), tripsOf(b),
                                    index(b, 1));
    OpBuilder fb = OpBuilder::atBlockTerminator(forOp.getBody());
    Value i = forOp.getInductionVar();
    Value outerIv = outer ? outer.getInductionVar() : Value();
    Value g = globalOf(fb, outerIv, i);
    Value stage = getStage(fb, loc, g, numStages);
    MbarrierWaitOp::create(fb, loc, full, stage, parityOf(fb, g, 0));
    Value scaled = fb.createOrFold<arith::MulIOp>(loc, i, step);
    Value iv = fb.createOrFold<arith::AddIOp>(loc, lb, scaled);
    useStages(fb, loop, list, stage);
    Operation *terminator = forOp.getBody()->getTerminator();
    {
      OpBuilder eb(terminator);
      if (inFlight.empty()) {
        MbarrierArriveOp::create(eb, loc, empty, stage, arriveCluster);
      } else {
        // Iteration i - 1's wgmma is done once iteration i's gemm waited.
        Value previous = arith::CmpIOp::create(
            eb, loc, arith::CmpIPredicate::uge, i, index(eb, 1));
        auto ifPrevious = scf::IfOp::create(eb, loc, previous, false);
        OpBuilder ab = OpBuilder::atBlockTerminator(ifPrevious.thenBlock());
        Value before = arith::SubIOp::create(ab, loc, g, index(ab, 1));
        MbarrierArriveOp::create(ab, loc, empty,
                                 getStage(ab, loc, before, numStages),
                                 arriveCluster);
      }
    }
    b.setInsertionPointAfter(forOp);
    if (!inFlight.empty()) {
      // The last iteration's stage, once the wait after the loop (which the
      // gemm lowering puts right after it) has seen its wgmma done: the
      // producer may be refilling it for the next tile.
      Value trips = tripsOf(b);
      Value any = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt,
                                        trips, index(b, 0));
      auto ifAny = scf::IfOp::create(b, loc, any, false);
      OpBuilder lb2 = OpBuilder::atBlockTerminator(ifAny.thenBlock());
      Value lastI = arith::SubIOp::create(lb2, loc, trips, index(lb2, 1));
      Value lastG = globalOf(lb2, outerIv, lastI);
      MbarrierArriveOp::create(lb2, loc, empty,
                               getStage(lb2, loc, lastG, numStages),
                               arriveCluster);
      b.setInsertionPointAfter(ifAny);
    }
    // After the loop, later writers of shared memory wait for every
    // consumer to be done with the stages.
    gpu::BarrierOp::create(b, loc);
    // The body goes between the wait and the hand-back.
    moveBody(loop, list, forOp, terminator->getPrevNode(), iv, inFlight);
    return success();
  }

  /// Whether the warp-specialised copy `copy` in a kernel of clusters of
  /// `cluster` is multicast: every block of a cluster copies the same box
  /// (tile::isClusterUniform of its offsets), as many times
  /// (tile::isRunUniformly), and the box splits into a piece for each
  /// (tile::chooseBulkCopy with the multicast).
  bool isMulticast(CopyOp copy, int64_t cluster) {
    if (!isRunUniformly(copy, cluster) ||
        !llvm::all_of(copy.getSrcOffsets(), [&](Value offset) {
          return isClusterUniform(offset, cluster);
        }))
      return false;
    tile::BulkCopyChoice choice = chooseBulkCopy(
        copy.getSrc().getType(), copy.getDst().getType(), copy.getSizes(),
        getSharedSwizzle(copy.getDst()), cluster);
    LLVM_DEBUG(if (!choice.ok()) llvm::dbgs()
               << "tile-pipeline: " << copy.getLoc()
               << " is not multicast: " << choice.whyNot << "\n");
    return choice.ok();
  }

  /// The producer's tail in a kernel whose stages other blocks write: it
  /// waits until the consumers of every block of the cluster have handed
  /// back each stage's last fill (the waits a further N iterations would
  /// make), so that the block does not leave while the cluster's other
  /// blocks still arrive on its barriers.
  void emitProducerTail(OpBuilder &b, Location loc, Value empty,
                        int64_t numStages, Value total) {
    auto index = [&](int64_t v) -> Value {
      return arith::ConstantIndexOp::create(b, loc, v);
    };
    auto tail = scf::ForOp::create(b, loc, index(0), index(numStages), index(1));
    OpBuilder ib = OpBuilder::atBlockTerminator(tail.getBody());
    Value g = arith::AddIOp::create(ib, loc, total, tail.getInductionVar());
    Value filled = arith::CmpIOp::create(ib, loc, arith::CmpIPredicate::uge, g,
                                         arith::ConstantIndexOp::create(ib, loc, numStages));
    auto ifFilled = scf::IfOp::create(ib, loc, filled, false);
    OpBuilder wb = OpBuilder::atBlockTerminator(ifFilled.thenBlock());
    Value n = arith::ConstantIndexOp::create(wb, loc, numStages);
    Value phase = arith::AddIOp::create(
        wb, loc, arith::DivUIOp::create(wb, loc, g, n),
        arith::ConstantIndexOp::create(wb, loc, 1));
    Value parity = arith::RemUIOp::create(
        wb, loc, phase, arith::ConstantIndexOp::create(wb, loc, 2));
    MbarrierWaitOp::create(wb, loc, empty, getStage(wb, loc, g, numStages),
                           parity);
  }

  /// Whether `op` loads from a kernel argument that no op of the kernel
  /// writes (tile::firstWriteIn).
  static bool isUnwrittenArgumentLoad(Operation *op) {
    auto load = dyn_cast<memref::LoadOp>(op);
    if (!load)
      return false;
    auto arg = dyn_cast<BlockArgument>(viewedBuffer(load.getMemref()));
    if (!arg)
      return false;
    Operation *kernel = arg.getOwner()->getParentOp();
    return isa<FunctionOpInterface>(kernel) && !firstWriteIn(kernel, arg);
  }

  /// Makes the producer's region use nothing the kernel computes after it:
  /// each such value is recomputed in the block that uses it, before that
  /// block's own ops (effect-free ops with no regions, as the copies'
  /// addresses are; `seeded` maps the enclosing loop's induction variable to the
  /// producer's copy of that loop); anything else is an error.
  LogicalResult recomputeInside(ProducerOp producer, Block &top,
                                const IRMapping &seeded) {
    DenseMap<Block *, Operation *> firstOf;
    producer.getBody().walk([&](Block *block) {
      if (!block->empty())
        firstOf[block] = &block->front();
    });
    DenseMap<std::pair<Value, Block *>, Value> made;
    std::function<FailureOr<Value>(Value, Block *)> available =
        [&](Value value, Block *block) -> FailureOr<Value> {
      if (Value known = seeded.lookupOrNull(value))
        return known;
      Operation *def = value.getDefiningOp();
      if (!def || producer->isAncestor(def))
        return value;
      Operation *inTop = top.findAncestorOpInBlock(*def);
      if (!inTop || inTop->isBeforeInBlock(producer))
        return value;
      if (Value known = made.lookup({value, block}))
        return known;
      // Effect-free is enough (not speculatable: a division by a computed
      // divisor): the producer recomputes a value for the same tile the
      // kernel computed it for, never on inputs the kernel did not see. So
      // is a load of a kernel argument the kernel never writes (a row count
      // on the device bounding the loop around the pipelined one): the
      // repeat reads what the kernel read.
      if ((!isMemoryEffectFree(def) && !isUnwrittenArgumentLoad(def)) ||
          def->getNumRegions() != 0)
        return producer.emitOpError()
               << "copies from an address computed by '"
               << def->getName() << "' at " << def->getLoc()
               << ", which the producer cannot recompute (it has effects or "
                  "regions)";
      IRMapping operands;
      for (Value operand : def->getOperands()) {
        FailureOr<Value> got = available(operand, block);
        if (failed(got))
          return failure();
        operands.map(operand, *got);
      }
      OpBuilder ob(firstOf.lookup(block));
      Operation *clone = ob.clone(*def, operands);
      for (auto [from, to] : llvm::zip(def->getResults(), clone->getResults()))
        made[{from, block}] = to;
      return made.lookup({value, block});
    };
    SmallVector<OpOperand *> uses;
    producer.getBody().walk([&](Operation *op) {
      for (OpOperand &use : op->getOpOperands())
        uses.push_back(&use);
    });
    for (OpOperand *use : uses) {
      FailureOr<Value> value =
          available(use->get(), use->getOwner()->getBlock());
      if (failed(value))
        return failure();
      use->set(*value);
    }
    return success();
  }

  /// The gemms whose wgmma stays in flight in `loop`: with the wgmma
  /// lowering, when the pass option or the loop's `wgmma_in_flight` asks.
  /// A loop that asks and gets none is told why (a warning at its line).
  SmallVector<GemmOp> inFlightGemmsOf(PipelinedOp loop) {
    bool asked = loop.getWgmmaInFlight();
    if (!wgmma || (!wgmmaInFlight && !asked)) {
      if (asked)
        loop.emitWarning() << "wgmma_in_flight has no effect: the gemms are "
                              "not lowered to wgmma here (sm_90a with wgmma "
                              "on is needed)";
      return {};
    }
    SmallVector<GemmOp> gemms = findInFlightGemms(loop);
    if (gemms.empty() && asked)
      loop.emitWarning() << "wgmma_in_flight has no effect: no gemm at the top "
                            "of the loop takes wgmma with an accumulator that "
                            "only gemms use in the loop";
    return gemms;
  }

  /// The stage iteration `iteration` uses: iteration % N.
  static Value getStage(OpBuilder &b, Location loc, Value iteration,
                        int64_t numStages) {
    if (std::optional<int64_t> known = getConstantIntValue(iteration))
      return arith::ConstantIndexOp::create(b, loc, *known % numStages);
    if (numStages == 1)
      return arith::ConstantIndexOp::create(b, loc, 0);
    Value n = arith::ConstantIndexOp::create(b, loc, numStages);
    return arith::RemUIOp::create(b, loc, iteration, n);
  }

  /// Stage `stage` of an N-stage buffer: a rank-reducing subview.
  static Value stageView(OpBuilder &b, Location loc, AllocSharedOp buffer,
                         Value stage) {
    MemRefType type = buffer.getType();
    int64_t rank = type.getRank();
    SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0));
    offsets[0] = getAsOpFoldResult(stage);
    SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1)};
    for (int64_t d : type.getShape().drop_front())
      sizes.push_back(b.getIndexAttr(d));
    SmallVector<OpFoldResult> strides(rank, b.getIndexAttr(1));
    auto stageType = cast<MemRefType>(memref::SubViewOp::inferRankReducedResultType(
        type.getShape().drop_front(), type, offsets, sizes, strides));
    return memref::SubViewOp::create(b, loc, stageType, buffer, offsets, sizes,
                                     strides);
  }
};

} // namespace
