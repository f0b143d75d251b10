//===- PairEntries.cpp - the second entry's weights under the first -------===//
//
// Marks consecutive AOT entries that convert-mega-to-gpu runs in one case
// with disjoint shared tiles, so that the second body's weights stream
// while the first waits and computes (docs/mega.md, "Paired entries").
//
//===----------------------------------------------------------------------===//

#include "tilemega/Dialect/Mega/IR/MegaDialect.h"
#include "tilemega/Dialect/Mega/IR/MegaPairs.h"
#include "tilemega/Dialect/Mega/Transforms/Passes.h"
#include "tilemega/Target/TargetInfo.h"

#include "llvm/Support/Debug.h"
#include "llvm/Support/MathExtras.h"

#define DEBUG_TYPE "mega-pair-entries"

namespace mlir::tilemega::mega {
#define GEN_PASS_DEF_MEGAPAIRENTRIES
#include "tilemega/Dialect/Mega/Transforms/Passes.h.inc"
} // namespace mlir::tilemega::mega

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::mega;

namespace {

/// Record words (TaskTables' kRecordWords) and argument-table bytes an
/// entry and an argument take in the persistent kernel's shared memory,
/// and its control words (rounded up).
constexpr int64_t kRecordBytes = 32, kArgumentBytes = 8, kControlBytes = 1024,
                  kAlign = 128;

struct MegaPairEntriesPass
    : public mega::impl::MegaPairEntriesBase<MegaPairEntriesPass> {
  using Base::Base;

  void runOnOperation() override {
    FailureOr<TargetInfo> target = getTargetInfo(chip);
    if (failed(target)) {
      getOperation().emitError() << "mega-pair-entries: unknown chip '" << chip
                                 << "' (known: " << getKnownChips() << ")";
      return signalPassFailure();
    }
    getOperation().walk([&](GraphOp graph) { pairGraph(graph, *target); });
  }

  /// What the two bodies of a pair may take in `graph`'s kernel.
  int64_t budget(GraphOp graph, const TargetInfo &target) {
    if (sharedBytes > 0)
      return sharedBytes;
    int64_t perCta = std::min(target.maxSharedBytesPerBlock,
                              target.sharedBytesPerSm / graph.getNumCtasPerSm() -
                                  kReservedSharedBytesPerCta);
    size_t longest = 0;
    for (auto queue : graph.getBodyBlock().getOps<QueueOp>())
      if (queue.getKind() == QueueKind::aot)
        longest = std::max(longest, queue.getNumEntries());
    int64_t own = llvm::alignTo(longest * kRecordBytes, kAlign) +
                  llvm::alignTo(graph.getBody().getNumArguments() * kArgumentBytes, kAlign) +
                  kControlBytes;
    return perCta - own;
  }

  void pairGraph(GraphOp graph, const TargetInfo &target) {
    if (graph.getNumRanks() > 1)
      return;
    for (auto queue : graph.getBodyBlock().getOps<QueueOp>())
      if (queue.getKind() == QueueKind::jit && queue.getNumEntries() > 0)
        return;
    int64_t limit = budget(graph, target);
    llvm::DenseSet<unsigned> written = getWrittenGraphArgs(graph);
    DenseMap<StringAttr, TaskOp> byName;
    for (TaskOp task : graph.getBodyBlock().getOps<TaskOp>())
      byName[task.getSymNameAttr()] = task;
    // Per task and per pair of tasks: the same answer for every entry.
    DenseMap<Operation *, bool> lighter;
    DenseMap<Operation *, int64_t> bytes;
    DenseMap<std::pair<Operation *, Operation *>, bool> pairs;
    auto pairable = [&](TaskOp first, TaskOp second) {
      auto key = std::make_pair(first.getOperation(), second.getOperation());
      if (auto it = pairs.find(key); it != pairs.end())
        return it->second;
      if (!lighter.count(first))
        lighter[first] = waitsOnLighterStage(first);
      for (TaskOp task : {first, second})
        if (!bytes.count(task))
          bytes[task] = estimateBodySharedBytes(task);
      std::string problem = getPairProblem(first, second, written);
      bool ok = lighter[first] && bytes[first] + bytes[second] <= limit && problem.empty();
      LLVM_DEBUG(llvm::dbgs() << "mega-pair-entries: @" << first.getSymName() << " then @"
                              << second.getSymName() << ": " << bytes[first] << " + "
                              << bytes[second] << " bytes of " << limit
                              << (lighter[first] ? "" : ", waits on a heavier stage")
                              << (problem.empty() ? "" : ", " + problem)
                              << (ok ? ": paired" : "") << "\n");
      return pairs[key] = ok;
    };
    for (auto queue : graph.getBodyBlock().getOps<QueueOp>()) {
      if (queue.getKind() != QueueKind::aot || queue.getNumEntries() < 2)
        continue;
      auto refs = llvm::to_vector(queue.getTasksAttr().getAsRange<FlatSymbolRefAttr>());
      SmallVector<int64_t> positions;
      for (size_t p = 0; p + 1 < refs.size();) {
        if (pairable(byName.lookup(refs[p].getAttr()), byName.lookup(refs[p + 1].getAttr()))) {
          positions.push_back(p);
          p += 2;
        } else {
          p += 1;
        }
      }
      if (!positions.empty())
        queue.setPairedAttr(DenseI64ArrayAttr::get(&getContext(), positions));
    }
  }
};

} // namespace
