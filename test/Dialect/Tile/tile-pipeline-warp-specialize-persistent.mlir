// RUN: tilemega-opt %s -tile-pipeline="wgmma=true wgmma-in-flight=true tma=true" | FileCheck %s

// A warp-specialised loop inside the kernel's loop over tiles (a
// persistent kernel): the producer copies that loop (its bounds), and the
// tile's coordinates are recomputed inside it from its own induction
// variable; the pipeline's iteration is j * trips + i (j the tile loop's
// trip, here (t - block) / 4, trips = 8) on both sides; the consumers hand
// the stage of the tile's last iteration back after the K loop.

// CHECK-LABEL: func.func @persistent
// CHECK:         tile.producer {
// CHECK:           scf.for %[[T:.*]] = %arg3 to %{{.*}} step %{{.*}} {
// CHECK:             scf.for %[[I:.*]] =
// CHECK:               %[[ROW:.*]] = arith.muli %[[T]], %{{.*}} : index
// CHECK:               %[[SPAN:.*]] = arith.subi %[[T]], %arg3 : index
// CHECK:               %[[J:.*]] = arith.divui %[[SPAN]], %{{.*}} : index
// CHECK:               %[[BASE:.*]] = arith.muli %[[J]], %{{.*}} : index
// CHECK:               %[[G:.*]] = arith.addi %[[BASE]], %[[I]] : index
// CHECK:               arith.remui %[[G]]
// CHECK:               tile.bulk_copy %arg0[%[[ROW]], %{{.*}}]
// CHECK:         tile.pipelined %[[TC:.*]] = %arg3 to
// CHECK:           scf.for
// CHECK:             tile.mbarrier_wait
// CHECK:             tile.gemm
// CHECK:           } {tile.wgmma_in_flight}
// CHECK:           scf.if
// CHECK:             tile.mbarrier_arrive
// CHECK:           gpu.barrier
// CHECK:           tile.copy
func.func @persistent(%A: memref<512x512xbf16>, %B: memref<128x512xbf16>, %C: memref<512x128xf32>) {
  tile.kernel blocks(%b) in [4] threads 256 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [8, 1]>} : memref<128x128xf32, #tile.fragment>
    tile.pipelined %t = %b to %c4 step %c4 num_stages 1 {
      %row = arith.muli %t, %c128 : index
      tile.clear %c : memref<128x128xf32, #tile.fragment>
      tile.pipelined %k = %c0 to %c8 step %c1 num_stages 3 attributes {warp_specialize} {
        %col = arith.muli %k, %c64 : index
        tile.copy %A[%row, %col] to %a[0, 0] sizes [128, 64] : memref<512x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
        tile.copy %B[%c0, %col] to %bb[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
        tile.gemm %a, %bb, %c {transpose_b}
            : memref<128x64xbf16, #gpu.address_space<workgroup>>,
              memref<128x64xbf16, #gpu.address_space<workgroup>>,
              memref<128x128xf32, #tile.fragment>
      }
      tile.copy %c[0, 0] to %C[%row, 0] sizes [128, 128] : memref<128x128xf32, #tile.fragment> to memref<512x128xf32>
    }
  }
  return
}

// A raster's division by a computed divisor (T.use_swizzle's last, narrower
// panel) is not speculatable but has no effects: the producer recomputes it
// for the same tile the kernel computed it for.
// CHECK-LABEL: func.func @computed_divisor
// CHECK:         tile.producer {
// CHECK:           scf.for %[[T:.*]] = %arg3 to
// CHECK:             %[[ROWS:.*]] = arith.minui %{{.*}}, %{{.*}} : index
// CHECK:             %[[Q:.*]] = arith.divui %[[T]], %[[ROWS]] : index
// CHECK:             arith.muli %[[Q]], %{{.*}} : index
// CHECK:             tile.bulk_copy %arg0
func.func @computed_divisor(%A: memref<512x512xbf16>, %B: memref<128x512xbf16>, %C: memref<512x128xf32>) {
  tile.kernel blocks(%b) in [4] threads 256 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [8, 1]>} : memref<128x128xf32, #tile.fragment>
    tile.pipelined %t = %b to %c4 step %c4 num_stages 1 {
      %left = arith.subi %c4, %b : index
      %rows = arith.minui %c3, %left : index
      %q = arith.divui %t, %rows : index
      %row = arith.muli %q, %c128 : index
      tile.clear %c : memref<128x128xf32, #tile.fragment>
      tile.pipelined %k = %c0 to %c8 step %c1 num_stages 3 attributes {warp_specialize} {
        %col = arith.muli %k, %c64 : index
        tile.copy %A[%row, %col] to %a[0, 0] sizes [128, 64] : memref<512x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
        tile.copy %B[%c0, %col] to %bb[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
        tile.gemm %a, %bb, %c {transpose_b}
            : memref<128x64xbf16, #gpu.address_space<workgroup>>,
              memref<128x64xbf16, #gpu.address_space<workgroup>>,
              memref<128x128xf32, #tile.fragment>
      }
      tile.copy %c[0, 0] to %C[%row, 0] sizes [128, 128] : memref<128x128xf32, #tile.fragment> to memref<512x128xf32>
    }
  }
  return
}

// A loop around the warp-specialised one bounded by a count loaded from a
// kernel argument the kernel never writes (the prefill's rows: a tile past
// them does nothing): the producer's copy of that loop loads the count
// again, reading what the kernel read.
// CHECK-LABEL: func.func @loaded_bound
// CHECK:         tile.producer {
// CHECK:           %[[ROWS:.*]] = memref.load %arg3[%{{.*}}] : memref<2xindex>
// CHECK:           %[[LIVE:.*]] = arith.cmpi ult, %{{.*}}, %[[ROWS]] : index
// CHECK:           %[[N:.*]] = arith.select %[[LIVE]]
// CHECK:           scf.for %{{.*}} = %{{.*}} to %[[N]] step
// CHECK:             tile.bulk_copy %arg0
func.func @loaded_bound(%A: memref<512x512xbf16>, %B: memref<128x512xbf16>, %C: memref<512x128xf32>, %S: memref<2xindex>) {
  tile.kernel blocks(%b) in [4] threads 256 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [8, 1]>} : memref<128x128xf32, #tile.fragment>
    %rows = memref.load %S[%c1] : memref<2xindex>
    %row = arith.muli %b, %c128 : index
    %live = arith.cmpi ult, %row, %rows : index
    %n = arith.select %live, %c1, %c0 : index
    tile.pipelined %t = %c0 to %n step %c1 num_stages 1 {
      tile.clear %c : memref<128x128xf32, #tile.fragment>
      tile.pipelined %k = %c0 to %c8 step %c1 num_stages 3 attributes {warp_specialize} {
        %col = arith.muli %k, %c64 : index
        tile.copy %A[%row, %col] to %a[0, 0] sizes [128, 64] : memref<512x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
        tile.copy %B[%c0, %col] to %bb[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
        tile.gemm %a, %bb, %c {transpose_b}
            : memref<128x64xbf16, #gpu.address_space<workgroup>>,
              memref<128x64xbf16, #gpu.address_space<workgroup>>,
              memref<128x128xf32, #tile.fragment>
      }
      tile.copy %c[0, 0] to %C[%row, 0] sizes [128, 128] : memref<128x128xf32, #tile.fragment> to memref<512x128xf32>
    }
  }
  return
}
