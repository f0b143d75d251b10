// RUN: tilemega-opt %s -convert-mega-to-gpu | FileCheck %s
// RUN: tilemega-opt %s -convert-mega-to-gpu | %check-mega-tables - | FileCheck %s --check-prefix=TABLES
// RUN: tilemega-opt %s -convert-mega-to-gpu="early-loads=true prefetch-bytes=65536" | FileCheck %s --check-prefix=READONLY

// A graph of two ranks (one persistent kernel a GPU): @push signals the
// peer event @pushed on both ranks, @sum waits for both ranks' pushes.
// Each rank keeps @pushed as two counter words (one per sender), and ends
// its argument table with its rank and both ranks' events buffers.

func.func @push(%x: memref<256xf32>, %to: memref<256xf32>) {
  tile.kernel blocks(%i) in [2] threads 64 {
    %c128 = arith.constant 128 : index
    %off = arith.muli %i, %c128 : index
    %s = tile.alloc_shared : memref<128xf32, #gpu.address_space<workgroup>>
    tile.copy %x[%off] to %s[0] sizes [128]
        : memref<256xf32> to memref<128xf32, #gpu.address_space<workgroup>>
    tile.copy %s[0] to %to[%off] sizes [128]
        : memref<128xf32, #gpu.address_space<workgroup>> to memref<256xf32>
  }
  return
}

func.func @sum(%inbox: memref<256xf32>, %out: memref<256xf32>) {
  tile.kernel blocks(%i) in [2] threads 64 {
    %f = tile.alloc_fragment : memref<128xf32, #tile.fragment>
    tile.clear %f : memref<128xf32, #tile.fragment>
  }
  return
}

// The tables, decoded: each rank's push instances signal their own
// sender's word of @pushed, the sums wait on both words.
// TABLES:      graph tp: 4 entries, 3 events, 2 workers, 2 ranks
// TABLES-NEXT: task push (aot): push#0 push#1
// TABLES-NEXT: task sum (aot): sum#0 sum#1
// TABLES-NEXT: event local: trigger 2 by push#0 push#1 for sum#0 sum#1
// TABLES-NEXT: event pushed from rank 0: trigger 2 by push#0 push#1 for sum#0 sum#1
// TABLES-NEXT: event pushed from rank 1: trigger 2 by push#0 push#1 for sum#0 sum#1
// TABLES-NEXT: aot w0: push#0 sum#0
// TABLES-NEXT: aot w1: push#1 sum#1

// The argument table: 4 graph tensors, this rank, 2 events buffers; the
// events buffer: one word for @local, two for @pushed.
// A peer may write any tensor of a rank (its inbox, through the peer's
// `to`): no copy is early and no weight is prefetched.
// READONLY-LABEL: func.func @tp(
// READONLY-NOT:   tile.prefetch_point
// READONLY-NOT:   tile.early
// READONLY-NOT:   mega.prefetch_l2

// CHECK-LABEL: func.func @tp(
// CHECK-SAME:    memref<7xi64> {mega.role = "runtime", tile.name = "mega_args"},
// CHECK-SAME:    memref<3xi32> {mega.role = "runtime", tile.name = "mega_events"},
// CHECK-SAME:    events = [{name = "local", trigger = 2 : i64},
// CHECK-SAME:              {name = "pushed", sender = 0 : i64, trigger = 2 : i64},
// CHECK-SAME:              {name = "pushed", sender = 1 : i64, trigger = 2 : i64}]
// CHECK-SAME:    num_events = 3 : i64
// CHECK-SAME:    ranks = 2 : i64
// Waits read their words at system scope: peers advance them over NVLink.
// CHECK:         mega.poll %{{.*}}[%{{.*}}] system : memref<3xi32>
// A signal: a peer event's entry (bit 30) signals word (first + rank) on
// every rank, through that rank's events buffer address (table words 5, 6);
// a local event's entry signals its word here.
// CHECK:         %[[PEER:.*]] = arith.cmpi ne
// CHECK:         scf.if %[[PEER]] {
// CHECK:           %[[RANK64:.*]] = memref.load %{{.*}}[%c4{{.*}}] : memref<7xi64, #gpu.address_space<workgroup>>
// CHECK:           scf.for %[[Q:.*]] = %c0{{.*}} to %c2{{.*}} step %c1
// CHECK:             %[[SLOT:.*]] = arith.addi %[[Q]], %c5
// CHECK:             %[[BASE:.*]] = memref.load %{{.*}}[%[[SLOT]]] : memref<7xi64, #gpu.address_space<workgroup>>
// CHECK:             mega.signal_peer %[[BASE]][%{{.*}}]
// CHECK:         } else {
// CHECK:           mega.signal %{{.*}}[%{{.*}}] : memref<3xi32>
mega.graph @tp(%x: memref<256xf32>, %to: memref<256xf32>, %inbox: memref<256xf32>,
               %out: memref<256xf32>)
    workers 2 schedulers 0 ranks 2 attributes {
      mega.arg_names = ["x", "to", "inbox", "out"],
      mega.arg_roles = ["input", "cache", "cache", "output"]} {
  mega.event @local trigger 2
  mega.event @pushed trigger 2 peers
  mega.queue @w0 aot worker 0 {tasks = [@push, @sum], instances = array<i64: 0, 0>}
  mega.queue @w1 aot worker 1 {tasks = [@push, @sum], instances = array<i64: 1, 1>}
  mega.task @push body @push(%x, %to : memref<256xf32>, memref<256xf32>) count 2
      signals [@pushed, @local]
      footprint [#mega.access<read operand 0 offset 128 * u + 0 size 128>,
                 #mega.access<write operand 1 offset 128 * u + 0 size 128>]
      {units_per_task = 1, cost_ns = 1000.0}
  mega.task @sum body @sum(%inbox, %out : memref<256xf32>, memref<256xf32>) count 2
      waits [@pushed, @local]
      footprint [#mega.access<read operand 0 offset 128 * u + 0 size 128>,
                 #mega.access<write operand 1 offset 128 * u + 0 size 128>]
      {units_per_task = 1, cost_ns = 500.0}
}
