//===- Schedule.cpp - AOT worker queues and the JIT queue -----------------===//

#include "TaskModel.h"

#include "tilemega/Dialect/Mega/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

#include <queue>

namespace mlir::tilemega::mega {
#define GEN_PASS_DEF_MEGASCHEDULE
#include "tilemega/Dialect/Mega/Transforms/Passes.h.inc"
} // namespace mlir::tilemega::mega

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::mega;

namespace {

/// The instance graph with events as nodes: an instance can start once all
/// events it waits on have every signaller finished.
struct InstanceGraph {
  SmallVector<std::pair<unsigned, int64_t>> instances; // (task, index)
  SmallVector<SmallVector<unsigned>> waits, signals;   // per instance
  SmallVector<SmallVector<unsigned>> waiters;          // per event
  SmallVector<unsigned> signallerCount;                // per event
  SmallVector<double> cost;

  LogicalResult build(GraphOp graph, MutableArrayRef<TaskOp> tasks) {
    DenseMap<StringAttr, unsigned> eventIndex;
    for (auto event : graph.getBodyBlock().getOps<EventOp>())
      eventIndex[event.getSymNameAttr()] = eventIndex.size();
    waiters.resize(eventIndex.size());
    signallerCount.assign(eventIndex.size(), 0);
    for (auto [t, task] : llvm::enumerate(tasks)) {
      for (int64_t i = 0; i < task.getNumInstances(); ++i) {
        unsigned c = instances.size();
        instances.push_back({static_cast<unsigned>(t), i});
        cost.push_back(getInstanceCost(task));
        waits.emplace_back();
        signals.emplace_back();
        for (FlatSymbolRefAttr ref : task.getInstanceWaitRefs(i)) {
          waits[c].push_back(eventIndex.at(ref.getAttr()));
          waiters[waits[c].back()].push_back(c);
        }
        for (FlatSymbolRefAttr ref : task.getInstanceSignalRefs(i)) {
          signals[c].push_back(eventIndex.at(ref.getAttr()));
          ++signallerCount[signals[c].back()];
        }
      }
    }
    return success();
  }

  /// Longest path (by cost) from each instance to the end of the graph, over
  /// a topological order found with Kahn's algorithm. Fails on a cycle.
  FailureOr<SmallVector<double>> upwardRanks() {
    size_t n = instances.size();
    SmallVector<unsigned> pending(n), eventPending(signallerCount);
    SmallVector<unsigned> order, ready;
    for (unsigned c = 0; c < n; ++c)
      if (!(pending[c] = waits[c].size()))
        ready.push_back(c);
    while (!ready.empty()) {
      unsigned c = ready.pop_back_val();
      order.push_back(c);
      for (unsigned e : signals[c])
        if (--eventPending[e] == 0)
          for (unsigned w : waiters[e])
            if (--pending[w] == 0)
              ready.push_back(w);
    }
    if (order.size() != n)
      return failure();
    SmallVector<double> rank(n, 0.0);
    for (unsigned c : llvm::reverse(order)) {
      double tail = 0;
      for (unsigned e : signals[c])
        for (unsigned w : waiters[e])
          tail = std::max(tail, rank[w]);
      rank[c] = cost[c] + tail;
    }
    return rank;
  }
};

/// Which workers share an SM in a `workers_by_sm` graph (worker w on SM
/// w mod G), and until when each SM runs a latency-bound instance. Such an
/// instance gets an SM of its own (its other workers idle or running
/// latency-bound instances too), because another CTA's loads on the SM (a
/// GEMV's early prologue, issued as that CTA's previous entry ends) queue
/// ahead of its loads and its wait (docs/mega.md). Streaming instances are
/// packed two to an SM where they can be, so that whole SMs stay free for
/// the latency-bound ones.
struct SmPlacement {
  SmPlacement(GraphOp graph, ArrayRef<double> freeAt, bool anyLatencyBound)
      : freeAt(freeAt),
        sms(graph.getWorkersBySm() && anyLatencyBound ? graph.getNumWorkerSms() : 0),
        aloneUntil(sms, 0.0) {}

  bool enabled() const { return sms > 0; }
  int64_t smOf(int64_t w) const { return w % sms; }

  /// When worker w may start a streaming instance: once free, and once no
  /// latency-bound instance runs on its SM.
  double freeFor(int64_t w) const {
    return enabled() ? std::max(freeAt[w], aloneUntil[smOf(w)]) : freeAt[w];
  }

  /// A worker free at `t` for a latency-bound instance: first one on an SM
  /// that already runs such instances, else the one on the SM whose other
  /// workers are free soonest; -1 if no worker is free at `t`.
  int64_t pickAlone(double t) const {
    int64_t open = -1;
    double openIdleAt = 0;
    for (int64_t w = 0, e = freeAt.size(); w < e; ++w) {
      if (freeAt[w] > t)
        continue;
      if (aloneUntil[smOf(w)] > t)
        return w;
      double idleAt = lastFree(smOf(w));
      if (open < 0 || idleAt < openIdleAt)
        open = w, openIdleAt = idleAt;
    }
    return open;
  }

