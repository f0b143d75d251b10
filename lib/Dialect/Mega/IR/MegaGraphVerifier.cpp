//===- MegaGraphVerifier.cpp - whole-graph checks of mega.graph -------------===//
//
// The region verifier of mega.graph: the checks that need every task, event
// and queue of a graph at once. It runs after each op in the body has been
// verified and after the graph's SymbolTable trait has resolved every
// symbol (TaskOp::verifySymbolUses), so lookups here cannot fail.
//
//  - at most one aot queue per worker and at most one jit queue;
//  - every event that is waited on is signalled by some task;
//  - every event's trigger count equals the number of task instances that
//    signal it (task-wide `signals` count every instance, `instance_signals`
//    the instances that list it);
//  - once scheduled (queues list entries), every task instance is in exactly
//    one queue;
//  - the task graph (task -> event it signals -> task waiting on it) is
//    acyclic; a cycle is reported once, naming its tasks in order;
//  - the entries a `paired` queue pairs may run as a pair (MegaPairs.h),
//    in a graph whose workers wait inside their cases (no JIT entries, one
//    rank).
//
//===----------------------------------------------------------------------===//

#include "tilemega/Dialect/Mega/IR/MegaDialect.h"
#include "tilemega/Dialect/Mega/IR/MegaPairs.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::mega;

namespace {

/// The dependency structure of one graph, indexed by position in the body.
struct TaskGraph {
  SmallVector<TaskOp> tasks;
  SmallVector<EventOp> events;
  DenseMap<StringAttr, unsigned> eventIndex;
  /// For each event, the tasks that signal it and the tasks that wait on it,
  /// in body order.
  SmallVector<SmallVector<unsigned>> signallers, waiters;
  /// For each event, how many task instances signal it.
  SmallVector<uint64_t> signalCounts;

  explicit TaskGraph(GraphOp graph) {
    for (Operation &op : graph.getBodyBlock()) {
      if (auto event = dyn_cast<EventOp>(op)) {
        eventIndex[event.getSymNameAttr()] = events.size();
        events.push_back(event);
      } else if (auto task = dyn_cast<TaskOp>(op)) {
        tasks.push_back(task);
      }
    }
    signallers.resize(events.size());
    waiters.resize(events.size());
    signalCounts.assign(events.size(), 0);
    taskSignals.resize(tasks.size());
    for (auto [t, task] : llvm::enumerate(tasks)) {
      uint64_t count = static_cast<uint64_t>(task.getNumInstances());
      for (auto ref : task.getSignals().getAsRange<FlatSymbolRefAttr>()) {
        unsigned e = eventIndex.at(ref.getAttr());
        addUnique(signallers[e], t);
        addUnique(taskSignals[t], e);
        signalCounts[e] = llvm::SaturatingAdd(signalCounts[e], count);
      }
      for (auto ref : task.getWaits().getAsRange<FlatSymbolRefAttr>())
        addUnique(waiters[eventIndex.at(ref.getAttr())], t);
      if (ArrayAttr lists = task.getInstanceSignalsAttr())
        for (Attribute list : lists)
          for (auto ref : cast<ArrayAttr>(list).getAsRange<FlatSymbolRefAttr>()) {
            unsigned e = eventIndex.at(ref.getAttr());
            addUnique(signallers[e], t);
            addUnique(taskSignals[t], e);
            signalCounts[e] = llvm::SaturatingAdd(signalCounts[e], uint64_t(1));
          }
      if (ArrayAttr lists = task.getInstanceWaitsAttr())
        for (Attribute list : lists)
          for (auto ref : cast<ArrayAttr>(list).getAsRange<FlatSymbolRefAttr>())
            addUnique(waiters[eventIndex.at(ref.getAttr())], t);
    }
  }

  /// Tasks that can start only after (some instance of) `t` finished: those
  /// that wait on an event `t` signals.
  SmallVector<unsigned> successors(unsigned t) {
    SmallVector<unsigned> result;
    for (unsigned e : taskSignals[t])
      for (unsigned w : waiters[e])
        addUnique(result, w);
    return result;
  }

private:
  /// Events each task signals (any instance).
  SmallVector<SmallVector<unsigned>> taskSignals;

