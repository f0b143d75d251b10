//===- TilePrefetch.h - where a loop's early copies may start ---*- C++ -*-===//
//
// A pipelined loop's copies marked `tile.early` may have their prologue
// issued at the nearest `tile.prefetch_point` before the loop (in its block
// or before one of its ancestors). A persistent kernel puts one before each
// task's wait (weights load while the task's inputs are produced); a body may
// hold its own, after the wait, to start a loop's loads under work it does
// first (the nearest point wins: a loop after a body's point starts there,
// weights included). These are the rules tile-pipeline (which moves the
// prologue) and convert-mega-to-gpu (which checks what a task may load
// before its events fire) share.
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_DIALECT_TILE_IR_TILEPREFETCH_H
#define TILEMEGA_DIALECT_TILE_IR_TILEPREFETCH_H

#include "tilemega/Dialect/Tile/IR/TileDialect.h"

#include "mlir/IR/Operation.h"

namespace mlir::tilemega::tile {

/// The nearest tile.prefetch_point before `loop` in its block or before one
/// of its ancestors (inside the kernel); null when none.
PrefetchPointOp findPrefetchPoint(Operation *loop);

/// The global buffer a copy's source is a view of (through view-like ops).
Value viewedBuffer(Value value);

/// The first op nested in `op` (itself included) that may write the buffer
/// `source` views: a tile.copy or tile.atomic into it, a memref.store to it,
/// or an op declaring a write effect on it (ops that write no named buffer,
/// a barrier say, do not count). Null when none.
Operation *firstWriteIn(Operation *op, Value source);

/// The first op between `point` and `loop` (the ops after the point in its
/// block, up to the one holding the loop, nested ops included) that writes
/// the buffer `source` views (firstWriteIn's rule). Null when none: a copy
/// of `source` issued at the point reads what it would read at the loop.
Operation *writeBetween(PrefetchPointOp point, Operation *loop, Value source);

} // namespace mlir::tilemega::tile

#endif // TILEMEGA_DIALECT_TILE_IR_TILEPREFETCH_H
