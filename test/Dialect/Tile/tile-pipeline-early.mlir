// RUN: tilemega-opt %s -tile-pipeline -split-input-file | FileCheck %s
// RUN: tilemega-opt %s -tile-pipeline=early-depth=1 -split-input-file | FileCheck %s --check-prefix=DEPTH

// A persistent kernel (its tiles never share bytes): the prologue of the
// copy marked tile.early (a weight) moves up to the tile.prefetch_point,
// ahead of the wait (here an scf.if on a flag) and of the normalisation
// before the loop; its address (a row computed inside the scf.if from the
// block index) is recomputed there. The activation's copy keeps its
// prologue at the loop. Two stages ahead: two early groups, then the
// loop's own two (activation only).

// CHECK-LABEL: func.func @early
// CHECK-SAME:    (%[[W:.*]]: memref<64x1024xbf16>, %[[X:.*]]: memref<1024xbf16>, %[[F:.*]]: memref<1xi32>)
// CHECK:         %[[WBUF:.*]] = tile.alloc_shared : memref<3x16x128xbf16
// CHECK:         %[[XBUF:.*]] = tile.alloc_shared : memref<3x128xbf16
// CHECK-NOT:     tile.prefetch_point
// CHECK:         %[[ROW:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// CHECK:         %[[W0:.*]] = memref.subview %[[WBUF]][0, 0, 0]
// CHECK-NEXT:    tile.copy async %[[W]][%[[ROW]], %{{.*}}] to %[[W0]][0, 0] sizes [16, 128] {tile.early}
// CHECK-NEXT:    tile.async_commit
// CHECK:         %[[W1:.*]] = memref.subview %[[WBUF]][1, 0, 0]
// CHECK-NEXT:    tile.copy async %[[W]][%[[ROW]], %{{.*}}] to %[[W1]][0, 0] sizes [16, 128] {tile.early}
// CHECK-NEXT:    tile.async_commit
// CHECK-NEXT:    memref.load %[[F]]
// CHECK:         scf.if
// CHECK:           memref.load %[[X]]
// CHECK:           %[[X0:.*]] = memref.subview %[[XBUF]][0, 0]
// CHECK-NEXT:      tile.copy async %[[X]][%{{.*}}] to %[[X0]][0] sizes [128]
// CHECK-NEXT:      tile.async_commit
// CHECK-NOT:       tile.copy async %[[W]]
// CHECK:           tile.copy async %[[X]][%{{.*}}]
// CHECK-NEXT:      tile.async_commit
// CHECK-NEXT:      scf.for
// CHECK-NEXT:        tile.async_wait pending 1
// CHECK:             tile.copy async %[[W]]
// CHECK:             tile.copy async %[[X]]
// early-depth=1: iteration 0's early copy at the point, iteration 1's
// with the loop's own prologue (a shallower burst before the wait).
// DEPTH-LABEL: func.func @early
// DEPTH:         tile.copy async %arg0[%{{.*}}, %c0] to %{{.*}} {tile.early}
// DEPTH-NEXT:    tile.async_commit
// DEPTH-NEXT:    memref.load %arg2
// DEPTH:         scf.if
// DEPTH-NOT:       tile.copy async %arg0
// DEPTH:           tile.copy async %arg1
// DEPTH-NEXT:      tile.async_commit
// DEPTH:           tile.copy async %arg0{{.*}} {tile.early}
// DEPTH:           tile.copy async %arg1
// DEPTH-NEXT:      tile.async_commit
// DEPTH-NEXT:      scf.for
func.func @early(%W: memref<64x1024xbf16>, %X: memref<1024xbf16>, %F: memref<1xi32>) {
  tile.kernel blocks(%b) in [4] threads 128 attributes {tile.persistent} {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %c128 = arith.constant 128 : index
    %c1024 = arith.constant 1024 : index
    %zero = arith.constant 0 : i32
    %w_s = tile.alloc_shared : memref<16x128xbf16, #gpu.address_space<workgroup>>
    %x_s = tile.alloc_shared : memref<128xbf16, #gpu.address_space<workgroup>>
    %w = tile.alloc_fragment : memref<16x128xbf16, #tile.fragment>
    tile.prefetch_point
    %flag = memref.load %F[%c0] : memref<1xi32>
    %go = arith.cmpi ne, %flag, %zero : i32
    scf.if %go {
      %row = arith.muli %b, %c16 : index
      // Work before the loop (a normalisation reading the activation).
      %first = memref.load %X[%c0] : memref<1024xbf16>
      tile.pipelined %k = %c0 to %c1024 step %c128 num_stages 3 {
        tile.copy %W[%row, %k] to %w_s[0, 0] sizes [16, 128] {tile.early}
            : memref<64x1024xbf16> to memref<16x128xbf16, #gpu.address_space<workgroup>>
        tile.copy %X[%k] to %x_s[0] sizes [128]
            : memref<1024xbf16> to memref<128xbf16, #gpu.address_space<workgroup>>
        tile.copy %w_s[0, 0] to %w[0, 0] sizes [16, 128]
            : memref<16x128xbf16, #gpu.address_space<workgroup>> to memref<16x128xbf16, #tile.fragment>
      }
    }
  }
  return
}

