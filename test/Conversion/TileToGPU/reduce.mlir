// RUN: tilemega-opt %s -tile-infer-layouts -convert-tile-to-gpu -split-input-file -verify-diagnostics | FileCheck %s

// A row reduction whose rows a warp covers: registers, then five xor
// shuffles across the 32 lanes of the row; no shared memory.

// CHECK-LABEL: gpu.func @row_max
// CHECK-NOT:     gpu.dynamic_shared_memory
// CHECK:         arith.maximumf
// CHECK:         gpu.shuffle  xor %{{.*}}, %c1_i32, %{{.*}} : f32
// CHECK:         gpu.shuffle  xor %{{.*}}, %c2_i32, %{{.*}} : f32
// CHECK:         gpu.shuffle  xor %{{.*}}, %c4_i32, %{{.*}} : f32
// CHECK:         gpu.shuffle  xor %{{.*}}, %c8_i32, %{{.*}} : f32
// CHECK:         gpu.shuffle  xor %{{.*}}, %c16_i32, %{{.*}} : f32
// CHECK-NOT:     gpu.shuffle
// CHECK:         gpu.return
func.func @row_max(%A: memref<4x128xf32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %s = tile.alloc_fragment : memref<4x128xf32, #tile.fragment>
    %m = tile.alloc_fragment : memref<4xf32, #tile.fragment>
    tile.copy %A[0, 0] to %s[0, 0] sizes [4, 128] : memref<4x128xf32> to memref<4x128xf32, #tile.fragment>
    tile.reduce max %s dim 1 into %m {clear} : memref<4x128xf32, #tile.fragment> into memref<4xf32, #tile.fragment>
  }
  return
}

// -----

// Rows spread over two warps: the warp partials meet in shared scratch
// (2 warps x 4 rows of f32 = 32 bytes), between barriers; without `clear`
// the result is added to what the destination holds. bf16 sums in f32.

// CHECK: tilemega.kernels = [{{.*}}dynamic_shared_bytes = 32
// CHECK-LABEL: gpu.func @across_warps
// CHECK:         arith.extf %{{.*}} : bf16 to f32
// CHECK:         gpu.shuffle  xor
// CHECK:         gpu.barrier
// CHECK:         scf.if
// CHECK:           memref.store %{{.*}} : memref<2x4xf32, #gpu.address_space<workgroup>>
// CHECK:         gpu.barrier
// CHECK:         memref.load %{{.*}} : memref<2x4xf32, #gpu.address_space<workgroup>>
// CHECK:         arith.addf
// CHECK:         arith.truncf %{{.*}} : f32 to bf16
func.func @across_warps() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %s = tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [2, 16], warpsPerBlock = [2, 2], order = [1, 0]>} : memref<4x256xbf16, #tile.fragment>
    %m = tile.alloc_fragment : memref<4xbf16, #tile.fragment>
    tile.reduce sum %s dim 1 into %m : memref<4x256xbf16, #tile.fragment> into memref<4xbf16, #tile.fragment>
  }
  return
}

// -----

// absmax reduces magnitudes.

// CHECK-LABEL: gpu.func @absmax
// CHECK:         math.absf
// CHECK:         arith.maximumf
func.func @absmax() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_fragment : memref<32x32xf32, #tile.fragment>
    %m = tile.alloc_fragment : memref<32xf32, #tile.fragment>
    tile.reduce absmax %s dim 0 into %m {clear} : memref<32x32xf32, #tile.fragment> into memref<32xf32, #tile.fragment>
  }
  return
}

// -----

func.func @shared_source() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared : memref<32x32xf32, #gpu.address_space<workgroup>>
    %m = tile.alloc_fragment : memref<32xf32, #tile.fragment>
    // expected-error @+2 {{reduces a fragment into a fragment; copy shared tiles into a fragment first}}
    // expected-error @+1 {{failed to legalize operation 'tile.reduce'}}
    tile.reduce sum %s dim 0 into %m : memref<32x32xf32, #gpu.address_space<workgroup>> into memref<32xf32, #tile.fragment>
  }
  return
}
