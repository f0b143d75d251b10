//===- MegaOps.cpp - mega dialect operations --------------------------------===//
//
// Per-op parsing, printing and verification. The checks that need the whole
// task graph (signal counts, unsatisfiable waits, cycles) are in
// MegaGraphVerifier.cpp.
//
//===----------------------------------------------------------------------===//

#include "tilemega/Dialect/Mega/IR/MegaDialect.h"
#include "tilemega/Dialect/Tile/IR/TileKernelParams.h"
#include "tilemega/Target/TargetInfo.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::mega;

#define GET_OP_CLASSES
#include "tilemega/Dialect/Mega/IR/MegaOps.cpp.inc"

//===----------------------------------------------------------------------===//
// AccessAttr
//===----------------------------------------------------------------------===//

LogicalResult AccessAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 AccessMode mode, int64_t operand,
                                 int64_t stride, int64_t base, int64_t size,
                                 int64_t first, int64_t last) {
  if (operand < 0)
    return emitError() << "access operand index must be >= 0, got " << operand;
  if (last < -1)
    return emitError() << "access unit range end " << last
                       << " must be -1 (all units) or past its start";
  if (first > 0 && last < 0)
    return emitError() << "access unit range starting at " << first
                       << " needs its end (`units F to L`)";
  if (first < 0 || (last >= 0 && last <= first))
    return emitError() << "access unit range " << first << " to " << last
                       << " is empty or negative";
  if (stride < 0 || stride * first + base < 0)
    return emitError() << "access offset " << stride << " * u + " << base
                       << " must have a non-negative stride and start at "
                          "element 0 or later for unit "
                       << first;
  if (size < 1)
    return emitError() << "access size must be >= 1, got " << size;
  return success();
}

//===----------------------------------------------------------------------===//
// GraphOp
//===----------------------------------------------------------------------===//

void GraphOp::build(OpBuilder &builder, OperationState &result, StringRef name,
                    TypeRange globals, int64_t workers, int64_t schedulers) {
  result.addAttribute(getSymNameAttrName(result.name),
                      builder.getStringAttr(name));
  result.addAttribute(getWorkersAttrName(result.name),
                      builder.getI64IntegerAttr(workers));
  result.addAttribute(getSchedulersAttrName(result.name),
                      builder.getI64IntegerAttr(schedulers));
  Region *body = result.addRegion();
  Block *block = new Block();
  for (Type type : globals)
    block->addArgument(type, result.location);
  body->push_back(block);
}

// mega.graph @name(%a: t, ...) workers W (schedulers S)?
//     (attributes {...})? { ... }
ParseResult GraphOp::parse(OpAsmParser &parser, OperationState &result) {
  Builder &b = parser.getBuilder();
  StringAttr name;
  if (parser.parseSymbolName(name, getSymNameAttrName(result.name),
                             result.attributes))
    return failure();

  SmallVector<OpAsmParser::Argument> globals;
  if (parser.parseArgumentList(globals, OpAsmParser::Delimiter::Paren,
                               /*allowType=*/true))
    return failure();

  int64_t workers;
  if (parser.parseKeyword("workers") || parser.parseInteger(workers))
    return failure();
  result.addAttribute(getWorkersAttrName(result.name),
                      b.getI64IntegerAttr(workers));

  if (succeeded(parser.parseOptionalKeyword("schedulers"))) {
    int64_t schedulers;
    if (parser.parseInteger(schedulers))
      return failure();
    result.addAttribute(getSchedulersAttrName(result.name),
                        b.getI64IntegerAttr(schedulers));
  }
  if (succeeded(parser.parseOptionalKeyword("ranks"))) {
    int64_t ranks;
    if (parser.parseInteger(ranks))
      return failure();
    result.addAttribute(getRanksAttrName(result.name), b.getI64IntegerAttr(ranks));
  }

  if (parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();

  Region *body = result.addRegion();
  if (parser.parseRegion(*body, globals))
    return failure();
  if (body->empty())
    body->push_back(new Block());
  return success();
}

void GraphOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printSymbolName(getSymName());
  p << '(';
  llvm::interleaveComma(getGlobals(), p,
                        [&](BlockArgument arg) { p.printRegionArgument(arg); });
  p << ") workers " << getNumWorkers();
  if (getNumSchedulers() != 1)
    p << " schedulers " << getNumSchedulers();
  if (getNumRanks() != 1)
    p << " ranks " << getNumRanks();
  p.printOptionalAttrDictWithKeyword(
      (*this)->getAttrs(), {getSymNameAttrName(), getWorkersAttrName(),
                            getSchedulersAttrName(), getRanksAttrName()});
  p << ' ';
  p.printRegion(getBody(), /*printEntryBlockArgs=*/false,
                /*printBlockTerminators=*/false);
}

