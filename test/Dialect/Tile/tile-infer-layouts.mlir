// RUN: tilemega-opt %s -tile-infer-layouts -split-input-file -verify-diagnostics | FileCheck %s

// Default layouts: each thread holds one 128-bit run of the innermost
// dimension (4 x f32, 8 x f16), lanes side by side along it, warps over rows.

// CHECK-LABEL: func.func @defaults
// CHECK:         tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerBlock = [4, 1], order = [1, 0]>} : memref<64x128xf32, #tile.fragment>
// CHECK:         tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [2, 16], warpsPerBlock = [4, 1], order = [1, 0]>} : memref<64x128xf16, #tile.fragment>
// CHECK:         tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerBlock = [4, 1], order = [1, 0]>} : memref<128x32xf32, #tile.fragment>
// CHECK:         tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerBlock = [4, 1], order = [1, 0]>} : memref<16x64xf16, #tile.fragment>
// CHECK:         tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerBlock = [4], order = [0]>} : memref<1024xf32, #tile.fragment>
func.func @defaults() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %0 = tile.alloc_fragment : memref<64x128xf32, #tile.fragment>
    %1 = tile.alloc_fragment : memref<64x128xf16, #tile.fragment>
    %2 = tile.alloc_fragment : memref<128x32xf32, #tile.fragment>
    %3 = tile.alloc_fragment : memref<16x64xf16, #tile.fragment>
    %4 = tile.alloc_fragment : memref<1024xf32, #tile.fragment>
  }
  return
}

// -----

// Fragments used in one tile.parallel share a layout; the widest element type
// (f32) sets the vector width, so the f16 fragment gets 4 per thread, not 8.
// The parallel gets the same layout. Groups are transitive: %c meets %a only
// through %h.

// CHECK-LABEL: func.func @group
// CHECK:         tile.alloc_fragment {layout = #[[L:tile.blocked<sizePerThread = \[1, 4\], threadsPerWarp = \[1, 32\], warpsPerBlock = \[4, 1\], order = \[1, 0\]>]]} : memref<64x128xf32, #tile.fragment>
// CHECK:         tile.alloc_fragment {layout = #[[L]]} : memref<64x128xf16, #tile.fragment>
// CHECK:         tile.alloc_fragment {layout = #[[L]]} : memref<64x128xf16, #tile.fragment>
// CHECK:         tile.parallel (%{{.*}}, %{{.*}}) in [64, 128] attributes {layout = #[[L]]}
// CHECK:         tile.parallel (%{{.*}}, %{{.*}}) in [64, 128] attributes {layout = #[[L]]}
func.func @group() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %a = tile.alloc_fragment : memref<64x128xf32, #tile.fragment>
    %h = tile.alloc_fragment : memref<64x128xf16, #tile.fragment>
    %c = tile.alloc_fragment : memref<64x128xf16, #tile.fragment>
    tile.parallel (%i, %j) in [64, 128] {
      %x = memref.load %h[%i, %j] : memref<64x128xf16, #tile.fragment>
      %y = arith.extf %x : f16 to f32
      memref.store %y, %a[%i, %j] : memref<64x128xf32, #tile.fragment>
    }
    tile.parallel (%i, %j) in [64, 128] {
      %x = memref.load %h[%i, %j] : memref<64x128xf16, #tile.fragment>
      memref.store %x, %c[%i, %j] : memref<64x128xf16, #tile.fragment>
    }
  }
  return
}

// -----

// An annotated layout is kept and imposed on the fragments of its group, and
// on the parallel; a fragment outside the group keeps its default.

// CHECK-LABEL: func.func @annotated
// CHECK:         tile.alloc_fragment {layout = #[[A:tile.blocked<sizePerThread = \[2, 2\], threadsPerWarp = \[4, 8\], warpsPerBlock = \[2, 2\], order = \[0, 1\]>]]} : memref<64x64xf32, #tile.fragment>
// CHECK:         tile.alloc_fragment {layout = #[[A]]} : memref<64x64xf32, #tile.fragment>
// CHECK:         tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerBlock = [4, 1], order = [1, 0]>} : memref<64x64xf32, #tile.fragment>
// CHECK:         tile.parallel (%{{.*}}, %{{.*}}) in [64, 64] attributes {layout = #[[A]]}
func.func @annotated() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %a = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    %u = tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [2, 2], threadsPerWarp = [4, 8], warpsPerBlock = [2, 2], order = [0, 1]>} : memref<64x64xf32, #tile.fragment>
    %other = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    tile.parallel (%i, %j) in [64, 64] {
      %x = memref.load %u[%i, %j] : memref<64x64xf32, #tile.fragment>
      memref.store %x, %a[%i, %j] : memref<64x64xf32, #tile.fragment>
    }
  }
  return
}

// -----

// Parallel layouts without fragments: one element per thread per step, and
// an annotated parallel layout is kept.

