//===- TileAsyncGemms.h - the rule for asynchronous tile.gemm ----*- C++ -*-===//
//
// A `tile.gemm {async}` leaves its wgmma group in flight: until a
// `tile.wgmma_wait` hands its accumulator back, the tensor cores own C and
// read A and B. The kernel's verifier enforces that here; the T.* front end
// asks the same question of its own list of pending gemms (language/ops.py
// wait_wgmma) and this verifier checks its answer.
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_DIALECT_TILE_IR_TILEASYNCGEMMS_H
#define TILEMEGA_DIALECT_TILE_IR_TILEASYNCGEMMS_H

#include "tilemega/Dialect/Tile/IR/TileDialect.h"

namespace mlir::tilemega::tile {

/// Checks every block under `region` (each on its own: a group in flight
/// may not cross a block's end, so no loop carries one into its next
/// iteration):
///  - no op but an asynchronous gemm accumulating into the same C reads or
///    writes the accumulator of a gemm in flight, and none writes its A or B;
///  - each tile.wgmma_wait lists exactly the accumulators it completes:
///    those of the groups older than its `pending` newest that no newer
///    group still writes;
///  - no group is in flight at the block's end.
/// Emits the diagnostic at the offending op.
LogicalResult verifyAsyncGemms(Region &region);

} // namespace mlir::tilemega::tile

#endif // TILEMEGA_DIALECT_TILE_IR_TILEASYNCGEMMS_H
