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
      if (swizzle.getBits() > 0)
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
      if (swizzle.getBase() < 3) {
        os << "the swizzle of " << name << " has base " << swizzle.getBase()
           << " < 3, which splits the 8-element rows ldmatrix reads";
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

TensorCoreChoice mlir::tilemega::tile::chooseWgmma(GemmOp gemm,
                                                   Attribute accLayout) {
  TensorCoreChoice choice = chooseTensorCores(gemm, accLayout);
  if (!choice.usesTensorCores())
    return choice;
  MemRefType aType = gemm.getA().getType(), bType = gemm.getB().getType(),
             cType = gemm.getC().getType();
  int64_t m = cType.getDimSize(0), n = cType.getDimSize(1);
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
  if (gemm.getTransposeA()) {
    os << "wgmma here reads A as M x K (K-major: transpose_a = false)";
    return decline();
  }
  for (auto [name, value] : {std::pair<StringRef, Value>{"A", gemm.getA()},
                             {"B", gemm.getB()}}) {
    auto type = cast<MemRefType>(value.getType());
    SwizzleAttr swizzle = getSharedSwizzle(value);
    if (type.getDimSize(1) != kWgmmaRowElems || !swizzle ||
        swizzle.getBits() != 3 || swizzle.getBase() != 3 ||
        swizzle.getShift() != 3) {
      os << name << " must be rows of " << kWgmmaRowElems << " elements of "
         << (name == "B" && !gemm.getTransposeB() ? "N" : "K")
         << " under #tile.swizzle<bits = 3, base = 3, shift = "
            "3> (the 128-byte swizzle wgmma reads)";
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
  if (aType.getDimSize(0) != m) {
    os << "A must have the accumulator's M rows";
    return decline();
  }
  // B N x K (transpose_b, K-major) or K x N (N-major: a row is 64 elements
  // of N, so N is exactly one 128-byte swizzle atom wide).
  if (gemm.getTransposeB() ? bType.getDimSize(0) != n
                           : bType.getDimSize(0) != aType.getDimSize(1) ||
                                 n != kWgmmaRowElems) {
    if (gemm.getTransposeB())
      os << "B must have the accumulator's N rows";
    else
      os << "B without transpose_b must be K x N with K = A's "
         << aType.getDimSize(1) << " rows and N = " << kWgmmaRowElems
         << " (one 128-byte swizzle atom); got " << bType.getDimSize(0)
         << " x " << bType.getDimSize(1);
    return decline();
  }
  return choice;
}
