//===- TaskTables.cpp - the tables a persistent kernel runs from ----------===//

#include "TaskTables.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::mega;
using namespace mlir::tilemega::mega_to_gpu;

int64_t TaskTables::section(StringRef name) const {
  for (const auto &[key, offset] : sections)
    if (key == name)
      return offset;
  llvm_unreachable("unknown task table section");
}

FailureOr<TaskTables> mega_to_gpu::buildTaskTables(GraphOp graph) {
  TaskTables t;
  t.workers = graph.getNumWorkers();
  t.ranks = graph.getNumRanks();
  if (graph.getWorkersBySm()) {
    t.workerSms = graph.getNumWorkerSms();
    t.ctasPerSm = graph.getNumCtasPerSm();
  }
  DenseMap<StringAttr, unsigned> eventIndex, taskIndex;
  for (Operation &op : graph.getBodyBlock()) {
    if (auto event = dyn_cast<EventOp>(op)) {
      eventIndex[event.getSymNameAttr()] = t.events.size();
      t.events.push_back(event);
      t.eventWord.push_back(t.numEventWords);
      t.numEventWords += event.getPeers() ? t.ranks : 1;
    } else if (auto task = dyn_cast<TaskOp>(op)) {
      taskIndex[task.getSymNameAttr()] = t.tasks.size();
      t.tasks.push_back(task);
    }
  }

  // Switch cases: one per (body, units per task, claimed or not).
  TaskOp threadsFrom;
  for (auto [i, task] : llvm::enumerate(t.tasks)) {
    func::FuncOp body = task.getTileFunction();
    tile::KernelOp kernel = getTileKernel(body);
    if (!threadsFrom) {
      threadsFrom = task;
      t.threads = kernel.getThreads();
    } else if (static_cast<int64_t>(kernel.getThreads()) != t.threads) {
      return task.emitOpError()
             << "body " << task.getBodyAttr() << " runs " << kernel.getThreads()
             << " threads, but task @" << threadsFrom.getSymName()
             << " runs " << t.threads
             << ": all bodies of a persistent kernel need the same thread count";
    }
    int64_t perTask = task.getNumUnitsPerTask();
    bool claims = task.getClaimsUnits();
    t.claimsUnits |= claims;
    auto it = llvm::find_if(t.cases, [&](const TaskCase &c) {
      return c.body == body && c.unitsPerTask == perTask && c.claimsUnits == claims;
    });
    if (it == t.cases.end()) {
      t.cases.push_back({body, perTask, *getNumBlocks(kernel), claims, {}});
      it = std::prev(t.cases.end());
    }
    it->tasks.push_back(i);
    t.caseOfTask.push_back(it - t.cases.begin());
    t.firstEntry.push_back(t.numEntries);
    t.numEntries += task.getNumInstances();
  }

  // Queues.
  SmallVector<SmallVector<int32_t>> aot(t.workers);
  // A paired entry -> the entry it runs with (the verifier checked the pairs).
  DenseMap<int32_t, int32_t> pairOf;
  SmallVector<int32_t> jit;
  bool scheduled = false;
  for (auto queue : graph.getBodyBlock().getOps<QueueOp>()) {
    if (!queue.getTasksAttr())
      continue;
    scheduled = true;
    SmallVector<int32_t> &list =
        queue.getKind() == QueueKind::jit ? jit : aot[*queue.getWorkerIndex()];
    ArrayRef<int64_t> instances = queue.getInstancesAttr().asArrayRef();
    int64_t start = list.size();
    for (auto [ref, instance] : llvm::zip_equal(
             queue.getTasksAttr().getAsRange<FlatSymbolRefAttr>(), instances))
      list.push_back(t.firstEntry[taskIndex.at(ref.getAttr())] + instance);
    if (DenseI64ArrayAttr paired = queue.getPairedAttr())
      for (int64_t p : paired.asArrayRef())
        pairOf[list[start + p]] = list[start + p + 1];
  }
  if (!scheduled && t.numEntries > 0)
    return graph.emitOpError()
           << "has no scheduled queues: run mega-schedule before "
              "convert-mega-to-gpu";
  t.numJit = jit.size();
  // One pair case per (case, case) that some pair runs.
  DenseMap<std::pair<unsigned, unsigned>, unsigned> pairCaseIndex;
  auto caseOfEntry = [&](int32_t e) {
    return t.caseOfTask[llvm::upper_bound(t.firstEntry, e) - t.firstEntry.begin() - 1];
  };
  SmallVector<int32_t> pairedFirst = llvm::to_vector(llvm::make_first_range(pairOf));
  llvm::sort(pairedFirst);
  DenseMap<int32_t, unsigned> recordCase;
  for (int32_t e : pairedFirst) {
    auto key = std::make_pair(caseOfEntry(e), caseOfEntry(pairOf[e]));
    auto [it, inserted] = pairCaseIndex.try_emplace(key, t.cases.size() + t.pairCases.size());
    if (inserted)
      t.pairCases.push_back({key.first, key.second});
    recordCase[e] = it->second;
    t.pairedEntries.push_back(e);
  }

  // The flat tables.
  auto begin = [&](StringRef name) {
    t.sections.push_back({name.str(), static_cast<int64_t>(t.data.size())});
  };
  SmallVector<int32_t> entryCase, entryTask, entryInstance;
  SmallVector<int32_t> waitOffsets = {0}, waits, signalOffsets = {0}, signals;
  for (auto [ti, task] : llvm::enumerate(t.tasks)) {
    for (int64_t i = 0; i < task.getNumInstances(); ++i) {
      entryCase.push_back(t.caseOfTask[ti]);
      entryTask.push_back(ti);
      entryInstance.push_back(i);
      // A peer event is waited on as its senders' words, each fired by
      // one rank's signalling instances.
      for (FlatSymbolRefAttr ref : task.getInstanceWaitRefs(i)) {
        unsigned e = eventIndex.at(ref.getAttr());
        int64_t words = t.events[e].getPeers() ? t.ranks : 1;
        for (int64_t s = 0; s < words; ++s)
          waits.push_back(t.eventWord[e] + s);
      }
      waitOffsets.push_back(waits.size());
      for (FlatSymbolRefAttr ref : task.getInstanceSignalRefs(i)) {
        unsigned e = eventIndex.at(ref.getAttr());
        signals.push_back(t.eventWord[e] |
                          (t.events[e].getPeers() ? kPeerSignalBit : 0));
      }
      signalOffsets.push_back(signals.size());
    }
  }
  // One trigger a counter word.
  SmallVector<int32_t> triggers;
  for (EventOp event : t.events)
    triggers.append(event.getPeers() ? t.ranks : 1,
                    static_cast<int32_t>(event.getTriggerCount()));
  // One 32-byte record per entry, what a worker needs in one vector load:
  // case | task << 16, instance, #waits, first wait event and its trigger,
  // #signals, first signalled event, the entry itself.
  if (t.cases.size() + t.pairCases.size() > 0xffff || t.tasks.size() > 0x7fff)
    return graph.emitOpError()
           << "has " << t.tasks.size() << " tasks in " << t.cases.size()
           << " bodies and " << t.pairCases.size()
           << " pairs of them; entry records hold at most 32767 tasks and 65535 "
              "bodies and pairs";
  auto record = [&](int64_t e, SmallVectorImpl<int32_t> &out) {
    int32_t w0 = waitOffsets[e], w1 = waitOffsets[e + 1];
    int32_t s0 = signalOffsets[e], s1 = signalOffsets[e + 1];
    int32_t wait = w1 > w0 ? waits[w0] : -1;
    int32_t trigger = wait >= 0 ? triggers[wait] : 0;
    int32_t caseField = recordCase.lookup_or(static_cast<int32_t>(e), entryCase[e]);
    llvm::append_values(out, caseField | (entryTask[e] << 16),
                        entryInstance[e], w1 - w0, wait, trigger, s1 - s0,
                        s1 > s0 ? signals[s0] : -1, static_cast<int32_t>(e));
  };
  SmallVector<int32_t> records, aotRecords;
  for (int64_t e = 0; e < t.numEntries; ++e)
    record(e, records);
  // The same records in each worker's AOT order: a worker copies its block
  // to shared memory once, instead of reading one record per task from L2.
  for (const SmallVector<int32_t> &list : aot) {
    for (int32_t e : list)
      record(e, aotRecords);
    t.maxAotEntries = std::max<int64_t>(t.maxAotEntries, list.size());
  }
  SmallVector<int32_t> aotOffsets = {0}, aotList;
  for (const SmallVector<int32_t> &list : aot) {
    llvm::append_range(aotList, list);
    aotOffsets.push_back(aotList.size());
  }
  for (auto [name, section] :
       {std::pair<StringRef, ArrayRef<int32_t>>{"records", records},
        {"aot_records", aotRecords},
        {"entry_case", entryCase},
        {"entry_task", entryTask},
        {"entry_instance", entryInstance},
        {"wait_offsets", waitOffsets},
        {"waits", waits},
        {"signal_offsets", signalOffsets},
        {"signals", signals},
        {"triggers", triggers},
        {"aot_offsets", aotOffsets},
        {"aot", aotList},
        {"jit", jit}}) {
    begin(name);
    llvm::append_range(t.data, section);
  }
  if (t.data.empty())
    t.data.push_back(0);
  return t;
}

