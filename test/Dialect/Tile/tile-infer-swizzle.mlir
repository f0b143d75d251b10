// RUN: tilemega-opt %s -tile-infer-layouts -split-input-file | FileCheck %s

// The shared A and B tiles of a tensor-core gemm get the swizzle that makes
// ldmatrix conflict-free: Swizzle<log2(min(2R, 128) / 16), 3,
// max(log2 R, 6) - 3> for rows of R halves (the XOR source is the 128-byte
// line index). 64-half rows: <3, 3, 3>; 32: <2, 3, 3>; 16: <1, 3, 3>;
// 128: <3, 3, 4>.

// CHECK-LABEL: func.func @nn
// CHECK: tile.alloc_shared {swizzle = #tile.swizzle<bits = 2, base = 3, shift = 3>} : memref<128x32xf16
// CHECK: tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 4>} : memref<32x128xf16
// CHECK: tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [2, 2]>}
func.func @nn() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %a = tile.alloc_shared : memref<128x32xf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<32x128xf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<128x128xf32, #tile.fragment>
    tile.gemm %a, %bb, %c : memref<128x32xf16, #gpu.address_space<workgroup>>, memref<32x128xf16, #gpu.address_space<workgroup>>, memref<128x128xf32, #tile.fragment>
  }
  return
}

// -----

// CHECK-LABEL: func.func @nt_bf16
// CHECK: tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<64x64xbf16
// CHECK: tile.alloc_shared {swizzle = #tile.swizzle<bits = 1, base = 3, shift = 3>} : memref<64x16xbf16
func.func @nt_bf16() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %a = tile.alloc_shared : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<64x16xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<64x16xf32, #tile.fragment>
    tile.gemm %a, %bb, %c {transpose_a}
        : memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x16xbf16, #gpu.address_space<workgroup>>, memref<64x16xf32, #tile.fragment>
  }
  return
}

// -----

// A multi-buffered tile is swizzled through its alloc (per stage, by the
// stage's row).

// CHECK-LABEL: func.func @stage
// CHECK: tile.alloc_shared {swizzle = #tile.swizzle<bits = 2, base = 3, shift = 3>} : memref<2x16x32xf16
func.func @stage(%i: index) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %buf = tile.alloc_shared : memref<2x16x32xf16, #gpu.address_space<workgroup>>
    %a = memref.subview %buf[%i, 0, 0] [1, 16, 32] [1, 1, 1]
        : memref<2x16x32xf16, #gpu.address_space<workgroup>>
          to memref<16x32xf16, strided<[32, 1], offset: ?>, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<32x8xf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<16x8xf32, #tile.fragment>
    tile.gemm %a, %bb, %c
        : memref<16x32xf16, strided<[32, 1], offset: ?>, #gpu.address_space<workgroup>>,
          memref<32x8xf16, #gpu.address_space<workgroup>>, memref<16x8xf32, #tile.fragment>
  }
  return
}

// -----

// No swizzle: rows under 32 bytes (8 halves) or not a power of two (48),
// a swizzle the user chose (even none), a tile also read outside tile ops,
// a gemm that stays on CUDA cores (blocked accumulator, f32 inputs).

// CHECK-LABEL: func.func @left_alone
// CHECK: tile.alloc_shared : memref<16x48xf16
// CHECK: tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<48x64xf16
// CHECK: tile.alloc_shared : memref<32x8xf16
// CHECK: tile.alloc_shared {swizzle = #tile.swizzle<bits = 0, base = 0, shift = 0>} : memref<16x32xf16
// CHECK: tile.alloc_shared : memref<16x32xf16
// CHECK: tile.alloc_shared : memref<32x32xf16
// CHECK: tile.alloc_shared : memref<16x32xf32
// CHECK: tile.alloc_shared : memref<32x32xf32
func.func @left_alone() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a0 = tile.alloc_shared : memref<16x48xf16, #gpu.address_space<workgroup>>
    %b0 = tile.alloc_shared : memref<48x64xf16, #gpu.address_space<workgroup>>
    %c0 = tile.alloc_fragment : memref<16x64xf32, #tile.fragment>
    tile.gemm %a0, %b0, %c0 : memref<16x48xf16, #gpu.address_space<workgroup>>, memref<48x64xf16, #gpu.address_space<workgroup>>, memref<16x64xf32, #tile.fragment>

    %b1 = tile.alloc_shared : memref<32x8xf16, #gpu.address_space<workgroup>>
    %a1 = tile.alloc_shared {swizzle = #tile.swizzle<bits = 0, base = 0, shift = 0>} : memref<16x32xf16, #gpu.address_space<workgroup>>
    %c1 = tile.alloc_fragment : memref<16x8xf32, #tile.fragment>
    tile.gemm %a1, %b1, %c1 : memref<16x32xf16, #gpu.address_space<workgroup>>, memref<32x8xf16, #gpu.address_space<workgroup>>, memref<16x8xf32, #tile.fragment>

    %a2 = tile.alloc_shared : memref<16x32xf16, #gpu.address_space<workgroup>>
    %b2 = tile.alloc_shared : memref<32x32xf16, #gpu.address_space<workgroup>>
    %c2 = tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerBlock = [1, 1], order = [1, 0]>} : memref<16x32xf32, #tile.fragment>
    tile.gemm %a2, %b2, %c2 : memref<16x32xf16, #gpu.address_space<workgroup>>, memref<32x32xf16, #gpu.address_space<workgroup>>, memref<16x32xf32, #tile.fragment>

    %a3 = tile.alloc_shared : memref<16x32xf32, #gpu.address_space<workgroup>>
    %b3 = tile.alloc_shared : memref<32x32xf32, #gpu.address_space<workgroup>>
    %c3 = tile.alloc_fragment : memref<16x32xf32, #tile.fragment>
    tile.gemm %a3, %b3, %c3 : memref<16x32xf32, #gpu.address_space<workgroup>>, memref<32x32xf32, #gpu.address_space<workgroup>>, memref<16x32xf32, #tile.fragment>
  }
  return
}

// -----

// CHECK-LABEL: func.func @raw_access
// CHECK: tile.alloc_shared : memref<16x32xf16
// CHECK: tile.alloc_shared {swizzle = #tile.swizzle<bits = 1, base = 3, shift = 3>} : memref<32x16xf16
func.func @raw_access(%out: memref<1xf16>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared : memref<16x32xf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<32x16xf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<16x16xf32, #tile.fragment>
    tile.gemm %a, %bb, %c : memref<16x32xf16, #gpu.address_space<workgroup>>, memref<32x16xf16, #gpu.address_space<workgroup>>, memref<16x16xf32, #tile.fragment>
    %c0 = arith.constant 0 : index
    %x = memref.load %a[%c0, %c0] : memref<16x32xf16, #gpu.address_space<workgroup>>
  }
  return
}