// CHECK-LABEL: func.func @parallel_layouts
// CHECK:         tile.parallel (%{{.*}}) in [100] attributes {layout = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerBlock = [2], order = [0]>}
// CHECK:         tile.parallel (%{{.*}}, %{{.*}}) in [16, 16] attributes {layout = #tile.blocked<sizePerThread = [1, 1], threadsPerWarp = [2, 16], warpsPerBlock = [2, 1], order = [1, 0]>}
// CHECK:         tile.parallel (%{{.*}}) in [128] attributes {layout = #tile.blocked<sizePerThread = [2], threadsPerWarp = [32], warpsPerBlock = [2], order = [0]>}
func.func @parallel_layouts(%G: memref<100xf32>, %H: memref<16x16xf32>, %K: memref<128xf32>) {
  tile.kernel blocks(%b) in [1] threads 64 {
    tile.parallel (%i) in [100] {
      %x = memref.load %G[%i] : memref<100xf32>
      memref.store %x, %G[%i] : memref<100xf32>
    }
    tile.parallel (%i, %j) in [16, 16] {
      %x = memref.load %H[%i, %j] : memref<16x16xf32>
      memref.store %x, %H[%i, %j] : memref<16x16xf32>
    }
    tile.parallel (%i) in [128] attributes {layout = #tile.blocked<sizePerThread = [2], threadsPerWarp = [32], warpsPerBlock = [2], order = [0]>} {
      %x = memref.load %K[%i] : memref<128xf32>
      memref.store %x, %K[%i] : memref<128xf32>
    }
  }
  return
}

// -----

func.func @conflict() {
  tile.kernel blocks(%b) in [1] threads 128 {
    // expected-note @+1 {{the other layout comes from here}}
    %a = tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerBlock = [4, 1], order = [1, 0]>} : memref<64x128xf32, #tile.fragment>
    // expected-error @+1 {{layout #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerBlock = [4, 1], order = [1, 0]> conflicts with layout #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerBlock = [4, 1], order = [1, 0]> of a fragment that shares tile.parallel bodies with it (directly or through other fragments)}}
    %c = tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerBlock = [4, 1], order = [1, 0]>} : memref<64x128xf32, #tile.fragment>
    tile.parallel (%i, %j) in [64, 128] {
      %x = memref.load %a[%i, %j] : memref<64x128xf32, #tile.fragment>
      memref.store %x, %c[%i, %j] : memref<64x128xf32, #tile.fragment>
    }
  }
  return
}

// -----

// 64 elements cannot be spread over 128 threads.

func.func @too_small() {
  tile.kernel blocks(%b) in [1] threads 128 {
    // expected-error @+1 {{cannot spread a fragment of shape [8, 8] evenly over 128 threads: its layout covers tiles of [64, 8]; use a larger fragment or fewer threads}}
    %f = tile.alloc_fragment : memref<8x8xf32, #tile.fragment>
  }
  return
}

// -----

// Reductions and sliced reads: the row maxima take the slice of the score
// tile's layout along the reduced dimension, and a tile.parallel over the
// scores reads them at [i] in the thread that holds [i, j].

// CHECK-LABEL: func.func @row_softmax_layouts
// CHECK: %[[S:.*]] = tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerBlock = [4, 1], order = [1, 0]>}
// CHECK: tile.alloc_fragment {layout = #tile.slice<dim = 1, parent = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerBlock = [4, 1], order = [1, 0]>>} : memref<16xf32, #tile.fragment>
// CHECK: tile.parallel (%{{.*}}, %{{.*}}) in [16, 128] attributes {layout = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerBlock = [4, 1], order = [1, 0]>}
func.func @row_softmax_layouts(%A: memref<16x128xf32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %s = tile.alloc_fragment : memref<16x128xf32, #tile.fragment>
    %m = tile.alloc_fragment : memref<16xf32, #tile.fragment>
    tile.copy %A[0, 0] to %s[0, 0] sizes [16, 128] : memref<16x128xf32> to memref<16x128xf32, #tile.fragment>
    tile.reduce max %s dim 1 into %m {clear} : memref<16x128xf32, #tile.fragment> into memref<16xf32, #tile.fragment>
    tile.parallel (%i, %j) in [16, 128] {
      %x = memref.load %s[%i, %j] : memref<16x128xf32, #tile.fragment>
      %r = memref.load %m[%i] : memref<16xf32, #tile.fragment>
      %y = arith.subf %x, %r : f32
      memref.store %y, %s[%i, %j] : memref<16x128xf32, #tile.fragment>
    }
  }
  return
}

// -----

// A tensor-core gemm accumulator gets the mma layout (square-ish warp tiles).

// CHECK-LABEL: func.func @mma_accumulator
// CHECK: tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [2, 2]>} : memref<128x128xf32, #tile.fragment>
func.func @mma_accumulator() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %a = tile.alloc_shared : memref<128x32xf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<32x128xf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<128x128xf32, #tile.fragment>
    tile.gemm %a, %bb, %c : memref<128x32xf16, #gpu.address_space<workgroup>>, memref<32x128xf16, #gpu.address_space<workgroup>>, memref<128x128xf32, #tile.fragment>
  }
  return
}

// -----

