//===- MegaOps.cpp - mega dialect operations --------------------------------===//
//
// Per-op parsing, printing and verification. The checks that need the whole
// task graph (signal counts, unsatisfiable waits, cycles) are in
// MegaGraphVerifier.cpp.
//
//===----------------------------------------------------------------------===//

#include "tilemega/Dialect/Mega/IR/MegaDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::mega;

#define GET_OP_CLASSES
#include "tilemega/Dialect/Mega/IR/MegaOps.cpp.inc"

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
  p.printOptionalAttrDictWithKeyword(
      (*this)->getAttrs(),
      {getSymNameAttrName(), getWorkersAttrName(), getSchedulersAttrName()});
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
  return success();
}

//===----------------------------------------------------------------------===//
// EventOp
//===----------------------------------------------------------------------===//

LogicalResult EventOp::verify() {
  if (getTriggerCount() < 1)
    return emitOpError() << "trigger count must be >= 1, got "
                         << getTriggerCount();
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
    return success();
  case QueueKind::jit:
    if (worker)
      return emitOpError() << "jit queue takes no worker index";
    if (graph.getNumSchedulers() < 1)
      return emitOpError() << "jit queue needs at least one scheduler warp, "
                              "but the graph has schedulers "
                           << graph.getNumSchedulers();
    return success();
  }
  llvm_unreachable("unhandled queue kind");
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
  return success();
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
  if (*blocks != getNumInstances())
    return emitOpError() << "count " << getNumInstances()
                         << " does not match the " << *blocks
                         << " blocks of the tile.kernel in " << body;
  return success();
}
