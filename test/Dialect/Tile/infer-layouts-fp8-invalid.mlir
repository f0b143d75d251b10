// RUN: tilemega-opt %s -tile-infer-layouts="wgmma=true" -split-input-file -verify-diagnostics
// RUN: not tilemega-opt %s -tile-infer-layouts -split-input-file 2>&1 | FileCheck %s --check-prefix=OFF

// 8-bit float gemms have no mma.sync or CUDA-core form: one that wgmma
// cannot take is an error at the gemm saying why, never a silent fallback.

// OFF: multiplies 8-bit floats, which only wgmma does, and cannot take it: the wgmma lowering is off
func.func @transposed_b() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %a = tile.alloc_shared : memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<64x128xf32, #tile.fragment>
    // expected-error @+1 {{multiplies 8-bit floats, which only wgmma does, and cannot take it: wgmma reads 8-bit operands K-major only}}
    tile.gemm %a, %bb, %c {clear_accum}
        : memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>,
          memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>,
          memref<64x128xf32, #tile.fragment>
  }
  return
}

// -----

func.func @short_k() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %a = tile.alloc_shared : memref<64x64xf8E5M2, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<128x64xf8E5M2, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<64x128xf32, #tile.fragment>
    // expected-error @+1 {{A must be rows of a multiple of 128 elements of K under #tile.swizzle<bits = 3, base = 4, shift = 3>}}
    tile.gemm %a, %bb, %c {clear_accum, transpose_b}
        : memref<64x64xf8E5M2, #gpu.address_space<workgroup>>,
          memref<128x64xf8E5M2, #gpu.address_space<workgroup>>,
          memref<64x128xf32, #tile.fragment>
  }
  return
}
