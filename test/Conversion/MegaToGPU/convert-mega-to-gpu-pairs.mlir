// RUN: tilemega-opt %s -convert-mega-to-gpu | FileCheck %s
// RUN: tilemega-opt %s -convert-mega-to-gpu -tile-pipeline | FileCheck %s --check-prefix=PIPE
// RUN: not tilemega-opt %s -convert-mega-to-gpu="early-loads=false" 2>&1 | FileCheck %s --check-prefix=OFF

// The worker's first two entries run as a pair (`paired = [0]`): one case
// holds @fill's body and @gemv's, the tiles of both in its exclusive
// group. Both tasks' operands are bound before the case's prefetch point;
// @fill waits, runs and signals; then @gemv waits for its own events and
// runs. After tile-pipeline the gemv's copies of %w (no task writes it)
// are issued at the point, before @fill's wait; %h (which @fill writes)
// stays in the loop's own prologue.

func.func @gemv(%W: memref<64x1024xbf16>, %X: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [4] threads 128 {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %c128 = arith.constant 128 : index
    %c1024 = arith.constant 1024 : index
    %row = arith.muli %b, %c16 : index
    %w_s = tile.alloc_shared : memref<16x128xbf16, #gpu.address_space<workgroup>>
    %x_s = tile.alloc_shared : memref<128xbf16, #gpu.address_space<workgroup>>
    %w = tile.alloc_fragment : memref<16x128xbf16, #tile.fragment>
    tile.pipelined %k = %c0 to %c1024 step %c128 num_stages 3 {
      tile.copy %W[%row, %k] to %w_s[0, 0] sizes [16, 128]
          : memref<64x1024xbf16> to memref<16x128xbf16, #gpu.address_space<workgroup>>
      tile.copy %X[%k] to %x_s[0] sizes [128]
          : memref<1024xbf16> to memref<128xbf16, #gpu.address_space<workgroup>>
      tile.copy %w_s[0, 0] to %w[0, 0] sizes [16, 128]
          : memref<16x128xbf16, #gpu.address_space<workgroup>> to memref<16x128xbf16, #tile.fragment>
    }
  }
  return
}

func.func @fill(%H: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %s = tile.alloc_shared : memref<1024xbf16, #gpu.address_space<workgroup>>
    %f = tile.alloc_fragment : memref<1024xbf16, #tile.fragment>
    tile.clear %f : memref<1024xbf16, #tile.fragment>
    tile.copy %f[0] to %s[0] sizes [1024]
        : memref<1024xbf16, #tile.fragment> to memref<1024xbf16, #gpu.address_space<workgroup>>
    tile.copy %s[0] to %H[0] sizes [1024]
        : memref<1024xbf16, #gpu.address_space<workgroup>> to memref<1024xbf16>
  }
  return
}

// CHECK-LABEL: func.func @pairs(
// The tiles of the pair case (region 3) are a group of their own.
// CHECK-DAG:     tile.alloc_shared {tile.exclusive_group = 3 : i64} : memref<1024xbf16
// CHECK-DAG:     tile.alloc_shared {tile.exclusive_group = 3 : i64} : memref<16x128xbf16
// CHECK:         scf.while
// The case after the bodies' two: the first entry's record names it; the
// second entry's record is the next AOT record.
// CHECK:         %[[PAIRED:.*]] = arith.cmpi sge, %{{.*}}, %c2{{.*}} : i32
// CHECK:         scf.if %[[PAIRED]] -> (vector<8xi32>)
// CHECK:         scf.index_switch %{{.*}} {tile.exclusive_cases}
// CHECK:         case 2 {
// CHECK:           %[[H1:.*]] = mega.graph_arg %{{.*}}[%c1{{.*}}] : {{.*}} -> memref<1024xbf16>
// CHECK:           %[[W:.*]] = mega.graph_arg %{{.*}}[%c0{{.*}}] : {{.*}} -> memref<64x1024xbf16>
// CHECK:           tile.prefetch_point
// CHECK:           mega.poll
// CHECK:           scf.if %{{.*}} {
// CHECK:             tile.copy %{{.*}} to %[[H1]][0] sizes [1024]
// CHECK:           gpu.barrier
// CHECK:           mega.signal
// CHECK-NOT:       tile.prefetch_point
// CHECK:           mega.poll
// CHECK:           scf.if %{{.*}} {
// CHECK:             tile.pipelined
// CHECK-NEXT:          tile.copy %[[W]][%{{.*}}, %{{.*}}] to %{{.*}}[0, 0] sizes [16, 128] {tile.early}
// The second entry signals after the switch; the position moves past it.
// CHECK:         gpu.barrier
// CHECK:         mega.signal
// CHECK:         arith.extui %[[PAIRED]] : i1 to i32

// PIPE-LABEL: func.func @pairs(
// PIPE:         case 2 {
// PIPE:           tile.copy async %{{.*}} {tile.early}
// PIPE-NEXT:      tile.async_commit
// PIPE:           tile.copy async %{{.*}} {tile.early}
// PIPE-NEXT:      tile.async_commit
// PIPE:           mega.poll
// PIPE:           mega.signal
// PIPE:           mega.poll
// PIPE:           scf.if %{{.*}} {
// PIPE-NOT:         tile.early
// PIPE:             tile.copy async %{{.*}} : memref<1024xbf16>
// PIPE-NEXT:        tile.async_commit
// PIPE-NOT:         tile.early
// PIPE:             tile.copy async %{{.*}} : memref<1024xbf16>
// PIPE-NEXT:        tile.async_commit
// PIPE-NEXT:        scf.for

// OFF: error: 'mega.graph' op pairs entries (a queue's `paired`, mega-pair-entries), which needs early-loads
mega.graph @pairs(%w: memref<64x1024xbf16>, %h: memref<1024xbf16>)
    workers 1 schedulers 0 {
  mega.event @filled trigger 1
  mega.queue @w0 aot worker 0 {tasks = [@first, @second, @second, @second, @second],
                               instances = array<i64: 0, 0, 1, 2, 3>,
                               paired = array<i64: 0>}
  mega.task @first body @fill(%h : memref<1024xbf16>) count 1 signals [@filled]
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
  mega.task @second body @gemv(%w, %h : memref<64x1024xbf16>, memref<1024xbf16>) count 4
      waits [@filled]
      footprint [#mega.access<read operand 0 offset 16384 * u + 0 size 16384>,
                 #mega.access<read operand 1 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
}
