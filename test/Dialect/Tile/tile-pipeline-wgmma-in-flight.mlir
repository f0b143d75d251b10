// RUN: tilemega-opt %s -tile-pipeline="wgmma=true wgmma-in-flight=true" -split-input-file | FileCheck %s
// RUN: tilemega-opt %s -tile-pipeline="wgmma=true" -split-input-file | FileCheck %s --check-prefix=OFF
// RUN: tilemega-opt %s -tile-pipeline="wgmma-in-flight=true" -split-input-file | FileCheck %s --check-prefix=OFF
// RUN: tilemega-opt %s -tile-pipeline="wgmma=true wgmma-in-flight=true" -convert-tile-to-gpu="wgmma=true" -split-input-file | FileCheck %s --check-prefix=LOWER

// wgmma-in-flight: a 3-stage loop whose gemm tile::chooseWgmma accepts keeps
// its copies one iteration ahead (N - 2): the prologue issues iteration 0
// only, each iteration waits with pending 0 and refills iteration i + 1 into
// stage (i + 1) % 3 = (i - 2) % 3; the gemm and the loop are marked. Lowered,
// the gemm waits for all but its own wgmma group (wait 1) and the loop's end
// for all (wait 0) before the accumulator is stored.

// CHECK-LABEL: func.func @in_flight
// CHECK:         tile.copy async
// CHECK:         tile.copy async
// CHECK-NEXT:    tile.async_commit
// CHECK-NOT:     tile.async_commit
// CHECK:         scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:      tile.async_wait pending 0
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:      %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT:      %[[NEXT:.*]] = arith.addi %[[I]], %[[ONE]]
// CHECK:           tile.async_commit
// CHECK:           tile.gemm {{.*}} {tile.wgmma_in_flight, transpose_b}
// CHECK:         } {tile.wgmma_in_flight}
// CHECK-NEXT:    gpu.barrier

// Without the option, or without the wgmma lowering: two iterations ahead,
// no marks.
// OFF-LABEL:   func.func @in_flight
// OFF:           tile.async_commit
// OFF:           tile.async_commit
// OFF:           scf.for
// OFF-NEXT:        tile.async_wait pending 1
// OFF-NOT:       tile.wgmma_in_flight

// LOWER-LABEL: gpu.func @in_flight
// LOWER:         scf.for
// LOWER:           nvvm.wgmma.commit.group.sync.aligned
// LOWER-NEXT:      nvvm.wgmma.wait.group.sync.aligned 1
// LOWER:         } {tile.wgmma_in_flight}
// LOWER-NEXT:    nvvm.wgmma.wait.group.sync.aligned 0
// LOWER-NEXT:    gpu.barrier
func.func @in_flight(%A: memref<128x512xbf16>, %B: memref<128x512xbf16>, %C: memref<128x128xf32>) {
  tile.kernel blocks(%b) in [1] threads 256 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [8, 1]>} : memref<128x128xf32, #tile.fragment>
    tile.clear %c : memref<128x128xf32, #tile.fragment>
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 3 {
      %col = arith.muli %k, %c64 : index
      tile.copy %A[%c0, %col] to %a[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.copy %B[%c0, %col] to %bb[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.gemm %a, %bb, %c {transpose_b}
          : memref<128x64xbf16, #gpu.address_space<workgroup>>,
            memref<128x64xbf16, #gpu.address_space<workgroup>>,
            memref<128x128xf32, #tile.fragment>
    }
    tile.copy %c[0, 0] to %C[0, 0] sizes [128, 128] : memref<128x128xf32, #tile.fragment> to memref<128x128xf32>
  }
  return
}

// -----

// Two stages leave no stage free of the pending wgmma: nothing changes.
// CHECK-LABEL: func.func @two_stages
// CHECK-NOT:     tile.wgmma_in_flight
func.func @two_stages(%A: memref<128x512xbf16>, %B: memref<128x512xbf16>) {
  tile.kernel blocks(%b) in [1] threads 256 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [8, 1]>} : memref<128x128xf32, #tile.fragment>
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 2 {
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

// The accumulator is read inside the loop: its wgmma must be waited for.
// CHECK-LABEL: func.func @accumulator_read_in_loop
// CHECK-NOT:     tile.wgmma_in_flight
func.func @accumulator_read_in_loop(%A: memref<128x512xbf16>, %B: memref<128x512xbf16>, %C: memref<1024x128xf32>) {
  tile.kernel blocks(%b) in [1] threads 256 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [8, 1]>} : memref<128x128xf32, #tile.fragment>
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 3 {
      %col = arith.muli %k, %c64 : index
      tile.copy %A[%c0, %col] to %a[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.copy %B[%c0, %col] to %bb[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.gemm %a, %bb, %c {transpose_b}
          : memref<128x64xbf16, #gpu.address_space<workgroup>>,
            memref<128x64xbf16, #gpu.address_space<workgroup>>,
            memref<128x128xf32, #tile.fragment>
      %row = arith.muli %k, %c128 : index
      tile.copy %c[0, 0] to %C[%row, 0] sizes [128, 128] : memref<128x128xf32, #tile.fragment> to memref<1024x128xf32>
    }
  }
  return
}

// -----

// A loop with an asynchronous gemm (`async`, T.gemm(..., wg_wait=-1)) counts
// its own wgmma groups with tile.wgmma_wait: wgmma-in-flight leaves it (and
// the loop's synchronous gemm) unmarked, the copies two iterations ahead.
// CHECK-LABEL: func.func @with_async_gemm
// CHECK:         scf.for
// CHECK-NEXT:      tile.async_wait pending 1
// CHECK:           tile.gemm {{.*}} {async, transpose_b}
// CHECK:           tile.wgmma_wait pending 0
// CHECK-NOT:     tile.wgmma_in_flight
func.func @with_async_gemm(%A: memref<128x512xbf16>, %B: memref<128x512xbf16>) {
  tile.kernel blocks(%b) in [1] threads 256 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [8, 1]>} : memref<128x128xf32, #tile.fragment>
    %d = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [8, 1]>} : memref<128x128xf32, #tile.fragment>
    tile.clear %c : memref<128x128xf32, #tile.fragment>
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 3 {
      %col = arith.muli %k, %c64 : index
      tile.copy %A[%c0, %col] to %a[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.copy %B[%c0, %col] to %bb[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.gemm %a, %bb, %c {async, transpose_b}
          : memref<128x64xbf16, #gpu.address_space<workgroup>>,
            memref<128x64xbf16, #gpu.address_space<workgroup>>,
            memref<128x128xf32, #tile.fragment>
      tile.gemm %a, %bb, %d {transpose_b}
          : memref<128x64xbf16, #gpu.address_space<workgroup>>,
            memref<128x64xbf16, #gpu.address_space<workgroup>>,
            memref<128x128xf32, #tile.fragment>
      tile.wgmma_wait pending 0 %c : memref<128x128xf32, #tile.fragment>
    }
  }
  return
}
