//===- TileTensorCores.cpp - which tile.gemm runs on tensor cores ---------===//

#include "tilemega/Dialect/Tile/IR/TileTensorCores.h"

#include "tilemega/Dialect/Tile/IR/TileLayouts.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::tilemega::tile;

/// True when mma.sync has a form for `in` inputs and an `acc` accumulator.
static bool isTensorCoreAccumulation(Type in, Type acc) {
  return (in.isF16() && (acc.isF16() || acc.isF32())) ||
         (in.isBF16() && acc.isF32());
}

std::string mlir::tilemega::tile::getUnsupportedAccumulationReason(Type in,
                                                                   Type acc) {
  if (isTensorCoreAccumulation(in, acc) || (in.isF32() && acc.isF32()) ||
      (in.isInteger(8) && acc.isInteger(32)))
    return "";
  if (in.isBF16() && acc.isF16())
    return "mma.sync has no bf16-input, f16-accumulator form: accumulate bf16 "
           "in f32";
  return "supported: f16 -> f32/f16, bf16 -> f32, f32 -> f32, i8 -> i32";
}

SwizzleAttr mlir::tilemega::tile::getSharedSwizzle(Value value) {
  auto alloc = value.getDefiningOp<AllocSharedOp>();
  if (!alloc)
    alloc = getMultiBufferedAlloc(value);
  if (alloc)
    if (SwizzleAttr swizzle = alloc.getSwizzleAttr())
      if (swizzle.getBits() > 0 || swizzle.getColumns() > 0)
        return swizzle;
  return nullptr;
}

/// What the operands must satisfy for ldmatrix + mma.sync, whatever the
/// accumulator layout: the reason they do not, or the empty string.
static std::string whyNotTensorCoreOperands(GemmOp gemm) {
  MemRefType aType = gemm.getA().getType(), bType = gemm.getB().getType();
  Type in = aType.getElementType();
  Type acc = gemm.getC().getType().getElementType();
  std::string why;
  llvm::raw_string_ostream os(why);
  if (!isTensorCoreAccumulation(in, acc)) {
    os << "mma.sync has no " << in << " -> " << acc << " form";
    return why;
  }
  if (!isShared(aType) || !isShared(bType))
    return "A and B must be in shared memory (ldmatrix reads them there)";
  int64_t k = gemm.getTransposeA() ? aType.getDimSize(0) : aType.getDimSize(1);
  if (k % kMmaTileK != 0) {
    os << "K = " << k << " is not a multiple of the mma.sync K of "
       << kMmaTileK << " (by " << k % kMmaTileK << ")";
    return why;
  }
  for (auto [name, value] : {std::pair<StringRef, Value>{"A", gemm.getA()},
                             {"B", gemm.getB()}}) {
    auto type = cast<MemRefType>(value.getType());
    // ldmatrix reads rows of 8 contiguous, 16-byte aligned elements.
    if (type.getDimSize(1) % 8 != 0) {
      os << "the rows of " << name << " (" << type.getDimSize(1)
         << " elements) are not a multiple of the 8 elements ldmatrix reads";
      return why;
    }
    if (SwizzleAttr swizzle = getSharedSwizzle(value))
      if (swizzle.getContiguousElements() % 8 != 0) {
        os << "the swizzle of " << name << " keeps runs of "
           << swizzle.getContiguousElements()
           << " elements contiguous, which splits the 8-element rows "
              "ldmatrix reads";
        return why;
      }
  }
  return "";
}

TensorCoreChoice mlir::tilemega::tile::chooseTensorCores(GemmOp gemm,
                                                         int64_t numThreads) {
  TensorCoreChoice choice;
  Type in = gemm.getA().getType().getElementType();
  choice.tensorCoreInputs = in.isF16() || in.isBF16();
  choice.whyNot = whyNotTensorCoreOperands(gemm);
  if (!choice.whyNot.empty())
    return choice;
  MemRefType cType = gemm.getC().getType();
  int64_t m = cType.getDimSize(0), n = cType.getDimSize(1);
  choice.layout = getDefaultMmaLayout(gemm.getContext(), m, n, numThreads);
  if (choice.layout)
    return choice;
  llvm::raw_string_ostream os(choice.whyNot);
  os << "no split of the " << numThreads / 32 << " warps tiles the " << m
     << "x" << n << " accumulator into " << kMmaTileM << "x" << kMmaTileN
     << " mma.sync tiles per warp (M must be a multiple of " << kMmaTileM
     << " * warps along M, N of " << kMmaTileN << " * warps along N)";
  return choice;
}

TensorCoreChoice mlir::tilemega::tile::chooseTensorCores(GemmOp gemm,
                                                         Attribute accLayout) {
  TensorCoreChoice choice;
  Type in = gemm.getA().getType().getElementType();
  choice.tensorCoreInputs = in.isF16() || in.isBF16();
  choice.whyNot = whyNotTensorCoreOperands(gemm);
  if (!choice.whyNot.empty())
    return choice;
  auto mma = dyn_cast_or_null<MmaLayoutAttr>(accLayout);
  if (!mma) {
    choice.whyNot = "the accumulator is not laid out #tile.mma";
    return choice;
  }
  std::string why;
  if (failed(getThreadOwnership(mma, gemm.getC().getType().getShape(), &why))) {
    choice.whyNot = why;
    return choice;
  }
  choice.layout = mma;
  return choice;
}