  static void addUnique(SmallVector<unsigned> &list, unsigned value) {
    if (list.empty() || list.back() != value)
      if (!llvm::is_contained(list, value))
        list.push_back(value);
  }
};

} // namespace

static LogicalResult verifyQueues(GraphOp graph) {
  DenseMap<int64_t, QueueOp> aotByWorker;
  QueueOp jit;
  for (auto queue : graph.getBodyBlock().getOps<QueueOp>()) {
    if (queue.getKind() == QueueKind::jit) {
      if (jit)
        return queue.emitOpError()
               << "is a second jit queue; the graph already has "
               << FlatSymbolRefAttr::get(jit.getSymNameAttr());
      jit = queue;
      continue;
    }
    auto [it, inserted] = aotByWorker.try_emplace(*queue.getWorkerIndex(), queue);
    if (!inserted)
      return queue.emitOpError()
             << "is a second aot queue for worker " << *queue.getWorkerIndex()
             << ", which already has "
             << FlatSymbolRefAttr::get(it->second.getSymNameAttr());
  }
  return success();
}

static LogicalResult verifyEventCounts(TaskGraph &g) {
  for (auto [e, event] : llvm::enumerate(g.events)) {
    auto name = FlatSymbolRefAttr::get(event.getSymNameAttr());
    if (g.signallers[e].empty() && !g.waiters[e].empty()) {
      TaskOp waiter = g.tasks[g.waiters[e].front()];
      return waiter.emitOpError()
             << "waits on event " << name
             << ", which no task signals, so task "
             << FlatSymbolRefAttr::get(waiter.getSymNameAttr())
             << " can never start";
    }
    uint64_t instances = g.signalCounts[e];
    uint64_t trigger = static_cast<uint64_t>(event.getTriggerCount());
    if (instances < trigger)
      return event.emitOpError()
             << "event " << name << " has trigger count " << trigger
             << " but is signalled by " << instances
             << " task instances: a wait on it can never be satisfied";
    if (instances > trigger)
      return event.emitOpError()
             << "event " << name << " has trigger count " << trigger
             << " but is signalled by " << instances
             << " task instances: it is over-signalled";
  }
  return success();
}

/// Depth-first search over the task graph in body order; reports the first
/// back edge found as one cycle, starting at the task it returns to.
static LogicalResult verifyAcyclic(TaskGraph &g) {
  enum class Color : uint8_t { White, Gray, Black };
  size_t n = g.tasks.size();
  SmallVector<Color> color(n, Color::White);
  SmallVector<SmallVector<unsigned>> succs(n);
  for (unsigned t = 0; t < n; ++t)
    succs[t] = g.successors(t);

  // Explicit stack of (task, index of the next successor to visit), so that
  // long dependency chains do not exhaust the native stack.
  SmallVector<std::pair<unsigned, unsigned>> stack;
  for (unsigned root = 0; root < n; ++root) {
    if (color[root] != Color::White)
      continue;
    color[root] = Color::Gray;
    stack.push_back({root, 0});
    while (!stack.empty()) {
      auto &[t, next] = stack.back();
      if (next == succs[t].size()) {
        color[t] = Color::Black;
        stack.pop_back();
        continue;
      }
      unsigned s = succs[t][next++];
      if (color[s] == Color::White) {
        color[s] = Color::Gray;
        stack.push_back({s, 0});
        continue;
      }
      if (color[s] == Color::Black)
        continue;
      // Back edge t -> s: the cycle is s ... t on the stack, then s again.
      auto start = llvm::find_if(
          stack, [&](const auto &entry) { return entry.first == s; });
      InFlightDiagnostic diag = g.tasks[s].emitOpError("dependency cycle: ");
      for (auto it = start; it != stack.end(); ++it)
        diag << FlatSymbolRefAttr::get(g.tasks[it->first].getSymNameAttr())
             << " -> ";
      diag << FlatSymbolRefAttr::get(g.tasks[s].getSymNameAttr());
      return diag;
    }
  }
  return success();
}

