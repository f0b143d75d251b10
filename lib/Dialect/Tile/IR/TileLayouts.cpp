//===- TileLayouts.cpp - choosing fragment layouts --------------------------===//

#include "tilemega/Dialect/Tile/IR/TileLayouts.h"

#include <numeric>

using namespace mlir;
using namespace mlir::tilemega::tile;

int64_t mlir::tilemega::tile::getMaxVectorElems(Type elementType) {
  int64_t bits = elementType.getIntOrFloatBitWidth();
  return std::max<int64_t>(1, 128 / std::max<int64_t>(8, bits));
}

/// Largest power of two that divides `n` and is at most `cap`.
static int64_t pow2Divisor(int64_t n, int64_t cap) {
  int64_t p = 1;
  while (p * 2 <= cap && n % (p * 2) == 0)
    p *= 2;
  return p;
}

/// The blocked layout for a fixed innermost size per thread.
static BlockedLayoutAttr buildBlockedLayout(MLIRContext *ctx,
                                            ArrayRef<int64_t> shape,
                                            int64_t vectorElems,
                                            int64_t numThreads);

BlockedLayoutAttr mlir::tilemega::tile::getDefaultBlockedLayout(
    MLIRContext *ctx, ArrayRef<int64_t> shape, int64_t maxVectorElems,
    int64_t numThreads) {
  // Prefer the widest access; narrow it when that leaves threads without
  // elements (small tiles), since a layout that covers the tile exactly is
  // what fragments need.
  BlockedLayoutAttr layout =
      buildBlockedLayout(ctx, shape, maxVectorElems, numThreads);
  for (int64_t v = maxVectorElems / 2;
       v >= 1 && !layoutCoversExactly(layout, shape); v /= 2)
    layout = buildBlockedLayout(ctx, shape, v, numThreads);
  if (!layoutCoversExactly(layout, shape))
    return buildBlockedLayout(ctx, shape, maxVectorElems, numThreads);
  return layout;
}

static BlockedLayoutAttr buildBlockedLayout(MLIRContext *ctx,
                                            ArrayRef<int64_t> shape,
                                            int64_t maxVectorElems,
                                            int64_t numThreads) {
  size_t rank = shape.size();
  size_t inner = rank - 1;
  SmallVector<int64_t> spt(rank, 1), tpw(rank, 1), wpb(rank, 1), order;
  for (size_t d = 0; d < rank; ++d)
    order.push_back(rank - 1 - d);

  spt[inner] = pow2Divisor(shape[inner], maxVectorElems);
  // Lanes: innermost dimension first so a warp's accesses are contiguous.
  int64_t lanes = 32;
  for (int64_t d = inner; d >= 0 && lanes > 1; --d) {
    int64_t room = shape[d] / spt[d];
    int64_t t = pow2Divisor(room, lanes);
    tpw[d] = t;
    lanes /= t;
  }
  tpw[0] *= lanes; // Tile too small: the chunk overhangs dimension 0.
  // Warps: outermost dimension first so each warp keeps whole rows.
  int64_t warps = std::max<int64_t>(1, numThreads / 32);
  for (size_t d = 0; d < rank && warps > 1; ++d) {
    int64_t room = shape[d] / (spt[d] * tpw[d]);
    // gcd, not a power of two: the warp count need not be one (96 threads).
    int64_t w = std::gcd(warps, std::max<int64_t>(room, 1));
    wpb[d] = w;
    warps /= w;
  }
  wpb[0] *= warps;
  return BlockedLayoutAttr::get(ctx, spt, tpw, wpb, order);
}

bool mlir::tilemega::tile::layoutCoversExactly(BlockedLayoutAttr layout,
                                               ArrayRef<int64_t> shape) {
  for (unsigned d = 0; d < shape.size(); ++d)
    if (shape[d] % layout.getChunkExtent(d) != 0)
      return false;
  return true;
}

int64_t mlir::tilemega::tile::getElementsPerThread(BlockedLayoutAttr layout,
                                                   ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (unsigned d = 0; d < shape.size(); ++d) {
    int64_t chunk = layout.getChunkExtent(d);
    n *= ((shape[d] + chunk - 1) / chunk) * layout.getSizePerThread()[d];
  }
  return n;
}
