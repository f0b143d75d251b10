// RUN: tilemega-opt %s -tile-infer-layouts -convert-tile-to-gpu | FileCheck %s
// RUN: tilemega-opt %s --tilemega-tile-to-ptx-pipeline="chip=sm_90a" > %t.mlir
// RUN: %extract-ptx %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx

// tile.block_atomic_add: a block barrier (every thread's writes are done),
// thread 0's add between two device-scope fences (release of the block's
// writes, acquire of the earlier adders'), the old value through a shared
// word, a second barrier, and every thread reads the word.

// CHECK-LABEL: gpu.func @last_block
// CHECK-SAME:    (%[[COUNTS:.*]]: memref<8xi32>, %[[OUT:.*]]: memref<8xi32>)
// CHECK:         %[[B:.*]] = gpu.block_id x
// CHECK:         %[[WORD:.*]] = memref.view
// CHECK:         gpu.barrier
// CHECK-NEXT:    %[[TID:.*]] = gpu.thread_id x
// CHECK-NEXT:    %[[FIRST:.*]] = arith.cmpi eq, %[[TID]], %[[ZERO:.*]] : index
// CHECK-NEXT:    scf.if %[[FIRST]] {
// CHECK-NEXT:      llvm.fence syncscope("device") acq_rel
// CHECK-NEXT:      %[[OLD:.*]] = memref.atomic_rmw addi %{{.*}}, %[[COUNTS]][%[[B]]] : (i32, memref<8xi32>) -> i32
// CHECK-NEXT:      llvm.fence syncscope("device") acq_rel
// CHECK-NEXT:      memref.store %[[OLD]], %[[WORD]][%[[ZERO]]]
// CHECK-NEXT:    }
// CHECK-NEXT:    gpu.barrier
// CHECK-NEXT:    %[[SEEN:.*]] = memref.load %[[WORD]][%[[ZERO]]]
// CHECK-NEXT:    memref.store %[[SEEN]], %[[OUT]][%[[B]]]

// PTX-LABEL: .entry last_block
// PTX:         bar.sync 0;
// PTX:         fence.acq_rel.gpu;
// PTX-NEXT:    atom.global.add.u32 [[OLD:%r[0-9]+]], [%rd{{[0-9]+}}], 1;
// PTX-NEXT:    fence.acq_rel.gpu;
// PTX-NEXT:    st.shared.b32 [__dynamic_shmem__0], [[OLD]];
// PTX:         bar.sync 0;
// PTX-NEXT:    ld.shared.b32 %r{{[0-9]+}}, [__dynamic_shmem__0];
func.func @last_block(%counts: memref<8xi32>, %out: memref<8xi32>) {
  tile.kernel blocks(%b) in [8] threads 128 {
    %c1 = arith.constant 1 : i32
    %s = tile.alloc_shared : memref<1xi32, #gpu.address_space<workgroup>>
    %old = tile.block_atomic_add %c1 to %counts[%b] via %s
        : i32, memref<8xi32>, memref<1xi32, #gpu.address_space<workgroup>>
    memref.store %old, %out[%b] : memref<8xi32>
  }
  return
}