LogicalResult GraphOp::verify() {
  if (getNumWorkers() < 1)
    return emitOpError() << "workers must be >= 1, got " << getNumWorkers();
  if (getNumSchedulers() < 0)
    return emitOpError() << "schedulers must be >= 0, got "
                         << getNumSchedulers();
  if (getNumRanks() < 1 || getNumRanks() > kMaxRanks)
    return emitOpError() << "ranks must be in [1, " << kMaxRanks
                         << "] (the GPUs of one node), got " << getNumRanks();
  if (getNumCtasPerSm() < 1)
    return emitOpError() << "ctas_per_sm must be >= 1, got " << getNumCtasPerSm();
  if (getNumCtasPerSm() > getMaxCtasPerSmOfKnownChips())
    return emitOpError() << "ctas_per_sm (" << getNumCtasPerSm() << ") exceeds the "
                         << getMaxCtasPerSmOfKnownChips() << " CTAs an SM of any known chip ("
                         << getKnownChips() << ") holds";
  // Every CTA of a persistent kernel must be resident at once; beyond what
  // any chip keeps, the graph can never run (and the passes would size
  // per-worker tables by it).
  int64_t most = getMaxResidentCtasOfKnownChips();
  if (getNumWorkers() > most || getNumSchedulers() > most - getNumWorkers())
    return emitOpError() << "workers (" << getNumWorkers() << ") + schedulers ("
                         << getNumSchedulers() << ") exceed the " << most
                         << " CTAs that any known chip ("
                         << getKnownChips() << ") keeps resident at once";
  return verifyLoop();
}

LogicalResult GraphOp::verifyLoop() {
  std::optional<ArrayRef<int64_t>> stop = getStopWord();
  std::optional<uint64_t> steps = getMaxSteps();
  if (stop.has_value() != steps.has_value())
    return emitOpError() << "stop_word and max_steps go together (a repeating "
                            "graph needs both)";
  if (!stop)
    return success();
  if (stop->size() != 2)
    return emitOpError() << "stop_word must be [argument, element], got "
                         << stop->size() << " values";
  int64_t arg = (*stop)[0], word = (*stop)[1];
  // Each step is one epoch of 32-bit event counters: bounded so that the
  // counters never wrap within a launch.
  int64_t most = int64_t(1) << 24;
  if (static_cast<int64_t>(*steps) < 1 || static_cast<int64_t>(*steps) > most)
    return emitOpError() << "max_steps must be in [1, " << most << "], got "
                         << static_cast<int64_t>(*steps);
  if (arg < 0 || arg >= static_cast<int64_t>(getGlobals().size()))
    return emitOpError() << "stop_word argument " << arg
                         << " is not one of the graph's "
                         << getGlobals().size() << " arguments";
  auto type = dyn_cast<MemRefType>(getGlobals()[arg].getType());
  if (!type || type.getRank() != 1 || !type.getElementType().isInteger(32) ||
      !type.hasStaticShape())
    return emitOpError() << "stop_word argument " << arg
                         << " must be a 1-D i32 memref of static size, got "
                         << getGlobals()[arg].getType();
  if (word < 0 || word >= type.getNumElements())
    return emitOpError() << "stop_word element " << word
                         << " is outside argument " << arg << " ("
                         << type.getNumElements() << " elements)";
  return success();
}

