//===- WgmmaGemmPatterns.cpp - tile.gemm on Hopper's wgmma.mma_async -------===//
//
// With convert-tile-to-gpu's `wgmma` option, a `tile.gemm` that
// tile::chooseWgmma accepts (TileTensorCores.h: A and B in shared memory,
// each K-major or MN-major under the 128-byte swizzle, an f32 accumulator
// whose mma layout gives each warp 16 whole rows) becomes, per warpgroup g
// (threads 128g .. 128g + 127, rows 64g .. 64g + 63):
//
//   fence.proxy.async.shared::cta; bar.sync   the tiles written by threads
//                                              (st.shared, cp.async) become
//                                              visible to the async proxy
//   d = C registers                            (undefined with clear_accum)
//   wgmma.fence
//   for s in 0..K/k-1:                         K in steps of k = 16 (16-bit
//                                              inputs) or 32 (e4m3, e5m2)
//     d = wgmma.mma_async.m64nNkk(desc(A part g, step s),
//                                  desc(B, step s), d,
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
// A K-major operand (A M x K, B N x K with transpose_b) is rows of 64
// elements of K (in 64-column blocks, #tile.swizzle<..., columns = 64>,
// when K is wider): a K step of 16 moves the start 32 bytes along the rows,
// every fourth step to the next block; warpgroup g's part of A starts 64
// rows on. An MN-major operand (A K x M
// with transpose_a: imm-trans-a = 1; B K x N: imm-trans-b = 1) is rows of K
// stored in 64-column blocks (#tile.swizzle<..., columns = 64> when wider
// than 64; the canonical MN-major 128-byte atom is 8 rows of K by 128 bytes
// of M or N): a K step of 16 moves the start by 16 rows, the descriptor's
// leading byte offset is the distance between blocks, and warpgroup g's
// part of A is block g.
//
// A 16-bit fragment A is wgmma's register form: its layout is the
// accumulator's (chooseWgmma), so the thread's A elements of k-step s are
// the slots at rows +0 / +8 and columns 16 s + 2 (l % 4) + {0, 1} (+ 8),
// packed two to a 32-bit register (registerA) before the warpgroup's fence,
// through which they pass (tile.wgmma_fence_registers: LLVM would sink the
// packing after a plain fence, and PTX wants the fence between a register's
// last write and the wgmma reading it), and each step is a
// tile.wgmma_register_a (NVVM has no such op; TileToLLVM writes its PTX).
// No descriptor of A and no proxy fence for it: registers are not shared
// memory.
//
// A shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"):
// bits 0-13 the start address >> 4, 16-29 the leading byte offset >> 4 (not
// used by swizzled K-major layouts: 1; MN-major: the column-block stride),
// 32-45 the stride byte offset >> 4
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

#include <limits>

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile_to_gpu;

namespace {

Value cI64(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, v, 64);
}

/// The 128-byte-swizzled matrix descriptor of the rows at `address` (see
/// the file comment for the fields). Both majors step 8 rows of 128 bytes
/// by 1024 bytes (K-major: 8 rows of M/N; MN-major: 8 rows of K). The
/// leading offset is unused by a K-major swizzled operand (1 by convention);
/// for an MN-major one it is the distance between its 64-column blocks.
Value descriptor(OpBuilder &b, Location loc, Value address,
                 int64_t leadingByteOffset) {
  constexpr int64_t kStrideByteOffset = 1024, kSwizzle128B = 1;
  Value start = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, address, cI64(b, loc, 4)),
      cI64(b, loc, 0x3FFF));
  int64_t fixed = ((leadingByteOffset >> 4) << 16) |
                  ((kStrideByteOffset >> 4) << 32) | (kSwizzle128B << 62);
  return arith::OrIOp::create(b, loc, start, cI64(b, loc, fixed));
}

