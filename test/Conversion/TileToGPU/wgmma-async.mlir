// RUN: tilemega-opt %s -tile-infer-layouts -convert-tile-to-gpu="wgmma=true" -split-input-file | FileCheck %s
// RUN: tilemega-opt %s -tile-infer-layouts -convert-tile-to-gpu -split-input-file | FileCheck %s --check-prefix=OFF

// Asynchronous gemms (`async`, T.gemm(..., wg_wait=-1)): each wgmma group
// is committed and not waited for; its D registers go to the accumulator's
// slots at once. tile.wgmma_wait pending 1 (the newest group, P @ V, stays
// in flight) loads the 32 slots of the score accumulator, passes them
// through tile.wgmma_wait_registers and stores them back: what reads the
// scores then reads the wait's results. pending 0 does the same for O.

// CHECK-LABEL: gpu.func @two_in_flight
// CHECK:         nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>]
// CHECK:         nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT:     nvvm.wgmma.wait.group.sync.aligned
// CHECK-COUNT-32: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<?xf32>
// CHECK:         nvvm.wgmma.fence.aligned
// CHECK:         nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <one>]
// CHECK:         nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT:     nvvm.wgmma.wait.group.sync.aligned
// CHECK-COUNT-32: memref.load %{{.*}}[%{{.*}}] : memref<?xf32>
// CHECK:         %[[S:.*]]:32 = tile.wgmma_wait_registers {{.*}} pending 1 : f32,
// CHECK-COUNT-32: memref.store %[[S]]#{{[0-9]+}}, %{{.*}}[%{{.*}}] : memref<?xf32>
// CHECK:         tile.wgmma_wait_registers {{.*}} pending 0 : f32,
// CHECK-NOT:     nvvm.wgmma.wait.group.sync.aligned

// Off, both gemms are mma.sync (synchronous) and the waits disappear.
// OFF-LABEL:     gpu.func @two_in_flight
// OFF-NOT:       tile.wgmma_wait
// OFF:           nvvm.mma.sync
// OFF-NOT:       tile.wgmma_wait
func.func @two_in_flight(%x: memref<64x64xf32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %q = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %k = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %p = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %s = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [4, 1]>} : memref<64x64xf32, #tile.fragment>
    %o = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [4, 1]>} : memref<64x64xf32, #tile.fragment>
    tile.gemm %q, %k, %s {async, clear_accum, transpose_b}
        : memref<64x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x64xf32, #tile.fragment>
    tile.gemm %p, %k, %o {async}
        : memref<64x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x64xf32, #tile.fragment>
    tile.wgmma_wait pending 1 %s : memref<64x64xf32, #tile.fragment>
    tile.copy %s[0, 0] to %x[0, 0] sizes [64, 64] : memref<64x64xf32, #tile.fragment> to memref<64x64xf32>
    tile.wgmma_wait pending 0 %o : memref<64x64xf32, #tile.fragment>
    tile.copy %o[0, 0] to %x[0, 0] sizes [64, 64] : memref<64x64xf32, #tile.fragment> to memref<64x64xf32>
  }
  return
}
