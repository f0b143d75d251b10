//===- ReducePatterns.cpp - tile.reduce over fragments ---------------------===//
//
// A reduction of a fragment along `dim` into its slice happens in three
// steps, each only when the layout spreads `dim` that far:
//   1. in registers: a thread combines the elements it holds of each row;
//   2. in the warp: butterfly shuffles (xor) over the lanes along `dim`;
//   3. in the block: one partial per warp along `dim` goes through shared
//      scratch, and every thread combines them.
// The result is replicated in every thread that holds a row, which is what
// the slice layout of the destination says.
//
//===----------------------------------------------------------------------===//

#include "TileToGPUInternal.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile_to_gpu;

/// f16/bf16 reduce in f32: fewer rounding steps and 32-bit shuffles.
static Type getAccumulatorType(Type elementType) {
  if (elementType.isF16() || elementType.isBF16())
    return Float32Type::get(elementType.getContext());
  return elementType;
}

int64_t tile_to_gpu::getReduceScratchBytes(tile::ReduceOp reduce) {
  Attribute layout = getFragmentLayout(reduce.getSrc());
  if (!layout)
    return 0;
  FailureOr<ThreadOwnership> ownership =
      tile::getThreadOwnership(layout, reduce.getSrc().getType().getShape());
  if (failed(ownership))
    return 0;
  int64_t warps = ownership->dims[reduce.getDim()].warpCount;
  if (warps <= 1)
    return 0;
  MemRefType dst = reduce.getDst().getType();
  Type acc = getAccumulatorType(dst.getElementType());
  return warps * dst.getNumElements() * (acc.getIntOrFloatBitWidth() / 8);
}

namespace {

struct Combiner {
  tile::ReduceKind kind;
  bool isFloat;

  /// The value an element contributes (|x| for absmax).
  Value prepare(OpBuilder &b, Location loc, Value v) const {
    if (kind != tile::ReduceKind::absmax)
      return v;
    if (isFloat)
      return math::AbsFOp::create(b, loc, v);
    return math::AbsIOp::create(b, loc, v);
  }

  Value combine(OpBuilder &b, Location loc, Value x, Value y) const {
    switch (kind) {
    case tile::ReduceKind::sum:
      return isFloat ? arith::AddFOp::create(b, loc, x, y).getResult()
                     : arith::AddIOp::create(b, loc, x, y).getResult();
    case tile::ReduceKind::max:
    case tile::ReduceKind::absmax:
      return isFloat ? arith::MaximumFOp::create(b, loc, x, y).getResult()
                     : arith::MaxSIOp::create(b, loc, x, y).getResult();
    case tile::ReduceKind::min:
      return isFloat ? arith::MinimumFOp::create(b, loc, x, y).getResult()
                     : arith::MinSIOp::create(b, loc, x, y).getResult();
    }
    llvm_unreachable("unhandled reduce kind");
  }
};

Value cIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

struct ReduceLowering : TileLoweringPattern<tile::ReduceOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::ReduceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MemRefType srcType = op.getSrc().getType(), dstType = op.getDst().getType();
    if (!tile::isFragment(srcType) || !tile::isFragment(dstType))
      return op.emitOpError("reduces a fragment into a fragment; copy shared "
                            "tiles into a fragment first");
    int64_t dim = op.getDim();
    Attribute srcLayout = getFragmentLayout(op.getSrc());
    Attribute dstLayout = getFragmentLayout(op.getDst());
    if (!srcLayout || !dstLayout)
      return op.emitOpError("reduces fragments without layouts: run "
                            "tile-infer-layouts first");
    if (srcType.getRank() < 2)
      return op.emitOpError("of a 1-d fragment to one value is not supported "
                            "yet; reduce a 2-d tile along a dimension");
    Attribute expected =
        tile::SliceLayoutAttr::get(op.getContext(), dim, srcLayout);
    if (dstLayout != expected)
      return op.emitOpError() << "needs a destination with layout " << expected
                              << ", got " << dstLayout;

    ThreadOwnership srcOwn = getOwnership(srcLayout, srcType.getShape());
    ThreadOwnership dstOwn = getOwnership(dstLayout, dstType.getShape());
    Type accType = getAccumulatorType(dstType.getElementType());
    Combiner combiner{op.getKind(), isa<FloatType>(accType)};

    // 1. Registers: fold the thread's elements of each destination row.
    SmallVector<Value> partial(dstOwn.elements.size());
    for (auto [slot, offsets] : llvm::enumerate(srcOwn.elements)) {
      SmallVector<int64_t> projected(offsets);
      projected.erase(projected.begin() + dim);
      int64_t dstSlot = dstOwn.findSlot(projected);
      Value v = memref::LoadOp::create(rewriter, loc, adaptor.getSrc(),
                                       cIndex(rewriter, loc, slot));
      v = combiner.prepare(rewriter, loc,
                           convertElements(rewriter, loc, v, accType));
      partial[dstSlot] = partial[dstSlot]
                             ? combiner.combine(rewriter, loc, partial[dstSlot], v)
                             : v;
    }