/// Where one operand's descriptors start and how they move: the byte offset
/// of warpgroup g's part (A only), of each K step of 16 inside a block of
/// `blockSteps` steps, of each such block, and the leading byte offset of
/// the descriptor.
struct OperandWalk {
  int64_t groupBytes = 0, stepBytes = 0, leadingBytes = 16;
  int64_t blockSteps = std::numeric_limits<int64_t>::max(), blockBytes = 0;

  /// The byte offset of K step `s`.
  int64_t stepOffset(int64_t s) const {
    return s / blockSteps * blockBytes + s % blockSteps * stepBytes;
  }
};

/// A K-major operand (rows of 64 elements of K, in 64-column blocks of
/// `rows` rows when K is wider) steps 16 elements, 32 bytes inside the
/// swizzle atom, and every fourth step to the next block; its 64-row
/// warpgroup parts are 64 rows apart in every block. An MN-major one (rows
/// of K, 128 bytes of M or N a block) steps 16 rows, and its 64-column
/// blocks, one per warpgroup for A, are `rows` rows of 128 bytes apart (an
/// operand one block wide keeps the unused leading offset at 1, as K-major
/// ones do).
OperandWalk walkOperand(bool majorK, MemRefType type) {
  int64_t rows = type.getDimSize(0);
  int64_t elemBits = type.getElementTypeBitWidth();
  int64_t span = tile::getWgmmaRowElems(elemBits);
  int64_t rowBytes = span * elemBits / 8;
  int64_t tileK = tile::getWgmmaTileK(elemBits);
  OperandWalk walk;
  if (majorK) {
    walk.groupBytes = tile::kWgmmaTileM * rowBytes;
    walk.stepBytes = tileK * elemBits / 8;
    walk.blockSteps = span / tileK;
    walk.blockBytes = rows * rowBytes;
  } else {
    walk.groupBytes = rows * rowBytes;
    walk.stepBytes = tileK * rowBytes;
    if (type.getDimSize(1) > span)
      walk.leadingBytes = rows * rowBytes;
  }
  return walk;
}

