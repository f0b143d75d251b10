//===- TileLayouts.h - choosing and walking fragment layouts ----*- C++ -*-===//
//
// Layout arithmetic shared by layout inference and the lowering: the default
// blocked layout for a tile, and the enumeration of the elements one thread
// owns under a blocked layout.
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_DIALECT_TILE_IR_TILELAYOUTS_H
#define TILEMEGA_DIALECT_TILE_IR_TILELAYOUTS_H

#include "tilemega/Dialect/Tile/IR/TileDialect.h"

namespace mlir::tilemega::tile {

/// A blocked layout spreading `shape` over `numThreads` threads: each thread
/// holds up to `maxVectorElems` consecutive elements of the innermost
/// dimension, lanes are laid along the innermost dimension first, warps along
/// the outermost. When the tile is too small for the threads, the layout's
/// chunk is larger than the tile (see `layoutCoversExactly`).
BlockedLayoutAttr getDefaultBlockedLayout(MLIRContext *ctx,
                                          ArrayRef<int64_t> shape,
                                          int64_t maxVectorElems,
                                          int64_t numThreads);

/// "[a, b, c]": how diagnostics print shapes.
std::string formatShape(ArrayRef<int64_t> shape);

/// Largest power of two that divides `n` and is at most `cap`.
int64_t pow2Divisor(int64_t n, int64_t cap);

/// Elements of `elementType` that fit one 128-bit access.
int64_t getMaxVectorElems(Type elementType);

/// True when every dimension of `shape` is a multiple of the layout's chunk,
/// i.e. every element has exactly one owner and no thread idles.
bool layoutCoversExactly(BlockedLayoutAttr layout, ArrayRef<int64_t> shape);

/// Number of elements each thread holds of a tile of `shape` under `layout`
/// (counting masked-off slots when the layout does not cover exactly).
int64_t getElementsPerThread(BlockedLayoutAttr layout, ArrayRef<int64_t> shape);

/// True for the attributes a fragment may carry as its layout
/// (#tile.blocked, #tile.mma, #tile.slice).
bool isFragmentLayout(Attribute layout);
/// Rank of the tiles a fragment layout applies to.
unsigned getLayoutRank(Attribute layout);
/// Threads a fragment layout spreads a tile over.
int64_t getLayoutNumThreads(Attribute layout);

/// How a layout spreads one tile dimension over a thread's lane and warp ids:
/// the thread's first index in the dimension is
///   ((lane / laneStride) % laneCount) * laneScale
/// + ((warp / warpStride) % warpCount) * warpScale.
/// Threads that differ only in lanes/warps along other dimensions share it.
struct DimMapping {
  int64_t laneStride = 1, laneCount = 1, laneScale = 0;
  int64_t warpStride = 1, warpCount = 1, warpScale = 0;
};

/// The elements of a tile that one thread holds under a layout: the
/// thread-dependent base of each dimension, plus, for each register slot in
/// order, the static offset from that base.
struct ThreadOwnership {
  SmallVector<DimMapping> dims;
  SmallVector<SmallVector<int64_t>> elements;
  /// Dimensions in which a thread's elements can fall outside the tile.
  SmallVector<bool> overhangs;

  bool coversExactly() const { return llvm::none_of(overhangs, [](bool b) { return b; }); }
  /// Largest power of two w such that every aligned group of w slots holds
  /// consecutive elements of the innermost dimension (a vector access).
  int64_t getContiguity() const;
  /// Slot of the element with these static offsets, or -1.
  int64_t findSlot(ArrayRef<int64_t> offsets) const;
};

/// The ownership of a tile of `shape` under `layout`; failure (with the reason
/// in `why`) when the layout cannot hold such a tile.
FailureOr<ThreadOwnership> getThreadOwnership(Attribute layout,
                                              ArrayRef<int64_t> shape,
                                              std::string *why = nullptr);

/// The mma layout for a gemm accumulator of M x N over `numThreads`, or null
/// when the shape does not tile into 16 x 8 mma.sync tiles per warp.
MmaLayoutAttr getDefaultMmaLayout(MLIRContext *ctx, int64_t m, int64_t n,
                                  int64_t numThreads);

} // namespace mlir::tilemega::tile

#endif // TILEMEGA_DIALECT_TILE_IR_TILELAYOUTS_H
