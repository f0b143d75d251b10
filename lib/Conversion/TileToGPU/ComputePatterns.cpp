//===- ComputePatterns.cpp - parallel, pipelined loops, gemm ---------------===//

#include "TileToGPUInternal.h"

#include "tilemega/Dialect/Tile/IR/TileLayouts.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile_to_gpu;

static bool isFragmentValue(Value v) {
  auto type = dyn_cast<MemRefType>(v.getType());
  return type && tile::isFragment(type);
}

static bool isSharedValue(Value v) {
  auto type = dyn_cast<MemRefType>(v.getType());
  return type && tile::isShared(type);
}

namespace {

/// Clones a tile.parallel body for one element the thread owns: fragment
/// accesses become accesses of the thread's register slot, swizzled shared
/// accesses get permuted indices, everything else is cloned as is.
class ParallelBodyCloner {
public:
  ParallelBodyCloner(ConversionPatternRewriter &rewriter, int64_t slot)
      : rewriter(rewriter), slot(slot) {}

  void cloneBlock(Block &block, IRMapping &mapping) {
    for (Operation &op : block.without_terminator())
      cloneOp(op, mapping);
    if (block.mightHaveTerminator())
      cloneOp(*block.getTerminator(), mapping);
  }

private:
  void cloneOp(Operation &op, IRMapping &mapping) {
    Location loc = op.getLoc();
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      if (isFragmentValue(load.getMemRef())) {
        Value storage = rewriter.getRemappedValue(load.getMemRef());
        Value idx = arith::ConstantIndexOp::create(rewriter, loc, slot);
        mapping.map(load.getResult(),
                    memref::LoadOp::create(rewriter, loc, storage, idx));
        return;
      }
      if (getSwizzle(load.getMemRef())) {
        SmallVector<Value> idx = swizzleIndices(
            rewriter, loc, load.getMemRef(),
            llvm::map_to_vector(load.getIndices(),
                                [&](Value v) { return mapping.lookupOrDefault(v); }));
        mapping.map(load.getResult(),
                    memref::LoadOp::create(rewriter, loc,
                                           mapping.lookupOrDefault(load.getMemRef()),
                                           idx));
        return;
      }
    }
    if (auto store = dyn_cast<memref::StoreOp>(op)) {
      Value value = mapping.lookupOrDefault(store.getValueToStore());
      if (isFragmentValue(store.getMemRef())) {
        Value storage = rewriter.getRemappedValue(store.getMemRef());
        Value idx = arith::ConstantIndexOp::create(rewriter, loc, slot);
        memref::StoreOp::create(rewriter, loc, value, storage, idx);
        return;
      }
      if (getSwizzle(store.getMemRef())) {
        SmallVector<Value> idx = swizzleIndices(
            rewriter, loc, store.getMemRef(),
            llvm::map_to_vector(store.getIndices(),
                                [&](Value v) { return mapping.lookupOrDefault(v); }));
        memref::StoreOp::create(rewriter, loc, value,
                                mapping.lookupOrDefault(store.getMemRef()), idx);
        return;
      }
    }
    if (op.getNumRegions() == 0) {
      rewriter.clone(op, mapping);
      return;
    }
    // Ops with regions: clone the shell, then the regions through us so that
    // nested fragment accesses are rewritten too.
    Operation *shell = rewriter.cloneWithoutRegions(op, mapping);
    for (auto [from, to] : llvm::zip(op.getRegions(), shell->getRegions())) {
      for (Block &block : from) {
        Block *newBlock = new Block();
        to.push_back(newBlock);
        for (BlockArgument arg : block.getArguments())
          mapping.map(arg, newBlock->addArgument(arg.getType(), arg.getLoc()));
        OpBuilder::InsertionGuard guard(rewriter);
        rewriter.setInsertionPointToEnd(newBlock);
        cloneBlock(block, mapping);
      }
    }
  }

  ConversionPatternRewriter &rewriter;
  int64_t slot;
};

struct ParallelLowering : TileLoweringPattern<tile::ParallelOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::ParallelOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    BlockedLayoutAttr layout = op.getLayoutAttr();
    if (!layout)
      return op.emitOpError("has no layout: run tile-infer-layouts before "
                            "convert-tile-to-gpu");
    // Each thread runs the iterations whose fragment elements it holds.
    WalkResult walk = op.getBody().walk([&](Operation *inner) -> WalkResult {
      for (Value operand : inner->getOperands()) {
        if (!isFragmentValue(operand))
          continue;
        BlockedLayoutAttr fragmentLayout = getFragmentLayout(operand);
        if (fragmentLayout != layout) {
          inner->emitOpError()
              << "touches a fragment with layout " << fragmentLayout
              << " inside a tile.parallel with layout " << layout
              << ": the thread running an iteration must hold its elements";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();

    Block &body = op.getBody().front();
    forEachOwnedChunk(
        rewriter, op.getLoc(), layout, op.getExtents(), 1,
        [&](const OwnedChunk &chunk) {
          emitGuarded(rewriter, op.getLoc(), chunk.inTile, [&](OpBuilder &) {
            IRMapping mapping;
            for (auto [arg, idx] :
                 llvm::zip_equal(body.getArguments(), chunk.indices))
              mapping.map(arg, idx);
            ParallelBodyCloner(rewriter, chunk.slot).cloneBlock(body, mapping);
          });
        });
    rewriter.eraseOp(op);
    return success();
  }
};

struct PipelinedLowering : TileLoweringPattern<tile::PipelinedOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::PipelinedOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    // Until tile-pipeline has run, a pipelined loop executes its stages in
    // order, which is what num_stages = 1 means.
    auto forOp = scf::ForOp::create(rewriter, op.getLoc(),
                                    adaptor.getLowerBound(),
                                    adaptor.getUpperBound(), adaptor.getStep());
    Block *forBody = forOp.getBody();
    rewriter.inlineBlockBefore(&op.getBody().front(), forBody->getTerminator(),
                               {forOp.getInductionVar()});
    rewriter.eraseOp(op);
    return success();
  }
};

