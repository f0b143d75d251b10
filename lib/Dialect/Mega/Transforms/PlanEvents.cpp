//===- PlanEvents.cpp - events from the tasks' footprints -----------------===//

#include "TaskModel.h"

#include "tilemega/Dialect/Mega/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::tilemega::mega {
#define GEN_PASS_DEF_MEGAPLANEVENTS
#include "tilemega/Dialect/Mega/Transforms/Passes.h.inc"
} // namespace mlir::tilemega::mega

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::mega;

namespace {

/// An earlier instance's access to a graph argument.
struct PastAccess {
  unsigned instance;
  int64_t begin, end;
  bool write;
};

struct MegaPlanEventsPass
    : public mega::impl::MegaPlanEventsBase<MegaPlanEventsPass> {
  void runOnOperation() override {
    for (auto graph : getOperation().getOps<GraphOp>())
      plan(graph);
  }

  void plan(GraphOp graph) {
    SmallVector<TaskOp> tasks = getTasks(graph);
    // Instances in program order: (task, index).
    SmallVector<std::pair<unsigned, int64_t>> instances;
    SmallVector<unsigned> firstInstance;
    for (auto [t, task] : llvm::enumerate(tasks)) {
      firstInstance.push_back(instances.size());
      for (int64_t i = 0; i < task.getNumInstances(); ++i)
        instances.push_back({static_cast<unsigned>(t), i});
    }
    size_t n = instances.size();

    // Direct dependencies from overlapping accesses, then the transitive
    // reduction: `ancestors[c]` is everything c (transitively) waits for.
    SmallVector<SmallVector<PastAccess>> history(graph.getGlobals().size());
    SmallVector<llvm::BitVector> ancestors(n);
    SmallVector<SmallVector<unsigned>> deps(n);
    for (unsigned c = 0; c < n; ++c) {
      auto [t, i] = instances[c];
      SmallVector<unsigned> direct;
      SmallVector<TouchedRange> regions = getInstanceRegions(tasks[t], i);
      for (const TouchedRange &r : regions)
        for (const PastAccess &past : history[r.arg])
          if ((past.write || r.write) && past.begin < r.end &&
              r.begin < past.end &&
              instances[past.instance].first != t)
            direct.push_back(past.instance);
      llvm::sort(direct);
      direct.erase(std::unique(direct.begin(), direct.end()), direct.end());

      ancestors[c].resize(n);
      for (unsigned d : direct) {
        ancestors[c] |= ancestors[d];
        ancestors[c].set(d);
      }
      for (unsigned d : direct) {
        bool implied = llvm::any_of(direct, [&](unsigned other) {
          return other != d && ancestors[other].test(d);
        });
        if (!implied)
          deps[c].push_back(d);
      }
      for (const TouchedRange &r : regions)
        history[r.arg].push_back({c, r.begin, r.end, r.write});
    }

    // One event per distinct dependency set.
    llvm::MapVector<ArrayRef<unsigned>, unsigned> eventOf;
    SmallVector<int> waitOf(n, -1);
    SmallVector<SmallVector<unsigned>> signalsOf(n);
    for (unsigned c = 0; c < n; ++c) {
      if (deps[c].empty())
        continue;
      auto [it, inserted] = eventOf.insert({deps[c], eventOf.size()});
      waitOf[c] = it->second;
      if (inserted)
        for (unsigned d : deps[c])
          signalsOf[d].push_back(it->second);
    }

    OpBuilder b(graph.getContext());
    b.setInsertionPointToStart(&graph.getBodyBlock());
    SmallVector<FlatSymbolRefAttr> eventRefs;
    SymbolTable symbols(graph);
    unsigned next = 0;
    for (auto &[key, e] : eventOf) {
      // The first free name evN (the graph may use some already).
      std::string name;
      do
        name = "ev" + std::to_string(next++);
      while (symbols.lookup(name));
      auto event = EventOp::create(b, graph.getLoc(), b.getStringAttr(name),
                                   b.getI64IntegerAttr(key.size()));
      symbols.insert(event, b.getInsertionPoint());
      eventRefs.push_back(FlatSymbolRefAttr::get(b.getStringAttr(name)));
    }

    for (auto [t, task] : llvm::enumerate(tasks)) {
      SmallVector<SmallVector<Attribute>> waits, signals;
      for (int64_t i = 0; i < task.getNumInstances(); ++i) {
        unsigned c = firstInstance[t] + i;
        waits.emplace_back();
        if (waitOf[c] >= 0)
          waits.back().push_back(eventRefs[waitOf[c]]);
        signals.emplace_back();
        for (unsigned e : signalsOf[c])
          signals.back().push_back(eventRefs[e]);
      }
      attach(task, waits, task.getWaits(), task.getInstanceWaitsAttr(),
             task.getWaitsAttrName(), task.getInstanceWaitsAttrName());
      attach(task, signals, task.getSignals(), task.getInstanceSignalsAttr(),
             task.getSignalsAttrName(), task.getInstanceSignalsAttrName());
    }
  }

  /// Puts per-instance event lists on a task: task-wide when every instance
  /// has the same list, per instance otherwise.
  static void attach(TaskOp task, ArrayRef<SmallVector<Attribute>> lists,
                     ArrayAttr taskWide, ArrayAttr existing,
                     StringAttr taskWideName, StringAttr perInstanceName) {
    Builder b(task.getContext());
    bool uniform = llvm::all_equal(lists);
    if (uniform && !existing) {
      if (lists.empty() || lists.front().empty())
        return;
      SmallVector<Attribute> merged(taskWide.getValue());
      llvm::append_range(merged, lists.front());
      task->setAttr(taskWideName, b.getArrayAttr(merged));
      return;
    }
    // Per instance, after the lists the task already had.
    SmallVector<Attribute> perInstance;
    for (auto [i, list] : llvm::enumerate(lists)) {
      SmallVector<Attribute> merged;
      if (existing)
        llvm::append_range(merged, cast<ArrayAttr>(existing[i]).getValue());
      llvm::append_range(merged, list);
      perInstance.push_back(b.getArrayAttr(merged));
    }
    task->setAttr(perInstanceName, b.getArrayAttr(perInstance));
  }
};

} // namespace
