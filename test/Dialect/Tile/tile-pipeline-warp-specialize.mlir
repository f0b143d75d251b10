// RUN: tilemega-opt %s -tile-pipeline="wgmma=true wgmma-in-flight=true tma=true" | FileCheck %s
// RUN: tilemega-opt %s -tile-pipeline="wgmma=true wgmma-in-flight=true tma=true" -convert-tile-to-gpu="wgmma=true" | FileCheck %s --check-prefix=LOWER

// warp_specialize: the allocations move to the top, then the stage buffers,
// the full (one arrival) and empty (one arrival per consumer warp: 8)
// mbarriers and their initialisation; the producer region issues every
// iteration's copies, waiting for the stage's hand-back from iteration N on
// (parity (i / N + 1) % 2); the consumers' loop waits full[i % N] (parity
// (i / N) % 2), computes, and hands back the stage of iteration i - 1 (the
// gemm's wgmma is in flight) with no block barrier inside the loop, and
// the last iteration's stage after the loop.

// CHECK-LABEL: func.func @warp_specialized
// CHECK:         tile.alloc_fragment
// CHECK:         %[[A:.*]] = tile.alloc_shared {swizzle = {{.*}}} : memref<3x128x64xbf16
// CHECK:         %[[B:.*]] = tile.alloc_shared {swizzle = {{.*}}} : memref<3x128x64xbf16
// CHECK:         %[[FULL:.*]] = tile.alloc_shared : memref<3xi64
// CHECK:         %[[EMPTY:.*]] = tile.alloc_shared : memref<3xi64
// CHECK:         tile.mbarrier_init %[[FULL]] :
// CHECK:         tile.mbarrier_init %[[EMPTY]] {count = 8 : i64}
// CHECK-NEXT:    gpu.barrier
// CHECK-NEXT:    tile.producer {
// CHECK:           scf.for %[[P:.*]] =
// CHECK:             scf.if
// CHECK:               tile.mbarrier_wait %[[EMPTY]]
// CHECK:             tile.mbarrier_arrive_expect_tx %[[FULL]][%{{.*}}], 32768
// CHECK:             tile.bulk_copy %arg0{{.*}}, %[[FULL]]
// CHECK:             tile.bulk_copy %arg1{{.*}}, %[[FULL]]
// CHECK:         }
// CHECK:         tile.clear
// CHECK:         scf.for %[[I:.*]] =
// CHECK:           tile.mbarrier_wait %[[FULL]]
// CHECK-NOT:       gpu.barrier
// CHECK:           tile.gemm
// CHECK:           scf.if
// CHECK:             tile.mbarrier_arrive %[[EMPTY]]
// CHECK:         } {tile.wgmma_in_flight}
// CHECK:         arith.cmpi sgt
// CHECK-NEXT:    scf.if
// CHECK:           tile.mbarrier_arrive %[[EMPTY]]
// CHECK:         gpu.barrier

// Lowered: 256 + 128 threads launched; after the block barrier that
// publishes the mbarriers, threads < 256 raise their registers and run the
// kernel (their barriers named: bar 1 of 256 threads), the producer
// warpgroup lowers its registers and thread 256 alone issues the copies
// (no thread-0 guard inside).

// LOWER:       block = array<i64: 384, 1, 1>
// LOWER-LABEL: gpu.func @warp_specialized
// LOWER-SAME:    known_block_size = array<i32: 384, 1, 1>
// LOWER:         nvvm.mbarrier.init
// LOWER:         gpu.barrier
// LOWER:         %[[TID:.*]] = gpu.thread_id x
// LOWER:         %[[CONSUMERS:.*]] = arith.constant 256 : index
// LOWER:         %[[IS:.*]] = arith.cmpi ult, %[[TID]], %[[CONSUMERS]] : index
// LOWER:         scf.if %[[IS]] {
// LOWER-NEXT:      nvvm.setmaxregister increase 232
// LOWER:           nvvm.mbarrier.try_wait.parity
// LOWER:           nvvm.wgmma.mma_async
// LOWER:           nvvm.bar.warp.sync
// LOWER:           nvvm.mbarrier.arrive
// LOWER:           nvvm.barrier id = %{{.*}} number_of_threads = %{{.*}}
// LOWER-NOT:       gpu.barrier
// LOWER:         } else {
// LOWER-NEXT:      nvvm.setmaxregister decrease 40
// LOWER:           arith.cmpi eq, %[[TID]], %[[CONSUMERS]] : index
// LOWER:           scf.if
// LOWER-NOT:         gpu.thread_id
// LOWER:             nvvm.cp.async.bulk.tensor.shared.cluster.global
// LOWER:         } {tilemega.consumers}
func.func @warp_specialized(%A: memref<128x512xbf16>, %B: memref<128x512xbf16>, %C: memref<128x128xf32>) {
  tile.kernel blocks(%b) in [1] threads 256 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [8, 1]>} : memref<128x128xf32, #tile.fragment>
    tile.clear %c : memref<128x128xf32, #tile.fragment>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 3 attributes {warp_specialize} {
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
