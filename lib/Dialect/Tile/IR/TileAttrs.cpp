//===- TileAttrs.cpp - tile dialect attributes ------------------------------===//

#include "tilemega/Dialect/Tile/IR/TileDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>

using namespace mlir;
using namespace mlir::tilemega::tile;

#include "tilemega/Dialect/Tile/IR/TileEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "tilemega/Dialect/Tile/IR/TileAttrs.cpp.inc"

void TileDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tilemega/Dialect/Tile/IR/TileAttrs.cpp.inc"
      >();
}

static int64_t product(ArrayRef<int64_t> values) {
  int64_t result = 1;
  for (int64_t v : values)
    result *= v;
  return result;
}

LogicalResult
BlockedLayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                          ArrayRef<int64_t> sizePerThread,
                          ArrayRef<int64_t> threadsPerWarp,
                          ArrayRef<int64_t> warpsPerBlock,
                          ArrayRef<int64_t> order) {
  size_t rank = order.size();
  if (rank == 0)
    return emitError() << "blocked layout must have rank >= 1";
  if (sizePerThread.size() != rank || threadsPerWarp.size() != rank ||
      warpsPerBlock.size() != rank)
    return emitError() << "blocked layout parameters must all have "
                       << rank << " entries (the length of 'order')";
  for (size_t d = 0; d < rank; ++d) {
    if (sizePerThread[d] < 1 || threadsPerWarp[d] < 1 || warpsPerBlock[d] < 1)
      return emitError() << "blocked layout sizes must be >= 1";
  }
  // A layout chunk holds sizePerThread elements of each thread: far past
  // any register file, and (found by fuzzing) past what the lowering can
  // enumerate. Bounded per entry first so that the product cannot overflow.
  constexpr int64_t kMaxElementsPerThread = 1 << 16;
  for (size_t d = 0; d < rank; ++d)
    if (sizePerThread[d] > kMaxElementsPerThread ||
        warpsPerBlock[d] > kMaxElementsPerThread)
      return emitError() << "blocked layout entries must be <= "
                         << kMaxElementsPerThread;
  // The lowering unrolls a chunk: 4096 elements took 6 s through the
  // pipeline and 65535 did not finish in a minute (scripts/fuzz), while a
  // thread's registers hold at most 255 words.
  constexpr int64_t kMaxChunk = 1024;
  if (product(sizePerThread) > kMaxChunk)
    return emitError() << "blocked layout gives each thread "
                       << product(sizePerThread)
                       << " elements per chunk; at most " << kMaxChunk;
  if (product(threadsPerWarp) != 32)
    return emitError() << "blocked layout threadsPerWarp must multiply to 32, "
                          "got "
                       << product(threadsPerWarp);
  SmallVector<bool> seen(rank, false);
  for (int64_t d : order) {
    if (d < 0 || d >= static_cast<int64_t>(rank) || seen[d])
      return emitError() << "blocked layout order must be a permutation of [0, "
                         << rank << ")";
    seen[d] = true;
  }
  return success();
}

int64_t BlockedLayoutAttr::getNumThreads() const {
  return 32 * product(getWarpsPerBlock());
}

int64_t BlockedLayoutAttr::getChunkExtent(unsigned d) const {
  return getSizePerThread()[d] * getThreadsPerWarp()[d] * getWarpsPerBlock()[d];
}

LogicalResult SwizzleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  int64_t bits, int64_t base, int64_t shift,
                                  int64_t columns) {
  if (bits < 0 || base < 0 || shift < 0 || columns < 0)
    return emitError() << "swizzle parameters must be >= 0";
  if (bits > 0 && shift < bits)
    return emitError() << "swizzle shift (" << shift
                       << ") must be >= bits (" << bits
                       << ") so that the XOR source and target bits do not "
                          "overlap";
  return success();
}

int64_t SwizzleAttr::getContiguousElements() const {
  int64_t run = getBits() > 0 ? int64_t(1) << getBase()
                              : std::numeric_limits<int64_t>::max();
  return getColumns() > 0 ? std::min(run, getColumns()) : run;
}

LogicalResult MmaLayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                    ArrayRef<int64_t> warpsPerBlock) {
  if (warpsPerBlock.size() != 2)
    return emitError() << "mma layout warpsPerBlock must have 2 entries "
                          "(warps along M and N), got "
                       << warpsPerBlock.size();
  if (warpsPerBlock[0] < 1 || warpsPerBlock[1] < 1)
    return emitError() << "mma layout warpsPerBlock entries must be >= 1";
  return success();
}

LogicalResult SliceLayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                      int64_t dim, Attribute parent) {
  if (!isa<BlockedLayoutAttr, MmaLayoutAttr>(parent))
    return emitError() << "slice layout parent must be a #tile.blocked or "
                          "#tile.mma layout, got "
                       << parent;
  unsigned rank = isa<MmaLayoutAttr>(parent)
                      ? 2
                      : cast<BlockedLayoutAttr>(parent).getRank();
  if (rank < 2)
    return emitError() << "slice layout parent must have rank >= 2";
  if (dim < 0 || dim >= static_cast<int64_t>(rank))
    return emitError() << "slice dim " << dim << " is out of range for a rank-"
                       << rank << " parent";
  return success();
}

unsigned SliceLayoutAttr::getRank() const {
  if (auto mma = dyn_cast<MmaLayoutAttr>(getParent()))
    return 1;
  return cast<BlockedLayoutAttr>(getParent()).getRank() - 1;
}

int64_t SliceLayoutAttr::getNumThreads() const {
  if (auto mma = dyn_cast<MmaLayoutAttr>(getParent()))
    return mma.getNumThreads();
  return cast<BlockedLayoutAttr>(getParent()).getNumThreads();
}