// -----

// The row comes from a load inside the scf.if (data-dependent: not
// computable at the prefetch point): the early copy's prologue stays at
// its loop.

// CHECK-LABEL: func.func @address_from_a_load
// CHECK-NOT:     tile.prefetch_point
// CHECK:         scf.if
// CHECK:           memref.load %arg2
// CHECK:           tile.copy async %arg0
// CHECK-NEXT:      tile.async_commit
func.func @address_from_a_load(%W: memref<64x1024xbf16>, %X: memref<1024xbf16>, %R: memref<1xindex>) {
  tile.kernel blocks(%b) in [4] threads 128 attributes {tile.persistent} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c1024 = arith.constant 1024 : index
    %true = arith.constant true
    %w_s = tile.alloc_shared : memref<16x128xbf16, #gpu.address_space<workgroup>>
    %w = tile.alloc_fragment : memref<16x128xbf16, #tile.fragment>
    tile.prefetch_point
    scf.if %true {
      %row = memref.load %R[%c0] : memref<1xindex>
      tile.pipelined %k = %c0 to %c1024 step %c128 num_stages 2 {
        tile.copy %W[%row, %k] to %w_s[0, 0] sizes [16, 128] {tile.early}
            : memref<64x1024xbf16> to memref<16x128xbf16, #gpu.address_space<workgroup>>
        tile.copy %w_s[0, 0] to %w[0, 0] sizes [16, 128]
            : memref<16x128xbf16, #gpu.address_space<workgroup>> to memref<16x128xbf16, #tile.fragment>
      }
    }
  }
  return
}

// -----

// A kernel whose tiles share bytes by live range (not persistent): a tile
// used before the loop could share the stage buffers' bytes, so the
// prologue stays at the loop.

// CHECK-LABEL: func.func @shares_bytes
// CHECK-NOT:     tile.prefetch_point
// CHECK:         tile.copy %arg1[0] to
// CHECK:         tile.copy async %arg0
// CHECK-NEXT:    tile.async_commit
func.func @shares_bytes(%W: memref<64x1024xbf16>, %X: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [4] threads 128 {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %c128 = arith.constant 128 : index
    %c1024 = arith.constant 1024 : index
    %x_s = tile.alloc_shared : memref<128xbf16, #gpu.address_space<workgroup>>
    %w_s = tile.alloc_shared : memref<16x128xbf16, #gpu.address_space<workgroup>>
    %w = tile.alloc_fragment : memref<16x128xbf16, #tile.fragment>
    tile.prefetch_point
    tile.copy %X[0] to %x_s[0] sizes [128]
        : memref<1024xbf16> to memref<128xbf16, #gpu.address_space<workgroup>>
    %row = arith.muli %b, %c16 : index
    tile.pipelined %k = %c0 to %c1024 step %c128 num_stages 2 {
      tile.copy %W[%row, %k] to %w_s[0, 0] sizes [16, 128] {tile.early}
          : memref<64x1024xbf16> to memref<16x128xbf16, #gpu.address_space<workgroup>>
      tile.copy %w_s[0, 0] to %w[0, 0] sizes [16, 128]
          : memref<16x128xbf16, #gpu.address_space<workgroup>> to memref<16x128xbf16, #tile.fragment>
    }
  }
  return
}

