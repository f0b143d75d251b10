//===- WgmmaGemmPatterns.cpp - tile.gemm on Hopper's wgmma.mma_async -------===//
//
// With convert-tile-to-gpu's `wgmma` option, a `tile.gemm` that
// tile::chooseWgmma accepts (TileTensorCores.h: A M x K and B N x K in shared
// memory, rows of 64 16-bit elements of K under the 128-byte swizzle, an f32
// accumulator whose mma layout gives each warp 16 whole rows) becomes, per
// warpgroup g (threads 128g .. 128g + 127, rows 64g .. 64g + 63):
//
//   fence.proxy.async.shared::cta; bar.sync   the tiles written by threads
//                                              (st.shared, cp.async) become
//                                              visible to the async proxy
//   d = C registers                            (undefined with clear_accum)
//   wgmma.fence
//   for s in 0..3:                             K = 64 in steps of 16
//     d = wgmma.mma_async.m64nNk16(desc(A + 64g rows, 32 s bytes),
//                                  desc(B, 32 s bytes), d,
//                                  scale-d = 0 on the first step with
//                                  clear_accum, else 1)
//   wgmma.commit_group; wgmma.wait_group 0
//   C registers = d
//
// wgmma's D fragment is the mma.sync C fragment of each 16 x 8 column tile,
// tile after tile: lane l of warp w (of its warpgroup) holds d[4t + e] =
// element (16 w + l / 4 + 8 (e / 2), 8 t + 2 (l % 4) + e % 2). The mma
// layout the rule requires (warpsPerBlock = [w, 1], 16 rows a warp) puts
// exactly those elements in the thread's slots, which the pattern looks up
// (ThreadOwnership::findSlot) rather than repeating the formula.
//
// B without transpose_b is K x N, N-major (imm-trans-b = 1): its rows are
// 64 elements of N under the same swizzle (the canonical MN-major 128-byte
// atom is 8 rows of K by 128 bytes of N), and a K step of 16 moves the start
// by 16 rows.
//
// A shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"):
// bits 0-13 the start address >> 4, 16-29 the leading byte offset >> 4 (not
// used by swizzled K-major layouts: 1), 32-45 the stride byte offset >> 4
// (1024 bytes between groups of 8 rows of 128 bytes), 49-51 the base offset
// (0: the tiles start on the 1024-byte swizzle period, which the outlining
// and tilemega-align-dynamic-shared-memory guarantee), 62-63 the swizzle (1:
// 128 bytes). Stepping K by 16 elements moves the start by 32 bytes inside
// the swizzle atom; the hardware applies the XOR to the absolute address,
// which is how the tile's #tile.swizzle<3, 3, 3> placed the data.
//
//===----------------------------------------------------------------------===//

#include "TileToGPUInternal.h"

#include "tilemega/Dialect/Tile/IR/TileLayouts.h"
#include "tilemega/Dialect/Tile/IR/TileTensorCores.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile_to_gpu;

namespace {

Value cI64(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, v, 64);
}

/// The 128-byte-swizzled matrix descriptor of the rows at `address` (see
/// the file comment for the fields). Both majors step 8 rows of 128 bytes
/// by 1024 bytes (K-major: 8 rows of M/N; N-major: 8 rows of K). The leading
/// offset is unused by a K-major swizzled operand (1 by convention) and, for
/// an N-major one exactly one 64-element atom wide, never reaches a second
/// atom.
Value descriptor(OpBuilder &b, Location loc, Value address) {
  constexpr int64_t kLeadingByteOffset = 16, kStrideByteOffset = 1024,
                    kSwizzle128B = 1;
  Value start = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, address, cI64(b, loc, 4)),
      cI64(b, loc, 0x3FFF));
  int64_t fixed = ((kLeadingByteOffset >> 4) << 16) |
                  ((kStrideByteOffset >> 4) << 32) | (kSwizzle128B << 62);
  return arith::OrIOp::create(b, loc, start, cI64(b, loc, fixed));
}

