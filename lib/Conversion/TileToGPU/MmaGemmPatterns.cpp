//===- MmaGemmPatterns.cpp - tile.gemm on tensor cores (mma.sync) ---------===//
//
// `tile.gemm` with f16/bf16 A and B in shared memory and an accumulator laid
// out `#tile.mma<warpsPerBlock = [wm, wn]>` becomes, per warp,
//
//   acc[tm][tn] = C registers                   (zeros with clear_accum)
//   for each k-step of 16:
//     a[tm] = ldmatrix.x4 (A 16x16 tile tm)     (.trans for transpose_a)
//     b[tn] = ldmatrix.x4 / .x2 (B 16x8 tiles)  (.trans unless transpose_b)
//     acc[tm][tn] = mma.sync.m16n8k16(a[tm], b[tn], acc[tm][tn])
//   C registers = acc
//
// The warp owns the (M / wm) x (N / wn) sub-tile at
// (warp_m * M / wm, warp_n * N / wn), warp_m = (warp / wn) % wm and
// warp_n = warp % wn: exactly the warp terms of the mma layout's DimMapping,
// which this pattern reads instead of repeating. Lane l's accumulator
// registers of the 16x8 tile (tm, tn) are PTX's m16n8 C fragment, rows l / 4
// (+ 8) and columns 2 * (l % 4) (+ 1): the ThreadOwnership of the mma layout,
// whose slot of each register this pattern looks up, so that a tile.copy of
// the fragment afterwards reads the right values.
//
// ldmatrix (x4) reads four 8x8 matrices of 16-bit elements; lanes 8i..8i+7
// give the addresses of matrix i's eight 16-byte rows and register i of every
// lane receives matrix i, lane l holding row l / 4, elements 2 * (l % 4) + {0,
// 1} (transposed with .trans). The mma.sync operand registers are
//   A (16x16, row): a0 = (rows 0-7, k 0-7), a1 = (rows 8-15, k 0-7),
//                   a2 = (rows 0-7, k 8-15), a3 = (rows 8-15, k 8-15)
//   B (16x8, col):  b0 = (k 0-7), b1 = (k 8-15), lane l holding column l / 4,
//                   k = 2 * (l % 4) + {0, 1}
// so lane l addresses, with i = l / 8 the matrix and r = l % 8 its row:
//   A MxK, ldmatrix      : row m = 16 tm + 8 (i % 2) + r (= 16 tm + l % 16),
//                          col k = k0 + 8 (i / 2)         (= k0 + 8 (l / 16))
//   A KxM, ldmatrix.trans: row k = k0 + 8 (i / 2) + r, col m = 16 tm + 8 (i%2)
//   B NxK, ldmatrix      : row n = 8 tn + 8 (i / 2) + r, col k = k0 + 8 (i % 2)
//   B KxN, ldmatrix.trans: row k = k0 + 8 (i % 2) + r, col n = 8 tn + 8 (i / 2)
// where for B, x4 covers the tiles tn and tn + 1 (matrices 2 and 3 are
// tn + 1's b0, b1) and x2 the tile tn alone (lanes 16-31 repeat 0-15).
//
// Every shared-memory index goes through swizzleIndices, so the tile's
// #tile.swizzle applies; a swizzle keeps the 16-byte rows ldmatrix reads
// contiguous when its base is at least 3 (8 elements), which the pattern
// requires. Which gemms qualify is decided by tile::chooseTensorCores
// (TileTensorCores.h), the rule layout inference and the gemm verifier also
// follow; everything it turns down (f32 or i8 inputs, fragment A/B, blocked
// accumulators, ...) takes the SIMT lowering in ComputePatterns.cpp.
//
// nvgpu.mma.sync lowers only f16 multiplicands to NVVM (its PTX type
// deduction rejects bf16), so bf16 tiles use nvvm.mma.sync directly, with the
// operand registers as the packed i32 pairs PTX expects.
//
//===----------------------------------------------------------------------===//

#include "TileToGPUInternal.h"

#include "tilemega/Dialect/Tile/IR/TileLayouts.h"
#include "tilemega/Dialect/Tile/IR/TileTensorCores.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile_to_gpu;