DictionaryAttr mega_to_gpu::buildMegaMetadata(GraphOp graph,
                                              const TaskTables &t,
                                              bool timeline,
                                              int64_t watchdogNs) {
  Builder b(graph.getContext());
  DenseSet<unsigned> jitTasks;
  for (auto queue : graph.getBodyBlock().getOps<QueueOp>())
    if (queue.getKind() == QueueKind::jit && queue.getTasksAttr())
      for (auto ref : queue.getTasksAttr().getAsRange<FlatSymbolRefAttr>())
        for (auto [i, task] : llvm::enumerate(t.tasks))
          if (TaskOp(task).getSymNameAttr() == ref.getAttr())
            jitTasks.insert(i);

  SmallVector<Attribute> tasks, events;
  for (auto [i, constTask] : llvm::enumerate(t.tasks)) {
    TaskOp task = constTask;
    const TaskCase &c = t.cases[t.caseOfTask[i]];
    double cost = task.getCostNs() ? task.getCostNs()->convertToDouble() : 0.0;
    SmallVector<NamedAttribute> taskFields = {
        b.getNamedAttr("name", b.getStringAttr(task.getSymName())),
        b.getNamedAttr("body", b.getStringAttr(task.getBody())),
        b.getNamedAttr("count", b.getI64IntegerAttr(task.getNumInstances())),
        b.getNamedAttr("units", b.getI64IntegerAttr(c.units)),
        b.getNamedAttr("units_per_task", b.getI64IntegerAttr(c.unitsPerTask)),
        b.getNamedAttr("queue",
                       b.getStringAttr(jitTasks.contains(i) ? "jit" : "aot")),
        b.getNamedAttr("cost_ns", b.getF64FloatAttr(cost)),
    };
    // Which units an entry ran is known only at run time.
    if (c.claimsUnits)
      taskFields.push_back(b.getNamedAttr("claims_units", b.getBoolAttr(true)));
    tasks.push_back(b.getDictionaryAttr(taskFields));
  }
  // One entry a counter word; a peer event's words name their sender.
  for (EventOp event : SmallVector<EventOp>(t.events)) {
    for (int64_t s = 0, n = event.getPeers() ? t.ranks : 1; s < n; ++s) {
      SmallVector<NamedAttribute> fields = {
          b.getNamedAttr("name", b.getStringAttr(event.getSymName())),
          b.getNamedAttr("trigger", b.getI64IntegerAttr(event.getTriggerCount()))};
      if (event.getPeers())
        fields.push_back(b.getNamedAttr("sender", b.getI64IntegerAttr(s)));
      events.push_back(b.getDictionaryAttr(fields));
    }
  }
  SmallVector<NamedAttribute> sections;
  for (const auto &[name, offset] : t.sections)
    sections.push_back(b.getNamedAttr(name, b.getI64IntegerAttr(offset)));
  SmallVector<NamedAttribute> fields = {
      b.getNamedAttr("graph", b.getStringAttr(graph.getSymName())),
      b.getNamedAttr("workers", b.getI64IntegerAttr(t.workers)),
      b.getNamedAttr("schedulers", b.getI64IntegerAttr(graph.getNumSchedulers())),
      b.getNamedAttr("threads", b.getI64IntegerAttr(t.threads)),
      b.getNamedAttr("timeline", b.getBoolAttr(timeline)),
      b.getNamedAttr("watchdog_ns", b.getI64IntegerAttr(watchdogNs)),
      b.getNamedAttr("num_entries", b.getI64IntegerAttr(t.numEntries)),
      b.getNamedAttr("num_events", b.getI64IntegerAttr(t.numEventWords)),
      b.getNamedAttr("num_jit", b.getI64IntegerAttr(t.numJit)),
      b.getNamedAttr("tasks", b.getArrayAttr(tasks)),
      b.getNamedAttr("events", b.getArrayAttr(events)),
      b.getNamedAttr("tables", b.getDenseI32ArrayAttr(t.data)),
      b.getNamedAttr("table_sections", b.getDictionaryAttr(sections)),
  };
  // A graph of several ranks: the runtime binds the peers' events buffers
  // into the argument table's last words.
  if (t.ranks > 1)
    fields.push_back(b.getNamedAttr("ranks", b.getI64IntegerAttr(t.ranks)));
  // Paired entries (mega-pair-entries): each runs with its worker's next.
  // and the body cases of each pair case (numbered after the body cases).
  if (!t.pairedEntries.empty()) {
    fields.push_back(b.getNamedAttr("paired_entries",
                                    b.getDenseI32ArrayAttr(t.pairedEntries)));
    SmallVector<Attribute> pairs;
    for (const PairCase &p : t.pairCases)
      pairs.push_back(b.getDenseI32ArrayAttr(
          {static_cast<int32_t>(p.first), static_cast<int32_t>(p.second)}));
    fields.push_back(b.getNamedAttr("pair_cases", b.getArrayAttr(pairs)));
  }
  // Workers placed by SM: the state buffer holds one claim word a CTA;
  // tasks that claim units: one unit counter a task after them.
  if (t.stateWords() != kStateWords)
    fields.push_back(b.getNamedAttr("state_words", b.getI64IntegerAttr(t.stateWords())));
  if (t.unitCounters() > 0)
    fields.push_back(b.getNamedAttr("unit_counters", b.getI64IntegerAttr(t.unitCounters())));
  // A repeating graph: the runtime sets the step limit and reads the steps.
  if (std::optional<ArrayRef<int64_t>> stop = graph.getStopWord())
    fields.push_back(b.getNamedAttr(
        "loop", b.getDictionaryAttr({
                    b.getNamedAttr("stop_argument", b.getI64IntegerAttr((*stop)[0])),
                    b.getNamedAttr("stop_element", b.getI64IntegerAttr((*stop)[1])),
                    b.getNamedAttr("max_steps",
                                   b.getI64IntegerAttr(static_cast<int64_t>(
                                       *graph.getMaxSteps()))),
                })));
  return b.getDictionaryAttr(fields);
}