  /// Of the workers whose freeFor is at most `t`, one whose SM has the most
  /// workers busy at `t` (packing), the first such producer's worker if
  /// one qualifies; -1 if none is free.
  int64_t pickPacked(double t, ArrayRef<unsigned> producers,
                     ArrayRef<int64_t> workerOf) const {
    int64_t best = -1, bestBusy = -1;
    auto consider = [&](int64_t w) {
      if (w < 0 || freeFor(w) > t)
        return;
      int64_t busy = busyAt(smOf(w), t);
      if (busy > bestBusy)
        best = w, bestBusy = busy;
    };
    for (unsigned p : producers)
      consider(workerOf[p]);
    for (int64_t w = 0, e = freeAt.size(); w < e; ++w)
      consider(w);
    return best;
  }

  void ranAlone(int64_t w, double finish) {
    if (enabled())
      aloneUntil[smOf(w)] = std::max(aloneUntil[smOf(w)], finish);
  }

  ArrayRef<double> freeAt;

private:
  /// When the last worker of `sm` becomes free.
  double lastFree(int64_t sm) const {
    double last = 0;
    for (int64_t w = sm, e = freeAt.size(); w < e; w += sms)
      last = std::max(last, freeAt[w]);
    return last;
  }
  int64_t busyAt(int64_t sm, double t) const {
    int64_t busy = 0;
    for (int64_t w = sm, e = freeAt.size(); w < e; w += sms)
      busy += freeAt[w] > t;
    return busy;
  }