/// mma.sync m16n8k16 tile extents.
static constexpr int64_t kTileM = tile::kMmaTileM, kTileN = tile::kMmaTileN,
                         kTileK = tile::kMmaTileK;
/// Up to this many k-steps the K loop is unrolled; beyond, an scf.for.
static constexpr int64_t kMaxUnrolledKSteps = 4;

static Value cIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

static Value addIndex(OpBuilder &b, Location loc, Value v, int64_t c) {
  if (c == 0)
    return v;
  return arith::AddIOp::create(b, loc, v, cIndex(b, loc, c));
}

/// ((id / stride) % count) * scale, the warp term of a DimMapping.
static Value warpTerm(OpBuilder &b, Location loc, Value warp,
                      const tile::DimMapping &m) {
  if (m.warpCount == 1 || m.warpScale == 0)
    return cIndex(b, loc, 0);
  Value v = warp;
  if (m.warpStride != 1)
    v = arith::DivUIOp::create(b, loc, v, cIndex(b, loc, m.warpStride));
  v = arith::RemUIOp::create(b, loc, v, cIndex(b, loc, m.warpCount));
  return arith::MulIOp::create(b, loc, v, cIndex(b, loc, m.warpScale));
}

namespace {

/// One mma.sync m16n8k16: `a` vector<4x2xT>, `b` vector<2x2xT>, `c`
/// vector<2x2xAcc>.
Value emitMma(OpBuilder &b, Location loc, Value a, Value bFrag, Value c) {
  Type in = cast<VectorType>(a.getType()).getElementType();
  if (in.isF16())
    return nvgpu::MmaSyncOp::create(b, loc, a, bFrag, c,
                                    ArrayRef<int64_t>{kTileM, kTileN, kTileK})
        .getResult();
  // bf16: nvvm.mma.sync on the i32 registers holding two elements each.
  MLIRContext *ctx = b.getContext();
  Type i32 = b.getI32Type();
  auto packed = VectorType::get({1}, i32);
  auto regs = [&](Value frag, int64_t n) {
    SmallVector<Value> result;
    for (int64_t i = 0; i < n; ++i) {
      Value pair = vector::ExtractOp::create(b, loc, frag, i);
      Value cast = vector::BitCastOp::create(b, loc, packed, pair);
      result.push_back(vector::ExtractOp::create(b, loc, cast, 0));
    }
    return result;
  };
  SmallVector<Value> cRegs;
  for (int64_t i = 0; i < 4; ++i)
    cRegs.push_back(vector::ExtractOp::create(
        b, loc, c, ArrayRef<int64_t>{i / 2, i % 2}));
  Type f32 = b.getF32Type();
  auto resultType = LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
  Value d = NVVM::MmaOp::create(
      b, loc, resultType, regs(a, 4), regs(bFrag, 2), cRegs,
      ArrayRef<int64_t>{kTileM, kTileN, kTileK}, std::nullopt, std::nullopt,
      std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16, NVVM::MMATypes::bf16},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  SmallVector<Value> dRegs;
  for (int64_t i = 0; i < 4; ++i)
    dRegs.push_back(LLVM::ExtractValueOp::create(b, loc, d, i));
  return vector::FromElementsOp::create(b, loc, c.getType(), dRegs);
}

/// Benefit 2: ahead of the SIMT lowering, which takes every gemm this one
/// declines.
struct GemmMmaLowering : OpConversionPattern<tile::GemmOp> {
  GemmMmaLowering(TypeConverter &converter, MLIRContext *ctx,
                  KernelLoweringState &)
      : OpConversionPattern(converter, ctx, /*benefit=*/2) {}

