// RUN: tilemega-opt %s -tile-infer-layouts -convert-tile-to-gpu | FileCheck %s

// A resident kernel's first grid dimension is the runtime's choice (as many
// blocks, whole clusters, as stay resident, at most the grid): the
// artifact says so, tile.num_blocks reads the launched count and the
// function claims no known grid size (which would fold it to the bound).
// An ordinary kernel's tile.num_blocks is its grid size.

// CHECK: tilemega.kernels = [{block = array<i64: 128, 1, 1>, cluster = 4 : i64, dynamic_shared_bytes = {{.*}}, grid = array<i64: 132, 1, 1>, name = "resident", params = {{.*}}, resident = true}, {block = array<i64: 128, 1, 1>, dynamic_shared_bytes = {{.*}}, grid = array<i64: 8, 2, 1>, name = "fixed", params = {{.*}}}]

// CHECK-LABEL: gpu.func @resident(
// CHECK-NOT:     known_grid_size
// CHECK-SAME:    kernel attributes
// CHECK:         gpu.grid_dim x
// CHECK:         gpu.return
func.func @resident(%A: memref<4096x32xf32>) {
  tile.kernel blocks(%b) in [132] threads 128 cluster 4 resident {
    %n = tile.num_blocks 0
    %s = tile.alloc_shared : memref<4x32xf32, #gpu.address_space<workgroup>>
    tile.copy %A[%n, 0] to %s[0, 0] sizes [4, 32]
        : memref<4096x32xf32> to memref<4x32xf32, #gpu.address_space<workgroup>>
  }
  return
}

// CHECK-LABEL: gpu.func @fixed(
// CHECK-SAME:    known_grid_size = array<i32: 8, 2, 1>
// CHECK-NOT:     gpu.grid_dim
// CHECK:         arith.constant 2 : index
// CHECK:         gpu.return
func.func @fixed(%A: memref<4096x32xf32>) {
  tile.kernel blocks(%bx, %by) in [8, 2] threads 128 {
    %n = tile.num_blocks 1
    %s = tile.alloc_shared : memref<4x32xf32, #gpu.address_space<workgroup>>
    tile.copy %A[%n, 0] to %s[0, 0] sizes [4, 32]
        : memref<4096x32xf32> to memref<4x32xf32, #gpu.address_space<workgroup>>
  }
  return
}
