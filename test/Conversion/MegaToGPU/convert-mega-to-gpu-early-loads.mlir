// RUN: tilemega-opt %s -convert-mega-to-gpu="early-loads=true" | FileCheck %s
// RUN: tilemega-opt %s -convert-mega-to-gpu="early-loads=false" | FileCheck %s --check-prefix=OFF
// RUN: tilemega-opt %s -convert-mega-to-gpu="early-loads=true" -tile-pipeline | FileCheck %s --check-prefix=PIPE

// Two GEMV-like tasks on one worker, no JIT queue: @first writes %h, which
// @second streams (an activation), next to %w, which no task writes (a
// weight). Early loads: the worker picks its next AOT entry without waiting;
// in the case, a tile.prefetch_point comes before thread 0's wait (a
// watchdog-bounded poll of the entry's events), and the body runs if the
// events fired. The copy of %w is marked tile.early, the copy of %h is not.

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
    %f = tile.alloc_fragment : memref<1024xbf16, #tile.fragment>
    tile.clear %f : memref<1024xbf16, #tile.fragment>
    tile.copy %f[0] to %H[0] sizes [1024]
        : memref<1024xbf16, #tile.fragment> to memref<1024xbf16>
  }
  return
}

// CHECK-LABEL: func.func @early(
// CHECK:         tile.kernel
// The pick: every thread reads the next AOT entry's record from shared
// memory; no readiness check, no global read, no hand-over barrier.
// CHECK:         scf.while
// CHECK-NOT:     mega.peek
// CHECK-NOT:     gpu.barrier
// CHECK:         scf.index_switch %{{.*}} {tile.exclusive_cases}
// CHECK:         case 1 {
// CHECK:           %[[W:.*]] = mega.graph_arg %{{.*}}[%c0{{.*}}] : memref<2xi64, #gpu.address_space<workgroup>> -> memref<64x1024xbf16>
// CHECK:           %[[H:.*]] = mega.graph_arg %{{.*}}[%c1{{.*}}] : memref<2xi64, #gpu.address_space<workgroup>> -> memref<1024xbf16>
// CHECK:           tile.prefetch_point
// An entry without events (its record's wait count 0) is ready at once: no
// event poll, no abort read; the wait loop is the other branch.
// CHECK:             %[[NONE:.*]] = arith.cmpi eq, %{{.*}}, %c0_i32{{.*}} : i32
// CHECK-NEXT:        %{{.*}} = scf.if %[[NONE]] -> (i32) {
// CHECK-NEXT:          %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT:          scf.yield %[[ONE]] : i32
// CHECK-NEXT:        } else {
// The wait reads the timer only after a miss (its start is carried, 0
// until then).
// CHECK-NOT:       nvvm.read.ptx.sreg.globaltimer
// CHECK:           scf.while {{.*}} : (i32, i64) -> (i32, i64)
// CHECK:             mega.peek
// CHECK:             mega.poll
// CHECK:             scf.if %{{.*}} -> (i1, i64) {
// CHECK-NEXT:          nvvm.read.ptx.sreg.globaltimer
// CHECK:               mega.watchdog_expired
// CHECK:           gpu.barrier
// CHECK:           scf.if %{{.*}} {
// CHECK:             tile.pipelined
// CHECK-NEXT:          tile.copy %[[W]][%{{.*}}, %{{.*}}] to %{{.*}}[0, 0] sizes [16, 128] {tile.early}
// CHECK-NEXT:          tile.copy %[[H]][%{{.*}}] to %{{.*}}[0] sizes [128] :
// The signals go out only if the body ran (control word 4).
// CHECK:         memref.load %{{.*}}[%c4{{.*}}] : memref<5xi32, #gpu.address_space<workgroup>>
// CHECK:         mega.signal

// OFF-LABEL: func.func @early(
// OFF-NOT:     tile.prefetch_point
// OFF-NOT:     tile.early

// After tile-pipeline: the first two stages of %w are issued before the
// wait; the loop's own prologue issues %h's only.
// PIPE-LABEL: func.func @early(
// PIPE:         case 1 {
// PIPE:           tile.copy async %{{.*}} {tile.early}
// PIPE-NEXT:      tile.async_commit
// PIPE:           tile.copy async %{{.*}} {tile.early}
// PIPE-NEXT:      tile.async_commit
// PIPE:           scf.while
// PIPE:             mega.poll
// PIPE:           scf.if %{{.*}} {
// PIPE-NOT:         tile.early
// PIPE:             tile.copy async %{{.*}} : memref<1024xbf16>
// PIPE-NEXT:        tile.async_commit
// PIPE-NOT:         tile.early
// PIPE:             tile.copy async %{{.*}} : memref<1024xbf16>
// PIPE-NEXT:        tile.async_commit
// PIPE-NEXT:        scf.for
mega.graph @early(%w: memref<64x1024xbf16>, %h: memref<1024xbf16>)
    workers 1 schedulers 0 {
  mega.event @filled trigger 1
  mega.queue @w0 aot worker 0 {tasks = [@first, @second, @second, @second, @second],
                               instances = array<i64: 0, 0, 1, 2, 3>}
  mega.task @first body @fill(%h : memref<1024xbf16>) count 1 signals [@filled]
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
  mega.task @second body @gemv(%w, %h : memref<64x1024xbf16>, memref<1024xbf16>) count 4
      waits [@filled]
      footprint [#mega.access<read operand 0 offset 16384 * u + 0 size 16384>,
                 #mega.access<read operand 1 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
}