func.func @slice_conflict(%A: memref<16x128xf32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %s = tile.alloc_fragment : memref<16x128xf32, #tile.fragment>
    // expected-note @+1 {{that layout comes from here}}
    %m = tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerBlock = [4], order = [0]>} : memref<128xf32, #tile.fragment>
    // expected-error @+1 {{'tile.reduce' op needs layout #tile.slice<dim = 0, parent = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerBlock = [4, 1], order = [1, 0]>> for a fragment that has layout #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerBlock = [4], order = [0]>; converting between them is not supported}}
    tile.reduce sum %s dim 0 into %m : memref<16x128xf32, #tile.fragment> into memref<128xf32, #tile.fragment>
  }
  return
}

// -----

// 16-bit gemms that tensor cores cannot serve say why.

func.func @simt_k(%A: memref<64x40xf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %a = tile.alloc_shared : memref<64x40xf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<40x64xf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    // expected-warning @+1 {{runs on CUDA cores, not tensor cores: K = 40 is not a multiple of the mma.sync K of 16 (by 8)}}
    tile.gemm %a, %bb, %c : memref<64x40xf16, #gpu.address_space<workgroup>>, memref<40x64xf16, #gpu.address_space<workgroup>>, memref<64x64xf32, #tile.fragment>
  }
  return
}

// -----

func.func @simt_registers() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %a = tile.alloc_fragment : memref<64x32xf16, #tile.fragment>
    %bb = tile.alloc_shared : memref<32x64xf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    // expected-warning @+1 {{runs on CUDA cores, not tensor cores: A and B must be in shared memory (ldmatrix reads them there)}}
    tile.gemm %a, %bb, %c : memref<64x32xf16, #tile.fragment>, memref<32x64xf16, #gpu.address_space<workgroup>>, memref<64x64xf32, #tile.fragment>
  }
  return
}

// -----

func.func @simt_shape() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %a = tile.alloc_shared : memref<8x32xf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<32x64xf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<8x64xf32, #tile.fragment>
    // expected-warning @+1 {{runs on CUDA cores, not tensor cores: no split of the 4 warps tiles the 8x64 accumulator into 16x8 mma.sync tiles per warp}}
    tile.gemm %a, %bb, %c : memref<8x32xf16, #gpu.address_space<workgroup>>, memref<32x64xf16, #gpu.address_space<workgroup>>, memref<8x64xf32, #tile.fragment>
  }
  return
}

// -----

// Row maxima of a 16x128 tile rescale a 16x64 tile whose layout differs: the
// maxima are the slice of the first layout (the reduction decides), and the
// parallel over the second reads a converted copy: fragment -> shared ->
// fragment with the slice of its own layout, right before it.

// CHECK-LABEL: func.func @converted_read
// CHECK-DAG:     %[[Y:.*]] = tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerBlock = [4, 1], order = [1, 0]>} : memref<16x64xf32, #tile.fragment>
// CHECK-DAG:     %[[M:.*]] = tile.alloc_fragment {layout = #tile.slice<dim = 1, parent = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerBlock = [4, 1], order = [1, 0]>>} : memref<16xf32, #tile.fragment>
// CHECK-DAG:     %[[S:.*]] = tile.alloc_shared : memref<16xf32, #gpu.address_space<workgroup>>
// CHECK-DAG:     %[[C:.*]] = tile.alloc_fragment {layout = #tile.slice<dim = 1, parent = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerBlock = [4, 1], order = [1, 0]>>} : memref<16xf32, #tile.fragment>
// CHECK:         tile.reduce max %{{.*}} dim 1 into %[[M]]
// CHECK-NEXT:    tile.copy %[[M]][0] to %[[S]][0] sizes [16]
// CHECK-NEXT:    tile.copy %[[S]][0] to %[[C]][0] sizes [16]
// CHECK-NEXT:    tile.parallel
// CHECK:           memref.load %[[C]][%{{.*}}] : memref<16xf32, #tile.fragment>
func.func @converted_read(%X: memref<16x128xf32>, %Y: memref<16x64xf32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %y = tile.alloc_fragment : memref<16x64xf32, #tile.fragment>
    %x = tile.alloc_fragment : memref<16x128xf32, #tile.fragment>
    %m = tile.alloc_fragment : memref<16xf32, #tile.fragment>
    tile.copy %X[0, 0] to %x[0, 0] sizes [16, 128] : memref<16x128xf32> to memref<16x128xf32, #tile.fragment>
    tile.copy %Y[0, 0] to %y[0, 0] sizes [16, 64] : memref<16x64xf32> to memref<16x64xf32, #tile.fragment>
    tile.reduce max %x dim 1 into %m {clear} : memref<16x128xf32, #tile.fragment> into memref<16xf32, #tile.fragment>
    tile.parallel (%i, %j) in [16, 64] {
      %v = memref.load %y[%i, %j] : memref<16x64xf32, #tile.fragment>
      %r = memref.load %m[%i] : memref<16xf32, #tile.fragment>
      %w = arith.divf %v, %r : f32
      memref.store %w, %y[%i, %j] : memref<16x64xf32, #tile.fragment>
    }
  }
  return
}