SwizzleAttr mlir::tilemega::tile::getWgmmaOperandSwizzle(MLIRContext *ctx,
                                                         int64_t rowElems) {
  if (rowElems < kWgmmaRowElems || rowElems % kWgmmaRowElems != 0)
    return nullptr;
  return SwizzleAttr::get(ctx, 3, 3, 3,
                          rowElems > kWgmmaRowElems ? kWgmmaRowElems : 0);
}

/// True when `swizzle` lays rows of `rowElems` out as wgmma reads them:
/// 128-byte rows under the 128-byte swizzle, in 64-column blocks when wider
/// (a 64-wide row may say columns = 64 or nothing: the same bytes).
static bool isWgmmaOperandLayout(SwizzleAttr swizzle, int64_t rowElems) {
  SwizzleAttr want = getWgmmaOperandSwizzle(swizzle.getContext(), rowElems);
  if (!want || swizzle.getBits() != want.getBits() ||
      swizzle.getBase() != want.getBase() ||
      swizzle.getShift() != want.getShift())
    return false;
  return swizzle.getColumns() == want.getColumns() ||
         (rowElems == kWgmmaRowElems && swizzle.getColumns() == rowElems);
}

TensorCoreChoice mlir::tilemega::tile::chooseWgmma(GemmOp gemm,
                                                   Attribute accLayout) {
  TensorCoreChoice choice = chooseTensorCores(gemm, accLayout);
  if (!choice.usesTensorCores())
    return choice;
  MemRefType aType = gemm.getA().getType(), bType = gemm.getB().getType(),
             cType = gemm.getC().getType();
  int64_t m = cType.getDimSize(0), n = cType.getDimSize(1);
  bool aMajorK = !gemm.getTransposeA(), bMajorK = gemm.getTransposeB();
  std::string why;
  llvm::raw_string_ostream os(why);
  auto decline = [&]() {
    choice.layout = nullptr;
    choice.whyNot = why;
    return choice;
  };
  if (!cType.getElementType().isF32()) {
    os << "wgmma here accumulates in f32, not " << cType.getElementType();
    return decline();
  }
  // Each operand is rows of its contiguous dimension: K for a K-major one
  // (exactly 64 elements, one 128-byte swizzle span), M or N for an
  // MN-major one (a multiple of 64: 64-column blocks of that span).
  for (auto [name, value, majorK] :
       {std::tuple<StringRef, Value, bool>{"A", gemm.getA(), aMajorK},
        {"B", gemm.getB(), bMajorK}}) {
    auto type = cast<MemRefType>(value.getType());
    int64_t row = type.getDimSize(1);
    SwizzleAttr swizzle = getSharedSwizzle(value);
    bool rowOk = majorK ? row == kWgmmaRowElems : row % kWgmmaRowElems == 0;
    if (!rowOk || !swizzle || !isWgmmaOperandLayout(swizzle, row)) {
      StringRef along = majorK ? "K" : name == "A" ? "M" : "N";
      os << name << " must be rows of "
         << (majorK ? "" : "a multiple of ") << kWgmmaRowElems
         << " elements of " << along
         << " under #tile.swizzle<bits = 3, base = 3, shift = 3> (the "
            "128-byte swizzle wgmma reads)";
      if (!majorK)
        os << ", wider rows in blocks of columns = " << kWgmmaRowElems;
      os << "; got " << row << " elements";
      if (swizzle)
        os << " under " << swizzle;
      return decline();
    }
  }
  ArrayRef<int64_t> warps = choice.layout.getWarpsPerBlock();
  if (warps[1] != 1 || warps[0] % kWarpgroupWarps != 0 ||
      m != warps[0] * (kWgmmaTileM / kWarpgroupWarps)) {
    os << "the accumulator layout must give each warp 16 whole rows "
          "(warpsPerBlock = [w, 1], w a multiple of 4, M = 16 * w); got "
          "warpsPerBlock = ["
       << warps[0] << ", " << warps[1] << "] for M = " << m;
    return decline();
  }
  if (n % 8 != 0 || n < 8 || n > kWgmmaMaxN) {
    os << "N = " << n << " is not a wgmma N (a multiple of 8 up to "
       << kWgmmaMaxN << ")";
    return decline();
  }
  int64_t aRows = aMajorK ? aType.getDimSize(0) : aType.getDimSize(1);
  int64_t k = aMajorK ? aType.getDimSize(1) : aType.getDimSize(0);
  int64_t bCols = bMajorK ? bType.getDimSize(0) : bType.getDimSize(1);
  int64_t bK = bMajorK ? bType.getDimSize(1) : bType.getDimSize(0);
  if (aRows != m) {
    os << "A must have the accumulator's M = " << m << " "
       << (aMajorK ? "rows" : "columns (transpose_a: K x M)") << ", got "
       << aRows;
    return decline();
  }
  if (bCols != n) {
    os << "B must have the accumulator's N = " << n << " "
       << (bMajorK ? "rows (transpose_b: N x K)" : "columns (K x N)")
       << ", got " << bCols;
    return decline();
  }
  if (bK != k || k % kWgmmaTileK != 0) {
    os << "A and B must share a K that is a multiple of " << kWgmmaTileK
       << "; got " << k << " and " << bK;
    return decline();
  }
  return choice;
}
