//===- TileSharedMemory.h - shared-memory accounting of a kernel -*- C++ -*-===//
//
// Shared tiles of a kernel normally add up. Tiles marked with the same
// `tile.exclusive_group` are live only while their group runs (the cases of
// a persistent kernel's task switch), and different groups never run at
// once, so they share one region: the kernel needs the ungrouped tiles plus
// the largest group.
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_DIALECT_TILE_IR_TILESHAREDMEMORY_H
#define TILEMEGA_DIALECT_TILE_IR_TILESHAREDMEMORY_H

#include "tilemega/Dialect/Tile/IR/TileDialect.h"

#include "mlir/IR/Operation.h"

#include <map>
#include <optional>

namespace mlir::tilemega::tile {

inline std::optional<int64_t> getExclusiveGroupAttr(Operation *op) {
  if (auto group = op->getAttrOfType<IntegerAttr>(
          TileDialect::getExclusiveGroupAttrName()))
    return group.getInt();
  return std::nullopt;
}

/// Adds up bytes per group: `add(op, bytes)` for each tile, then `total()`.
class SharedMemoryTally {
public:
  void add(Operation *op, int64_t bytes) {
    if (std::optional<int64_t> group = getExclusiveGroupAttr(op))
      groups[*group] += bytes;
    else
      ungrouped += bytes;
  }
  int64_t total() const {
    int64_t largest = 0;
    for (const auto &entry : groups)
      largest = std::max(largest, entry.second);
    return ungrouped + largest;
  }

private:
  int64_t ungrouped = 0;
  std::map<int64_t, int64_t> groups;
};

} // namespace mlir::tilemega::tile

#endif // TILEMEGA_DIALECT_TILE_IR_TILESHAREDMEMORY_H
