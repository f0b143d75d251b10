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

bool mlir::tilemega::tile::isWgmmaOnlyInput(Type in) {
  return isa<Float8E4M3FNType, Float8E5M2Type>(in);
}

int64_t mlir::tilemega::tile::getWgmmaRowElems(int64_t elemBits) {
  return 128 * 8 / elemBits;
}

int64_t mlir::tilemega::tile::getWgmmaTileK(int64_t elemBits) {
  return 32 * 8 / elemBits;
}

std::string mlir::tilemega::tile::getUnsupportedAccumulationReason(Type in,
                                                                   Type acc) {
  if (isTensorCoreAccumulation(in, acc) || (in.isF32() && acc.isF32()) ||
      (in.isInteger(8) && acc.isInteger(32)) ||
      (isWgmmaOnlyInput(in) && acc.isF32()))
    return "";
  if (in.isBF16() && acc.isF16())
    return "mma.sync has no bf16-input, f16-accumulator form: accumulate bf16 "
           "in f32";
  return "supported: f16 -> f32/f16, bf16 -> f32, f32 -> f32, i8 -> i32, "
         "f8E4M3FN/f8E5M2 -> f32 (wgmma)";
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
    if (isWgmmaOnlyInput(in))
      os << " (8-bit float gemms run on wgmma only: sm_90a with wgmma)";
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
  choice.tensorCoreInputs = in.isF16() || in.isBF16() || isWgmmaOnlyInput(in);
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

/// The accumulator half of the tensor-core rule: an mma layout that tiles
/// the accumulator.
static TensorCoreChoice chooseMmaAccumulator(GemmOp gemm, Attribute accLayout,
                                             TensorCoreChoice choice) {
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

TensorCoreChoice mlir::tilemega::tile::chooseTensorCores(GemmOp gemm,
                                                         Attribute accLayout) {
  TensorCoreChoice choice;
  Type in = gemm.getA().getType().getElementType();
  choice.tensorCoreInputs = in.isF16() || in.isBF16() || isWgmmaOnlyInput(in);
  choice.whyNot = whyNotTensorCoreOperands(gemm);
  if (!choice.whyNot.empty())
    return choice;
  return chooseMmaAccumulator(gemm, accLayout, choice);
}

SwizzleAttr mlir::tilemega::tile::getWgmmaOperandSwizzle(MLIRContext *ctx,
                                                         int64_t rowElems,
                                                         int64_t elemBits) {
  if (elemBits != 8 && elemBits != 16)
    return nullptr;
  int64_t span = getWgmmaRowElems(elemBits);
  if (rowElems < span || rowElems % span != 0)
    return nullptr;
  // XOR the 16-byte chunk (2^base elements) with the 128-byte row index.
  int64_t base = elemBits == 8 ? 4 : 3;
  return SwizzleAttr::get(ctx, 3, base, 3, rowElems > span ? span : 0);
}

/// True when `swizzle` lays rows of `rowElems` out as wgmma reads them:
/// 128-byte rows under the 128-byte swizzle, in one-span column blocks when
/// wider (a one-span row may say columns = span or nothing: the same bytes).
static bool isWgmmaOperandLayout(SwizzleAttr swizzle, int64_t rowElems,
                                 int64_t elemBits) {
  SwizzleAttr want =
      getWgmmaOperandSwizzle(swizzle.getContext(), rowElems, elemBits);
  if (!want || swizzle.getBits() != want.getBits() ||
      swizzle.getBase() != want.getBase() ||
      swizzle.getShift() != want.getShift())
    return false;
  int64_t span = getWgmmaRowElems(elemBits);
  return swizzle.getColumns() == want.getColumns() ||
         (rowElems == span && swizzle.getColumns() == rowElems);
}

TensorCoreChoice mlir::tilemega::tile::chooseWgmma(GemmOp gemm,
                                                   Attribute accLayout) {
  MemRefType aType = gemm.getA().getType(), bType = gemm.getB().getType(),
             cType = gemm.getC().getType();
  Type in = aType.getElementType();
  bool eightBit = isWgmmaOnlyInput(in);
  // 8-bit floats have no mma.sync form: only the accumulator half of its
  // rule applies; their operands are checked below.
  TensorCoreChoice choice;
  // A fragment A is wgmma's register form (16-bit inputs): its registers
  // must hold what the accumulator layout gives each thread of A's M x K.
  bool aInRegisters = isFragment(aType);
  if (eightBit) {
    choice.tensorCoreInputs = true;
    if (!isShared(aType) || !isShared(bType)) {
      choice.whyNot = "wgmma reads A and B from shared memory here";
      return choice;
    }
    choice = chooseMmaAccumulator(gemm, accLayout, choice);
  } else if (aInRegisters) {
    choice.tensorCoreInputs = in.isF16() || in.isBF16();
    if (!isTensorCoreAccumulation(in, cType.getElementType()) ||
        !choice.tensorCoreInputs) {
      choice.whyNot = "wgmma takes A from registers for bf16 and f16 inputs only";
      return choice;
    }
    if (!isShared(bType)) {
      choice.whyNot = "wgmma reads B from shared memory";
      return choice;
    }
    if (gemm.getTransposeA()) {
      choice.whyNot = "wgmma reads A from registers as M x K (no transpose_a)";
      return choice;
    }
    choice = chooseMmaAccumulator(gemm, accLayout, choice);
  } else {
    choice = chooseTensorCores(gemm, accLayout);
  }
  if (!choice.usesTensorCores())
    return choice;
  int64_t m = cType.getDimSize(0), n = cType.getDimSize(1);
  bool aMajorK = !gemm.getTransposeA(), bMajorK = gemm.getTransposeB();
  int64_t elemBits = aType.getElementTypeBitWidth();
  int64_t span = getWgmmaRowElems(elemBits);
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
  if (eightBit && (!aMajorK || !bMajorK)) {
    os << "wgmma reads 8-bit operands K-major only: A as M x K and B as N x K "
          "(transpose_b)";
    return decline();
  }
  // Each operand is rows of its contiguous dimension, a multiple of one
  // 128-byte swizzle span (64 16-bit elements), in blocks of one span
  // when wider: K for a K-major one (a K step of 16 moves 32 bytes within
  // a block, every fourth step to the next block), M or N for an MN-major
  // one (the blocks are the descriptor's leading offset apart).
  for (auto [name, value, majorK] :
       {std::tuple<StringRef, Value, bool>{"A", gemm.getA(), aMajorK},
        {"B", gemm.getB(), bMajorK}}) {
    if (name == "A" && aInRegisters)
      continue;
    auto type = cast<MemRefType>(value.getType());
    int64_t row = type.getDimSize(1);
    SwizzleAttr swizzle = getSharedSwizzle(value);
    bool rowOk = row % span == 0;
    if (!rowOk || !swizzle || !isWgmmaOperandLayout(swizzle, row, elemBits)) {
      StringRef along = majorK ? "K" : name == "A" ? "M" : "N";
      os << name << " must be rows of a multiple of " << span << " elements of "
         << along << " under #tile.swizzle<bits = "
         << "3, base = " << (elemBits == 8 ? 4 : 3)
         << ", shift = 3> (the 128-byte swizzle wgmma reads), wider rows in "
            "blocks of columns = "
         << span;
      os << "; got " << row << " elements";
      if (swizzle)
        os << " under " << swizzle;
      return decline();
    }
  }
  if (aInRegisters)
    if (auto alloc = gemm.getA().getDefiningOp<AllocFragmentOp>())
      if (Attribute aLayout = alloc.getLayoutAttr();
          aLayout && aLayout != choice.layout) {
        os << "A in registers must have the accumulator's layout "
           << choice.layout << " (the threads' A registers are their D "
           << "registers of the same rows and columns); got " << aLayout;
        return decline();
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
  if (bK != k || k % getWgmmaTileK(elemBits) != 0) {
    os << "A and B must share a K that is a multiple of "
       << getWgmmaTileK(elemBits)
       << "; got " << k << " and " << bK;
    return decline();
  }
  return choice;
}