/// Once any queue lists entries, each task instance must be listed exactly
/// once over all queues: a missing one would never run (its events never
/// fire), a repeated one would signal twice.
static LogicalResult verifyScheduleCoverage(GraphOp graph, TaskGraph &g) {
  SmallVector<QueueOp> queues;
  for (auto queue : graph.getBodyBlock().getOps<QueueOp>())
    if (queue.getTasks())
      queues.push_back(queue);
  if (queues.empty())
    return success();
  DenseMap<StringAttr, unsigned> taskIndex;
  for (auto [t, task] : llvm::enumerate(g.tasks))
    taskIndex[task.getSymNameAttr()] = t;
  SmallVector<SmallVector<uint8_t>> seen(g.tasks.size());
  for (auto [t, task] : llvm::enumerate(g.tasks))
    seen[t].assign(task.getNumInstances(), 0);
  for (QueueOp queue : queues) {
    ArrayRef<int64_t> instances = queue.getInstancesAttr().asArrayRef();
    for (auto [ref, instance] : llvm::zip_equal(
             queue.getTasksAttr().getAsRange<FlatSymbolRefAttr>(), instances)) {
      auto it = taskIndex.find(ref.getAttr());
      if (it == taskIndex.end())
        return queue.emitOpError() << "lists " << ref
                                   << ", which does not name a mega.task";
      if (instance >= g.tasks[it->second].getNumInstances())
        return queue.emitOpError()
               << "lists instance " << instance << " of " << ref
               << ", which has " << g.tasks[it->second].getNumInstances();
      if (seen[it->second][instance]++)
        return queue.emitOpError() << "lists instance " << instance << " of "
                                   << ref << " a second time";
    }
  }
  for (auto [t, task] : llvm::enumerate(g.tasks))
    for (auto [i, count] : llvm::enumerate(seen[t]))
      if (!count)
        return task.emitOpError() << "instance " << i
                                  << " is in no queue, so it would never run";
  return success();
}

/// Every pair of a `paired` queue follows getPairProblem, in a graph whose
/// workers commit to their next AOT entry (no JIT entries, one rank).
static LogicalResult verifyPairs(GraphOp graph) {
  SmallVector<QueueOp> paired;
  bool jitEntries = false;
  for (auto queue : graph.getBodyBlock().getOps<QueueOp>()) {
    if (queue.getPairedAttr() && !queue.getPairedAttr().empty())
      paired.push_back(queue);
    jitEntries |= queue.getKind() == QueueKind::jit && queue.getNumEntries() > 0;
  }
  if (paired.empty())
    return success();
  if (jitEntries || graph.getNumRanks() > 1)
    return paired.front().emitOpError()
           << "pairs entries, but the graph "
           << (jitEntries ? "has JIT entries" : "spans several ranks")
           << ": a pair's second entry is committed to before the first "
              "one's events fire, which needs every entry in an AOT queue of "
              "a graph of one rank";
  llvm::DenseSet<unsigned> written = getWrittenGraphArgs(graph);
  auto tasks = graph.getBodyBlock().getOps<TaskOp>();
  llvm::DenseMap<StringAttr, TaskOp> byName;
  for (TaskOp task : tasks)
    byName[task.getSymNameAttr()] = task;
  for (QueueOp queue : paired) {
    auto refs = llvm::to_vector(queue.getTasksAttr().getAsRange<FlatSymbolRefAttr>());
    ArrayRef<int64_t> instances = queue.getInstancesAttr().asArrayRef();
    for (int64_t p : queue.getPairedAttr().asArrayRef()) {
      TaskOp first = byName.lookup(refs[p].getAttr()),
             second = byName.lookup(refs[p + 1].getAttr());
      std::string problem = getPairProblem(first, second, written);
      if (!problem.empty())
        return queue.emitOpError()
               << "pairs entry " << p << " (" << refs[p] << " instance "
               << instances[p] << ") with entry " << p + 1 << " ("
               << refs[p + 1] << " instance " << instances[p + 1]
               << "), but " << problem;
    }
  }
  return success();
}

LogicalResult GraphOp::verifyRegions() {
  if (failed(verifyQueues(*this)))
    return failure();
  TaskGraph g(*this);
  if (failed(verifyEventCounts(g)) || failed(verifyScheduleCoverage(*this, g)) ||
      failed(verifyPairs(*this)))
    return failure();
  return verifyAcyclic(g);
}