/// The four 32-bit A registers of the k-step at column `k0` of a fragment A
/// (wgmma's register form): the thread's elements at rows +0 / +8 and
/// columns k0 + 2 (l % 4) + {0, 1} (+ 8), two 16-bit elements a register,
/// the first in the low half. They are the slots the accumulator layout
/// gives the thread in A's M x K (ThreadOwnership::findSlot, relative to
/// the thread's first element, as the D registers are found).
SmallVector<Value, 4> registerA(OpBuilder &b, Location loc, Value storage,
                                const ThreadOwnership &ownership, int64_t k0) {
  Type i16 = b.getI16Type(), i32 = b.getI32Type();
  SmallVector<Value, 4> regs;
  for (int64_t r = 0; r < 4; ++r) {
    Value packed;
    for (int64_t half = 0; half < 2; ++half) {
      int64_t e = 2 * r + half;
      int64_t slot = ownership.findSlot({8 * ((e / 2) % 2), k0 + 8 * (e / 4) + e % 2});
      assert(slot >= 0 && "the mma ownership holds every A register");
      Value v = memref::LoadOp::create(
          b, loc, storage, ValueRange{arith::ConstantIndexOp::create(b, loc, slot)});
      Value bits = arith::ExtUIOp::create(
          b, loc, i32, arith::BitcastOp::create(b, loc, i16, v));
      packed = half == 0 ? bits
                         : arith::OrIOp::create(
                               b, loc, packed,
                               arith::ShLIOp::create(
                                   b, loc, bits,
                                   arith::ConstantIntOp::create(b, loc, 16, 32)));
    }
    regs.push_back(packed);
  }
  return regs;
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
    ThreadOwnership aOwnership =
        tile::isFragment(aType) ? getOwnership(choice.layout, aType.getShape())
                                : ThreadOwnership();
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    int64_t n = cType.getDimSize(1);
    int64_t tilesN = n / tile::kMmaTileN;
    bool aMajorK = !op.getTransposeA(), bMajorK = op.getTransposeB();
    int64_t k = aMajorK ? aType.getDimSize(1) : aType.getDimSize(0);
    int64_t tileK = tile::getWgmmaTileK(aType.getElementTypeBitWidth());
    int64_t kSteps = k / tileK;
    // A fragment A is wgmma's register form (chooseWgmma checked its layout).
    bool aInRegisters = tile::isFragment(aType);
    OperandWalk aWalk = aInRegisters ? OperandWalk() : walkOperand(aMajorK, aType);
    OperandWalk bWalk = walkOperand(bMajorK, op.getB().getType());

    // The tiles' writers were generic-proxy stores; wgmma reads through the
    // async proxy. Tiles only TMA writes are async-proxy data already, and
    // each thread's mbarrier wait made them visible to it; published gemms
    // come after a fence and barrier with no shared write since.
    if (!state.publishedGemms.contains(op) &&
        ((!aInRegisters && !state.onlyTmaWrites(op.getA())) ||
         !state.onlyTmaWrites(op.getB()))) {
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
    Value groupPart = arith::IndexCastUIOp::create(
        rewriter, loc, rewriter.getI64Type(),
        arith::MulIOp::create(
            rewriter, loc, group,
            arith::ConstantIndexOp::create(rewriter, loc, aWalk.groupBytes)));
    Value aAddress =
        aInRegisters
            ? Value()
            : arith::AddIOp::create(rewriter, loc,
                                    sharedAddress(rewriter, loc, adaptor.getA()),
                                    groupPart);
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
    NVVM::WGMMATypes inType = in.isBF16()                  ? NVVM::WGMMATypes::bf16
                              : in.isF16()                 ? NVVM::WGMMATypes::f16
                              : isa<Float8E4M3FNType>(in) ? NVVM::WGMMATypes::e4m3
                                                           : NVVM::WGMMATypes::e5m2;
    auto shape = NVVM::MMAShapeAttr::get(ctx, tile::kWgmmaTileM, n, tileK);
    // Register A: every step's A registers are packed before the fence and
    // pass through it (tile.wgmma_fence_registers), as PTX requires of
    // registers a wgmma reads.
    SmallVector<Value> aRegisters;
    if (aInRegisters) {
      for (int64_t s = 0; s < kSteps; ++s)
        llvm::append_range(aRegisters, registerA(rewriter, loc, adaptor.getA(),
                                                 aOwnership, s * tileK));
      auto fence = tile::WgmmaFenceRegistersOp::create(rewriter, loc, aRegisters);
      aRegisters.assign(fence.getResults().begin(), fence.getResults().end());
    } else {
      NVVM::WgmmaFenceAlignedOp::create(rewriter, loc);
    }
    for (int64_t s = 0; s < kSteps; ++s) {
      // scale-d = 0 rather than zeroed registers: no non-wgmma instruction
      // writes the accumulator inside the pipeline (ptxas C7515).
      bool accumulate = !(op.getClearAccum() && s == 0);
      if (aInRegisters) {
        Value descB = descriptor(
            rewriter, loc,
            arith::AddIOp::create(rewriter, loc, bAddress,
                                  cI64(rewriter, loc, bWalk.stepOffset(s))),
            bWalk.leadingBytes);
        ArrayRef<Value> a = ArrayRef<Value>(aRegisters).slice(4 * s, 4);
        d = tile::WgmmaRegisterAOp::create(rewriter, loc, dType, d, a[0], a[1],
                                           a[2], a[3], descB, TypeAttr::get(in),
                                           rewriter.getBoolAttr(accumulate),
                                           rewriter.getBoolAttr(!bMajorK));
        continue;
      }
      Value descA = descriptor(
          rewriter, loc,
          arith::AddIOp::create(rewriter, loc, aAddress,
                                cI64(rewriter, loc, aWalk.stepOffset(s))),
          aWalk.leadingBytes);
      Value descB = descriptor(
          rewriter, loc,
          arith::AddIOp::create(rewriter, loc, bAddress,
                                cI64(rewriter, loc, bWalk.stepOffset(s))),
          bWalk.leadingBytes);
      NVVM::WGMMAScaleOut scaleD =
          accumulate ? NVVM::WGMMAScaleOut::one : NVVM::WGMMAScaleOut::zero;
      d = NVVM::WgmmaMmaAsyncOp::create(
          rewriter, loc, dType, d, descA, descB, shape, inType, inType,
          NVVM::WGMMATypes::f32, scaleD, NVVM::WGMMAScaleIn::one,
          NVVM::WGMMAScaleIn::one,
          aMajorK ? NVVM::MMALayout::row : NVVM::MMALayout::col,
          bMajorK ? NVVM::MMALayout::col : NVVM::MMALayout::row,
          /*satfinite=*/nullptr);
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(rewriter, loc);
    // In flight (tile-pipeline wgmma-in-flight): this group may run on into
    // the next iteration, whose refill only overwrites the stage of the
    // group waited for here; the loop's end waits for all of them.
    // Asynchronous (`async`): a tile.wgmma_wait waits for it, and hands the
    // registers stored below back through the wait (WgmmaWaitLowering).
    bool inFlight = op->hasAttr(tile::kWgmmaInFlightAttrName);
    if (!op.getAsync())
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

/// tile.wgmma_wait: `wgmma.wait_group pending` with the f32 registers of
/// the listed accumulators passed through it (tile.wgmma_wait_registers),
/// so that nothing reading them is computed before the wait. Without the
/// wgmma lowering every gemm was synchronous: nothing to wait for.
struct WgmmaWaitLowering : TileLoweringPattern<tile::WgmmaWaitOp> {
  using TileLoweringPattern::TileLoweringPattern;

  LogicalResult
  matchAndRewrite(tile::WgmmaWaitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!state.wgmma) {
      rewriter.eraseOp(op);
      return success();
    }
    Location loc = op.getLoc();
    // (fragment, slot) of each register, in order.
    SmallVector<std::pair<Value, int64_t>> places;
    SmallVector<Value> registers;
    for (auto [original, storage] :
         llvm::zip(op.getFragments(), adaptor.getFragments())) {
      // Accumulators that are not f32 belong to synchronous mma.sync gemms
      // (wgmma accumulates in f32 only): nothing of theirs is in flight.
      if (!cast<MemRefType>(original.getType()).getElementType().isF32())
        continue;
      Attribute layout = getFragmentLayout(original);
      if (!layout)
        return op.emitOpError("waits for a fragment without a layout: run "
                              "tile-infer-layouts first");
      ThreadOwnership ownership =
          getOwnership(layout, cast<MemRefType>(original.getType()).getShape());
      for (int64_t slot = 0, e = ownership.elements.size(); slot < e; ++slot) {
        Value index = arith::ConstantIndexOp::create(rewriter, loc, slot);
        registers.push_back(memref::LoadOp::create(rewriter, loc, storage, index));
        places.push_back({storage, slot});
      }
    }
    auto wait = tile::WgmmaWaitRegistersOp::create(rewriter, loc, registers,
                                                   op.getPendingAttr());
    for (auto [place, value] : llvm::zip(places, wait.getResults())) {
      Value index = arith::ConstantIndexOp::create(rewriter, loc, place.second);
      memref::StoreOp::create(rewriter, loc, value, place.first, index);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void tile_to_gpu::populateWgmmaGemmPatterns(RewritePatternSet &patterns,
                                            TypeConverter &converter,
                                            KernelLoweringState &state) {
  patterns.add<GemmWgmmaLowering, WgmmaWaitLowering>(converter, patterns.getContext(),
                                                    state);
}
