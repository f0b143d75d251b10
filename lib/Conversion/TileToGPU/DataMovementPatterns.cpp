//===- DataMovementPatterns.cpp - allocation, copy, fill, atomic -----------===//

#include "TileToGPUInternal.h"

#include "tilemega/Dialect/Tile/IR/TileLayouts.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile_to_gpu;

Attribute tile_to_gpu::getFragmentLayout(Value original) {
  if (auto alloc = original.getDefiningOp<tile::AllocFragmentOp>())
    return alloc.getLayoutAttr();
  return nullptr;
}


/// Width of the vector accesses of a box copy: what the layout gives each
/// thread along the innermost dimension, limited to 128 bits and to what the
/// alignment of every non-fragment side allows.
static int64_t pickVectorWidth(const ThreadOwnership &ownership,
                               ArrayRef<int64_t> sizes,
                               ArrayRef<std::pair<Value, ArrayRef<OpFoldResult>>>
                                   sides) {
  unsigned inner = sizes.size() - 1;
  int64_t width = ownership.getContiguity();
  width = tile::pow2Divisor(sizes[inner], width);
  for (auto [buffer, offsets] : sides) {
    auto type = cast<MemRefType>(buffer.getType());
    // Registers have no access width; memory sides are capped at 128 bits.
    if (tile::isFragment(type))
      continue;
    width = std::min(width, tile::getMaxVectorElems(type.getElementType()));
    width = tile::pow2Divisor(type.getDimSize(inner), width);
    width = std::min(width, knownDivisor(offsets[inner]));
    if (tile::SwizzleAttr swizzle = getSwizzle(buffer))
      width = tile::pow2Divisor(swizzle.getContiguousElements(), width);
  }
  return std::max<int64_t>(width, 1);
}

/// The ownership a cooperative (fragment-free) access of a box uses.
static ThreadOwnership getCooperativeOwnership(MLIRContext *ctx,
                                               ArrayRef<int64_t> shape,
                                               int64_t maxVectorElems,
                                               int64_t numThreads) {
  return getOwnership(tile::getDefaultBlockedLayout(ctx, shape, maxVectorElems,
                                                    numThreads),
                      shape);
}

/// Reads `width` register slots of a lowered fragment as a scalar or vector.
static Value readSlots(OpBuilder &b, Location loc, Value storage, int64_t slot,
                       int64_t width) {
  SmallVector<Value> elems;
  for (int64_t i = 0; i < width; ++i) {
    Value idx = arith::ConstantIndexOp::create(b, loc, slot + i);
    elems.push_back(memref::LoadOp::create(b, loc, storage, idx));
  }
  if (width == 1)
    return elems.front();
  auto type = VectorType::get({width}, elems.front().getType());
  return vector::FromElementsOp::create(b, loc, type, elems);
}

/// Writes a scalar or vector into consecutive register slots.
static void writeSlots(OpBuilder &b, Location loc, Value value, Value storage,
                       int64_t slot) {
  auto vec = dyn_cast<VectorType>(value.getType());
  int64_t width = vec ? vec.getNumElements() : 1;
  for (int64_t i = 0; i < width; ++i) {
    Value elem = vec ? vector::ExtractOp::create(b, loc, value, i).getResult()
                     : value;
    Value idx = arith::ConstantIndexOp::create(b, loc, slot + i);
    memref::StoreOp::create(b, loc, elem, storage, idx);
  }
}

/// Loads from a global or shared box; a global access outside the buffer
/// reads zeros.
static Value loadBox(OpBuilder &b, Location loc, Value original, Value lowered,
                     ArrayRef<OpFoldResult> offsets, ArrayRef<Value> rel,
                     ArrayRef<int64_t> sizes, int64_t width) {
  auto type = cast<MemRefType>(original.getType());
  SmallVector<Value> idx = addOffsets(b, loc, offsets, rel);
  if (tile::isShared(type)) {
    idx = swizzleIndices(b, loc, original, idx);
    return loadElements(b, loc, lowered, idx, width);
  }
  Value inBounds = boundsCheck(b, loc, type, offsets, idx, sizes);
  if (!inBounds)
    return loadElements(b, loc, lowered, idx, width);
  Type resultType = type.getElementType();
  if (width > 1)
    resultType = VectorType::get({width}, resultType);
  auto ifOp = scf::IfOp::create(
      b, loc, inBounds,
      [&](OpBuilder &tb, Location l) {
        scf::YieldOp::create(tb, l, loadElements(tb, l, lowered, idx, width));
      },
      [&](OpBuilder &eb, Location l) {
        Value zero = arith::ConstantOp::create(
            eb, l, cast<TypedAttr>(eb.getZeroAttr(resultType)));
        scf::YieldOp::create(eb, l, zero);
      });
  return ifOp.getResult(0);
}

