//===- AsyncCopyPatterns.cpp - cp.async copies, commits and waits ----------===//
//
// `tile.copy async` (global -> shared) becomes one `nvgpu.device_async_copy`
// per chunk of 4, 8 or 16 bytes each thread owns; chunks outside the global
// buffer read no bytes and zero-fill their shared destination, which is how a
// tile that overhangs the tensor (K not a multiple of the tile) stays correct.
// `tile.async_commit` / `tile.async_wait` become the NVVM cp.async group ops,
// which convert-gpu-to-nvvm passes through.
//
//===----------------------------------------------------------------------===//

#include "TileToGPUInternal.h"

#include "tilemega/Dialect/Tile/IR/TileLayouts.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile_to_gpu;


/// Elements per cp.async: what the thread owns contiguously, limited to 16
/// bytes and to what the alignment of both sides allows (static extents,
/// offset divisibility, the shared tile's swizzle), so that no chunk
/// straddles the end of a global row and every address is chunk-aligned.
static int64_t pickChunkWidth(const ThreadOwnership &ownership,
                              ArrayRef<int64_t> sizes, Type elementType,
                              ArrayRef<std::pair<Value, ArrayRef<OpFoldResult>>>
                                  sides) {
  unsigned inner = sizes.size() - 1;
  int64_t width = std::min(ownership.getContiguity(),
                           tile::getMaxVectorElems(elementType));
  width = tile::pow2Divisor(sizes[inner], width);
  for (auto [buffer, offsets] : sides) {
    auto type = cast<MemRefType>(buffer.getType());
    width = tile::pow2Divisor(type.getDimSize(inner), width);
    width = std::min(width, knownDivisor(offsets[inner]));
    if (tile::SwizzleAttr swizzle = getSwizzle(buffer))
      width = tile::pow2Divisor(swizzle.getContiguousElements(), width);
  }
  return std::max<int64_t>(width, 1);
}

namespace {

/// Benefit 2: ahead of the synchronous copy lowering, which takes over the
/// async copies this pattern declines.
struct AsyncCopyLowering : OpConversionPattern<tile::CopyOp> {
  AsyncCopyLowering(TypeConverter &converter, MLIRContext *ctx,
                    KernelLoweringState &state)
      : OpConversionPattern(converter, ctx, /*benefit=*/2), state(state) {}
  KernelLoweringState &state;

  LogicalResult
  matchAndRewrite(tile::CopyOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!op.getAsync())
      return rewriter.notifyMatchFailure(op, "not an async copy");
    Location loc = op.getLoc();
    MemRefType srcType = op.getSrc().getType(), dstType = op.getDst().getType();
    Type elem = dstType.getElementType();
    ArrayRef<int64_t> sizes = op.getSizes();
    SmallVector<OpFoldResult> srcOffsets = op.getMixedSrcOffsets();
    SmallVector<OpFoldResult> dstOffsets = op.getMixedDstOffsets();

    int64_t elemBits = dstType.getElementTypeBitWidth();
    if (elemBits % 8 != 0)
      return rewriter.notifyMatchFailure(op, "sub-byte elements");
    int64_t elemBytes = elemBits / 8;
    ThreadOwnership ownership = getOwnership(
        tile::getDefaultBlockedLayout(op.getContext(), sizes,
                                      tile::getMaxVectorElems(elem),
                                      state.numThreads),
        sizes);
    int64_t width =
        pickChunkWidth(ownership, sizes, elem,
                       {{op.getSrc(), srcOffsets}, {op.getDst(), dstOffsets}});
    int64_t bytes = width * elemBytes;
    // cp.async moves 4, 8 or 16 bytes. Narrower chunks are copied
    // synchronously by the plain copy lowering: complete when issued, which
    // is all a later wait asks for.
    if (bytes < 4)
      return rewriter.notifyMatchFailure(
          op, "chunks under 4 bytes: copied synchronously");

    Type tokenType = nvgpu::DeviceAsyncTokenType::get(op.getContext());
    IntegerAttr dstElements = rewriter.getIndexAttr(width);
    // 16-byte copies go through L2 only (cp.async.cg): the tile is read from
    // shared memory, so caching it in L1 as well only evicts other data.
    UnitAttr bypassL1 = bytes == 16 ? rewriter.getUnitAttr() : UnitAttr();
    forEachOwnedChunk(
        rewriter, loc, ownership, sizes, width, [&](const OwnedChunk &chunk) {
          emitGuarded(rewriter, loc, chunk.inTile, [&](OpBuilder &b) {
            SmallVector<Value> srcIdx =
                addOffsets(b, loc, srcOffsets, chunk.indices);
            SmallVector<Value> dstIdx =
                addOffsets(b, loc, dstOffsets, chunk.indices);
            dstIdx = swizzleIndices(b, loc, op.getDst(), dstIdx);
            // Outside the tensor: read 0 bytes (the 16 land as zeros) from
            // the tensor's first element, so that no address points past it.
            Value srcElements;
            if (Value inBounds =
                    boundsCheck(b, loc, srcType, srcOffsets, srcIdx, sizes)) {
              Value zero = arith::ConstantIndexOp::create(b, loc, 0);
              srcElements = arith::SelectOp::create(
                  b, loc, inBounds,
                  arith::ConstantIndexOp::create(b, loc, width), zero);
              for (Value &idx : srcIdx)
                idx = arith::SelectOp::create(b, loc, inBounds, idx, zero);
            }
            nvgpu::DeviceAsyncCopyOp::create(
                b, loc, tokenType, adaptor.getDst(), dstIdx, adaptor.getSrc(),
                srcIdx, dstElements, srcElements, bypassL1);
          });
        });
    rewriter.eraseOp(op);
    return success();
  }
};

struct AsyncCommitLowering : TileLoweringPattern<tile::AsyncCommitOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::AsyncCommitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<NVVM::CpAsyncCommitGroupOp>(op);
    return success();
  }
};

struct AsyncWaitLowering : TileLoweringPattern<tile::AsyncWaitOp> {
  using TileLoweringPattern::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(tile::AsyncWaitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<NVVM::CpAsyncWaitGroupOp>(
        op, static_cast<int32_t>(op.getPendingAttr().getInt()));
    return success();
  }
};

/// Markers with no code of their own: a prefetch point tile-pipeline did
/// not run on marks nothing to move, and a task wait outside a persistent
/// kernel (the body launched on its own) has its inputs ready at the start.
template <typename MarkerOp>
struct EraseMarker : TileLoweringPattern<MarkerOp> {
  using TileLoweringPattern<MarkerOp>::TileLoweringPattern;
  LogicalResult
  matchAndRewrite(MarkerOp op, typename MarkerOp::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void tile_to_gpu::populateAsyncCopyPatterns(RewritePatternSet &patterns,
                                            TypeConverter &converter,
                                            KernelLoweringState &state) {
  patterns.add<AsyncCopyLowering, AsyncCommitLowering, AsyncWaitLowering,
               EraseMarker<tile::PrefetchPointOp>, EraseMarker<tile::TaskWaitOp>>(
      converter, patterns.getContext(), state);
}
