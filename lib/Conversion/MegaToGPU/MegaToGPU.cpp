//===- MegaToGPU.cpp - a scheduled mega.graph to one persistent kernel ----===//
//
// The pass builds the persistent kernel as a tile function: its runtime
// (picking entries, waiting, signalling, the scheduler CTA, the watchdog;
// PersistentKernel.cpp) is plain scf/arith/gpu code plus the mega dialect's
// runtime protocol ops (mega.poll, mega.signal, ...), and the task bodies stay tile IR, cloned
// into a switch, so that the tile pipeline lowers them exactly as it lowers
// their kernels. This file checks the graph, lays out the kernel's
// arguments and metadata, and drives the builder.
//
//===----------------------------------------------------------------------===//

#include "tilemega/Conversion/Passes.h"

#include "PersistentKernel.h"

#include "tilemega/Dialect/Mega/IR/MegaDialect.h"
#include "tilemega/Dialect/Tile/IR/TileKernelParams.h"
#include "tilemega/Dialect/Tile/IR/TileSharedMemory.h"
#include "tilemega/Target/TargetInfo.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
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

struct ConvertMegaToGPUPass
    : public tilemega::impl::ConvertMegaToGPUBase<ConvertMegaToGPUPass> {
  using ConvertMegaToGPUBase::ConvertMegaToGPUBase;

  /// The chip's limits (SMs, threads and CTAs an SM).
  TargetInfo target;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<TargetInfo> target = getTargetInfo(chip);
    if (failed(target)) {
      module.emitError() << "convert-mega-to-gpu: unknown chip '" << chip
                         << "' (known: " << getKnownChips() << ")";
      return signalPassFailure();
    }
    if (maxCtas < 0) {
      module.emitError() << "convert-mega-to-gpu: max-ctas must be >= 0 (0: "
                            "the SM count of the chip), got "
                         << static_cast<int64_t>(maxCtas);
      return signalPassFailure();
    }
    this->target = *target;
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
    // CTAs resident at once: max-ctas, or the chip's SMs x the graph's
    // CTAs an SM.
    int64_t residentCtas = maxCtas > 0 ? static_cast<int64_t>(maxCtas)
                                       : target.smCount * graph.getNumCtasPerSm();
    FailureOr<TaskTables> tables = buildTaskTables(graph);
    if (failed(tables))
      return failure();
    tables->schedulers = graph.getNumSchedulers();
    int64_t ctas = tables->ctas();
    if (ctas > residentCtas)
      return graph.emitOpError()
             << "needs " << ctas << " CTAs (" << tables->workers
             << " workers" << (tables->numJit > 0 ? " + 1 scheduler CTA" : "")
             << ") but only " << residentCtas
             << " can be resident at once (max-ctas, or the GPU's SM count x "
                "ctas_per_sm), and "
                "a persistent kernel needs all of them resident: use at most "
             << residentCtas - (tables->numJit > 0 ? 1 : 0) << " workers";
    if (tables->numEntries == 0)
      return graph.emitOpError() << "has no tasks to run";
    // A pair case commits to its second entry before the first one's
    // events fire, as the workers of early loads do.
    if (!tables->pairedEntries.empty() && !earlyLoads)
      return graph.emitOpError()
             << "pairs entries (a queue's `paired`, mega-pair-entries), which "
                "needs early-loads: a pair's second entry loads before the first "
                "one waits";
    for (const TaskCase &c : tables->cases)
      bodies.insert(c.body);

    Location loc = graph.getLoc();
    OpBuilder b(graph);
    // The graph's arguments are not kernel parameters: the runtime writes
    // them (a tensor's address, a scalar's bits) into the argument table
    // at bind (mega.graph_arg), and the artifact describes them in
    // `mega.args`.
    auto names = graph->getAttrOfType<ArrayAttr>(MegaDialect::getArgNamesAttrName());
    auto roles = graph->getAttrOfType<ArrayAttr>(MegaDialect::getArgRolesAttrName());
    SmallVector<Type> globalTypes(graph.getBody().getArgumentTypes());
    SmallVector<Attribute> graphArgs;
    for (auto [i, type] : llvm::enumerate(globalTypes)) {
      if (!mega::isGraphArgType(type))
        return graph.emitOpError() << "argument " << i << " has type " << type
                                   << ": " << mega::kGraphArgRule;
      std::string name = "arg" + std::to_string(i);
      if (names && i < names.size())
        if (auto n = dyn_cast<StringAttr>(names[i]))
          name = n.str();
      StringAttr role;
      if (roles && i < roles.size())
        role = dyn_cast<StringAttr>(roles[i]);
      graphArgs.push_back(tile::buildParamMetadata(b, name, role, type));
    }

    auto buffer = [&](int64_t n, Type type) {
      return MemRefType::get({std::max<int64_t>(1, n)}, type);
    };
    // A graph of several ranks: the argument table ends with this rank and
    // every rank's events buffer address (docs/mega.md).
    int64_t peerWords = graph.getNumRanks() > 1 ? graph.getNumRanks() + 1 : 0;
    SmallVector<Type> argTypes = {
        buffer(globalTypes.size() + peerWords, b.getI64Type()),
        buffer(tables->data.size(), b.getI32Type()),
        buffer(tables->numEventWords, b.getI32Type()),
        buffer(tables->stateWords(), b.getI32Type()),
        buffer(4 * tables->numEntries, b.getI64Type())};
    auto func = func::FuncOp::create(b, loc, graph.getSymName(),
                                     b.getFunctionType(argTypes, {}));
    const char *runtimeNames[] = {"mega_args", "mega_tables", "mega_events",
                                  "mega_state", "mega_timeline"};
    for (unsigned i = 0; i < argTypes.size(); ++i) {
      func.setArgAttr(i, tile::TileDialect::getArgNameAttrName(),
                      b.getStringAttr(runtimeNames[i]));
      func.setArgAttr(i, MegaDialect::getRoleAttrName(),
                      b.getStringAttr("runtime"));
    }
    int64_t watchdogNs = watchdogMs * 1000000;
    NamedAttrList metadata(buildMegaMetadata(graph, *tables, timeline, watchdogNs));
    metadata.set("args", b.getArrayAttr(graphArgs));
    func->setAttr(MegaDialect::getMegaMetadataAttrName(),
                  metadata.getDictionary(b.getContext()));
    // Every CTA is resident for the kernel's whole life: more CTAs than SMs
    // (max-ctas) means several an SM, and the register budget must allow it
    // (as far as an SM's threads do; beyond, the runtime refuses the grid).
    int64_t perSm = std::min<int64_t>(llvm::divideCeil(ctas, target.smCount),
                             std::max<int64_t>(1, target.maxThreadsPerSm /
                                                      tables->threads));
    func->setAttr(MegaDialect::getCtasPerSmAttrName(),
                  b.getI64IntegerAttr(std::min(perSm, target.maxCtasPerSm)));

    Block *entry = func.addEntryBlock();
    b.setInsertionPointToStart(entry);
    auto kernel = tile::KernelOp::create(b, loc, ArrayRef<int64_t>{ctas},
                                         tables->threads);
    kernel->setAttr(tile::TileDialect::getPersistentAttrName(), b.getUnitAttr());
    func::ReturnOp::create(b, loc);
    Block &body = kernel.getBody().front();
    b.setInsertionPointToStart(&body);
    StepLoop stepLoop;
    if (std::optional<ArrayRef<int64_t>> stop = graph.getStopWord()) {
      stepLoop.stopArgument = (*stop)[0];
      stepLoop.stopElement = (*stop)[1];
      stepLoop.maxSteps = static_cast<int64_t>(*graph.getMaxSteps());
    }
    PersistentKernelBuilder builder(b, loc, *tables, timeline, watchdogNs,
                                    prefetchBytes, prefetchDepth, earlyLoads,
                                    streamUnits, stepLoop);
    ValueRange args = entry->getArguments();
    builder.build(body.getArgument(0), args[0], globalTypes, args[1], args[2],
                  args[3], args[4]);
    if (builder.hasErrors())
      return failure();
    return success();
  }
};

} // namespace
