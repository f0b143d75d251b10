// RUN: tilemega-opt %s -tile-infer-layouts -tile-pipeline="tma=true" -convert-tile-to-gpu -split-input-file -verify-diagnostics | FileCheck %s

// Two 128 KiB tiles whose live ranges do not overlap (the first is read for
// the last time before the second is first written) share their bytes
// (TileSharedMemory.h): the kernel needs 128 KiB, which the verifier and
// the layout both count, not the 256 KiB over sm_90a's limit that the two
// would need side by side. The second tile starts after an async-proxy
// fence and a barrier.

// CHECK: dynamic_shared_bytes = 131072 : i64
// CHECK-LABEL: gpu.func @sequential_tiles
// CHECK:         %[[Z0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    memref.view %{{.*}}[%[[Z0]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<256x128xf32, #gpu.address_space<workgroup>>
// CHECK:         %[[Z1:.*]] = arith.constant 0 : index
// CHECK-NEXT:    memref.view %{{.*}}[%[[Z1]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<256x128xf32, #gpu.address_space<workgroup>>
// CHECK:         vector.store %{{.*}} : memref<256x128xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK:         vector.store %{{.*}} : memref<256x128xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK:         nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT:    gpu.barrier
func.func @sequential_tiles(%A: memref<256x128xf32>, %B: memref<256x128xf32>, %C: memref<256x128xf32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %s0 = tile.alloc_shared : memref<256x128xf32, #gpu.address_space<workgroup>>
    %s1 = tile.alloc_shared : memref<256x128xf32, #gpu.address_space<workgroup>>
    tile.copy %A[0, 0] to %s0[0, 0] sizes [256, 128] : memref<256x128xf32> to memref<256x128xf32, #gpu.address_space<workgroup>>
    tile.copy %s0[0, 0] to %C[0, 0] sizes [256, 128] : memref<256x128xf32, #gpu.address_space<workgroup>> to memref<256x128xf32>
    tile.copy %B[0, 0] to %s1[0, 0] sizes [256, 128] : memref<256x128xf32> to memref<256x128xf32, #gpu.address_space<workgroup>>
    tile.copy %s1[0, 0] to %C[0, 0] sizes [256, 128] : memref<256x128xf32, #gpu.address_space<workgroup>> to memref<256x128xf32>
  }
  return
}

// -----

// Live at once, the same two tiles are over the limit: the verifier says so.
func.func @overlapping_tiles(%A: memref<256x128xf32>, %C: memref<256x128xf32>) {
  // expected-error @+1 {{allocates 262144 bytes of shared memory, over the 232448-byte (227 KiB) limit of sm_90a by 29696 bytes}}
  tile.kernel blocks(%b) in [1] threads 128 {
    %s0 = tile.alloc_shared : memref<256x128xf32, #gpu.address_space<workgroup>>
    %s1 = tile.alloc_shared : memref<256x128xf32, #gpu.address_space<workgroup>>
    tile.copy %A[0, 0] to %s0[0, 0] sizes [256, 128] : memref<256x128xf32> to memref<256x128xf32, #gpu.address_space<workgroup>>
    tile.copy %A[0, 0] to %s1[0, 0] sizes [256, 128] : memref<256x128xf32> to memref<256x128xf32, #gpu.address_space<workgroup>>
    tile.copy %s0[0, 0] to %C[0, 0] sizes [256, 128] : memref<256x128xf32, #gpu.address_space<workgroup>> to memref<256x128xf32>
    tile.copy %s1[0, 0] to %C[0, 0] sizes [256, 128] : memref<256x128xf32, #gpu.address_space<workgroup>> to memref<256x128xf32>
  }
  return
}

// -----

// A TMA pipeline's stages (2 x 16 KiB each for A and B) and a C tile used
// only after the loop: C reuses the stages' bytes from offset 0, while the
// mbarrier words (after the stages, at 65536) are never reused (they would
// need mbarrier.inval first). 65536 + 16 bytes of barriers: 65552.
// CHECK: dynamic_shared_bytes = 65552 : i64
// CHECK-LABEL: gpu.func @stages_then_c
// CHECK-DAG:     %[[BARS:.*]] = arith.constant 65536 : index
// CHECK-DAG:     memref.view %{{.*}}[%[[BARS]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<2xi64, #gpu.address_space<workgroup>>
// CHECK:         %[[CZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT:    memref.view %{{.*}}[%[[CZERO]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<128x64xf32, #gpu.address_space<workgroup>>
func.func @stages_then_c(%A: memref<128x512xbf16>, %B: memref<128x512xbf16>, %C: memref<128x64xf32>) {
  tile.kernel blocks(%b) in [1] threads 256 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %cs = tile.alloc_shared : memref<128x64xf32, #gpu.address_space<workgroup>>
    %acc = tile.alloc_fragment : memref<128x64xf32, #tile.fragment>
    tile.clear %acc : memref<128x64xf32, #tile.fragment>
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 2 attributes {tma = true} {
      %col = arith.muli %k, %c64 : index
      tile.copy %A[%c0, %col] to %a[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.copy %B[%c0, %col] to %bb[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.copy %a[0, 0] to %acc[0, 0] sizes [128, 64] : memref<128x64xbf16, #gpu.address_space<workgroup>> to memref<128x64xf32, #tile.fragment>
    }
    tile.copy %acc[0, 0] to %cs[0, 0] sizes [128, 64] : memref<128x64xf32, #tile.fragment> to memref<128x64xf32, #gpu.address_space<workgroup>>
    tile.copy %cs[0, 0] to %C[0, 0] sizes [128, 64] : memref<128x64xf32, #gpu.address_space<workgroup>> to memref<128x64xf32>
  }
  return
}
