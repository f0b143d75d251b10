// RUN: tilemega-opt %s -tile-pipeline="wgmma=true wgmma-in-flight=true tma=true" -split-input-file | FileCheck %s
// RUN: tilemega-opt %s -tile-pipeline="wgmma=true wgmma-in-flight=true" -split-input-file | FileCheck %s --check-prefix=OFF
// RUN: tilemega-opt %s -tile-pipeline="wgmma=true wgmma-in-flight=true tma=true" -convert-tile-to-gpu="wgmma=true" -split-input-file | FileCheck %s --check-prefix=LOWER

// tma: both producers copy from kernel arguments into 128-byte-swizzled
// tiles of 64 bf16 a row, which tile::chooseBulkCopy accepts, so the loop
// pipelines on mbarriers: one barrier a stage, initialised before the
// prologue; issuing a stage is one arrival expecting both tiles' 32 KiB,
// then one bulk copy per tile; iteration i waits on stage i % 3 with parity
// (i / 3) % 2, then the barrier that frees the refilled stage. No cp.async
// groups. Lowered, the kernel takes one tensor map per copied argument after
// its own parameters, thread 0 issues the TMA copies, and the gemm needs no
// proxy fence or barrier of its own (only TMA writes its tiles).

// CHECK-LABEL: func.func @tma
// CHECK:         %[[BARS:.*]] = tile.alloc_shared : memref<3xi64, #gpu.address_space<workgroup>>
// CHECK:         tile.mbarrier_init %[[BARS]]
// CHECK-NEXT:    gpu.barrier
// CHECK:         tile.mbarrier_arrive_expect_tx %[[BARS]][%{{.*}}], 32768
// CHECK:         tile.bulk_copy %arg0[%{{.*}}, %{{.*}}] to %{{.*}}, %[[BARS]][%{{.*}}]
// CHECK:         tile.bulk_copy %arg1[%{{.*}}, %{{.*}}] to %{{.*}}, %[[BARS]][%{{.*}}]
// CHECK-NOT:     tile.async_commit
// CHECK:         scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:           %[[Q:.*]] = arith.divui %[[I]], %{{.*}}
// CHECK-NEXT:      %[[PARITY:.*]] = arith.remui %[[Q]], %{{.*}}
// CHECK:           tile.mbarrier_wait %[[BARS]][%{{.*}}], %[[PARITY]]
// CHECK-NEXT:      gpu.barrier
// CHECK:           scf.if
// CHECK:             tile.mbarrier_arrive_expect_tx
// CHECK-NOT:       tile.async
// CHECK:           tile.gemm
// CHECK:         } {tile.wgmma_in_flight}

// OFF-LABEL:   func.func @tma
// OFF-NOT:       tile.bulk_copy
// OFF:           tile.copy async

// LOWER:       tensor_maps = [{box = array<i64: 128, 64>, param = 0 : i64, swizzle_bytes = 128 : i64}, {box = array<i64: 128, 64>, param = 1 : i64, swizzle_bytes = 128 : i64}]
// LOWER-LABEL: gpu.func @tma(
// LOWER-SAME:    %{{.*}}: memref<128x512xbf16>, %{{.*}}: memref<128x512xbf16>, %{{.*}}: memref<128x128xf32>, %[[MAPA:.*]]: !llvm.ptr, %[[MAPB:.*]]: !llvm.ptr)
// LOWER-SAME:    tilemega.tensor_map_params = array<i64: 3, 4>
// LOWER:         nvvm.mbarrier.init
// LOWER:         nvvm.fence.mbarrier.init
// LOWER:         nvvm.mbarrier.arrive.expect_tx
// LOWER:         nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAPA]], %{{.*}}, box[%{{.*}}, %{{.*}}]
// LOWER:         nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAPB]], %{{.*}}, box[%{{.*}}, %{{.*}}]
// LOWER:         scf.for
// LOWER:           nvvm.mbarrier.try_wait.parity
// LOWER-NOT:       nvvm.fence.proxy
// LOWER:           nvvm.wgmma.fence.aligned
func.func @tma(%A: memref<128x512xbf16>, %B: memref<128x512xbf16>, %C: memref<128x128xf32>) {
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

// A tile swizzled for ldmatrix rows of 32 f16 (64 bytes) under a pattern no
// TMA mode produces (shift 2): the loop keeps cp.async.
// CHECK-LABEL: func.func @not_a_tma_swizzle
// CHECK-NOT:     tile.bulk_copy
// CHECK:         tile.copy async
func.func @not_a_tma_swizzle(%A: memref<128x512xf16>, %F: memref<64x32xf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %c32 = arith.constant 32 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 2, base = 3, shift = 2>} : memref<64x32xf16, #gpu.address_space<workgroup>>
    tile.pipelined %k = %c0 to %c16 step %c1 num_stages 2 {
      %col = arith.muli %k, %c32 : index
      tile.copy %A[%c0, %col] to %a[0, 0] sizes [64, 32] : memref<128x512xf16> to memref<64x32xf16, #gpu.address_space<workgroup>>
      tile.copy %a[0, 0] to %F[0, 0] sizes [64, 32] : memref<64x32xf16, #gpu.address_space<workgroup>> to memref<64x32xf16>
    }
  }
  return
}