/// `wgmma.wait_group 0` right after the loop tile-pipeline marked around an
/// in-flight gemm (once per loop): nothing after it may read an accumulator
/// a wgmma is still writing.
LogicalResult waitAfterLoop(tile::GemmOp op, ConversionPatternRewriter &rewriter) {
  auto loop = dyn_cast<scf::ForOp>(op->getParentOp());
  if (!loop || !loop->hasAttr(tile::kWgmmaInFlightAttrName))
    return rewriter.notifyMatchFailure(
        op, "an in-flight gemm must sit at the top of its marked loop");
  Operation *next = loop->getNextNode();
  auto wait = dyn_cast_or_null<NVVM::WgmmaWaitGroupSyncOp>(next);
  if (wait && wait.getGroup() == 0)
    return success();
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointAfter(loop);
  NVVM::WgmmaWaitGroupSyncOp::create(rewriter, op.getLoc(), 0);
  return success();
}

/// Benefit 3: ahead of the mma.sync lowering (2), which takes the gemms this
/// one declines.
struct GemmWgmmaLowering : TileLoweringPattern<tile::GemmOp> {
  GemmWgmmaLowering(TypeConverter &converter, MLIRContext *ctx,
                    KernelLoweringState &state)
      : TileLoweringPattern(converter, ctx, state, /*benefit=*/3) {}

  LogicalResult
  matchAndRewrite(tile::GemmOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!state.wgmma)
      return rewriter.notifyMatchFailure(op, "the wgmma lowering is off");
    tile::TensorCoreChoice choice =
        tile::chooseWgmma(op, getFragmentLayout(op.getC()));
    if (!choice.usesTensorCores())
      return rewriter.notifyMatchFailure(op, choice.whyNot);
    MemRefType aType = op.getA().getType(), cType = op.getC().getType();
    ThreadOwnership ownership = getOwnership(choice.layout, cType.getShape());
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    int64_t n = cType.getDimSize(1);
    int64_t tilesN = n / tile::kMmaTileN;
    int64_t kSteps = aType.getDimSize(1) / tile::kWgmmaTileK;
    int64_t rowBytes = tile::kWgmmaRowElems * aType.getElementTypeBitWidth() / 8;
    int64_t stepBytes = tile::kWgmmaTileK * aType.getElementTypeBitWidth() / 8;
    // K-major B steps 16 elements along its rows (as A does); N-major B
    // steps 16 of its rows.
    bool bMajorN = !op.getTransposeB();
    int64_t bStepBytes = bMajorN ? tile::kWgmmaTileK * rowBytes : stepBytes;

