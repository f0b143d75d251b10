//===- TileLayouts.cpp - choosing fragment layouts --------------------------===//

#include "tilemega/Dialect/Tile/IR/TileLayouts.h"

#include "llvm/ADT/TypeSwitch.h"

#include <limits>
#include <numeric>

using namespace mlir;
using namespace mlir::tilemega::tile;

int64_t mlir::tilemega::tile::getMaxVectorElems(Type elementType) {
  int64_t bits = elementType.getIntOrFloatBitWidth();
  return std::max<int64_t>(1, 128 / std::max<int64_t>(8, bits));
}

std::string mlir::tilemega::tile::formatShape(ArrayRef<int64_t> shape) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(shape, os);
  return s + "]";
}

int64_t mlir::tilemega::tile::pow2Divisor(int64_t n, int64_t cap) {
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

//===----------------------------------------------------------------------===//
// Generic layout queries
//===----------------------------------------------------------------------===//

bool mlir::tilemega::tile::isFragmentLayout(Attribute layout) {
  return isa_and_nonnull<BlockedLayoutAttr, MmaLayoutAttr, SliceLayoutAttr>(
      layout);
}

unsigned mlir::tilemega::tile::getLayoutRank(Attribute layout) {
  return llvm::TypeSwitch<Attribute, unsigned>(layout)
      .Case<BlockedLayoutAttr, MmaLayoutAttr, SliceLayoutAttr>(
          [](auto attr) { return attr.getRank(); })
      .Default([](Attribute) { return 0; });
}

int64_t mlir::tilemega::tile::getLayoutNumThreads(Attribute layout) {
  return llvm::TypeSwitch<Attribute, int64_t>(layout)
      .Case<BlockedLayoutAttr, MmaLayoutAttr, SliceLayoutAttr>(
          [](auto attr) { return attr.getNumThreads(); })
      .Default([](Attribute) { return 0; });
}

int64_t ThreadOwnership::getContiguity() const {
  if (elements.empty())
    return 1;
  unsigned inner = elements.front().size() - 1;
  auto groupOk = [&](int64_t width) {
    if (elements.size() % width != 0)
      return false;
    for (size_t g = 0; g < elements.size(); g += width) {
      if (elements[g][inner] % width != 0)
        return false;
      for (int64_t i = 1; i < width; ++i) {
        for (unsigned d = 0; d < inner; ++d)
          if (elements[g + i][d] != elements[g][d])
            return false;
        if (elements[g + i][inner] != elements[g][inner] + i)
          return false;
      }
    }
    return true;
  };
  int64_t width = 1;
  while (groupOk(width * 2))
    width *= 2;
  return width;
}

int64_t ThreadOwnership::findSlot(ArrayRef<int64_t> offsets) const {
  for (auto [slot, element] : llvm::enumerate(elements))
    if (ArrayRef<int64_t>(element) == offsets)
      return slot;
  return -1;
}

static ThreadOwnership getBlockedOwnership(BlockedLayoutAttr layout,
                                           ArrayRef<int64_t> shape) {
  unsigned rank = shape.size();
  ArrayRef<int64_t> spt = layout.getSizePerThread();
  ArrayRef<int64_t> tpw = layout.getThreadsPerWarp();
  ArrayRef<int64_t> wpb = layout.getWarpsPerBlock();
  ThreadOwnership result;
  result.dims.resize(rank);
  int64_t laneStride = 1, warpStride = 1;
  for (int64_t d : layout.getOrder()) {
    DimMapping &m = result.dims[d];
    m.laneStride = laneStride;
    m.laneCount = tpw[d];
    m.laneScale = spt[d];
    m.warpStride = warpStride;
    m.warpCount = wpb[d];
    m.warpScale = spt[d] * tpw[d];
    laneStride *= tpw[d];
    warpStride *= wpb[d];
  }
  SmallVector<int64_t> reps(rank);
  for (unsigned d = 0; d < rank; ++d) {
    int64_t chunk = layout.getChunkExtent(d);
    reps[d] = (shape[d] + chunk - 1) / chunk;
    result.overhangs.push_back(shape[d] % chunk != 0);
  }
  int64_t numReps = 1, sptProduct = 1;
  for (unsigned d = 0; d < rank; ++d) {
    numReps *= reps[d];
    sptProduct *= spt[d];
  }
  // Row-major over (rep, element): the innermost element is fastest, so
  // consecutive slots are consecutive columns (vector accesses).
  for (int64_t r = 0; r < numReps; ++r) {
    for (int64_t e = 0; e < sptProduct; ++e) {
      SmallVector<int64_t> offsets(rank);
      int64_t rr = r, ee = e;
      for (int d = rank - 1; d >= 0; --d) {
        offsets[d] = (rr % reps[d]) * layout.getChunkExtent(d) + ee % spt[d];
        rr /= reps[d];
        ee /= spt[d];
      }
      result.elements.push_back(offsets);
    }
  }
  return result;
}

static FailureOr<ThreadOwnership> getMmaOwnership(MmaLayoutAttr layout,
                                                  ArrayRef<int64_t> shape,
                                                  std::string *why) {
  int64_t wm = layout.getWarpsPerBlock()[0], wn = layout.getWarpsPerBlock()[1];
  if (shape.size() != 2 || shape[0] % (16 * wm) != 0 ||
      shape[1] % (8 * wn) != 0) {
    if (why)
      *why = "an mma layout with warpsPerBlock = [" + std::to_string(wm) +
             ", " + std::to_string(wn) +
             "] needs a 2-d tile whose rows are a multiple of " +
             std::to_string(16 * wm) + " and columns a multiple of " +
             std::to_string(8 * wn);
    return failure();
  }
  ThreadOwnership result;
  result.dims.resize(2);
  // Lane l of an m16n8 tile: rows l/4 and l/4 + 8, columns 2*(l%4) + {0,1}.
  result.dims[0] = {4, 8, 1, wn, wm, shape[0] / wm};
  result.dims[1] = {1, 4, 2, 1, wn, shape[1] / wn};
  result.overhangs = {false, false};
  int64_t tilesM = shape[0] / wm / 16, tilesN = shape[1] / wn / 8;
  for (int64_t tm = 0; tm < tilesM; ++tm)
    for (int64_t tn = 0; tn < tilesN; ++tn)
      for (int64_t e = 0; e < 4; ++e)
        result.elements.push_back({16 * tm + 8 * (e / 2), 8 * tn + e % 2});
  return result;
}

FailureOr<ThreadOwnership>
mlir::tilemega::tile::getThreadOwnership(Attribute layout,
                                         ArrayRef<int64_t> shape,
                                         std::string *why) {
  if (getLayoutRank(layout) != shape.size()) {
    if (why)
      *why = "the layout has rank " + std::to_string(getLayoutRank(layout)) +
             " but the tile has rank " + std::to_string(shape.size());
    return failure();
  }
  if (auto blocked = dyn_cast<BlockedLayoutAttr>(layout))
    return getBlockedOwnership(blocked, shape);
  if (auto mma = dyn_cast<MmaLayoutAttr>(layout))
    return getMmaOwnership(mma, shape, why);
  auto slice = cast<SliceLayoutAttr>(layout);
  // The parent tile: the sliced dimension gets the extent one pass of the
  // parent layout covers, so every projected element appears.
  Attribute parent = slice.getParent();
  int64_t dim = slice.getDim();
  int64_t extent = 1;
  if (auto blocked = dyn_cast<BlockedLayoutAttr>(parent))
    extent = blocked.getChunkExtent(dim);
  else if (auto mma = dyn_cast<MmaLayoutAttr>(parent))
    extent = (dim == 0 ? 16 : 8) * mma.getWarpsPerBlock()[dim];
  else
    extent = 1;
  SmallVector<int64_t> parentShape(shape);
  parentShape.insert(parentShape.begin() + dim, extent);
  if (isa<SliceLayoutAttr>(parent)) {
    if (why)
      *why = "slices of slices are not supported";
    return failure();
  }
  FailureOr<ThreadOwnership> parentOwnership =
      getThreadOwnership(parent, parentShape, why);
  if (failed(parentOwnership))
    return failure();
  ThreadOwnership result;
  result.dims = parentOwnership->dims;
  result.dims.erase(result.dims.begin() + dim);
  result.overhangs = parentOwnership->overhangs;
  result.overhangs.erase(result.overhangs.begin() + dim);
  for (const SmallVector<int64_t> &element : parentOwnership->elements) {
    SmallVector<int64_t> projected(element);
    projected.erase(projected.begin() + dim);
    if (result.findSlot(projected) < 0)
      result.elements.push_back(projected);
  }
  return result;
}

MmaLayoutAttr mlir::tilemega::tile::getDefaultMmaLayout(MLIRContext *ctx,
                                                        int64_t m, int64_t n,
                                                        int64_t numThreads) {
  int64_t warps = numThreads / 32;
  // Square-ish warp tiles: split the larger dimension first.
  MmaLayoutAttr best;
  int64_t bestScore = std::numeric_limits<int64_t>::max();
  for (int64_t wm = 1; wm <= warps; ++wm) {
    if (warps % wm != 0)
      continue;
    int64_t wn = warps / wm;
    if (m % (16 * wm) != 0 || n % (8 * wn) != 0)
      continue;
    int64_t score = std::abs(m / wm - n / wn);
    if (score < bestScore) {
      bestScore = score;
      best = MmaLayoutAttr::get(ctx, {wm, wn});
    }
  }
  return best;
}
