// RUN: tilemega-opt %s -tile-infer-layouts -convert-tile-to-gpu | FileCheck %s

// A kernel launched on its own: its inputs are ready when it starts, so
// tile.task_wait is erased; the ops on both sides of it stay, in order.

// CHECK-LABEL: gpu.func @standalone
// CHECK:         memref.load
// CHECK-NOT:     tile.task_wait
// CHECK:         memref.store
// CHECK-NOT:     tile.task_wait
// CHECK:         gpu.return
func.func @standalone(%G: memref<16xi32>, %A: memref<128xi32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %c0 = arith.constant 0 : index
    %p = memref.load %G[%c0] : memref<16xi32>
    tile.task_wait
    memref.store %p, %A[%c0] : memref<128xi32>
  }
  return
}
