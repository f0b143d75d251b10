// RUN: tilemega-opt %s -tile-pipeline="wgmma=true" -split-input-file -verify-diagnostics | FileCheck %s
// RUN: tilemega-opt %s -tile-pipeline -split-input-file 2>&1 | FileCheck %s --check-prefix=NOWGMMA

// A loop that asks for in-flight wgmma (`wgmma_in_flight`, T.Pipelined's
// knob) gets it without the pass-wide option: copies one iteration ahead in
// 3 stages, the gemm and the loop marked.

// CHECK-LABEL: func.func @asked
// CHECK:         scf.for
// CHECK-NEXT:      tile.async_wait pending 0
// CHECK:           tile.gemm {{.*}} {tile.wgmma_in_flight, transpose_b}
// CHECK:         } {tile.wgmma_in_flight}
// NOWGMMA:       wgmma_in_flight has no effect: the gemms are not lowered to wgmma here
func.func @asked(%A: memref<128x512xbf16>, %B: memref<128x512xbf16>) {
  tile.kernel blocks(%b) in [1] threads 256 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [8, 1]>} : memref<128x128xf32, #tile.fragment>
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 3 wgmma_in_flight {
      %col = arith.muli %k, %c64 : index
      tile.copy %A[%c0, %col] to %a[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.copy %B[%c0, %col] to %bb[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.gemm %a, %bb, %c {transpose_b}
          : memref<128x64xbf16, #gpu.address_space<workgroup>>,
            memref<128x64xbf16, #gpu.address_space<workgroup>>,
            memref<128x128xf32, #tile.fragment>
    }
  }
  return
}

// -----

// Asked, but the warps split N (not wgmma's accumulator): a warning says
// why, and the loop is pipelined as usual.
// CHECK-LABEL: func.func @declined
// CHECK-NOT:     tile.wgmma_in_flight
func.func @declined(%A: memref<128x512xbf16>, %B: memref<128x512xbf16>) {
  tile.kernel blocks(%b) in [1] threads 256 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [4, 2]>} : memref<128x128xf32, #tile.fragment>
    // expected-warning @+1 {{wgmma_in_flight has no effect: no gemm at the top of the loop takes wgmma with an accumulator that only gemms use in the loop}}
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 3 wgmma_in_flight {
      %col = arith.muli %k, %c64 : index
      tile.copy %A[%c0, %col] to %a[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.copy %B[%c0, %col] to %bb[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.gemm %a, %bb, %c {transpose_b}
          : memref<128x64xbf16, #gpu.address_space<workgroup>>,
            memref<128x64xbf16, #gpu.address_space<workgroup>>,
            memref<128x128xf32, #tile.fragment>
    }
  }
  return
}

// -----

// Asked, but nothing to pipeline: the loop stays a loop, with a warning.
// CHECK-LABEL: func.func @no_copies
func.func @no_copies(%G: memref<256xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    // expected-warning @+1 {{wgmma_in_flight has no effect: the loop has no global-to-shared copy to pipeline}}
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 3 wgmma_in_flight {
    }
  }
  return
}
