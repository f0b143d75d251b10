// RUN: tilemega-opt %s -tile-infer-layouts -convert-tile-to-gpu="wgmma=true" -split-input-file | FileCheck %s

// Threads write P (a wgmma operand tile): the barrier after the write gets a
// fence.proxy.async before it, and the two gemms that read P next (nothing
// written to shared memory between them) fence nothing again. After the
// next write (V0, also an operand) the same: one fence and barrier, then two
// gemms without. (A gemm whose walk back reaches a shared write or the start
// of its block without such a hand-over fences for itself:
// wgmma-gemm.mlir.)

// CHECK-LABEL: gpu.func @published
// CHECK:         nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK-NEXT:    gpu.barrier
// CHECK-NOT:     nvvm.fence.proxy
// CHECK-NOT:     gpu.barrier
// CHECK:         nvvm.wgmma.fence.aligned
// CHECK:         nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT:     nvvm.fence.proxy
// CHECK-NOT:     gpu.barrier
// CHECK:         nvvm.wgmma.fence.aligned
// CHECK:         nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:         gpu.barrier
// CHECK:         nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK-NEXT:    gpu.barrier
// CHECK:         nvvm.wgmma.fence.aligned
// CHECK-NOT:     gpu.barrier
// CHECK:         nvvm.wgmma.fence.aligned
// CHECK:         gpu.return
func.func @published(%g: memref<64x64xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %p = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %v0 = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %v1 = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %acc0 = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [4, 1]>} : memref<64x64xf32, #tile.fragment>
    %acc1 = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [4, 1]>} : memref<64x64xf32, #tile.fragment>
    tile.copy %g[0, 0] to %p[0, 0] sizes [64, 64]
        : memref<64x64xbf16> to memref<64x64xbf16, #gpu.address_space<workgroup>>
    tile.gemm %p, %v0, %acc0 {clear_accum}
        : memref<64x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x64xf32, #tile.fragment>
    tile.gemm %p, %v1, %acc1 {clear_accum}
        : memref<64x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x64xf32, #tile.fragment>
    tile.copy %g[0, 0] to %v0[0, 0] sizes [64, 64]
        : memref<64x64xbf16> to memref<64x64xbf16, #gpu.address_space<workgroup>>
    tile.gemm %p, %v0, %acc0
        : memref<64x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x64xf32, #tile.fragment>
    tile.gemm %p, %v1, %acc1
        : memref<64x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x64xf32, #tile.fragment>
  }
  return
}