    // The tiles' writers were generic-proxy stores; wgmma reads through the
    // async proxy. Tiles only TMA writes are async-proxy data already, and
    // each thread's mbarrier wait made them visible to it; published gemms
    // come after a fence and barrier with no shared write since.
    if (!state.publishedGemms.contains(op) &&
        (!state.onlyTmaWrites(op.getA()) || !state.onlyTmaWrites(op.getB()))) {
      NVVM::FenceProxyOp::create(
          rewriter, loc, NVVM::ProxyKind::async_shared,
          NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
      gpu::BarrierOp::create(rewriter, loc);
    }

    // Warpgroup g multiplies rows 64g.. of A.
    Value tid = gpu::ThreadIdOp::create(rewriter, loc, gpu::Dimension::x);
    Value group = arith::DivUIOp::create(
        rewriter, loc, tid,
        arith::ConstantIndexOp::create(rewriter, loc,
                                       32 * tile::kWarpgroupWarps));
    Value groupRows = arith::IndexCastUIOp::create(
        rewriter, loc, rewriter.getI64Type(),
        arith::MulIOp::create(
            rewriter, loc, group,
            arith::ConstantIndexOp::create(rewriter, loc,
                                           tile::kWgmmaTileM * rowBytes)));
    Value aAddress = arith::AddIOp::create(
        rewriter, loc, sharedAddress(rewriter, loc, adaptor.getA()), groupRows);
    Value bAddress = sharedAddress(rewriter, loc, adaptor.getB());

    // The accumulator registers as wgmma's D struct, d[4t + e].
    Type f32 = rewriter.getF32Type();
    auto dType = LLVM::LLVMStructType::getLiteral(
        ctx, SmallVector<Type>(tilesN * 4, f32));
    SmallVector<int64_t> slots;
    for (int64_t t = 0; t < tilesN; ++t)
      for (int64_t e = 0; e < 4; ++e) {
        int64_t slot =
            ownership.findSlot({8 * (e / 2), tile::kMmaTileN * t + e % 2});
        assert(slot >= 0 && "the mma ownership holds every D register");
        slots.push_back(slot);
      }
    Value storage = adaptor.getC();
    Value d = LLVM::UndefOp::create(rewriter, loc, dType);
    if (!op.getClearAccum())
      for (auto [i, slot] : llvm::enumerate(slots)) {
        Value index = arith::ConstantIndexOp::create(rewriter, loc, slot);
        Value v = memref::LoadOp::create(rewriter, loc, storage, index);
        d = LLVM::InsertValueOp::create(rewriter, loc, d, v, i);
      }

    Type in = aType.getElementType();
    NVVM::WGMMATypes inType =
        in.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
    auto shape = NVVM::MMAShapeAttr::get(ctx, tile::kWgmmaTileM, n,
                                         tile::kWgmmaTileK);
    NVVM::WgmmaFenceAlignedOp::create(rewriter, loc);
    for (int64_t s = 0; s < kSteps; ++s) {
      Value descA = descriptor(
          rewriter, loc,
          arith::AddIOp::create(rewriter, loc, aAddress,
                                cI64(rewriter, loc, s * stepBytes)));
      Value descB = descriptor(
          rewriter, loc,
          arith::AddIOp::create(rewriter, loc, bAddress,
                                cI64(rewriter, loc, s * bStepBytes)));
      // scale-d = 0 rather than zeroed registers: no non-wgmma instruction
      // writes the accumulator inside the pipeline (ptxas C7515).
      NVVM::WGMMAScaleOut scaleD = op.getClearAccum() && s == 0
                                       ? NVVM::WGMMAScaleOut::zero
                                       : NVVM::WGMMAScaleOut::one;
      d = NVVM::WgmmaMmaAsyncOp::create(
          rewriter, loc, dType, d, descA, descB, shape, inType, inType,
          NVVM::WGMMATypes::f32, scaleD, NVVM::WGMMAScaleIn::one,
          NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row,
          bMajorN ? NVVM::MMALayout::row : NVVM::MMALayout::col,
          /*satfinite=*/nullptr);
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(rewriter, loc);
    // In flight (tile-pipeline wgmma-in-flight): this group may run on into
    // the next iteration, whose refill only overwrites the stage of the
    // group waited for here; the loop's end waits for all of them.
    bool inFlight = op->hasAttr(tile::kWgmmaInFlightAttrName);
    NVVM::WgmmaWaitGroupSyncOp::create(rewriter, loc, inFlight ? 1 : 0);
    if (inFlight)
      if (failed(waitAfterLoop(op, rewriter)))
        return failure();
    for (auto [i, slot] : llvm::enumerate(slots)) {
      Value v = LLVM::ExtractValueOp::create(rewriter, loc, d, i);
      Value index = arith::ConstantIndexOp::create(rewriter, loc, slot);
      memref::StoreOp::create(rewriter, loc, v, storage, index);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void tile_to_gpu::populateWgmmaGemmPatterns(RewritePatternSet &patterns,
                                            TypeConverter &converter,
                                            KernelLoweringState &state) {
  patterns.add<GemmWgmmaLowering>(converter, patterns.getContext(), state);
}