    // 2. Warp: butterfly over the lanes that split `dim`.
    const tile::DimMapping &mapping = srcOwn.dims[dim];
    for (int64_t step = 1; step < mapping.laneCount; step *= 2) {
      int32_t mask = static_cast<int32_t>(mapping.laneStride * step);
      for (Value &v : partial) {
        Value other = gpu::ShuffleOp::create(rewriter, loc, v, mask,
                                             /*width=*/32,
                                             gpu::ShuffleMode::XOR)
                          .getShuffleResult();
        v = combiner.combine(rewriter, loc, v, other);
      }
    }

    // 3. Block: one partial per warp along `dim` through shared scratch.
    if (mapping.warpCount > 1) {
      int64_t warps = mapping.warpCount;
      auto space = gpu::AddressSpaceAttr::get(op.getContext(),
                                              gpu::AddressSpace::Workgroup);
      auto bytesType = MemRefType::get({ShapedType::kDynamic},
                                       rewriter.getI8Type(), nullptr, space);
      auto scratchType = MemRefType::get({warps, dstType.getNumElements()},
                                         accType, nullptr, space);
      Value base = gpu::DynamicSharedMemoryOp::create(rewriter, loc, bytesType);
      Value scratch = memref::ViewOp::create(
          rewriter, loc, scratchType, base,
          cIndex(rewriter, loc, state.sharedOffsets.lookup(op)), ValueRange{});

      Value tid = gpu::ThreadIdOp::create(rewriter, loc, gpu::Dimension::x);
      Value lane = arith::RemUIOp::create(rewriter, loc, tid,
                                          cIndex(rewriter, loc, 32));
      Value warp = arith::DivUIOp::create(rewriter, loc, tid,
                                          cIndex(rewriter, loc, 32));
      Value warpAlong = arith::RemUIOp::create(
          rewriter, loc,
          arith::DivUIOp::create(rewriter, loc, warp,
                                 cIndex(rewriter, loc, mapping.warpStride)),
          cIndex(rewriter, loc, warps));
      Value laneAlong = arith::RemUIOp::create(
          rewriter, loc,
          arith::DivUIOp::create(rewriter, loc, lane,
                                 cIndex(rewriter, loc, mapping.laneStride)),
          cIndex(rewriter, loc, mapping.laneCount));
      Value writer =
          arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                laneAlong, cIndex(rewriter, loc, 0));

      // Linear position of each destination element in the scratch row.
      SmallVector<Value> dstBase = getThreadBase(rewriter, loc, dstOwn);
      SmallVector<Value> linear;
      for (const SmallVector<int64_t> &offsets : dstOwn.elements) {
        Value lin = cIndex(rewriter, loc, 0);
        for (unsigned d = 0; d < offsets.size(); ++d) {
          Value idx = arith::AddIOp::create(rewriter, loc, dstBase[d],
                                            cIndex(rewriter, loc, offsets[d]));
          lin = arith::AddIOp::create(
              rewriter, loc,
              arith::MulIOp::create(rewriter, loc, lin,
                                    cIndex(rewriter, loc,
                                           dstType.getDimSize(d))),
              idx);
        }
        linear.push_back(lin);
      }
      // Earlier users of this scratch (a reduce in a loop) are done.
      gpu::BarrierOp::create(rewriter, loc);
      emitGuarded(rewriter, loc, writer, [&](OpBuilder &b) {
        for (auto [v, lin] : llvm::zip_equal(partial, linear))
          memref::StoreOp::create(b, loc, v, scratch,
                                  ValueRange{warpAlong, lin});
      });
      gpu::BarrierOp::create(rewriter, loc);
      for (auto [v, lin] : llvm::zip_equal(partial, linear)) {
        Value total;
        for (int64_t w = 0; w < warps; ++w) {
          Value x = memref::LoadOp::create(
              rewriter, loc, scratch,
              ValueRange{cIndex(rewriter, loc, w), lin});
          total = total ? combiner.combine(rewriter, loc, total, x) : x;
        }
        v = total;
      }
    }

    // Into the destination registers, combined with what they hold unless
    // `clear`.
    for (auto [slot, v] : llvm::enumerate(partial)) {
      Value idx = cIndex(rewriter, loc, slot);
      if (!op.getClear()) {
        Value old = memref::LoadOp::create(rewriter, loc, adaptor.getDst(), idx);
        v = combiner.combine(rewriter, loc, v,
                             convertElements(rewriter, loc, old, accType));
      }
      memref::StoreOp::create(
          rewriter, loc, convertElements(rewriter, loc, v, dstType.getElementType()),
          adaptor.getDst(), idx);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void tile_to_gpu::populateReducePatterns(RewritePatternSet &patterns,
                                         TypeConverter &converter,
                                         KernelLoweringState &state) {
  patterns.add<ReduceLowering>(converter, patterns.getContext(), state);
}
