//===- ComputePatterns.cpp - parallel, pipelined loops, gemm ---------------===//

#include "TileToGPUInternal.h"

#include "tilemega/Dialect/Tile/IR/TileLayouts.h"
#include "tilemega/Dialect/Tile/IR/TileTensorCores.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile_to_gpu;
using tile::isFragmentValue;
using tile::isSharedValue;

namespace {

/// Where a fragment a parallel body touches keeps the current iteration's
/// element: its ownership, and which parallel dimensions its indices leave
/// out (a slice such as row_max[i] in a loop over (i, j)).
struct FragmentView {
  ThreadOwnership ownership;
  SmallVector<int64_t> droppedDims;
};

/// Clones a tile.parallel body for one element the thread owns: fragment
/// accesses become accesses of the thread's register slot, swizzled shared
/// accesses get permuted indices, everything else is cloned as is.
class ParallelBodyCloner {
public:
  ParallelBodyCloner(ConversionPatternRewriter &rewriter,
                     const DenseMap<Value, FragmentView> &views,
                     ArrayRef<int64_t> offsets)
      : rewriter(rewriter), views(views), offsets(offsets) {}

  void cloneBlock(Block &block, IRMapping &mapping) {
    for (Operation &op : block.without_terminator())
      cloneOp(op, mapping);
    if (block.mightHaveTerminator())
      cloneOp(*block.getTerminator(), mapping);
  }

private:
  /// The register slot of the current iteration's element of `fragment`.
  Value slotOf(Value fragment, Location loc) {
    const FragmentView &view = views.find(fragment)->second;
    SmallVector<int64_t> projected(offsets);
    for (int64_t d : llvm::reverse(view.droppedDims))
      projected.erase(projected.begin() + d);
    int64_t slot = view.ownership.findSlot(projected);
    assert(slot >= 0 && "layouts were checked to match");
    return arith::ConstantIndexOp::create(rewriter, loc, slot);
  }

  SmallVector<Value> mapped(ValueRange values, IRMapping &mapping) {
    return llvm::map_to_vector(
        values, [&](Value v) { return mapping.lookupOrDefault(v); });
  }

