//===- MegaToGPU.cpp - a scheduled mega.graph to one persistent kernel ----===//
//
// The pass builds the persistent kernel as a tile function: its runtime
// (picking entries, waiting, signalling, the scheduler CTA, the watchdog;
// PersistentKernel.cpp) is plain scf/arith/gpu code plus the PTX memory
// operations of SyncPrimitives, and the task bodies stay tile IR, cloned
// into a switch, so that the tile pipeline lowers them exactly as it lowers
// their kernels. This file checks the graph, lays out the kernel's
// arguments and metadata, and drives the builder.
//
//===----------------------------------------------------------------------===//

#include "tilemega/Conversion/Passes.h"

#include "PersistentKernel.h"

#include "tilemega/Dialect/Mega/IR/MegaDialect.h"
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

  /// CTAs resident at once: max-ctas, or the SM count of chip.
  int64_t residentCtas = 0;

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
    residentCtas = maxCtas > 0 ? static_cast<int64_t>(maxCtas)
                               : target->smCount;
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
    FailureOr<TaskTables> tables = buildTaskTables(graph);
    if (failed(tables))
      return failure();
    tables->schedulers = graph.getNumSchedulers();
    int64_t ctas = tables->workers + (tables->numJit > 0 ? 1 : 0);
    if (ctas > residentCtas)
      return graph.emitOpError()
             << "needs " << ctas << " CTAs (" << tables->workers
             << " workers" << (tables->numJit > 0 ? " + 1 scheduler CTA" : "")
             << ") but only " << residentCtas
             << " can be resident at once (max-ctas, the GPU's SM count), and "
                "a persistent kernel needs all of them resident: use at most "
             << residentCtas - (tables->numJit > 0 ? 1 : 0) << " workers";
    if (tables->numEntries == 0)
      return graph.emitOpError() << "has no tasks to run";
    for (const TaskCase &c : tables->cases)
      bodies.insert(c.body);

    Location loc = graph.getLoc();
    OpBuilder b(graph);
    SmallVector<Type> argTypes(graph.getBody().getArgumentTypes());
    auto buffer = [&](int64_t n, Type type) {
      return MemRefType::get({std::max<int64_t>(1, n)}, type);
    };
    argTypes.push_back(buffer(tables->data.size(), b.getI32Type()));
    argTypes.push_back(buffer(tables->events.size(), b.getI32Type()));
    argTypes.push_back(buffer(kStateWords, b.getI32Type()));
    argTypes.push_back(buffer(4 * tables->numEntries, b.getI64Type()));
    auto func = func::FuncOp::create(b, loc, graph.getSymName(),
                                     b.getFunctionType(argTypes, {}));

    // Parameter names and roles for the artifact.
    auto names = graph->getAttrOfType<ArrayAttr>(MegaDialect::getArgNamesAttrName());
    auto roles = graph->getAttrOfType<ArrayAttr>(MegaDialect::getArgRolesAttrName());
    unsigned numGlobals = graph.getGlobals().size();
    for (unsigned i = 0; i < numGlobals; ++i) {
      if (names && i < names.size())
        func.setArgAttr(i, tile::TileDialect::getArgNameAttrName(), names[i]);
      if (roles && i < roles.size())
        func.setArgAttr(i, MegaDialect::getRoleAttrName(), roles[i]);
    }
    const char *runtimeNames[] = {"mega_tables", "mega_events", "mega_state",
                                  "mega_timeline"};
    for (unsigned i = 0; i < 4; ++i) {
      func.setArgAttr(numGlobals + i, tile::TileDialect::getArgNameAttrName(),
                      b.getStringAttr(runtimeNames[i]));
      func.setArgAttr(numGlobals + i, MegaDialect::getRoleAttrName(),
                      b.getStringAttr("runtime"));
    }
    int64_t watchdogNs = watchdogMs * 1000000;
    func->setAttr(MegaDialect::getMegaMetadataAttrName(),
                  buildMegaMetadata(graph, *tables, timeline, watchdogNs));

    Block *entry = func.addEntryBlock();
    b.setInsertionPointToStart(entry);
    auto kernel = tile::KernelOp::create(b, loc, ArrayRef<int64_t>{ctas},
                                         tables->threads);
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
                                    prefetchBytes, prefetchDepth, stepLoop);
    ValueRange args = entry->getArguments();
    builder.build(body.getArgument(0), args.take_front(numGlobals),
                  args[numGlobals], args[numGlobals + 1], args[numGlobals + 2],
                  args[numGlobals + 3]);
    return success();
  }
};

} // namespace