/// Stores into a global or shared box; a global access outside the buffer is
/// dropped.
static void storeBox(OpBuilder &b, Location loc, Value value, Value original,
                     Value lowered, ArrayRef<OpFoldResult> offsets,
                     ArrayRef<Value> rel, ArrayRef<int64_t> sizes) {
  auto type = cast<MemRefType>(original.getType());
  SmallVector<Value> idx = addOffsets(b, loc, offsets, rel);
  if (tile::isShared(type)) {
    idx = swizzleIndices(b, loc, original, idx);
    storeElements(b, loc, value, lowered, idx);
    return;
  }
  Value inBounds = boundsCheck(b, loc, type, offsets, idx, sizes);
  emitGuarded(b, loc, inBounds, [&](OpBuilder &gb) {
    storeElements(gb, loc, value, lowered, idx);
  });
}

namespace {

struct AllocSharedLowering : TileLoweringPattern<tile::AllocSharedOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::AllocSharedOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto space = gpu::AddressSpaceAttr::get(op.getContext(),
                                            gpu::AddressSpace::Workgroup);
    auto bytesType = MemRefType::get({ShapedType::kDynamic},
                                     rewriter.getI8Type(), nullptr, space);
    Value base = gpu::DynamicSharedMemoryOp::create(rewriter, loc, bytesType);
    Value offset = arith::ConstantIndexOp::create(
        rewriter, loc, state.sharedOffsets.lookup(op));
    rewriter.replaceOpWithNewOp<memref::ViewOp>(op, op.getType(), base, offset,
                                                ValueRange{});
    return success();
  }
};

struct AllocFragmentLowering : TileLoweringPattern<tile::AllocFragmentOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::AllocFragmentOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!op.getLayoutAttr())
      return op.emitOpError("has no layout: run tile-infer-layouts before "
                            "convert-tile-to-gpu");
    // The thread's share: as many registers as the layout gives it (more
    // than numel / threads for sliced, replicated layouts).
    MemRefType type = op.getType();
    int64_t slots =
        getOwnership(op.getLayoutAttr(), type.getShape()).elements.size();
    Value storage = memref::AllocaOp::create(
        rewriter, op.getLoc(), MemRefType::get({slots}, type.getElementType()));
    auto converted = cast<MemRefType>(
        getTypeConverter()->convertType(op.getType()));
    rewriter.replaceOpWithNewOp<memref::CastOp>(op, converted, storage);
    return success();
  }
};

struct CopyLowering : TileLoweringPattern<tile::CopyOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::CopyOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MemRefType srcType = op.getSrc().getType(), dstType = op.getDst().getType();
    ArrayRef<int64_t> sizes = op.getSizes();
    Type dstElem = dstType.getElementType();
    SmallVector<OpFoldResult> srcOffsets = op.getMixedSrcOffsets();
    SmallVector<OpFoldResult> dstOffsets = op.getMixedDstOffsets();

    // A fragment side fixes who moves what; otherwise spread the box evenly.
    std::optional<ThreadOwnership> ownership;
    if (tile::isFragment(srcType) || tile::isFragment(dstType)) {
      Attribute layout = getFragmentLayout(
          tile::isFragment(srcType) ? op.getSrc() : op.getDst());
      if (!layout)
        return op.emitOpError("copies a fragment without a layout: run "
                              "tile-infer-layouts first");
      ownership = getOwnership(layout, sizes);
    } else {
      int64_t maxVec =
          std::min(tile::getMaxVectorElems(srcType.getElementType()),
                   tile::getMaxVectorElems(dstElem));
      ownership = getCooperativeOwnership(op.getContext(), sizes, maxVec,
                                          state.numThreads);
    }
    int64_t width = pickVectorWidth(
        *ownership, sizes,
        {{op.getSrc(), srcOffsets}, {op.getDst(), dstOffsets}});

    forEachOwnedChunk(
        rewriter, loc, *ownership, sizes, width, [&](const OwnedChunk &chunk) {
          emitGuarded(rewriter, loc, chunk.inTile, [&](OpBuilder &b) {
            Value value =
                tile::isFragment(srcType)
                    ? readSlots(b, loc, adaptor.getSrc(), chunk.slot, width)
                    : loadBox(b, loc, op.getSrc(), adaptor.getSrc(), srcOffsets,
                              chunk.indices, sizes, width);
            value = convertElements(b, loc, value, dstElem);
            if (tile::isFragment(dstType))
              writeSlots(b, loc, value, adaptor.getDst(), chunk.slot);
            else
              storeBox(b, loc, value, op.getDst(), adaptor.getDst(), dstOffsets,
                       chunk.indices, sizes);
          });
        });
    rewriter.eraseOp(op);
    return success();
  }
};

