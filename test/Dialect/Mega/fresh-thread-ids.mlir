// RUN: tilemega-opt %s -mega-fresh-thread-ids | FileCheck %s

// Each case of the persistent kernel's switch over task bodies (marked
// tile.exclusive_cases) reads its thread index itself; a use outside the
// switch, another switch's cases and a y index keep the kernel's reads.

// CHECK-LABEL: func.func @kernel
// CHECK:         %[[TID:.*]] = gpu.thread_id x
// CHECK:         %[[TIDY:.*]] = gpu.thread_id y
// CHECK:         arith.cmpi eq, %[[TID]], %c0
// CHECK:         scf.index_switch %{{.*}} {tile.exclusive_cases}
// CHECK-NEXT:    case 1 {
// CHECK-NEXT:      %[[T1:.*]] = mega.thread_index
// CHECK-NEXT:      arith.muli %[[T1]], %c8
// CHECK-NEXT:      arith.addi %[[T1]], %[[TIDY]]
// CHECK:         case 2 {
// CHECK-NEXT:      %[[T2:.*]] = mega.thread_index
// CHECK:           scf.if
// CHECK-NEXT:        arith.muli %[[T2]], %c4
// CHECK:         scf.index_switch
// CHECK:         case 1 {
// CHECK-NOT:       mega.thread_index
// CHECK:           arith.addi %[[TID]], %c1
func.func @kernel(%case: index, %flag: i1, %out: memref<8xindex>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %tid = gpu.thread_id x
  %tidy = gpu.thread_id y
  %first = arith.cmpi eq, %tid, %c0 : index
  scf.index_switch %case {tile.exclusive_cases}
  case 1 {
    %a = arith.muli %tid, %c8 : index
    %b = arith.addi %tid, %tidy : index
    memref.store %a, %out[%b] : memref<8xindex>
    scf.yield
  }
  case 2 {
    scf.if %flag {
      %a = arith.muli %tid, %c4 : index
      memref.store %a, %out[%c0] : memref<8xindex>
    }
    scf.yield
  }
  default {
  }
  scf.index_switch %case
  case 1 {
    %a = arith.addi %tid, %c1 : index
    memref.store %a, %out[%c1] : memref<8xindex>
    scf.yield
  }
  default {
  }
  %f = arith.index_cast %first : i1 to index
  memref.store %f, %out[%c4] : memref<8xindex>
  return
}