/// tile.gemm on CUDA cores: every thread computes the C elements its fragment
/// layout gives it, with one accumulator register each, reading A and B from
/// shared memory. This is the fp32 (SIMT) path; tensor cores come from the
/// mma lowering.
struct GemmSimtLowering : TileLoweringPattern<tile::GemmOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::GemmOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    if (!isSharedValue(op.getA()) || !isSharedValue(op.getB()))
      return op.emitOpError("with fragment operands A or B needs the "
                            "tensor-core lowering, which this build does not "
                            "have yet; keep A and B in shared memory");
    BlockedLayoutAttr layout = getFragmentLayout(op.getC());
    if (!layout)
      return op.emitOpError("accumulates into a fragment without a layout: "
                            "run tile-infer-layouts first");
    MemRefType aType = op.getA().getType(), cType = op.getC().getType();
    Type accType = cType.getElementType();
    int64_t k = op.getTransposeA() ? aType.getDimSize(0) : aType.getDimSize(1);
    Value storage = adaptor.getC();

    // Thread-owned C elements: (i, j) index values and register slots.
    SmallVector<std::pair<SmallVector<Value>, int64_t>> owned;
    forEachOwnedChunk(rewriter, loc, layout, cType.getShape(), 1,
                      [&](const OwnedChunk &chunk) {
                        owned.push_back({chunk.indices, chunk.slot});
                      });
    SmallVector<Value> init;
    for (auto &[idx, slot] : owned) {
      if (op.getClearAccum()) {
        init.push_back(arith::ConstantOp::create(
            rewriter, loc, cast<TypedAttr>(rewriter.getZeroAttr(accType))));
      } else {
        Value s = arith::ConstantIndexOp::create(rewriter, loc, slot);
        init.push_back(memref::LoadOp::create(rewriter, loc, storage, s));
      }
    }
    Value c0 = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value cK = arith::ConstantIndexOp::create(rewriter, loc, k);
    Value c1 = arith::ConstantIndexOp::create(rewriter, loc, 1);
    auto loop = scf::ForOp::create(
        rewriter, loc, c0, cK, c1, init,
        [&](OpBuilder &b, Location l, Value kk, ValueRange accs) {
          SmallVector<Value> next;
          for (auto [entry, acc] : llvm::zip_equal(owned, accs)) {
            Value i = entry.first[0], j = entry.first[1];
            SmallVector<Value> aIdx = op.getTransposeA()
                                          ? SmallVector<Value>{kk, i}
                                          : SmallVector<Value>{i, kk};
            SmallVector<Value> bIdx = op.getTransposeB()
                                          ? SmallVector<Value>{j, kk}
                                          : SmallVector<Value>{kk, j};
            aIdx = swizzleIndices(b, l, op.getA(), aIdx);
            bIdx = swizzleIndices(b, l, op.getB(), bIdx);
            Value a = memref::LoadOp::create(b, l, adaptor.getA(), aIdx);
            Value bv = memref::LoadOp::create(b, l, adaptor.getB(), bIdx);
            a = convertElements(b, l, a, accType);
            bv = convertElements(b, l, bv, accType);
            if (isa<FloatType>(accType)) {
              next.push_back(math::FmaOp::create(b, l, a, bv, acc));
            } else {
              Value prod = arith::MulIOp::create(b, l, a, bv);
              next.push_back(arith::AddIOp::create(b, l, prod, acc));
            }
          }
          scf::YieldOp::create(b, l, next);
        });
    for (auto [entry, result] : llvm::zip_equal(owned, loop.getResults())) {
      Value s = arith::ConstantIndexOp::create(rewriter, loc, entry.second);
      memref::StoreOp::create(rewriter, loc, result, storage, s);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

struct ReduceLowering : TileLoweringPattern<tile::ReduceOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::ReduceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    return op.emitOpError("cannot be lowered yet: cross-thread reductions "
                          "need the warp-shuffle lowering of the single-kernel "
                          "milestone");
  }
};

} // namespace

void tile_to_gpu::populateComputePatterns(RewritePatternSet &patterns,
                                          TypeConverter &converter,
                                          KernelLoweringState &state) {
  patterns.add<ParallelLowering, PipelinedLowering, GemmSimtLowering,
               ReduceLowering>(converter, patterns.getContext(), state);
}
