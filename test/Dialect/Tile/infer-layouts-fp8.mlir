// RUN: tilemega-opt %s -tile-infer-layouts="wgmma=true" | FileCheck %s

// 8-bit float inputs: rows of 128 elements of K (128 bytes) under the 8-bit
// 128-byte swizzle <3, 4, 3>, the wgmma accumulator layout.

// CHECK-LABEL: func.func @fp8
// CHECK:         tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 4, shift = 3>} : memref<128x128xf8E4M3FN
// CHECK:         tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 4, shift = 3>} : memref<256x128xf8E4M3FN
// CHECK:         tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [8, 1]>} : memref<128x256xf32
func.func @fp8() {
  tile.kernel blocks(%b) in [1] threads 256 {
    %a = tile.alloc_shared : memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<256x128xf8E4M3FN, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<128x256xf32, #tile.fragment>
    tile.gemm %a, %bb, %c {clear_accum, transpose_b}
        : memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>,
          memref<256x128xf8E4M3FN, #gpu.address_space<workgroup>>,
          memref<128x256xf32, #tile.fragment>
  }
  return
}
