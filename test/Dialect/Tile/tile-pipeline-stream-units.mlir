// RUN: tilemega-opt %s -tile-pipeline -split-input-file | FileCheck %s
// RUN: tilemega-opt %s -tile-pipeline -split-input-file -debug-only=tile-pipeline 2>&1 >/dev/null | FileCheck %s --check-prefix=WHY

// A loop over units marked tile.stream_units (a mega task's units, 3 of
// the 4 in range): one ring of 3 stages across the units. Unit j's
// iteration i is ring position j * 8 + i; its prologue runs only when unit
// j - 1 did not (here: j = 0); in its last iterations the refill issues
// unit j + 1's first ones (row recomputed for j + 1) when that unit runs.

// CHECK-LABEL: func.func @stream
// CHECK-SAME:    (%[[W:.*]]: memref<64x1024xbf16>,
// CHECK:         %[[WBUF:.*]] = tile.alloc_shared : memref<3x16x128xbf16
// CHECK:         %[[FIRST:.*]] = arith.muli %{{.*}}, %c4 : index
// CHECK:         scf.for %[[J:.*]] = %c0 to %c4 step %c1 {
// CHECK:           scf.if
// CHECK:             %[[ROW:.*]] = arith.muli %{{.*}}, %c16 : index
// CHECK:             %[[BASE:.*]] = arith.muli %[[J]], %c8 : index
// The prologue: where unit j - 1 did not run.
// CHECK:             %[[PREV:.*]] = arith.subi %[[J]], %c1
// CHECK:             %[[PREVUNIT:.*]] = arith.addi %[[FIRST]], %[[PREV]]
// CHECK:             arith.cmpi ult, %[[PREVUNIT]], %c3
// CHECK:             %[[FRESH:.*]] = arith.xori
// CHECK:             scf.if %[[FRESH]] {
// CHECK:               %[[S0:.*]] = arith.remui %[[BASE]], %c3
// CHECK:               memref.subview %[[WBUF]][%[[S0]], 0, 0]
// CHECK:               tile.copy async %[[W]][%[[ROW]], %c0]
// CHECK:               tile.async_commit
// CHECK:               tile.copy async %[[W]][%[[ROW]], %{{.*}}]
// CHECK:               tile.async_commit
// CHECK-NEXT:        }
// CHECK:             scf.for %[[I:.*]] = %{{.*}} to %c8 step
// CHECK-NEXT:          tile.async_wait pending 1
// CHECK-NEXT:          gpu.barrier
// CHECK:               %[[NEXT:.*]] = arith.addi %[[I]], %c2
// CHECK:               %[[IN:.*]] = arith.cmpi slt, %[[NEXT]], %c8
// Past the unit's end, the next unit's first iterations: one set of copies
// whose unit (j or j + 1) and iteration (next or next - 8) are selected,
// at ring position j * 8 + next either way.
// CHECK:               %[[J1:.*]] = arith.addi %[[J]], %c1
// CHECK:               %[[WRAP:.*]] = arith.cmpi sge, %[[NEXT]], %c8
// CHECK:               %[[UNIT1:.*]] = arith.addi %[[FIRST]], %[[J1]]
// CHECK:               %[[RUNS:.*]] = arith.andi
// CHECK:               %[[GO:.*]] = arith.ori %[[IN]], %[[RUNS]]
// CHECK:               %[[JI:.*]] = arith.select %[[WRAP]], %[[J1]], %[[J]]
// CHECK:               %[[M:.*]] = arith.subi %[[NEXT]], %c8
// CHECK:               %[[IT:.*]] = arith.select %[[WRAP]], %[[M]], %[[NEXT]]
// CHECK:               %[[UNITI:.*]] = arith.addi %[[FIRST]], %[[JI]]
// CHECK:               %[[ROWI:.*]] = arith.muli %[[UNITI]], %c16
// CHECK:               %[[RING:.*]] = arith.addi %[[BASE]], %[[NEXT]]
// CHECK:               scf.if %[[GO]] {
// CHECK:                 %[[COL:.*]] = arith.muli %[[IT]], %c128
// CHECK:                 arith.remui %[[RING]], %c3
// CHECK:                 tile.copy async %[[W]][%[[ROWI]], %[[COL]]]
// CHECK-NOT:           } else {
// CHECK:               }
// CHECK-NEXT:          tile.async_commit
// CHECK:               arith.addi %[[I]], %[[BASE]]
// CHECK:         } {tile.stream_units}
// WHY: tile-pipeline: loc({{.*}}stream-units.mlir":{{[0-9]+}}:{{[0-9]+}}) streams across the units of
func.func @stream(%W: memref<64x1024xbf16>, %X: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 attributes {tile.persistent} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    %c16 = arith.constant 16 : index
    %c128 = arith.constant 128 : index
    %c1024 = arith.constant 1024 : index
    %w_s = tile.alloc_shared : memref<16x128xbf16, #gpu.address_space<workgroup>>
    %x_s = tile.alloc_shared : memref<128xbf16, #gpu.address_space<workgroup>>
    %w = tile.alloc_fragment : memref<16x128xbf16, #tile.fragment>
    %first = arith.muli %b, %c4 : index
    scf.for %j = %c0 to %c4 step %c1 {
      %unit = arith.addi %first, %j : index
      gpu.barrier
      %in = arith.cmpi ult, %unit, %c3 : index
      scf.if %in {
        %row = arith.muli %unit, %c16 : index
        tile.pipelined %k = %c0 to %c1024 step %c128 num_stages 3 {
          tile.copy %W[%row, %k] to %w_s[0, 0] sizes [16, 128]
              : memref<64x1024xbf16> to memref<16x128xbf16, #gpu.address_space<workgroup>>
          tile.copy %X[%k] to %x_s[0] sizes [128]
              : memref<1024xbf16> to memref<128xbf16, #gpu.address_space<workgroup>>
          tile.copy %w_s[0, 0] to %w[0, 0] sizes [16, 128]
              : memref<16x128xbf16, #gpu.address_space<workgroup>> to memref<16x128xbf16, #tile.fragment>
        }
      }
    } {tile.stream_units}
  }
  return
}

