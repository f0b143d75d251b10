// RUN: tilemega-opt %s -tile-infer-layouts="wgmma=true" -split-input-file | FileCheck %s
// RUN: tilemega-opt %s -tile-infer-layouts -split-input-file | FileCheck %s --check-prefix=OFF

// With wgmma, a gemm that tile::chooseWgmma accepts once laid out with 16
// accumulator rows a warp gets that layout, and its tiles the 128-byte
// swizzle; without, the usual split of the warps (and the same swizzle,
// the ldmatrix one for 64-element rows).

// CHECK-LABEL: func.func @hopper
// CHECK:         tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16
// CHECK:         tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16
// CHECK:         tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [8, 1]>} : memref<128x128xf32
// OFF-LABEL:   func.func @hopper
// OFF:           tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [{{[1-8]}}, {{[2-8]}}]>} : memref<128x128xf32
func.func @hopper() {
  tile.kernel blocks(%b) in [1] threads 256 {
    %a = tile.alloc_shared : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<128x128xf32, #tile.fragment>
    tile.gemm %a, %bb, %c {clear_accum, transpose_b}
        : memref<128x64xbf16, #gpu.address_space<workgroup>>,
          memref<128x64xbf16, #gpu.address_space<workgroup>>,
          memref<128x128xf32, #tile.fragment>
  }
  return
}

// -----

// K = 32 is not a 128-byte row: chooseWgmma declines, the usual choice
// stands and the tiles get the 64-byte ldmatrix swizzle.

// CHECK-LABEL: func.func @short_k
// CHECK:         tile.alloc_shared {swizzle = #tile.swizzle<bits = 2, base = 3, shift = 3>} : memref<128x32xbf16
// CHECK:         tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [{{[1-8]}}, {{[2-8]}}]>} : memref<128x128xf32
func.func @short_k() {
  tile.kernel blocks(%b) in [1] threads 256 {
    %a = tile.alloc_shared : memref<128x32xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<128x32xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<128x128xf32, #tile.fragment>
    tile.gemm %a, %bb, %c {clear_accum, transpose_b}
        : memref<128x32xbf16, #gpu.address_space<workgroup>>,
          memref<128x32xbf16, #gpu.address_space<workgroup>>,
          memref<128x128xf32, #tile.fragment>
  }
  return
}

// -----

// MN-major operands wider than 64 elements (A as K x M with transpose_a, B
// as K x N): the 128-byte swizzle in blocks of 64 columns
// (tile::getWgmmaOperandSwizzle), which chooseWgmma takes.

// CHECK-LABEL: func.func @mn_major
// CHECK:         tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3, columns = 64>} : memref<64x128xbf16
// CHECK:         tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3, columns = 64>} : memref<64x256xbf16
// CHECK:         tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [8, 1]>} : memref<128x256xf32
// OFF-LABEL:   func.func @mn_major
// OFF-NOT:       columns
func.func @mn_major() {
  tile.kernel blocks(%b) in [1] threads 256 {
    %a = tile.alloc_shared : memref<64x128xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<64x256xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<128x256xf32, #tile.fragment>
    tile.gemm %a, %bb, %c {clear_accum, transpose_a}
        : memref<64x128xbf16, #gpu.address_space<workgroup>>,
          memref<64x256xbf16, #gpu.address_space<workgroup>>,
          memref<128x256xf32, #tile.fragment>
  }
  return
}


// -----

// A second gemm into an accumulator the first laid out for wgmma (Q K^T
// before a loop and in it): its operand tiles take wgmma's swizzle too,
// which for rows of 128 elements is the 64-column blocks, not the ldmatrix
// swizzle (shift 4) they would get otherwise.
// CHECK-LABEL: func.func @second_gemm_into_a_wgmma_accumulator
// CHECK-COUNT-3: tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3, columns = 64>} : memref<64x128xbf16
// CHECK-NOT:     shift = 4
func.func @second_gemm_into_a_wgmma_accumulator() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %q = tile.alloc_shared : memref<64x128xbf16, #gpu.address_space<workgroup>>
    %k1 = tile.alloc_shared : memref<64x128xbf16, #gpu.address_space<workgroup>>
    %k2 = tile.alloc_shared : memref<64x128xbf16, #gpu.address_space<workgroup>>
    %s = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    tile.gemm %q, %k1, %s {clear_accum, transpose_b} : memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<64x64xf32, #tile.fragment>
    tile.gemm %q, %k2, %s {transpose_b} : memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<64x64xf32, #tile.fragment>
  }
  return
}