// -----

// A store into the copied tensor between the prefetch point and the loop
// (a cache row written before the loop reads the cache): issued at the
// point, the copy could read the row from before the store, so its
// prologue stays at the loop. A store into another tensor there
// (@other_tensor_between) does not hold it back.

// CHECK-LABEL: func.func @write_between
// CHECK-NOT:     tile.prefetch_point
// CHECK:         tile.copy %{{.*}} to %arg0[%{{.*}}, 0] sizes [1, 128]
// CHECK:         tile.copy async %arg0
// CHECK-NEXT:    tile.async_commit
// CHECK-LABEL: func.func @other_tensor_between
// CHECK:         tile.copy async %arg0{{.*}} {tile.early}
// CHECK-NEXT:    tile.async_commit
// CHECK:         tile.copy %{{.*}} to %arg2[%{{.*}}, 0] sizes [1, 128]
func.func @write_between(%C: memref<64x128xbf16>, %R: memref<1xindex>) {
  tile.kernel blocks(%b) in [4] threads 128 attributes {tile.persistent} {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %c64 = arith.constant 64 : index
    %row = memref.load %R[%c0] : memref<1xindex>
    %new = tile.alloc_shared : memref<1x128xbf16, #gpu.address_space<workgroup>>
    %c_s = tile.alloc_shared : memref<16x128xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<16x128xbf16, #tile.fragment>
    tile.prefetch_point
    tile.copy %new[0, 0] to %C[%row, 0] sizes [1, 128]
        : memref<1x128xbf16, #gpu.address_space<workgroup>> to memref<64x128xbf16>
    tile.pipelined %k = %c0 to %c64 step %c16 num_stages 2 {
      tile.copy %C[%k, 0] to %c_s[0, 0] sizes [16, 128] {tile.early}
          : memref<64x128xbf16> to memref<16x128xbf16, #gpu.address_space<workgroup>>
      tile.copy %c_s[0, 0] to %c[0, 0] sizes [16, 128]
          : memref<16x128xbf16, #gpu.address_space<workgroup>> to memref<16x128xbf16, #tile.fragment>
    }
  }
  return
}
func.func @other_tensor_between(%C: memref<64x128xbf16>, %R: memref<1xindex>,
                                %D: memref<64x128xbf16>) {
  tile.kernel blocks(%b) in [4] threads 128 attributes {tile.persistent} {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %c64 = arith.constant 64 : index
    %row = memref.load %R[%c0] : memref<1xindex>
    %new = tile.alloc_shared : memref<1x128xbf16, #gpu.address_space<workgroup>>
    %c_s = tile.alloc_shared : memref<16x128xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<16x128xbf16, #tile.fragment>
    tile.prefetch_point
    tile.copy %new[0, 0] to %D[%row, 0] sizes [1, 128]
        : memref<1x128xbf16, #gpu.address_space<workgroup>> to memref<64x128xbf16>
    tile.pipelined %k = %c0 to %c64 step %c16 num_stages 2 {
      tile.copy %C[%k, 0] to %c_s[0, 0] sizes [16, 128] {tile.early}
          : memref<64x128xbf16> to memref<16x128xbf16, #gpu.address_space<workgroup>>
      tile.copy %c_s[0, 0] to %c[0, 0] sizes [16, 128]
          : memref<16x128xbf16, #gpu.address_space<workgroup>> to memref<16x128xbf16, #tile.fragment>
    }
  }
  return
}
