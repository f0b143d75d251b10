//===- MegaPairs.cpp - which entries may run as a pair --------------------===//

#include "tilemega/Dialect/Mega/IR/MegaPairs.h"

#include "tilemega/Dialect/Tile/IR/TileDialect.h"
#include "tilemega/Dialect/Tile/IR/TilePrefetch.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::mega;

bool mega::taskWritesOperand(TaskOp task, unsigned operand) {
  std::optional<ArrayAttr> footprint = task.getFootprint();
  if (!footprint)
    return true;
  return llvm::any_of(footprint->getAsRange<AccessAttr>(), [&](AccessAttr access) {
    return access.isWrite() && access.getOperand() == int64_t(operand);
  });
}

llvm::DenseSet<unsigned> mega::getWrittenGraphArgs(GraphOp graph) {
  llvm::DenseSet<unsigned> written;
  for (TaskOp task : graph.getBodyBlock().getOps<TaskOp>())
    for (auto [a, arg] : llvm::enumerate(task.getArgs()))
      if (auto block = dyn_cast<BlockArgument>(arg); block && taskWritesOperand(task, a))
        written.insert(block.getArgNumber());
  return written;
}

bool mega::readsStableOperand(TaskOp task, const llvm::DenseSet<unsigned> &written) {
  std::optional<ArrayAttr> footprint = task.getFootprint();
  if (!footprint)
    return false;
  return llvm::any_of(footprint->getAsRange<AccessAttr>(), [&](AccessAttr access) {
    auto arg = dyn_cast<BlockArgument>(task.getArgs()[access.getOperand()]);
    return !access.isWrite() && arg && isa<MemRefType>(arg.getType()) &&
           !written.contains(arg.getArgNumber());
  });
}

/// A task's stage: its instances' estimated cost, summed; nullopt without
/// an estimate.
static std::optional<double> stageCost(TaskOp task) {
  if (!task.getCostNs())
    return std::nullopt;
  return task.getCostNs()->convertToDouble() * static_cast<double>(task.getNumInstances());
}

bool mega::waitsOnLighterStage(TaskOp task) {
  // Loads issued while the stage before still streams its own data compete
  // with it for DRAM (measured: the decode step 1-3 % slower when every
  // next entry prefetched into L2); behind a lighter stage (attention
  // before the output projection) DRAM is idle.
  auto graph = task->getParentOfType<GraphOp>();
  std::optional<double> own = stageCost(task);
  llvm::DenseSet<StringAttr> waited;
  for (int64_t i = 0; i < task.getNumInstances(); ++i)
    for (FlatSymbolRefAttr ref : task.getInstanceWaitRefs(i))
      waited.insert(ref.getAttr());
  for (TaskOp producer : graph.getBodyBlock().getOps<TaskOp>())
    for (int64_t i = 0; i < producer.getNumInstances(); ++i)
      for (FlatSymbolRefAttr ref : producer.getInstanceSignalRefs(i))
        if (waited.contains(ref.getAttr())) {
          // At most half its own: a stage of about the same estimate
          // streams as much as this one (the estimates are per byte).
          std::optional<double> theirs = stageCost(producer);
          if (!own || !theirs || 2 * *theirs > *own)
            return false;
        }
  return true;
}

std::string mega::getPairProblem(TaskOp first, TaskOp second,
                                 const llvm::DenseSet<unsigned> &written) {
  // One unit an entry: the wait sits at the body (several units repeat
  // their body in a loop, whose first unit's loads the pair cannot start).
  // Loads issued beside a latency-bound body slow it (measured: the
  // attention with other tasks' loads on its SMs, docs/mega.md).
  if (first.getLatencyBound())
    return ("@" + first.getSymName() +
            " is latency-bound: the second body's loads would slow it")
        .str();
  for (TaskOp task : {first, second})
    if (task.getNumUnitsPerTask() != 1)
      return ("@" + task.getSymName() + " runs " + Twine(task.getNumUnitsPerTask()) +
              " units an entry; a pair's tasks run one")
          .str();
  func::FuncOp body = second.getTileFunction();
  tile::KernelOp kernel = body ? getTileKernel(body) : tile::KernelOp();
  if (!kernel)
    return ("@" + second.getSymName() + "'s body has no tile.kernel").str();
  // Its wait would sit inside its body, after ops that must not run
  // before the first entry's signal.
  if (!kernel.getBody().front().getOps<tile::TaskWaitOp>().empty())
    return ("@" + second.getSymName() + "'s body places its own wait (tile.task_wait)").str();
  if (!readsStableOperand(second, written))
    return ("@" + second.getSymName() +
            " reads no tensor that no task writes: nothing of it may load before "
            "its events fire")
        .str();
  return "";
}

int64_t mega::estimateBodySharedBytes(TaskOp task) {
  func::FuncOp body = task.getTileFunction();
  tile::KernelOp kernel = body ? getTileKernel(body) : tile::KernelOp();
  if (!kernel)
    return 0;
  // Stages of the pipelined copies' destination tiles.
  llvm::DenseMap<Operation *, int64_t> stages;
  kernel.walk([&](tile::PipelinedOp loop) {
    loop.walk([&](tile::CopyOp copy) {
      if (Operation *alloc = tile::viewedBuffer(copy.getDst()).getDefiningOp())
        if (isa<tile::AllocSharedOp>(alloc))
          stages[alloc] = std::max<int64_t>(stages.lookup(alloc),
                                            static_cast<int64_t>(loop.getNumStages()));
    });
  });
  // The pipeline's tile alignment (OutlineKernels' kSharedAlignment); a
  // reduction across warps exchanges at most one accumulator (f32, or f64
  // for f64 data) a warp and result element.
  constexpr int64_t kAlign = 128;
  int64_t warps = std::max<int64_t>(1, kernel.getThreads() / 32);
  int64_t bytes = 0;
  kernel.walk([&](Operation *op) {
    if (auto alloc = dyn_cast<tile::AllocSharedOp>(op)) {
      MemRefType type = alloc.getType();
      int64_t tile = type.getNumElements() *
                     std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
      bytes += llvm::alignTo(tile * std::max<int64_t>(1, stages.lookup(op)), kAlign);
    } else if (auto reduce = dyn_cast<tile::ReduceOp>(op)) {
      MemRefType dst = reduce.getDst().getType();
      int64_t acc = dst.getElementTypeBitWidth() > 32 ? 8 : 4;
      bytes += llvm::alignTo(warps * dst.getNumElements() * acc, kAlign);
    }
  });
  return bytes;
}
