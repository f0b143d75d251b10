// RUN: tilemega-opt %s -convert-mega-to-gpu="early-loads=true" | FileCheck %s
// RUN: tilemega-opt %s -convert-mega-to-gpu="early-loads=false" | FileCheck %s --check-prefix=OFF

// A body's tile.task_wait places the task's wait (early loads on, no JIT
// queue, one rank, one unit an entry): the ops before it run after the
// case's tile.prefetch_point and before thread 0's poll of the entry's
// events; those after it run in the scf.if of the events having fired.

func.func @fill(%H: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %f = tile.alloc_fragment : memref<1024xbf16, #tile.fragment>
    tile.clear %f : memref<1024xbf16, #tile.fragment>
    tile.copy %f[0] to %H[0] sizes [1024]
        : memref<1024xbf16, #tile.fragment> to memref<1024xbf16>
  }
  return
}

// Before its wait, @use reads %G[0] (the position: only @last, after @use
// in the step, writes %G) and copies a row of %W (no task writes it); after
// it, the same row of %X, which @first writes.
func.func @use(%W: memref<1024xbf16>, %G: memref<16xi32>, %X: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %w_s = tile.alloc_shared : memref<128xbf16, #gpu.address_space<workgroup>>
    %x_s = tile.alloc_shared : memref<128xbf16, #gpu.address_space<workgroup>>
    %p = memref.load %G[%c0] : memref<16xi32>
    %row = arith.index_cast %p : i32 to index
    tile.copy %W[%row] to %w_s[0] sizes [128]
        : memref<1024xbf16> to memref<128xbf16, #gpu.address_space<workgroup>>
    tile.task_wait
    tile.copy %X[%row] to %x_s[0] sizes [128]
        : memref<1024xbf16> to memref<128xbf16, #gpu.address_space<workgroup>>
  }
  return
}

// The step's last task advances the position.
func.func @advance(%G: memref<16xi32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : i32
    %p = memref.load %G[%c0] : memref<16xi32>
    %q = arith.addi %p, %c1 : i32
    memref.store %q, %G[%c0] : memref<16xi32>
  }
  return
}

// CHECK-LABEL: func.func @at_the_body_wait(
// CHECK:         case 1 {
// CHECK:           %[[W:.*]] = mega.graph_arg %{{.*}}[%c0{{.*}}] : {{.*}} -> memref<1024xbf16>
// CHECK:           %[[G:.*]] = mega.graph_arg %{{.*}}[%c1{{.*}}] : {{.*}} -> memref<16xi32>
// CHECK:           %[[X:.*]] = mega.graph_arg %{{.*}}[%c2{{.*}}] : {{.*}} -> memref<1024xbf16>
// CHECK:           tile.prefetch_point
// CHECK-NOT:       mega.poll
// CHECK:           %[[P:.*]] = memref.load %[[G]][%{{.*}}] : memref<16xi32>
// CHECK-NEXT:      %[[ROW:.*]] = arith.index_cast %[[P]]
// CHECK-NEXT:      tile.copy %[[W]][%[[ROW]]] to %{{.*}}[0] sizes [128] {tile.early}
// CHECK-NEXT:      scf.if %{{.*}} {
// CHECK-NOT:           nvvm.read.ptx.sreg.globaltimer
// CHECK:               scf.while
// CHECK:               mega.poll
// CHECK:           gpu.barrier
// CHECK:           scf.if %{{.*}} {
// CHECK-NEXT:        tile.copy %[[X]][%[[ROW]]] to %{{.*}}[0] sizes [128] :
// CHECK-NEXT:      }
// CHECK-NEXT:      scf.yield
// CHECK-NOT:     tile.task_wait
// OFF-LABEL:   func.func @at_the_body_wait(
// OFF-NOT:       tile.prefetch_point
// OFF-NOT:       tile.task_wait
mega.graph @at_the_body_wait(%w: memref<1024xbf16>, %gen: memref<16xi32>,
                             %h: memref<1024xbf16>) workers 1 schedulers 0 {
  mega.event @filled trigger 1
  mega.event @used trigger 1
  mega.queue @w0 aot worker 0 {tasks = [@first, @second, @last],
                               instances = array<i64: 0, 0, 0>}
  mega.task @first body @fill(%h : memref<1024xbf16>) count 1 signals [@filled]
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
  mega.task @second body @use(%w, %gen, %h : memref<1024xbf16>, memref<16xi32>, memref<1024xbf16>)
      count 1 waits [@filled] signals [@used]
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 1024>,
                 #mega.access<read operand 1 offset 0 * u + 0 size 16>,
                 #mega.access<read operand 2 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
  mega.task @last body @advance(%gen : memref<16xi32>) count 1 waits [@used]
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 16>,
                 #mega.access<write operand 0 offset 0 * u + 0 size 16>]
      {units_per_task = 1}
}

// Two units an entry: the case runs them in a loop, which would repeat a
// wait placed in the body, so the wait stays at the case's start and the
// body's tile.task_wait is dropped. Nothing runs before the wait, so the
// read of %X (which @first writes) before the tile.task_wait is no error.

func.func @use2(%X: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [2] threads 128 {
    %c0 = arith.constant 0 : index
    %x_s = tile.alloc_shared : memref<128xbf16, #gpu.address_space<workgroup>>
    %y_s = tile.alloc_shared : memref<128xbf16, #gpu.address_space<workgroup>>
    tile.copy %X[%c0] to %x_s[0] sizes [128]
        : memref<1024xbf16> to memref<128xbf16, #gpu.address_space<workgroup>>
    tile.task_wait
    tile.copy %X[%c0] to %y_s[0] sizes [128]
        : memref<1024xbf16> to memref<128xbf16, #gpu.address_space<workgroup>>
  }
  return
}

// CHECK-LABEL: func.func @at_the_case_start(
// CHECK:         case 1 {
// CHECK:           %[[X:.*]] = mega.graph_arg %{{.*}} -> memref<1024xbf16>
// CHECK-NOT:       tile.copy
// CHECK:           tile.prefetch_point
// CHECK-NOT:       tile.copy
// CHECK:           scf.while
// CHECK:             mega.poll
// CHECK:           gpu.barrier
// CHECK:           scf.if %{{.*}} {
// CHECK:             scf.for
// CHECK:               tile.copy %[[X]][%{{.*}}] to
// CHECK-NOT:           tile.task_wait
// CHECK:               tile.copy %[[X]][%{{.*}}] to
// CHECK-NOT:     tile.task_wait
// OFF-LABEL:   func.func @at_the_case_start(
// OFF-NOT:       tile.task_wait
mega.graph @at_the_case_start(%h: memref<1024xbf16>) workers 1 schedulers 0 {
  mega.event @filled trigger 1
  mega.queue @w0 aot worker 0 {tasks = [@first, @second], instances = array<i64: 0, 0>}
  mega.task @first body @fill(%h : memref<1024xbf16>) count 1 signals [@filled]
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
  mega.task @second body @use2(%h : memref<1024xbf16>) count 1 waits [@filled]
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 2}
}