// -----

// The row comes from a load inside the unit (not recomputable for the next
// unit): each unit runs its own prologue, as without the mark.

// CHECK-LABEL: func.func @loaded_row
// CHECK:         scf.for %[[J:.*]] = %c0 to %c4 step %c1 {
// CHECK-NOT:       arith.xori
// CHECK:           tile.copy async
// CHECK-NEXT:      tile.async_commit
// CHECK:           scf.for
// CHECK-NOT:       } else {
// CHECK:         } {tile.stream_units}
// WHY: does not stream across units: an address depends on a value that cannot be recomputed for the next unit
func.func @loaded_row(%W: memref<64x1024xbf16>, %R: memref<4xindex>) {
  tile.kernel blocks(%b) in [1] threads 128 attributes {tile.persistent} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c128 = arith.constant 128 : index
    %c1024 = arith.constant 1024 : index
    %w_s = tile.alloc_shared : memref<16x128xbf16, #gpu.address_space<workgroup>>
    %w = tile.alloc_fragment : memref<16x128xbf16, #tile.fragment>
    scf.for %j = %c0 to %c4 step %c1 {
      gpu.barrier
      %row = memref.load %R[%j] : memref<4xindex>
      tile.pipelined %k = %c0 to %c1024 step %c128 num_stages 2 {
        tile.copy %W[%row, %k] to %w_s[0, 0] sizes [16, 128]
            : memref<64x1024xbf16> to memref<16x128xbf16, #gpu.address_space<workgroup>>
        tile.copy %w_s[0, 0] to %w[0, 0] sizes [16, 128]
            : memref<16x128xbf16, #gpu.address_space<workgroup>> to memref<16x128xbf16, #tile.fragment>
      }
    } {tile.stream_units}
  }
  return
}

// -----

// Tiles that may share bytes (not a persistent kernel): a tile written
// after one unit's loop could alias the stages the next unit's copies
// fill, so no streaming.

// CHECK-LABEL: func.func @shared_bytes
// CHECK-NOT:     arith.xori
// WHY: does not stream across units: the kernel's shared tiles share bytes by live range
func.func @shared_bytes(%W: memref<64x1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c16 = arith.constant 16 : index
    %c128 = arith.constant 128 : index
    %c1024 = arith.constant 1024 : index
    %w_s = tile.alloc_shared : memref<16x128xbf16, #gpu.address_space<workgroup>>
    %w = tile.alloc_fragment : memref<16x128xbf16, #tile.fragment>
    scf.for %j = %c0 to %c4 step %c1 {
      gpu.barrier
      %row = arith.muli %j, %c16 : index
      tile.pipelined %k = %c0 to %c1024 step %c128 num_stages 2 {
        tile.copy %W[%row, %k] to %w_s[0, 0] sizes [16, 128]
            : memref<64x1024xbf16> to memref<16x128xbf16, #gpu.address_space<workgroup>>
        tile.copy %w_s[0, 0] to %w[0, 0] sizes [16, 128]
            : memref<16x128xbf16, #gpu.address_space<workgroup>> to memref<16x128xbf16, #tile.fragment>
      }
    } {tile.stream_units}
  }
  return
}

// -----

// Bounds computed inside the unit: the trips may change from one unit to
// the next, so no streaming.

// CHECK-LABEL: func.func @unit_bounds
// CHECK-NOT:     arith.xori
// WHY: does not stream across units: its bounds change from one unit to the next
func.func @unit_bounds(%W: memref<64x1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 attributes {tile.persistent} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c16 = arith.constant 16 : index
    %c128 = arith.constant 128 : index
    %w_s = tile.alloc_shared : memref<16x128xbf16, #gpu.address_space<workgroup>>
    %w = tile.alloc_fragment : memref<16x128xbf16, #tile.fragment>
    scf.for %j = %c0 to %c4 step %c1 {
      gpu.barrier
      %row = arith.muli %j, %c16 : index
      %j1 = arith.addi %j, %c1 : index
      %end = arith.muli %j1, %c128 : index
      tile.pipelined %k = %c0 to %end step %c128 num_stages 2 {
        tile.copy %W[%row, %k] to %w_s[0, 0] sizes [16, 128]
            : memref<64x1024xbf16> to memref<16x128xbf16, #gpu.address_space<workgroup>>
        tile.copy %w_s[0, 0] to %w[0, 0] sizes [16, 128]
            : memref<16x128xbf16, #gpu.address_space<workgroup>> to memref<16x128xbf16, #tile.fragment>
      }
    } {tile.stream_units}
  }
  return
}