/// Writes `value` into every element of a shared or fragment tile.
static void lowerFill(Operation *op, Value original, Value lowered, Value value,
                      KernelLoweringState &state,
                      ConversionPatternRewriter &rewriter) {
  Location loc = op->getLoc();
  auto type = cast<MemRefType>(original.getType());
  if (tile::isFragment(type)) {
    int64_t slots = getOwnership(getFragmentLayout(original), type.getShape())
                        .elements.size();
    for (int64_t slot = 0; slot < slots; ++slot)
      writeSlots(rewriter, loc, value, lowered, slot);
    return;
  }
  ThreadOwnership ownership = getCooperativeOwnership(
      op->getContext(), type.getShape(),
      tile::getMaxVectorElems(type.getElementType()), state.numThreads);
  SmallVector<OpFoldResult> zeros(type.getRank(), rewriter.getIndexAttr(0));
  int64_t width =
      pickVectorWidth(ownership, type.getShape(), {{original, zeros}});
  Value splat = value;
  if (width > 1)
    splat = vector::BroadcastOp::create(
        rewriter, loc, VectorType::get({width}, value.getType()), value);
  forEachOwnedChunk(rewriter, loc, ownership, type.getShape(), width,
                    [&](const OwnedChunk &chunk) {
                      emitGuarded(rewriter, loc, chunk.inTile,
                                  [&](OpBuilder &b) {
                                    storeBox(b, loc, splat, original, lowered,
                                             zeros, chunk.indices,
                                             type.getShape());
                                  });
                    });
}

struct FillLowering : TileLoweringPattern<tile::FillOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::FillOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    lowerFill(op, op.getDst(), adaptor.getDst(), adaptor.getValue(), state,
              rewriter);
    rewriter.eraseOp(op);
    return success();
  }
};

struct ClearLowering : TileLoweringPattern<tile::ClearOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::ClearOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Type elem = op.getDst().getType().getElementType();
    Value zero = arith::ConstantOp::create(
        rewriter, op.getLoc(), cast<TypedAttr>(rewriter.getZeroAttr(elem)));
    lowerFill(op, op.getDst(), adaptor.getDst(), zero, state, rewriter);
    rewriter.eraseOp(op);
    return success();
  }
};

struct AtomicLowering : TileLoweringPattern<tile::AtomicOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::AtomicOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MemRefType srcType = op.getSrc().getType(), dstType = op.getDst().getType();
    ArrayRef<int64_t> shape = srcType.getShape();
    bool isFloat = isa<FloatType>(srcType.getElementType());
    arith::AtomicRMWKind kind =
        op.getKind() == tile::AtomicKind::add
            ? (isFloat ? arith::AtomicRMWKind::addf : arith::AtomicRMWKind::addi)
            : (isFloat ? arith::AtomicRMWKind::maximumf
                       : arith::AtomicRMWKind::maxs);
    std::optional<ThreadOwnership> ownership;
    if (tile::isFragment(srcType)) {
      Attribute layout = getFragmentLayout(op.getSrc());
      if (!layout)
        return op.emitOpError("reads a fragment without a layout: run "
                              "tile-infer-layouts first");
      ownership = getOwnership(layout, shape);
    } else {
      ownership = getCooperativeOwnership(op.getContext(), shape, 1,
                                          state.numThreads);
    }
    SmallVector<OpFoldResult> offsets =
        getMixedValues(op.getStaticOffsets(), op.getOffsets(), rewriter);
    SmallVector<OpFoldResult> zeros(shape.size(), rewriter.getIndexAttr(0));
    forEachOwnedChunk(
        rewriter, loc, *ownership, shape, 1, [&](const OwnedChunk &chunk) {
          emitGuarded(rewriter, loc, chunk.inTile, [&](OpBuilder &b) {
            Value value =
                tile::isFragment(srcType)
                    ? readSlots(b, loc, adaptor.getSrc(), chunk.slot, 1)
                    : loadBox(b, loc, op.getSrc(), adaptor.getSrc(), zeros,
                              chunk.indices, shape, 1);
            SmallVector<Value> idx = addOffsets(b, loc, offsets, chunk.indices);
            Value inBounds = boundsCheck(b, loc, dstType, offsets, idx, shape);
            emitGuarded(b, loc, inBounds, [&](OpBuilder &gb) {
              memref::AtomicRMWOp::create(gb, loc, kind, value,
                                          adaptor.getDst(), idx);
            });
          });
        });
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void tile_to_gpu::populateDataMovementPatterns(RewritePatternSet &patterns,
                                               TypeConverter &converter,
                                               KernelLoweringState &state) {
  patterns.add<AllocSharedLowering, AllocFragmentLowering, CopyLowering,
               FillLowering, ClearLowering, AtomicLowering>(
      converter, patterns.getContext(), state);
}
