//===- TileSharedMemory.h - shared-memory accounting of a kernel -*- C++ -*-===//
//
// Shared tiles of a kernel need their bytes only while they are live: from
// the first to the last op of the kernel body that uses them (SharedLiveness),
// so tiles whose live ranges do not overlap may share bytes - the pipelined
// stages of a K loop and the tile its epilogue stages C through, say. The
// kernel needs the most bytes live at any one op. Tiles marked with the same
// `tile.exclusive_group` are live only while their group runs (the cases of
// a persistent kernel's task switch), and different groups never run at
// once, so they share one region; such kernels, and persistent ones
// (`tile.persistent`: their warps run different roles at once), share by
// group only. This is
// the one rule the kernel verifier, tile-pipeline and convert-tile-to-gpu's
// shared-memory layout count by.
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_DIALECT_TILE_IR_TILESHAREDMEMORY_H
#define TILEMEGA_DIALECT_TILE_IR_TILESHAREDMEMORY_H

#include "tilemega/Dialect/Tile/IR/TileDialect.h"

#include "mlir/IR/Operation.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <limits>
#include <map>
#include <optional>

namespace mlir::tilemega::tile {

inline std::optional<int64_t> getExclusiveGroupAttr(Operation *op) {
  if (auto group = op->getAttrOfType<IntegerAttr>(
          TileDialect::getExclusiveGroupAttrName()))
    return group.getInt();
  return std::nullopt;
}

/// When a tile's bytes are in use: the positions (in the kernel body) of
/// the first and the last op that uses it.
struct LiveRange {
  int64_t first = 0, last = std::numeric_limits<int64_t>::max();

  bool overlaps(const LiveRange &other) const {
    return first <= other.last && other.first <= last;
  }
};

/// Live ranges of the shared memory of one kernel body (a tile.kernel's, or
/// the gpu.func's it is outlined into).
class SharedLiveness {
public:
  /// `persistent`: the kernel is (`tile.persistent`).
  SharedLiveness(Block &body, bool persistent);

  /// Whether tiles may share bytes by live range: not in a persistent
  /// kernel, nor in one with exclusive groups (laid out by group).
  bool sharesBytes() const { return shares; }

  /// The live range of the shared memory `op` owns: a tile.alloc_shared's
  /// from its first to its last use (through views), any other op's (a
  /// reduction's scratch, a pipelined loop's buffers) while the op runs.
  /// Always live where bytes are not shared and for mbarrier words (reusing
  /// them would need mbarrier.inval first).
  LiveRange of(Operation *op) const;

  /// The body op at `position`.
  Operation *at(int64_t position) const { return ops[position]; }

private:
  int64_t positionOf(Operation *op) const;

  Block &body;
  bool shares = true;
  SmallVector<Operation *> ops;
  DenseMap<Operation *, int64_t> positions;
};

/// Adds up bytes per group and live range: `add(op, bytes, range)` for each
/// tile, then `total()`: the most bytes live at once.
class SharedMemoryTally {
public:
  void add(Operation *op, int64_t bytes, LiveRange range = LiveRange()) {
    if (std::optional<int64_t> group = getExclusiveGroupAttr(op))
      groups[*group] += bytes;
    else
      ungrouped.push_back({range, bytes});
  }
  int64_t total() const {
    int64_t largest = 0;
    for (const auto &entry : groups)
      largest = std::max(largest, entry.second);
    int64_t peak = 0;
    for (const auto &[at, unused] : ungrouped) {
      int64_t live = 0;
      for (const auto &[range, bytes] : ungrouped)
        if (range.first <= at.first && at.first <= range.last)
          live += bytes;
      peak = std::max(peak, live);
    }
    return peak + largest;
  }

private:
  SmallVector<std::pair<LiveRange, int64_t>> ungrouped;
  std::map<int64_t, int64_t> groups;
};

} // namespace mlir::tilemega::tile

#endif // TILEMEGA_DIALECT_TILE_IR_TILESHAREDMEMORY_H