  int64_t sms;
  SmallVector<double> aloneUntil;
};

struct MegaSchedulePass
    : public mega::impl::MegaScheduleBase<MegaSchedulePass> {
  using MegaScheduleBase::MegaScheduleBase;

  void runOnOperation() override {
    if (policy != "auto" && policy != "aot" && policy != "jit") {
      getOperation().emitError() << "mega-schedule policy must be auto, aot "
                                    "or jit, got '"
                                 << policy << "'";
      return signalPassFailure();
    }
    for (auto graph : getOperation().getOps<GraphOp>())
      if (failed(schedule(graph)))
        return signalPassFailure();
  }

  LogicalResult schedule(GraphOp graph) {
    for (auto queue : graph.getBodyBlock().getOps<QueueOp>())
      if (queue.getTasks())
        return success(); // Already scheduled.
    SmallVector<TaskOp> tasks = getTasks(graph);
    InstanceGraph g;
    if (failed(g.build(graph, tasks)))
      return failure();
    FailureOr<SmallVector<double>> rank = g.upwardRanks();
    if (failed(rank))
      return graph.emitOpError("has a dependency cycle between task instances");

    // Queues: one AOT queue per worker, the JIT queue if any task goes there.
    int64_t workers = graph.getNumWorkers();
    OpBuilder b(graph.getContext());
    b.setInsertionPointToStart(&graph.getBodyBlock());
    SmallVector<QueueOp> aot(workers);
    QueueOp jit;
    for (auto queue : graph.getBodyBlock().getOps<QueueOp>()) {
      if (queue.getKind() == QueueKind::jit)
        jit = queue;
      else
        aot[*queue.getWorkerIndex()] = queue;
    }
    // Per task: -1 any worker (AOT), -2 the JIT queue, w >= 0 pinned.
    SmallVector<int64_t> placement(tasks.size(), -1);
    for (auto [t, task] : llvm::enumerate(tasks)) {
      if (FlatSymbolRefAttr ref = task.getQueueAttr()) {
        auto queue = cast<QueueOp>(SymbolTable::lookupSymbolIn(graph, ref));
        placement[t] = queue.getKind() == QueueKind::jit
                           ? -2
                           : *queue.getWorkerIndex();
        continue;
      }
      bool wantJit = policy == "jit" || (policy == "auto" && task.getVariable());
      if (wantJit && graph.getNumSchedulers() < 1) {
        if (policy == "jit")
          return graph.emitOpError()
                 << "cannot use the JIT queue (policy jit): the graph has no "
                    "scheduler warps (schedulers 0)";
        wantJit = false;
      }
      placement[t] = wantJit ? -2 : -1;
    }
    // New queues get the first free name (tasks and events share the
    // graph's symbol table).
    SymbolTable symbols(graph);
    auto freeName = [&](std::string base) {
      std::string name = base;
      for (unsigned n = 0; symbols.lookup(name); ++n)
        name = base + "_" + std::to_string(n);
      return name;
    };
    bool needJit = llvm::is_contained(placement, -2);
    if (needJit && !jit)
      jit = QueueOp::create(b, graph.getLoc(), b.getStringAttr(freeName("jit")),
                            QueueKind::jit, IntegerAttr(), ArrayAttr(),
                            DenseI64ArrayAttr(), DenseI64ArrayAttr());
    for (int64_t w = 0; w < workers; ++w)
      if (!aot[w])
        aot[w] = QueueOp::create(b, graph.getLoc(),
                                 b.getStringAttr(freeName("w" + std::to_string(w))),
                                 QueueKind::aot, b.getI64IntegerAttr(w),
                                 ArrayAttr(), DenseI64ArrayAttr(), DenseI64ArrayAttr());

    // List scheduling (see the pass description).
    size_t n = g.instances.size();
    SmallVector<double> freeAt(workers, 0.0), readyAt(n, 0.0),
        eventTime(g.signallerCount.size(), 0.0);
    SmallVector<unsigned> pending(n), eventPending(g.signallerCount);
    SmallVector<int64_t> workerOf(n, -1);
    SmallVector<SmallVector<unsigned>> producers(n);
    SmallVector<SmallVector<unsigned>> aotEntries(workers);
    SmallVector<std::pair<double, unsigned>> jitEntries; // (start, instance)
    auto byRank = [&](unsigned a, unsigned b) {
      return (*rank)[a] != (*rank)[b] ? (*rank)[a] < (*rank)[b] : a > b;
    };
    auto byReady = [&](unsigned a, unsigned b) {
      return readyAt[a] != readyAt[b] ? readyAt[a] > readyAt[b] : byRank(a, b);
    };
    std::priority_queue<unsigned, std::vector<unsigned>, decltype(byRank)>
        available(byRank);
    std::priority_queue<unsigned, std::vector<unsigned>, decltype(byReady)>
        future(byReady);
    for (unsigned c = 0; c < n; ++c)
      if (!(pending[c] = g.waits[c].size()))
        future.push(c);

    bool anyLatencyBound =
        llvm::any_of(tasks, [](TaskOp task) { return task.getLatencyBound(); });
    SmPlacement sms(graph, freeAt, anyLatencyBound);
    double makespan = 0;
    for (size_t scheduled = 0; scheduled < n; ++scheduled) {
      double t = *llvm::min_element(freeAt);
      if (available.empty() && readyAt[future.top()] > t)
        t = readyAt[future.top()];
      while (!future.empty() && readyAt[future.top()] <= t) {
        available.push(future.top());
        future.pop();
      }
      unsigned c = available.top();
      available.pop();
      int64_t pinned = placement[g.instances[c].first];
      bool latencyBound = tasks[g.instances[c].first].getLatencyBound();
      int64_t w = pinned;
      if (pinned < 0 && sms.enabled())
        w = latencyBound ? sms.pickAlone(t) : sms.pickPacked(t, producers[c], workerOf);
      if (w < 0)
        w = pickWorker(sms, t, producers[c], workerOf);
      double start = std::max(latencyBound ? freeAt[w] : sms.freeFor(w), readyAt[c]);
      double finish = start + g.cost[c];
      freeAt[w] = finish;
      if (latencyBound)
        sms.ranAlone(w, finish);
      workerOf[c] = w;
      makespan = std::max(makespan, finish);
      if (pinned == -2)
        jitEntries.push_back({start, c});
      else
        aotEntries[w].push_back(c);
      for (unsigned e : g.signals[c]) {
        eventTime[e] = std::max(eventTime[e], finish);
        if (--eventPending[e] != 0)
          continue;
        for (unsigned waiter : g.waiters[e]) {
          readyAt[waiter] = std::max(readyAt[waiter], eventTime[e]);
          producers[waiter].push_back(c);
          if (--pending[waiter] == 0)
            future.push(waiter);
        }
      }
    }

    auto setEntries = [&](QueueOp queue, ArrayRef<unsigned> entries) {
      SmallVector<Attribute> names;
      SmallVector<int64_t> indices;
      for (unsigned c : entries) {
        names.push_back(FlatSymbolRefAttr::get(
            tasks[g.instances[c].first].getSymNameAttr()));
        indices.push_back(g.instances[c].second);
      }
      queue.setTasksAttr(b.getArrayAttr(names));
      queue.setInstancesAttr(b.getDenseI64ArrayAttr(indices));
    };
    for (int64_t w = 0; w < workers; ++w)
      setEntries(aot[w], aotEntries[w]);
    if (jit) {
      llvm::stable_sort(jitEntries, [](auto a, auto b) { return a.first < b.first; });
      setEntries(jit, llvm::to_vector(llvm::make_second_range(jitEntries)));
    }
    graph->setAttr(MegaDialect::getEstimatedMakespanAttrName(), b.getF64FloatAttr(makespan));
    return success();
  }

  /// The worker for an instance that may start at `t`: one that ran one of
  /// its producers and is free by then, else the first to be free (with
  /// workers by SM, a worker counts as busy while a latency-bound instance
  /// runs on its SM: SmPlacement::freeFor).
  static int64_t pickWorker(const SmPlacement &sms, double t,
                            ArrayRef<unsigned> producers,
                            ArrayRef<int64_t> workerOf) {
    for (unsigned p : producers) {
      int64_t w = workerOf[p];
      if (w >= 0 && sms.freeFor(w) <= t)
        return w;
    }
    int64_t best = 0;
    for (int64_t w = 1, e = sms.freeAt.size(); w < e; ++w)
      if (sms.freeFor(w) < sms.freeFor(best))
        best = w;
    return best;
  }
};

} // namespace
