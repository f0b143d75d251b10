//===- TileBulkCopies.h - when a tile copy can be one TMA box ---*- C++ -*-===//
//
// The tensor memory accelerator (TMA, sm_90) copies a box of a global tensor
// into shared memory with one instruction (cp.async.bulk.tensor), described
// by a CUtensorMap the host encodes. This is the one rule that decides
// whether a global-to-shared tile copy can be such a box: tile-pipeline asks
// it before choosing the mbarrier pipeline, tile.bulk_copy's verifier
// enforces it, convert-tile-to-gpu lays out and lowers by it, and the
// artifact's tensor-map metadata carries its answer to the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_DIALECT_TILE_IR_TILEBULKCOPIES_H
#define TILEMEGA_DIALECT_TILE_IR_TILEBULKCOPIES_H

#include "tilemega/Dialect/Tile/IR/TileDialect.h"

#include <string>

namespace mlir::tilemega::tile {

/// TMA's hardware limits (CUDA driver API, cuTensorMapEncodeTiled).
inline constexpr int64_t kTmaMaxRank = 5, kTmaMaxBoxDim = 256,
                         kTmaStrideAlign = 16, kTmaSharedAlign = 128;

/// The answer for one copy: the TMA swizzle span (0: none; 32, 64 or 128
/// bytes), or the reason why the copy cannot be a TMA box.
struct BulkCopyChoice {
  int64_t swizzleBytes = 0;
  /// The TMA box: the tile's shape, or one column block of it when the
  /// tile's swizzle splits its rows into blocks (#tile.swizzle<...,
  /// columns = c>): then `boxes` boxes, block j at column offset j c of the
  /// source and at element j * (box elements) of the tile.
  SmallVector<int64_t> box;
  int64_t boxes = 1;
  /// Multicast over a cluster: each column block's box split into
  /// `rowSplit` boxes of box[0] rows (box[0] is already the split one), so
  /// that the tile's pieces() boxes share out evenly over the cluster's
  /// blocks. Piece p is column block p / rowSplit, rows (p % rowSplit)
  /// box[0] on, at element p * (piece elements) of the tile.
  int64_t rowSplit = 1;
  std::string whyNot;

  int64_t pieces() const { return boxes * rowSplit; }

  bool ok() const { return whyNot.empty(); }
  /// The shared alignment the destination needs: one swizzle atom (8 rows of
  /// the span) when swizzled, else TMA's 128 bytes.
  int64_t sharedAlignment() const {
    return swizzleBytes ? 8 * swizzleBytes : kTmaSharedAlign;
  }
};

/// Can the box `sizes` of the global tensor `global` be copied into the whole
/// shared tile `tile` (a tile or one stage of a multi-buffered one) laid out
/// with `swizzle` by one TMA box? Yes when: same element type of 1, 2, 4 or
/// 8 bytes; the tensor is statically shaped and row-major with rank 1 to 5,
/// its rows a multiple of 16 bytes; the box is the tile's shape, each extent
/// at most 256, its innermost extent a multiple of 16 bytes; and the tile is
/// unswizzled or swizzled exactly as a TMA swizzle mode places rows of its
/// span (#tile.swizzle<bits = b, base = log2(16 / element bytes), shift = 3>
/// for spans of 16 << b bytes) with rows of exactly the span and a whole
/// number of 8-row atoms. A tile whose swizzle splits its rows into column
/// blocks is one box per block, each block's rows the span.
///
/// With `multicast` N > 1 (a copy each block of a cluster of N issues 1/N
/// of, tile.bulk_copy's `multicast`): the tile's boxes are N, or a multiple
/// of N, column blocks; else each block's rows split N ways, into pieces
/// each a whole number of swizzle atoms (or of TMA's 128 bytes).
BulkCopyChoice chooseBulkCopy(MemRefType global, MemRefType tile,
                              ArrayRef<int64_t> sizes, SwizzleAttr swizzle,
                              int64_t multicast = 1);

/// Whether `value` (an index in a tile.kernel whose blocks form clusters of
/// `cluster` along the first grid dimension) is the same in every block of
/// a cluster, so that a copy of a box at such offsets may be multicast:
/// constants, the function's arguments, the block indices of the other
/// dimensions, the first one's quotient by a multiple of `cluster` (the
/// cluster's index), induction variables of loops with such bounds, and
/// side-effect-free ops of such operands. Anything else is not.
bool isClusterUniform(Value value, int64_t cluster);

/// Whether `op` runs the same number of times, in the same order, in every
/// block of a cluster of `cluster`: every loop around it up to its
/// tile.kernel has cluster-uniform bounds and every scf.if a cluster-uniform
/// condition (a multicast copy one block issues and another does not would
/// leave the other's barrier waiting for ever).
bool isRunUniformly(Operation *op, int64_t cluster);

/// The function argument whose tensor map a bulk copy from `src` reads
/// through: `src` itself, or the argument `src` is a row-major reshape of
/// (a chain of memref.collapse_shape / memref.expand_shape, as `.view` in
/// T.* builds; the map then describes the view's shape over the argument's
/// bytes). Null for anything else.
BlockArgument getBulkCopyArgument(Value src);

/// A copy as 1-D bulk copies (`cp.async.bulk`, no tensor map: what a
/// persistent mega-kernel, whose runtime binds no tensor maps, can use):
/// one copy of `rowBytes` per row of the box (every index but the
/// innermost), each from the row's global address into the tile's row.
struct LinearBulkCopyChoice {
  int64_t rowBytes = 0;
  int64_t rows = 0;
  std::string whyNot;

  bool ok() const { return whyNot.empty(); }
};

/// Can the box `sizes` of the global tensor `global`, at `offsets` (of which
/// only their largest known power-of-two divisors count), be copied into
/// the whole shared tile `tile` (laid out with `swizzle`) by 1-D bulk
/// copies, one a row? Yes when: same element type of whole bytes; the
/// tensor statically shaped and strided with a unit innermost stride and
/// its other strides multiples of 16 bytes; the tile unswizzled and
/// contiguous, of the box's shape; a row of the box a multiple of 16
/// bytes; and the box's rows never cross the end of a tensor row (the
/// innermost extent divides the tensor's, and its offset is a multiple of
/// it): a row is then wholly inside the tensor or wholly outside, where
/// the lowering fills it with zeros instead (as cp.async and TMA do).
LinearBulkCopyChoice chooseLinearBulkCopy(MemRefType global, MemRefType tile,
                                          ArrayRef<int64_t> sizes,
                                          SwizzleAttr swizzle,
                                          ArrayRef<OpFoldResult> offsets);

/// The largest power of two known to divide the index `value` (capped at
/// 1 << 20; 0 counts as the cap): constants, loop counters (scf.for,
/// tile.pipelined: their lower bound and step), and products, sums and
/// constant left shifts of such. 1 for anything else.
int64_t knownDivisor(Value value);
int64_t knownDivisor(OpFoldResult value);

} // namespace mlir::tilemega::tile

#endif // TILEMEGA_DIALECT_TILE_IR_TILEBULKCOPIES_H