  void cloneOp(Operation &op, IRMapping &mapping) {
    Location loc = op.getLoc();
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      Value memref = load.getMemRef();
      if (isFragmentValue(memref)) {
        Value storage = rewriter.getRemappedValue(memref);
        mapping.map(load.getResult(),
                    memref::LoadOp::create(rewriter, loc, storage,
                                           slotOf(memref, loc)));
        return;
      }
      if (getSwizzle(memref)) {
        SmallVector<Value> idx = swizzleIndices(
            rewriter, loc, memref, mapped(load.getIndices(), mapping));
        mapping.map(load.getResult(),
                    memref::LoadOp::create(
                        rewriter, loc, mapping.lookupOrDefault(memref), idx));
        return;
      }
    }
    if (auto store = dyn_cast<memref::StoreOp>(op)) {
      Value memref = store.getMemRef();
      Value value = mapping.lookupOrDefault(store.getValueToStore());
      if (isFragmentValue(memref)) {
        Value storage = rewriter.getRemappedValue(memref);
        memref::StoreOp::create(rewriter, loc, value, storage,
                                slotOf(memref, loc));
        return;
      }
      if (getSwizzle(memref)) {
        SmallVector<Value> idx = swizzleIndices(
            rewriter, loc, memref, mapped(store.getIndices(), mapping));
        memref::StoreOp::create(rewriter, loc, value,
                                mapping.lookupOrDefault(memref), idx);
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
  const DenseMap<Value, FragmentView> &views;
  ArrayRef<int64_t> offsets;
};

struct ParallelLowering : TileLoweringPattern<tile::ParallelOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::ParallelOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Attribute layout = op.getLayoutAttr();
    if (!layout)
      return op.emitOpError("has no layout: run tile-infer-layouts before "
                            "convert-tile-to-gpu");
    Block &body = op.getBody().front();
    // Each thread runs the iterations whose elements it holds; every fragment
    // the body touches must be laid out like the iterations (or be a slice
    // of that layout along the indices it leaves out).
    DenseMap<Value, FragmentView> views;
    WalkResult walk = op.getBody().walk([&](Operation *inner) -> WalkResult {
      std::optional<tile::MemRefAccess> access = tile::getMemRefAccess(inner);
      if (!access || !isFragmentValue(access->memref) ||
          views.count(access->memref))
        return WalkResult::advance();
      Value memref = access->memref;
      ValueRange indices = access->indices;
      FragmentView view;
      Attribute expected = layout;
      for (auto [d, arg] : llvm::enumerate(body.getArguments()))
        if (!llvm::is_contained(indices, arg))
          view.droppedDims.push_back(d);
      for (int64_t d : llvm::reverse(view.droppedDims))
        expected = tile::SliceLayoutAttr::get(op.getContext(), d, expected);
      Attribute fragmentLayout = getFragmentLayout(memref);
      if (fragmentLayout != expected) {
        inner->emitOpError()
            << "touches a fragment with layout " << fragmentLayout
            << " inside a tile.parallel that needs " << expected
            << ": the thread running an iteration must hold its elements";
        return WalkResult::interrupt();
      }
      view.ownership = getOwnership(
          fragmentLayout, cast<MemRefType>(memref.getType()).getShape());
      views.try_emplace(memref, std::move(view));
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();

    ThreadOwnership ownership = getOwnership(layout, op.getExtents());
    forEachOwnedChunk(
        rewriter, op.getLoc(), ownership, op.getExtents(), 1,
        [&](const OwnedChunk &chunk) {
          emitGuarded(rewriter, op.getLoc(), chunk.inTile, [&](OpBuilder &) {
            IRMapping mapping;
            for (auto [arg, idx] :
                 llvm::zip_equal(body.getArguments(), chunk.indices))
              mapping.map(arg, idx);
            ParallelBodyCloner(rewriter, views, chunk.offsets)
                .cloneBlock(body, mapping);
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
    // The wgmma lowering (benefit 3) took every gemm with a fragment A it
    // can: what reaches here has no lowering.
    if (!isSharedValue(op.getB()))
      return op.emitOpError("reads B from a fragment, which no lowering "
                            "multiplies: keep B in shared memory");
    if (!isSharedValue(op.getA()))
      return op.emitOpError()
             << "reads A from registers (a fragment), which only wgmma's "
                "register form multiplies (sm_90a with wgmma, bf16 or f16 "
                "into f32, B in shared memory): "
             << (state.wgmma ? tile::chooseWgmma(op, getFragmentLayout(op.getC())).whyNot
                             : std::string("the wgmma lowering is off"))
             << "; or keep A in shared memory";
    Attribute layout = getFragmentLayout(op.getC());
    if (!layout)
      return op.emitOpError("accumulates into a fragment without a layout: "
                            "run tile-infer-layouts first");
    // The gemms the tensor-core rule accepts belong to GemmMmaLowering.
    if (tile::chooseTensorCores(op, layout).usesTensorCores())
      return rewriter.notifyMatchFailure(op, "runs on tensor cores");
    // 8-bit floats have no CUDA-core form here: the wgmma lowering declined.
    if (tile::isWgmmaOnlyInput(op.getA().getType().getElementType()))
      return op.emitOpError()
             << "multiplies 8-bit floats, which only wgmma does, and cannot "
                "take it: "
             << (state.wgmma ? tile::chooseWgmma(op, layout).whyNot
                             : std::string("the wgmma lowering is off (sm_90a "
                                           "with wgmma needed)"));
    MemRefType aType = op.getA().getType(), cType = op.getC().getType();
    Type accType = cType.getElementType();
    int64_t k = op.getTransposeA() ? aType.getDimSize(0) : aType.getDimSize(1);
    Value storage = adaptor.getC();

    // Thread-owned C elements: (i, j) index values and register slots.
    SmallVector<std::pair<SmallVector<Value>, int64_t>> owned;
    forEachOwnedChunk(rewriter, loc, getOwnership(layout, cType.getShape()),
                      cType.getShape(), 1, [&](const OwnedChunk &chunk) {
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

} // namespace

void tile_to_gpu::populateComputePatterns(RewritePatternSet &patterns,
                                          TypeConverter &converter,
                                          KernelLoweringState &state) {
  patterns.add<ParallelLowering, PipelinedLowering, GemmSimtLowering>(
      converter, patterns.getContext(), state);
}