//===----------------------------------------------------------------------===//
// EventOp
//===----------------------------------------------------------------------===//

LogicalResult EventOp::verify() {
  if (getTriggerCount() < 1)
    return emitOpError() << "trigger count must be >= 1, got "
                         << getTriggerCount();
  auto graph = cast<GraphOp>((*this)->getParentOp());
  if (getPeers() && graph.getNumRanks() < 2)
    return emitOpError() << "is a peer event in a graph of "
                         << graph.getNumRanks()
                         << " rank: peer events need `ranks` >= 2";
  return success();
}

//===----------------------------------------------------------------------===//
// QueueOp
//===----------------------------------------------------------------------===//

LogicalResult QueueOp::verify() {
  auto graph = cast<GraphOp>((*this)->getParentOp());
  std::optional<int64_t> worker = getWorkerIndex();
  switch (getKind()) {
  case QueueKind::aot:
    if (!worker)
      return emitOpError() << "aot queue needs a worker index";
    if (*worker < 0 || *worker >= graph.getNumWorkers())
      return emitOpError() << "worker " << *worker << " is out of range [0, "
                           << graph.getNumWorkers() << ") of the graph's workers";
    break;
  case QueueKind::jit:
    if (worker)
      return emitOpError() << "jit queue takes no worker index";
    if (graph.getNumSchedulers() < 1)
      return emitOpError() << "jit queue needs at least one scheduler warp, "
                              "but the graph has schedulers "
                           << graph.getNumSchedulers();
    break;
  }
  if (getTasks().has_value() != getInstances().has_value())
    return emitOpError() << "needs both 'tasks' and 'instances' or neither";
  if (getTasks() && getTasks()->size() != getInstances()->size())
    return emitOpError() << "lists " << getTasks()->size() << " tasks but "
                         << getInstances()->size() << " instances";
  if (DenseI64ArrayAttr instances = getInstancesAttr())
    for (int64_t instance : instances.asArrayRef())
      if (instance < 0)
        return emitOpError() << "instance index " << instance
                             << " must be >= 0";
  if (DenseI64ArrayAttr paired = getPairedAttr()) {
    if (getKind() != QueueKind::aot)
      return emitOpError() << "pairs entries, but only an aot queue's entries "
                              "run in a fixed order";
    int64_t entries = static_cast<int64_t>(getNumEntries()), next = 0;
    for (int64_t p : paired.asArrayRef()) {
      if (p < 0)
        return emitOpError() << "pairs entry " << p << ": positions are >= 0";
      if (p < next)
        return emitOpError() << "pairs entry " << p << " after entry " << next - 1
                             << ": the positions must ascend and no entry may be "
                                "in two pairs";
      if (p + 1 >= entries)
        return emitOpError() << "pairs entry " << p << " with entry " << p + 1
                             << ", but the queue has " << entries << " entries";
      next = p + 2;
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// TaskOp
//===----------------------------------------------------------------------===//

/// Checks that no event is listed twice in `waits` or `signals`: a task
/// signals each event once per instance, and waits on it once.
static LogicalResult verifyNoDuplicates(TaskOp task, ArrayAttr refs,
                                        StringRef field) {
  llvm::SmallDenseSet<Attribute> seen;
  for (Attribute ref : refs)
    if (!seen.insert(ref).second)
      return task.emitOpError() << "lists event " << ref
                                << " more than once in '" << field << "'";
  return success();
}

LogicalResult TaskOp::verify() {
  if (getNumInstances() < 1)
    return emitOpError() << "count must be >= 1, got " << getNumInstances();
  Block *graphBody = &getGraph().getBodyBlock();
  for (auto [i, arg] : llvm::enumerate(getArgs())) {
    auto blockArg = dyn_cast<BlockArgument>(arg);
    if (!blockArg || blockArg.getOwner() != graphBody)
      return emitOpError() << "operand #" << i
                           << " is not an argument of the enclosing mega.graph";
  }
  if (failed(verifyNoDuplicates(*this, getWaits(), "waits")) ||
      failed(verifyNoDuplicates(*this, getSignals(), "signals")))
    return failure();
  if (getUnitsPerTaskAttr() && getNumUnitsPerTask() < 1)
    return emitOpError() << "units_per_task must be >= 1, got "
                         << getNumUnitsPerTask();
  // Claimed units are those beyond the instances' own (from `count` on): a
  // task of one unit an instance has none.
  if (getClaimsUnits() && getNumUnitsPerTask() < 2)
    return emitOpError() << "claims_units needs units_per_task >= 2 (units "
                            "beyond the instances' own to claim), got "
                         << getNumUnitsPerTask();
  if (std::optional<ArrayAttr> footprint = getFootprint()) {
    for (auto access : footprint->getAsRange<AccessAttr>()) {
      if (access.getOperand() >= static_cast<int64_t>(getArgs().size()))
        return emitOpError() << "footprint names operand #"
                             << access.getOperand() << " but the task has "
                             << getArgs().size() << " operands";
      auto type = dyn_cast<MemRefType>(getArgs()[access.getOperand()].getType());
      if (!type || !type.hasStaticShape())
        return emitOpError() << "footprint names operand #"
                             << access.getOperand()
                             << ", which is not a statically shaped memref";
      // Before decomposition `count` is the number of units, so the last
      // unit's range must fit the tensor (decomposition keeps the units).
      int64_t lastUnit = getUnitsPerTaskAttr() ? access.getFirst()
                         : access.getLast() >= 0 ? access.getLast() - 1
                                                 : getNumInstances() - 1;
      int64_t end = access.getBegin(lastUnit) + access.getSize();
      if (end > type.getNumElements())
        return emitOpError() << "footprint " << access << " reaches element "
                             << end << " of operand #" << access.getOperand()
                             << ", which has " << type.getNumElements();
    }
  }
  for (auto [attr, field] :
       {std::pair<ArrayAttr, StringRef>{getInstanceWaitsAttr(), "instance_waits"},
        {getInstanceSignalsAttr(), "instance_signals"}}) {
    if (!attr)
      continue;
    if (static_cast<int64_t>(attr.size()) != getNumInstances())
      return emitOpError() << "'" << field << "' has " << attr.size()
                           << " entries for " << getNumInstances()
                           << " instances";
    for (Attribute entry : attr) {
      auto refs = dyn_cast<ArrayAttr>(entry);
      if (!refs || llvm::any_of(refs, [](Attribute a) {
            return !isa<FlatSymbolRefAttr>(a);
          }))
        return emitOpError() << "'" << field
                             << "' entries must be lists of event names";
    }
  }
  return success();
}

static SmallVector<FlatSymbolRefAttr>
collectEventRefs(ArrayAttr taskWide, ArrayAttr perInstance, int64_t i) {
  SmallVector<FlatSymbolRefAttr> refs(
      taskWide.getAsRange<FlatSymbolRefAttr>());
  if (perInstance && i < static_cast<int64_t>(perInstance.size()))
    if (auto list = dyn_cast<ArrayAttr>(perInstance[i]))
      for (Attribute a : list)
        if (auto ref = dyn_cast<FlatSymbolRefAttr>(a))
          refs.push_back(ref);
  return refs;
}

SmallVector<FlatSymbolRefAttr> TaskOp::getInstanceWaitRefs(int64_t i) {
  return collectEventRefs(getWaits(), getInstanceWaitsAttr(), i);
}

SmallVector<FlatSymbolRefAttr> TaskOp::getInstanceSignalRefs(int64_t i) {
  return collectEventRefs(getSignals(), getInstanceSignalsAttr(), i);
}

func::FuncOp TaskOp::getTileFunction() {
  return dyn_cast_or_null<func::FuncOp>(SymbolTable::lookupNearestSymbolFrom(
      getGraph()->getParentOp(), getBodyAttr()));
}

LogicalResult TaskOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  GraphOp graph = getGraph();

  // Events and the queue live in the graph's symbol table (whose names the
  // SymbolTable trait has already checked to be unique).
  for (auto [refs, field] : {std::pair<ArrayAttr, StringRef>{getWaits(), "waits"},
                             {getSignals(), "signals"}}) {
    for (auto ref : refs.getAsRange<FlatSymbolRefAttr>())
      if (!symbolTable.lookupSymbolIn<EventOp>(graph, ref))
        return emitOpError() << "'" << field << "' entry " << ref
                             << " does not name a mega.event in the "
                                "enclosing mega.graph";
  }
  for (auto [attr, field] :
       {std::pair<ArrayAttr, StringRef>{getInstanceWaitsAttr(), "instance_waits"},
        {getInstanceSignalsAttr(), "instance_signals"}}) {
    if (!attr)
      continue;
    for (Attribute list : attr)
      for (auto ref : cast<ArrayAttr>(list).getAsRange<FlatSymbolRefAttr>())
        if (!symbolTable.lookupSymbolIn<EventOp>(graph, ref))
          return emitOpError() << "'" << field << "' entry " << ref
                               << " does not name a mega.event in the "
                                  "enclosing mega.graph";
  }
  if (FlatSymbolRefAttr queue = getQueueAttr())
    if (!symbolTable.lookupSymbolIn<QueueOp>(graph, queue))
      return emitOpError() << "queue " << queue
                           << " does not name a mega.queue in the enclosing "
                              "mega.graph";

  // The body lives in the module around the graph. That module's own
  // symbol-table checks run only after the graph is verified, so look the
  // name up with a plain scan (a SymbolTable would assert on duplicates).
  FlatSymbolRefAttr body = getBodyAttr();
  func::FuncOp func = getTileFunction();
  if (!func)
    return emitOpError() << "body " << body
                         << " does not name a func.func in the enclosing "
                            "module";

  // The function may be verified concurrently or not at all yet: read its
  // type defensively and leave malformed functions to their own verifier.
  auto typeAttr = func->getAttrOfType<TypeAttr>(func.getFunctionTypeAttrName());
  auto fnType = typeAttr ? dyn_cast<FunctionType>(typeAttr.getValue())
                         : FunctionType();
  if (!fnType)
    return success();
  if (fnType.getNumResults() != 0)
    return emitOpError() << "tile function " << body
                         << " must not return values, but returns "
                         << fnType.getNumResults();
  if (fnType.getNumInputs() != getArgs().size())
    return emitOpError() << "has " << getArgs().size()
                         << " operands but tile function " << body << " takes "
                         << fnType.getNumInputs() << " arguments";
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip_equal(getArgs().getTypes(), fnType.getInputs())))
    if (std::get<0>(pair) != std::get<1>(pair))
      return emitOpError() << "operand #" << i << " has type "
                           << std::get<0>(pair) << " but tile function "
                           << body << " expects " << std::get<1>(pair);

  SmallVector<tile::KernelOp> kernels = getTileKernels(func);
  if (kernels.size() != 1)
    return emitOpError() << "tile function " << body
                         << " must contain exactly one tile.kernel, found "
                         << kernels.size();
  tile::KernelOp kernel = kernels.front();
  auto grid = kernel->getAttrOfType<DenseI64ArrayAttr>(kernel.getGridAttrName());
  if (!grid || grid.empty() ||
      llvm::any_of(grid.asArrayRef(), [](int64_t size) { return size < 1; }))
    return success(); // A malformed grid is the kernel verifier's to report.
  std::optional<int64_t> blocks = getNumBlocks(kernel);
  if (!blocks) {
    InFlightDiagnostic diag = emitOpError()
                              << "count " << getNumInstances()
                              << " does not match the tile.kernel in " << body
                              << ", whose grid [";
    llvm::interleaveComma(grid.asArrayRef(), diag);
    return diag << "] has more than " << std::numeric_limits<int64_t>::max()
                << " blocks";
  }
  if (std::optional<ArrayAttr> footprint = getFootprint()) {
    for (auto access : footprint->getAsRange<AccessAttr>()) {
      auto type = dyn_cast<MemRefType>(getArgs()[access.getOperand()].getType());
      if (!type || !type.hasStaticShape())
        continue; // TaskOp::verify reports it.
      if (access.getLast() > *blocks)
        return emitOpError() << "footprint " << access << " names units up to "
                             << access.getLast() << " but " << body << " has "
                             << *blocks << " units";
      int64_t lastUnit = (access.getLast() < 0 ? *blocks : access.getLast()) - 1;
      int64_t end = access.getBegin(lastUnit) + access.getSize();
      if (lastUnit >= access.getFirst() && end > type.getNumElements())
        return emitOpError() << "footprint " << access << " reaches element "
                             << end << " of operand #" << access.getOperand()
                             << " at unit " << lastUnit << ", which has "
                             << type.getNumElements();
    }
  }
  int64_t perTask = getNumUnitsPerTask();
  if (llvm::divideCeil(*blocks, perTask) != getNumInstances()) {
    InFlightDiagnostic diag = emitOpError()
                              << "count " << getNumInstances()
                              << " does not match the " << *blocks
                              << " blocks of the tile.kernel in " << body;
    if (perTask > 1)
      diag << " at " << perTask << " units per task";
    return diag;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// GraphArgOp
//===----------------------------------------------------------------------===//

bool mega::isGraphArgType(Type type) {
  if (auto memref = dyn_cast<MemRefType>(type))
    return tile::isKernelTensorType(memref);
  return type.isIntOrIndexOrFloat() && !tile::getDTypeName(type).empty();
}

LogicalResult GraphArgOp::verify() {
  auto table = cast<MemRefType>(getTable().getType());
  if (!(tile::isGlobal(table) || tile::isShared(table)) ||
      !table.getLayout().isIdentity())
    return emitOpError() << "reads its argument table from " << table
                         << ": the table must be a row-major global or shared "
                            "memref";
  Type result = getType();
  if (!isGraphArgType(result))
    return emitOpError() << "result " << result << ": " << kGraphArgRule;
  if (std::optional<int64_t> slot = getConstantIntValue(getSlot()))
    if (!table.isDynamicDim(0) && (*slot < 0 || *slot >= table.getDimSize(0)))
      return emitOpError() << "slot " << *slot << " is outside the argument table's "
                           << table.getDimSize(0) << " entries";
  return success();
}

//===----------------------------------------------------------------------===//
// The runtime protocol
//===----------------------------------------------------------------------===//

LogicalResult mega::verifyProtocolWord(Operation *op, MemRefType memory,
                                       size_t indices) {
  if (!tile::isGlobal(memory))
    return op->emitOpError()
           << "accesses " << memory
           << ": protocol words live in global memory, where every CTA "
              "of the kernel sees them";
  if (static_cast<int64_t>(indices) != memory.getRank())
    return op->emitOpError() << "has " << indices << " indices for a memref of rank "
                             << memory.getRank();
  return success();
}

LogicalResult PostOp::verify() {
  Type element = getMemory().getType().getElementType();
  if (getValue().getType() != element)
    return emitOpError() << "stores a " << getValue().getType()
                         << " into a memref of " << element;
  return success();
}

LogicalResult PrefetchL2Op::verify() {
  auto tensor = cast<MemRefType>(getTensor().getType());
  if (!tile::isGlobal(tensor))
    return emitOpError() << "prefetches " << tensor
                         << ": only global memory goes through L2";
  std::optional<int64_t> bytes = getConstantIntValue(getBytes());
  if (bytes && (*bytes <= 0 || *bytes % 16))
    return emitOpError() << "prefetches " << *bytes
                         << " bytes: a bulk prefetch moves a positive multiple of 16";
  std::optional<int64_t> offset = getConstantIntValue(getOffset());
  if (offset && *offset % 16)
    return emitOpError() << "prefetches from byte offset " << *offset
                         << ": a bulk prefetch starts 16-byte aligned";
  return success();
}
