// RUN: tilemega-opt %s -tile-pipeline="wgmma=true wgmma-in-flight=true tma=true" | FileCheck %s
// RUN: tilemega-opt %s -tile-pipeline="wgmma=true wgmma-in-flight=true tma=true" -convert-tile-to-gpu="wgmma=true" | FileCheck %s --check-prefix=LOWER

// A kernel of clusters of 2 along the first grid dimension: B's box (its
// offsets depend on %by and the cluster's index %bx / 2 only) is the same
// in both blocks of a cluster, so its copy is multicast; A's (%bx) is not.
// The empty barriers take the arrivals of both blocks' 8 consumer warps
// (16), a cluster sync follows their initialisation, the consumers hand
// each stage back to both blocks, and the producer's tail waits for the
// last hand-back of each of the 3 stages.

// CHECK-LABEL: func.func @cluster_multicast
// CHECK:         tile.kernel blocks(%[[BX:.*]], %[[BY:.*]]) in [4, 2] threads 256 cluster 2
// CHECK:         %[[FULL:.*]] = tile.alloc_shared : memref<3xi64
// CHECK:         %[[EMPTY:.*]] = tile.alloc_shared : memref<3xi64
// CHECK:         tile.mbarrier_init %[[FULL]] :
// CHECK:         tile.mbarrier_init %[[EMPTY]] {count = 16 : i64}
// CHECK-NEXT:    gpu.barrier
// CHECK-NEXT:    tile.cluster_sync
// CHECK-NEXT:    tile.producer {
// CHECK:             tile.mbarrier_arrive_expect_tx %[[FULL]][%{{.*}}], 49152
// CHECK:             tile.bulk_copy %arg0{{.*}}, %[[FULL]][%{{.*}}] :
// CHECK:             tile.bulk_copy %arg1{{.*}}, %[[FULL]][%{{.*}}] {multicast = 2 : i64}
// CHECK:           scf.for
// CHECK:             scf.if
// CHECK:               tile.mbarrier_wait %[[EMPTY]]
// CHECK:         }
// CHECK:         scf.for
// CHECK:           tile.mbarrier_wait %[[FULL]]
// CHECK:           tile.gemm
// CHECK:             tile.mbarrier_arrive %[[EMPTY]][%{{.*}}] {cluster = 2 : i64}
// CHECK:         tile.mbarrier_arrive %[[EMPTY]][%{{.*}}] {cluster = 2 : i64}

// Lowered: launched in clusters of 2; each producer copies its half of
// B's 256 rows (128, rows 128 x rank on, at byte 16384 x rank of the tile)
// into both blocks (mask 0b11); each consumer warp arrives on the stage's
// empty barrier of both blocks.

// LOWER-LABEL: gpu.func @cluster_multicast
// LOWER-SAME:    known_cluster_size = array<i32: 2, 1, 1>
// LOWER:         nvvm.cluster.arrive
// LOWER-NEXT:    nvvm.cluster.wait
// LOWER:         nvvm.mapa %{{.*}}, %{{.*}} : !llvm.ptr<3> -> !llvm.ptr<7>
// LOWER:         nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<7>
// LOWER:         nvvm.mapa
// LOWER:         nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<7>
// LOWER:         %[[MASK:.*]] = llvm.mlir.constant(3 : i16) : i16
// LOWER:         nvvm.read.ptx.sreg.cluster.ctarank
// LOWER:         nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %{{.*}}, %{{.*}}, box[%{{.*}}, %{{.*}}] multicast_mask = %[[MASK]]
func.func @cluster_multicast(%A: memref<512x512xbf16>, %B: memref<512x512xbf16>, %C: memref<512x512xf32>) {
  tile.kernel blocks(%bx, %by) in [4, 2] threads 256 cluster 2 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<256x64xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [8, 1]>} : memref<128x256xf32, #tile.fragment>
    tile.clear %c : memref<128x256xf32, #tile.fragment>
    %row = arith.muli %bx, %c128 : index
    // From the cluster's index and %by only: the same in both blocks.
    %pair = arith.divui %bx, %c2 : index
    %sum = arith.addi %pair, %by : index
    %half = arith.remui %sum, %c2 : index
    %colb = arith.muli %half, %c256 : index
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 3 attributes {warp_specialize} {
      %col = arith.muli %k, %c64 : index
      tile.copy %A[%row, %col] to %a[0, 0] sizes [128, 64] : memref<512x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.copy %B[%colb, %col] to %bb[0, 0] sizes [256, 64] : memref<512x512xbf16> to memref<256x64xbf16, #gpu.address_space<workgroup>>
      tile.gemm %a, %bb, %c {transpose_b}
          : memref<128x64xbf16, #gpu.address_space<workgroup>>,
            memref<256x64xbf16, #gpu.address_space<workgroup>>,
            memref<128x256xf32, #tile.fragment>
    }
    tile.copy %c[0, 0] to %C[%row, %colb] sizes [128, 256] : memref<128x256xf32, #tile.fragment> to memref<512x512xf32>
  }
  return
}
