// RUN: tilemega-opt %s -mega-fresh-thread-ids | FileCheck %s
// RUN: tilemega-opt %s -mega-fresh-thread-ids="cases=false" | FileCheck %s --check-prefix=NOCASES

// A claim loop (mega.claim_loop) reads the thread index at the start of each
// of its regions, and computes there again every value it uses that the
// kernel computed from the thread index outside it by side-effect-free ops
// (here the `thread 0` test, and a lane computed from the case's read): no
// per-thread condition in the loop is loop-invariant, so LLVM cannot
// unswitch the loop on one. A value loaded outside keeps its use, and so
// does the loop without the mark.

// CHECK-LABEL: func.func @claims
// CHECK:         %[[TID:.*]] = gpu.thread_id x
// CHECK:         %[[FIRST:.*]] = arith.cmpi eq, %[[TID]], %c0
// CHECK:         case 1 {
// CHECK-NEXT:      %[[CASE:.*]] = mega.thread_index
// CHECK:           %[[LANE:.*]] = arith.remui %[[CASE]], %c32
// CHECK:           %[[LOADED:.*]] = memref.load
// CHECK:           scf.while
// CHECK-NEXT:        %[[T1:.*]] = mega.thread_index
// CHECK-NEXT:        %[[F1:.*]] = arith.cmpi eq, %[[T1]], %c0
// CHECK-NEXT:        %[[L1:.*]] = arith.remui %[[T1]], %c32
// CHECK:             scf.if %[[F1]] {
// CHECK:             %[[L32:.*]] = arith.index_cast %[[L1]]
// CHECK-NEXT:        arith.cmpi eq, %[[L32]], %[[LOADED]]
// CHECK:           } do {
// CHECK-NEXT:      ^bb0
// CHECK-NEXT:        %[[T2:.*]] = mega.thread_index
// CHECK-NEXT:        %[[F2:.*]] = arith.cmpi eq, %[[T2]], %c0
// CHECK-NEXT:        scf.if %[[F2]] {
// CHECK:           } attributes {mega.claim_loop}
// CHECK:           scf.while
// CHECK-NOT:         mega.thread_index
// CHECK:             scf.if %[[FIRST]] {
// CHECK:           }

// Without per-case reads the case keeps the kernel's index; the claim loop
// still reads its own.
// NOCASES-LABEL: func.func @claims
// NOCASES:         %[[TID:.*]] = gpu.thread_id x
// NOCASES:         case 1 {
// NOCASES-NEXT:      arith.remui %[[TID]], %c32
// NOCASES:           scf.while
// NOCASES-NEXT:        %[[T1:.*]] = mega.thread_index
// NOCASES-NEXT:        arith.cmpi eq, %[[T1]], %c0
// NOCASES-NEXT:        arith.remui %[[T1]], %c32
func.func @claims(%case: index, %out: memref<8xi32>, %word: memref<1xi32>) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %c4_i32 = arith.constant 4 : i32
  %tid = gpu.thread_id x
  %first = arith.cmpi eq, %tid, %c0 : index
  scf.index_switch %case {tile.exclusive_cases}
  case 1 {
    %lane = arith.remui %tid, %c32 : index
    %loaded = memref.load %word[%c0] : memref<1xi32>
    %start = arith.constant 0 : i32
    %r = scf.while (%u = %start) : (i32) -> i32 {
      scf.if %first {
        memref.store %u, %word[%c0] : memref<1xi32>
      }
      %lane32 = arith.index_cast %lane : index to i32
      %mine = arith.cmpi eq, %lane32, %loaded : i32
      %v = arith.extui %mine : i1 to i32
      memref.store %v, %out[%lane] : memref<8xi32>
      %next = memref.load %word[%c0] : memref<1xi32>
      %more = arith.cmpi ult, %next, %c4_i32 : i32
      scf.condition(%more) %next : i32
    } do {
    ^bb0(%u: i32):
      scf.if %first {
        memref.store %u, %word[%c0] : memref<1xi32>
      }
      scf.yield %u : i32
    } attributes {mega.claim_loop}
    %s = scf.while (%u = %start) : (i32) -> i32 {
      scf.if %first {
        memref.store %u, %word[%c0] : memref<1xi32>
      }
      %more = arith.cmpi ult, %u, %c4_i32 : i32
      scf.condition(%more) %u : i32
    } do {
    ^bb0(%u: i32):
      scf.yield %u : i32
    }
    scf.yield
  }
  default {
  }
  return
}
