// RUN: tilemega-opt %s | tilemega-opt | FileCheck %s

// tile.task_wait directly in a tile.kernel body, once: printed back in its
// custom syntax, in its place between the ops before and after it.

// CHECK-LABEL: func.func @task_wait
// CHECK:         memref.load
// CHECK-NEXT:    tile.prefetch_point
// CHECK-NEXT:    tile.task_wait
// CHECK-NEXT:    memref.store
func.func @task_wait(%G: memref<16xi32>, %A: memref<128xi32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %p = memref.load %G[%c0] : memref<16xi32>
    tile.prefetch_point
    tile.task_wait
    memref.store %p, %A[%c0] : memref<128xi32>
  }
  return
}
