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

/// Elements of `elementType` that fit one 128-bit access.
int64_t getMaxVectorElems(Type elementType);

/// True when every dimension of `shape` is a multiple of the layout's chunk,
/// i.e. every element has exactly one owner and no thread idles.
bool layoutCoversExactly(BlockedLayoutAttr layout, ArrayRef<int64_t> shape);

/// Number of elements each thread holds of a tile of `shape` under `layout`
/// (counting masked-off slots when the layout does not cover exactly).
int64_t getElementsPerThread(BlockedLayoutAttr layout, ArrayRef<int64_t> shape);

} // namespace mlir::tilemega::tile

#endif // TILEMEGA_DIALECT_TILE_IR_TILELAYOUTS_H
