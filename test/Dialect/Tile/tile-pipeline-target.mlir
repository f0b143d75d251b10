// RUN: tilemega-opt %s -tile-pipeline="chip=sm_90" -verify-diagnostics | FileCheck %s
// RUN: not tilemega-opt %s -tile-pipeline="chip=sm_80" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// tile-pipeline bounds the multi-buffered tiles by the shared memory of one
// block on its chip (tilemega/Target/TargetInfo.h); an unknown chip is an
// error that lists the known ones.

// UNKNOWN: error: tile-pipeline: unknown chip 'sm_80' (known: sm_90, sm_90a)

// 3 stages of 64 KiB fit the 227 KiB of sm_90.
// CHECK-LABEL: func.func @fits
// CHECK:         tile.alloc_shared : memref<3x128x128xf32, #gpu.address_space<workgroup>>
func.func @fits(%A: memref<256x1024xf32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c128 = arith.constant 128 : index
    %s = tile.alloc_shared : memref<128x128xf32, #gpu.address_space<workgroup>>
    %f = tile.alloc_fragment : memref<128x128xf32, #tile.fragment>
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 3 {
      %col = arith.muli %k, %c128 : index
      tile.copy %A[0, %col] to %s[0, 0] sizes [128, 128]
          : memref<256x1024xf32> to memref<128x128xf32, #gpu.address_space<workgroup>>
      tile.copy %s[0, 0] to %f[0, 0] sizes [128, 128]
          : memref<128x128xf32, #gpu.address_space<workgroup>> to memref<128x128xf32, #tile.fragment>
    }
  }
  return
}
