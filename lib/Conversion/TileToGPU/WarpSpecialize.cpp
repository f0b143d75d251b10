//===- WarpSpecialize.cpp - a producer warpgroup and its consumers ---------===//
//
// A kernel with a tile.producer (tile-pipeline's warp_specialize) launches
// one warpgroup more than its threads. After the allocations, the mbarrier
// initialisation and the block barrier that publishes it (all threads), the
// kernel splits:
//
//   if (tid < T) {                     the consumers: the kernel's own code
//     setmaxnreg.inc R                 R = what the producer gave up, shared
//     ...                              barriers: bar.sync 1, T
//   } else {                           the producer warpgroup
//     setmaxnreg.dec 40
//     if (tid == T) { producer region }  one thread issues the TMA copies
//   }                                  and the warpgroup leaves the kernel
//
// The consumers' block barriers become named barrier 1 of T threads: the
// producer warpgroup never reaches them. setmaxnreg moves registers between
// warpgroups (the launch gives every thread the same share, 65536 / (T +
// 128) at most); its operand is a multiple of 8 in 24..256.
//
//===----------------------------------------------------------------------===//

#include "TileToGPUInternal.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile_to_gpu;

namespace {

/// Registers of one SM, what a thread may hold, and what the producer
/// warpgroup keeps.
constexpr int64_t kRegistersPerSm = 65536, kMaxThreadRegisters = 255,
                  kProducerRegisters = 40, kMaxRegisters = 240;

/// The consumers' register budget. setmaxnreg moves registers within the
/// CTA's register pool (PTX ISA: setmaxnreg.inc blocks until the CTA's
/// pool holds enough), which is what .maxntid's threads get at launch: the
/// SM's registers over them, a multiple of 8 a thread (not ptxas's own
/// count: a 384-thread attention kernel ptxas gave 160 ran its 232 / 40
/// split). The producer's decrease returns its surplus to the pool and the
/// consumers' increase draws on it: asking for more leaves consumer warps
/// in setmaxnreg.inc forever (640 threads start with 96 each, and 112 for
/// 512 consumers, the whole SM less the producer's, hung on an H100). So:
/// the pool less the producer's share, split over `consumers` threads, a
/// multiple of 8, at most 240.
int64_t consumerRegisters(int64_t consumers) {
  int64_t launched = consumers + tile::ProducerOp::kThreads;
  int64_t atLaunch =
      std::min<int64_t>(kMaxThreadRegisters, kRegistersPerSm / launched) / 8 * 8;
  int64_t left = atLaunch * launched -
                 tile::ProducerOp::kThreads * kProducerRegisters;
  return std::min<int64_t>(kMaxRegisters, left / consumers / 8 * 8);
}

} // namespace

bool tile_to_gpu::inSingleThreadRegion(Operation *op) {
  for (Operation *parent = op->getParentOp(); parent;
       parent = parent->getParentOp())
    if (parent->hasAttr(kSingleThreadAttrName))
      return true;
  return false;
}

void tile_to_gpu::splitWarpSpecializedKernel(gpu::GPUFuncOp func,
                                             KernelLoweringState &state) {
  Block &entry = func.getBody().front();
  tile::ProducerOp producer;
  for (Operation &op : entry)
    if (auto found = dyn_cast<tile::ProducerOp>(op))
      producer = found;
  Location loc = producer.getLoc();
  MLIRContext *ctx = func.getContext();
  OpBuilder b(producer);
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value consumers = arith::ConstantIndexOp::create(b, loc, state.numThreads);
  Value isConsumer = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                           tid, consumers);
  auto split = scf::IfOp::create(b, loc, isConsumer, /*withElseRegion=*/true);
  split->setAttr(kConsumersAttrName, UnitAttr::get(ctx));

  // The producer warpgroup: one thread runs the region.
  OpBuilder eb = OpBuilder::atBlockTerminator(split.elseBlock());
  NVVM::SetMaxRegisterOp::create(eb, loc, kProducerRegisters,
                                 NVVM::SetMaxRegisterAction::decrease);
  Value first = arith::CmpIOp::create(eb, loc, arith::CmpIPredicate::eq, tid,
                                      consumers);
  auto single = scf::IfOp::create(eb, loc, first, /*withElseRegion=*/false);
  single->setAttr(kSingleThreadAttrName, UnitAttr::get(ctx));
  Block *singleBlock = single.thenBlock();
  singleBlock->getOperations().splice(
      Block::iterator(singleBlock->getTerminator()),
      producer.getBody().front().getOperations());
  producer.erase();

  // The consumers: the rest of the kernel.
  Block *thenBlock = split.thenBlock();
  thenBlock->getOperations().splice(
      Block::iterator(thenBlock->getTerminator()), entry.getOperations(),
      std::next(Block::iterator(split)),
      Block::iterator(entry.getTerminator()));
  OpBuilder tb = OpBuilder::atBlockBegin(thenBlock);
  NVVM::SetMaxRegisterOp::create(tb, loc, consumerRegisters(state.numThreads),
                                 NVVM::SetMaxRegisterAction::increase);
}

void tile_to_gpu::nameConsumerBarriers(gpu::GPUFuncOp func,
                                       const KernelLoweringState &state) {
  // Barrier 0 is the block's (__syncthreads); 1 is the consumers'.
  constexpr int32_t kConsumerBarrier = 1;
  SmallVector<gpu::BarrierOp> barriers;
  func.walk([&](scf::IfOp split) {
    if (split->hasAttr(kConsumersAttrName))
      split.getThenRegion().walk(
          [&](gpu::BarrierOp barrier) { barriers.push_back(barrier); });
  });
  for (gpu::BarrierOp barrier : barriers) {
    OpBuilder b(barrier);
    Location loc = barrier.getLoc();
    Value id = arith::ConstantIntOp::create(b, loc, kConsumerBarrier, 32);
    Value threads = arith::ConstantIntOp::create(b, loc, state.numThreads, 32);
    NVVM::BarrierOp::create(b, loc, TypeRange{}, id, threads,
                            NVVM::BarrierReductionAttr(), Value());
    barrier.erase();
  }
}
