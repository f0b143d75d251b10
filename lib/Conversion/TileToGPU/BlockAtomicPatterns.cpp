//===- BlockAtomicPatterns.cpp - one ordered atomic add for a whole block --===//
//
// `tile.block_atomic_add` is the release/acquire hand-over of a split
// reduction finished by its last block: every thread's earlier writes reach
// the block barrier, the first thread publishes them with a device-scope
// fence before its add and acquires the others' with a fence after it (the
// pattern the persistent kernel's signals and waits use, since LLVM 22.1.8
// drops the ordering of an `atomicrmw add` at device scope), and a second
// barrier hands the old value, through one shared word, to every thread.
//
//===----------------------------------------------------------------------===//

#include "TileToGPUInternal.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile_to_gpu;

namespace {

/// The device scope of the fences: the counter's other adders run on other
/// SMs of this GPU.
constexpr llvm::StringLiteral kDeviceScope = "device";

struct BlockAtomicAddLowering
    : public TileLoweringPattern<tile::BlockAtomicAddOp> {
  using TileLoweringPattern::TileLoweringPattern;

  LogicalResult
  matchAndRewrite(tile::BlockAtomicAddOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
    // Every thread's writes before the add are done.
    gpu::BarrierOp::create(rewriter, loc);
    Value tid = gpu::ThreadIdOp::create(rewriter, loc, gpu::Dimension::x);
    Value first = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                        tid, zero);
    emitGuarded(rewriter, loc, first, [&](OpBuilder &b) {
      LLVM::FenceOp::create(b, loc, LLVM::AtomicOrdering::acq_rel, kDeviceScope);
      Value old = memref::AtomicRMWOp::create(
          b, loc, arith::AtomicRMWKind::addi, adaptor.getValue(),
          adaptor.getDst(), adaptor.getIndices());
      LLVM::FenceOp::create(b, loc, LLVM::AtomicOrdering::acq_rel, kDeviceScope);
      memref::StoreOp::create(b, loc, old, adaptor.getScratch(),
                              ValueRange(SmallVector<Value>(
                                  op.getScratch().getType().getRank(), zero)));
    });
    gpu::BarrierOp::create(rewriter, loc);
    rewriter.replaceOpWithNewOp<memref::LoadOp>(
        op, adaptor.getScratch(),
        ValueRange(SmallVector<Value>(op.getScratch().getType().getRank(), zero)));
    return success();
  }
};

} // namespace

void tile_to_gpu::populateBlockAtomicPatterns(RewritePatternSet &patterns,
                                              TypeConverter &converter,
                                              KernelLoweringState &state) {
  patterns.add<BlockAtomicAddLowering>(converter, patterns.getContext(), state);
}
