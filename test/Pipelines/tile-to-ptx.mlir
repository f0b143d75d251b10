// RUN: tilemega-opt %s --tilemega-tile-to-ptx-pipeline="chip=sm_90a" | FileCheck %s
// RUN: tilemega-opt %s --tilemega-tile-to-ptx-pipeline="chip=sm_90a" > %t.mlir
// RUN: %extract-ptx %t.mlir %t.ptx && %ptxas -arch=sm_90a %t.ptx -o %t.cubin
// REQUIRES: ptxas

// The first end-to-end kernel: global -> shared -> fragment, an elementwise
// body, and back to global, lowered to PTX that ptxas assembles.

// The module records the aligned barriers it hands to LLVM (two, around
// the shared tile; tilemega-record-aligned-barriers), which
// tilemega.compile checks the PTX against.
// CHECK: module attributes {gpu.container_module, tilemega.aligned_barriers = 2 : i64, tilemega.kernels = [{block = array<i64: 128, 1, 1>, dynamic_shared_bytes = 32768 : i64, grid = array<i64: 4, 8, 1>, name = "scale_add"
// CHECK: gpu.binary @tilemega_kernels
// CHECK-SAME: .target sm_90a
// CHECK-SAME: .entry scale_add
// CHECK-SAME: ld.global.v4.b32
// CHECK-SAME: st.shared.v4.b32
// CHECK-SAME: st.global.v4.b32
func.func @scale_add(%A: memref<256x1024xf32> {tile.name = "A"},
                     %B: memref<256x1024xf32> {tile.name = "B"},
                     %alpha: f32 {tile.name = "alpha"}) {
  tile.kernel blocks(%bx, %by) in [4, 8] threads 128 {
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %row = arith.muli %bx, %c64 : index
    %col = arith.muli %by, %c128 : index
    %s = tile.alloc_shared : memref<64x128xf32, #gpu.address_space<workgroup>>
    %f = tile.alloc_fragment : memref<64x128xf32, #tile.fragment>
    tile.copy %A[%row, %col] to %s[0, 0] sizes [64, 128]
        : memref<256x1024xf32> to memref<64x128xf32, #gpu.address_space<workgroup>>
    tile.copy %s[0, 0] to %f[0, 0] sizes [64, 128]
        : memref<64x128xf32, #gpu.address_space<workgroup>> to memref<64x128xf32, #tile.fragment>
    tile.parallel (%i, %j) in [64, 128] {
      %x = memref.load %f[%i, %j] : memref<64x128xf32, #tile.fragment>
      %one = arith.constant 1.0 : f32
      %y = arith.mulf %x, %alpha : f32
      %z = arith.addf %y, %one : f32
      memref.store %z, %f[%i, %j] : memref<64x128xf32, #tile.fragment>
    }
    tile.copy %f[0, 0] to %B[%row, %col] sizes [64, 128]
        : memref<64x128xf32, #tile.fragment> to memref<256x1024xf32>
  }
  return
}