// -----

// Rows of 20 f16 (40 bytes) break TMA's 16-byte stride rule, although the
// box's rows (8 f16, 16 bytes) would do: the loop keeps cp.async.
// CHECK-LABEL: func.func @unaligned_rows
// CHECK-NOT:     tile.bulk_copy
// CHECK:         tile.copy async
func.func @unaligned_rows(%A: memref<64x20xf16>, %F: memref<64x8xf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %c8 = arith.constant 8 : index
    %a = tile.alloc_shared : memref<64x8xf16, #gpu.address_space<workgroup>>
    tile.pipelined %k = %c0 to %c3 step %c1 num_stages 2 {
      %col = arith.muli %k, %c8 : index
      tile.copy %A[%c0, %col] to %a[0, 0] sizes [64, 8] : memref<64x20xf16> to memref<64x8xf16, #gpu.address_space<workgroup>>
      tile.copy %a[0, 0] to %F[0, 0] sizes [64, 8] : memref<64x8xf16, #gpu.address_space<workgroup>> to memref<64x8xf16>
    }
  }
  return
}

// -----

// The loop's own `tma = false` keeps cp.async under the pass's tma.
// CHECK-LABEL: func.func @loop_says_no
// CHECK-NOT:     tile.bulk_copy
// CHECK:         tile.copy async
func.func @loop_says_no(%A: memref<128x512xbf16>, %F: memref<128x64xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 2 attributes {tma = false} {
      %col = arith.muli %k, %c64 : index
      tile.copy %A[%c0, %col] to %a[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.copy %a[0, 0] to %F[0, 0] sizes [128, 64] : memref<128x64xbf16, #gpu.address_space<workgroup>> to memref<128x64xbf16>
    }
  }
  return
}

// -----

// B as K x N (N-major) in 64-column blocks (#tile.swizzle columns = 64): the
// copy stays one bulk_copy of the whole 64 x 128 tile (the barrier expects
// both tiles' 32 KiB), and lowers to one TMA box per block: the tensor map's
// box is one block (64 x 64), box 1 reads 64 columns further on and fills
// the tile from element 4096 (8192 bytes) on.

// CHECK-LABEL: func.func @column_blocks
// CHECK:         tile.mbarrier_arrive_expect_tx %{{.*}}[%{{.*}}], 32768
// CHECK:         tile.bulk_copy %arg0
// CHECK:         tile.bulk_copy %arg1
// CHECK-NOT:     tile.copy async

// LOWER:       tensor_maps = [{box = array<i64: 128, 64>, param = 0 : i64, swizzle_bytes = 128 : i64}, {box = array<i64: 64, 64>, param = 1 : i64, swizzle_bytes = 128 : i64}]
// LOWER-LABEL: gpu.func @column_blocks(
// LOWER-SAME:    %[[MAPA:[^:]*]]: !llvm.ptr, %[[MAPB:[^:]*]]: !llvm.ptr)
// LOWER:         nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAPA]], %{{.*}}, box[%{{.*}}, %{{.*}}]
// LOWER:         nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAPB]], %{{.*}}, box[%{{.*}}, %{{.*}}]
// LOWER:         %[[COLUMNS:.*]] = arith.constant 64 : index
// LOWER-NEXT:    arith.addi %{{.*}}, %[[COLUMNS]] : index
// LOWER:         %[[BLOCK:.*]] = arith.constant 4096 : index
// LOWER:         arith.addi %{{.*}}, %[[BLOCK]] : index
// LOWER:         nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAPB]], %{{.*}}, box[%{{.*}}, %{{.*}}]
// LOWER-NEXT:    }
// LOWER-NEXT:    scf.for
func.func @column_blocks(%A: memref<128x512xbf16>, %B: memref<512x128xbf16>, %C: memref<128x128xf32>) {
  tile.kernel blocks(%b) in [1] threads 256 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3, columns = 64>} : memref<64x128xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [8, 1]>} : memref<128x128xf32, #tile.fragment>
    tile.clear %c : memref<128x128xf32, #tile.fragment>
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 3 {
      %row = arith.muli %k, %c64 : index
      tile.copy %A[%c0, %row] to %a[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.copy %B[%row, %c0] to %bb[0, 0] sizes [64, 128] : memref<512x128xbf16> to memref<64x128xbf16, #gpu.address_space<workgroup>>
      tile.gemm %a, %bb, %c
          : memref<128x64xbf16, #gpu.address_space<workgroup>>,
            memref<64x128xbf16, #gpu.address_space<workgroup>>,
            memref<128x128xf32, #tile.fragment>
    }
    tile.copy %c[0, 0] to %C[0, 0] sizes [128, 128] : memref<128x128xf32, #tile.fragment> to memref<128x128xf32>
  }
  return
}
