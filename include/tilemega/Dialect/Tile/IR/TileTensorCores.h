//===- TileTensorCores.h - which tile.gemm runs on tensor cores -*- C++ -*-===//
//
// The one rule that decides whether a tile.gemm runs on tensor cores
// (ldmatrix + mma.sync m16n8k16) or on CUDA cores (SIMT). The gemm verifier,
// tile-infer-layouts and the two gemm lowerings all ask it, so an accumulator
// that inference lays out for mma.sync is also lowered to mma.sync, and the
// SIMT lowering takes exactly the gemms the rule turns down.
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_DIALECT_TILE_IR_TILETENSORCORES_H
#define TILEMEGA_DIALECT_TILE_IR_TILETENSORCORES_H

#include "tilemega/Dialect/Tile/IR/TileDialect.h"

#include <string>

namespace mlir::tilemega::tile {

/// mma.sync m16n8k16 tile extents.
inline constexpr int64_t kMmaTileM = 16, kMmaTileN = 8, kMmaTileK = 16;

/// Why tile.gemm cannot multiply `in` inputs into an `acc` accumulator on any
/// path, or the empty string when it can: f16 -> f32 / f16, bf16 -> f32,
/// f32 -> f32, i8 -> i32. bf16 into f16 is rejected rather than run on CUDA
/// cores: mma.sync has no bf16-input, f16-accumulator form, and a 16-bit
/// gemm that silently misses tensor cores is a performance bug.
std::string getUnsupportedAccumulationReason(Type in, Type acc);

/// The tensor-core decision for one tile.gemm.
struct TensorCoreChoice {
  /// The accumulator layout the mma.sync lowering uses; null when the gemm
  /// runs on CUDA cores.
  MmaLayoutAttr layout;
  /// When `layout` is null: why, phrased to follow "runs on CUDA cores, not
  /// tensor cores: ".
  std::string whyNot;
  /// True when the inputs are 16-bit, i.e. tensor cores were expected and a
  /// CUDA-core gemm deserves a warning (f32 and i8 gemms are SIMT by design).
  bool tensorCoreInputs = false;

  bool usesTensorCores() const { return layout != nullptr; }
};

/// Layout inference's question: can `gemm` run on tensor cores, and with
/// which mma layout of its accumulator over the kernel's `numThreads`?
TensorCoreChoice chooseTensorCores(GemmOp gemm, int64_t numThreads);

/// The lowering's question (and inference's, for an accumulator the user laid
/// out): can `gemm` run on tensor cores with `accLayout`, the layout its
/// accumulator already has? Only an mma layout that tiles the accumulator
/// can.
TensorCoreChoice chooseTensorCores(GemmOp gemm, Attribute accLayout);

/// The swizzle that applies to the shared tile `value` (an alloc_shared or a
/// stage of a multi-buffered one), or null when it is not swizzled.
SwizzleAttr getSharedSwizzle(Value value);

//===- Hopper warpgroup MMA (wgmma.mma_async) ----------------------------===//

/// wgmma m64nNk16: a warpgroup of 4 warps computes 64 rows, 16 of K a step.
inline constexpr int64_t kWgmmaTileM = 64, kWgmmaTileK = 16,
                         kWarpgroupWarps = 4, kWgmmaMaxN = 256;
/// The shared operand form wgmma reads here: rows of 128 bytes (64 16-bit
/// elements of K) under the 128-byte swizzle, which is
/// #tile.swizzle<bits = 3, base = 3, shift = 3> on 16-bit elements; its
/// pattern repeats every 1024 bytes, the alignment the tiles then need.
inline constexpr int64_t kWgmmaRowElems = 64, kWgmmaSwizzleAlign = 1024;
/// Marks the gemms (and their scf.for) whose wgmma tile-pipeline lets stay
/// in flight into the next iteration (its wgmma-in-flight option).
inline constexpr llvm::StringLiteral kWgmmaInFlightAttrName =
    "tile.wgmma_in_flight";

/// True for the 8-bit float inputs (e4m3, e5m2) that only wgmma multiplies
/// (k = 32 a step, both operands K-major); tile.gemm takes them into f32.
bool isWgmmaOnlyInput(Type in);

/// Elements of `elemBits` in one 128-byte swizzle span (a wgmma operand
/// row: 64 16-bit, 128 8-bit), and the K of one wgmma step (16 for 16-bit
/// inputs, 32 for 8-bit ones): both are 32 bytes of K a step.
int64_t getWgmmaRowElems(int64_t elemBits);
int64_t getWgmmaTileK(int64_t elemBits);

/// The swizzle wgmma reads a shared operand tile with rows of `rowElems`
/// elements of `elemBits` in: the 128-byte swizzle (#tile.swizzle<3, 3, 3>
/// on 16-bit elements, <3, 4, 3> on 8-bit ones) on rows of one span, in
/// blocks of one span (`columns`) on rows of a larger multiple of it (an
/// operand wider than one swizzle atom, K-major or MN-major); null for
/// other rows.
/// Layout inference gives it, chooseWgmma requires it.
SwizzleAttr getWgmmaOperandSwizzle(MLIRContext *ctx, int64_t rowElems,
                                   int64_t elemBits = 16);

/// The wgmma decision for one tile.gemm whose accumulator has `accLayout`:
/// the mma layout (each warp 16 rows of the accumulator, so that warpgroup
/// g owns rows 64g..64g+63 and its registers are wgmma's D fragment), or
/// null with the reason. A and B in shared memory, each either K-major
/// (A M x K; B N x K with transpose_b), rows of K, or MN-major (A K x M
/// with transpose_a; B K x N), rows of M or N, the rows a multiple of the
/// swizzle span, laid out by getWgmmaOperandSwizzle (one-span column
/// blocks when wider); K a multiple of the
/// wgmma step shared by both; 8 <= N <= 256 with N % 8 == 0; f16/bf16 into
/// f32, or e4m3/e5m2 into f32 with both operands K-major. The caller
/// decides whether the chip has wgmma (sm_90a) and whether the Hopper path
/// is enabled.
TensorCoreChoice chooseWgmma(GemmOp gemm, Attribute accLayout);

} // namespace mlir::tilemega::tile

#endif // TILEMEGA_DIALECT_TILE_IR_TILETENSORCORES_H