  LogicalResult
  matchAndRewrite(tile::GemmOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    tile::TensorCoreChoice choice =
        tile::chooseTensorCores(op, getFragmentLayout(op.getC()));
    if (!choice.usesTensorCores())
      return rewriter.notifyMatchFailure(op, choice.whyNot);
    tile::MmaLayoutAttr layout = choice.layout;
    MemRefType aType = op.getA().getType(), bType = op.getB().getType(),
               cType = op.getC().getType();
    ThreadOwnership ownership = getOwnership(layout, cType.getShape());

    Location loc = op.getLoc();
    bool transA = op.getTransposeA(), transB = op.getTransposeB();
    Type inType = aType.getElementType(), accType = cType.getElementType();
    int64_t m = cType.getDimSize(0), n = cType.getDimSize(1);
    int64_t k = transA ? aType.getDimSize(0) : aType.getDimSize(1);
    int64_t wm = layout.getWarpsPerBlock()[0];
    int64_t wn = layout.getWarpsPerBlock()[1];
    int64_t tilesM = m / wm / kTileM, tilesN = n / wn / kTileN;
    int64_t kSteps = k / kTileK;

    // Thread coordinates: the warp's sub-tile origin (as the layout maps
    // warps) and the lane parts of the ldmatrix row addresses.
    Value tid = gpu::ThreadIdOp::create(rewriter, loc, gpu::Dimension::x);
    Value c32 = cIndex(rewriter, loc, 32);
    Value lane = arith::RemUIOp::create(rewriter, loc, tid, c32);
    Value warp = arith::DivUIOp::create(rewriter, loc, tid, c32);
    Value warpRow = warpTerm(rewriter, loc, warp, ownership.dims[0]);
    Value warpCol = warpTerm(rewriter, loc, warp, ownership.dims[1]);
    Value c8 = cIndex(rewriter, loc, 8);
    Value laneMod8 = arith::RemUIOp::create(rewriter, loc, lane, c8);
    Value laneMod16 =
        arith::RemUIOp::create(rewriter, loc, lane, cIndex(rewriter, loc, 16));
    // 8 * (l / 16) and 8 * ((l / 8) % 2).
    Value hi8 = arith::MulIOp::create(
        rewriter, loc,
        arith::DivUIOp::create(rewriter, loc, lane, cIndex(rewriter, loc, 16)),
        c8);
    Value mid8 = arith::MulIOp::create(
        rewriter, loc,
        arith::RemUIOp::create(
            rewriter, loc, arith::DivUIOp::create(rewriter, loc, lane, c8),
            cIndex(rewriter, loc, 2)),
        c8);
    // Row offsets within a 16-row block that lane l addresses: l % 16 for
    // the plain A load, l % 8 + 8 (l / 16) for the transposed A and the
    // plain B x4 loads.
    Value rowHi = arith::AddIOp::create(rewriter, loc, laneMod8, hi8);

    auto ldmatrix = [&](OpBuilder &b, Location l, Value original,
                        Value lowered, Value row, Value col, bool transpose,
                        int64_t numTiles) -> Value {
      SmallVector<Value> idx = swizzleIndices(b, l, original, {row, col});
      auto type = VectorType::get({numTiles, 2}, inType);
      return nvgpu::LdMatrixOp::create(b, l, type, lowered, idx, transpose,
                                       numTiles)
          .getResult();
    };

    // One k-step: load the warp's A and B fragments at k0, then the mmas.
    auto kStep = [&](OpBuilder &b, Location l, Value k0,
                     ArrayRef<Value> accs) -> SmallVector<Value> {
      SmallVector<Value> aFrags;
      for (int64_t tm = 0; tm < tilesM; ++tm) {
        Value mBase = addIndex(b, l, warpRow, tm * kTileM);
        Value row, col;
        if (!transA) { // A is M x K.
          row = arith::AddIOp::create(b, l, mBase, laneMod16);
          col = arith::AddIOp::create(b, l, k0, hi8);
        } else { // A is K x M: rows are k.
          row = arith::AddIOp::create(b, l, k0, rowHi);
          col = arith::AddIOp::create(b, l, mBase, mid8);
        }
        aFrags.push_back(ldmatrix(b, l, op.getA(), adaptor.getA(), row, col,
                                  transA, 4));
      }
      auto bType2 = VectorType::get({2, 2}, inType);
      Value bZero = arith::ConstantOp::create(
          b, l, cast<TypedAttr>(b.getZeroAttr(bType2)));
      SmallVector<Value> bFrags;
      for (int64_t tn = 0; tn < tilesN;) {
        int64_t numTiles = tn + 1 < tilesN ? 4 : 2;
        Value nBase = addIndex(b, l, warpCol, tn * kTileN);
        Value row, col;
        if (transB) { // B is N x K: rows are n, plain ldmatrix.
          row = arith::AddIOp::create(b, l, nBase,
                                      numTiles == 4 ? rowHi : laneMod8);
          col = arith::AddIOp::create(b, l, k0, mid8);
        } else { // B is K x N: rows are k, ldmatrix.trans.
          row = arith::AddIOp::create(b, l, k0, laneMod16);
          col = numTiles == 4 ? arith::AddIOp::create(b, l, nBase, hi8)
                                    .getResult()
                              : nBase;
        }
        Value frag = ldmatrix(b, l, op.getB(), adaptor.getB(), row, col,
                              !transB, numTiles);
        if (numTiles == 2) {
          bFrags.push_back(frag);
        } else {
          for (int64_t half = 0; half < 2; ++half) {
            Value pair = bZero;
            for (int64_t r = 0; r < 2; ++r) {
              Value reg = vector::ExtractOp::create(b, l, frag, 2 * half + r);
              pair = vector::InsertOp::create(b, l, reg, pair, r);
            }
            bFrags.push_back(pair);
          }
        }
        tn += numTiles / 2;
      }
      SmallVector<Value> next(accs);
      for (int64_t tm = 0; tm < tilesM; ++tm)
        for (int64_t tn = 0; tn < tilesN; ++tn) {
          // Serpentine over n so that consecutive mmas share an operand.
          int64_t tnn = tm % 2 ? tilesN - 1 - tn : tn;
          Value &acc = next[tm * tilesN + tnn];
          acc = emitMma(b, l, aFrags[tm], bFrags[tnn], acc);
        }
      return next;
    };

    // Accumulators: the C registers once, in registers across the K loop.
    Value storage = adaptor.getC();
    auto accVecType = VectorType::get({2, 2}, accType);
    SmallVector<SmallVector<int64_t, 4>> slots;
    SmallVector<Value> accs;
    Value zero;
    if (op.getClearAccum())
      zero = arith::ConstantOp::create(
          rewriter, loc, cast<TypedAttr>(rewriter.getZeroAttr(accVecType)));
    for (int64_t tm = 0; tm < tilesM; ++tm)
      for (int64_t tn = 0; tn < tilesN; ++tn) {
        SmallVector<int64_t, 4> tileSlots;
        for (int64_t e = 0; e < 4; ++e) {
          int64_t slot = ownership.findSlot(
              {kTileM * tm + 8 * (e / 2), kTileN * tn + e % 2});
          assert(slot >= 0 && "mma ownership holds every accumulator");
          tileSlots.push_back(slot);
        }
        if (zero) {
          accs.push_back(zero);
        } else {
          SmallVector<Value> elems;
          for (int64_t slot : tileSlots)
            elems.push_back(memref::LoadOp::create(
                rewriter, loc, storage, cIndex(rewriter, loc, slot)));
          accs.push_back(
              vector::FromElementsOp::create(rewriter, loc, accVecType, elems));
        }
        slots.push_back(tileSlots);
      }

    SmallVector<Value> results;
    if (kSteps <= kMaxUnrolledKSteps) {
      results = accs;
      for (int64_t s = 0; s < kSteps; ++s)
        results = kStep(rewriter, loc, cIndex(rewriter, loc, s * kTileK),
                        results);
    } else {
      auto loop = scf::ForOp::create(
          rewriter, loc, cIndex(rewriter, loc, 0), cIndex(rewriter, loc, k),
          cIndex(rewriter, loc, kTileK), accs,
          [&](OpBuilder &b, Location l, Value k0, ValueRange iterAccs) {
            SmallVector<Value> next =
                kStep(b, l, k0, SmallVector<Value>(iterAccs));
            scf::YieldOp::create(b, l, next);
          });
      results.assign(loop.getResults().begin(), loop.getResults().end());
    }

    for (auto [acc, tileSlots] : llvm::zip_equal(results, slots))
      for (int64_t e = 0; e < 4; ++e) {
        Value v = vector::ExtractOp::create(rewriter, loc, acc,
                                            ArrayRef<int64_t>{e / 2, e % 2});
        memref::StoreOp::create(rewriter, loc, v, storage,
                                cIndex(rewriter, loc, tileSlots[e]));
      }
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void tile_to_gpu::populateMmaGemmPatterns(RewritePatternSet &patterns,
                                          TypeConverter &converter,
                                          KernelLoweringState &state) {
  patterns.add<GemmMmaLowering>(converter, patterns.getContext(), state);
}
