// RUN: tilemega-opt %s -split-input-file -mega-schedule | FileCheck %s --check-prefixes=CHECK,AUTO
// RUN: tilemega-opt %s -split-input-file -mega-schedule=policy=auto | FileCheck %s --check-prefixes=CHECK,AUTO
// RUN: tilemega-opt %s -split-input-file -mega-schedule=policy=aot | FileCheck %s --check-prefixes=CHECK,AOT
// RUN: tilemega-opt %s -split-input-file -verify-diagnostics -mega-schedule=policy=jit | FileCheck %s --check-prefixes=CHECK,JIT
// RUN: not tilemega-opt %s -split-input-file -mega-schedule=policy=fifo 2>&1 | FileCheck %s --check-prefix=POLICY

// POLICY: error: mega-schedule policy must be auto, aot or jit, got 'fifo'

func.func @k2(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [2] threads 128 {
  }
  return
}
func.func @k1(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 128 {
  }
  return
}

// p (2 x 100 ns) -> v (2 x 300 ns, variable) -> q (50 ns) on 2 workers.
// List scheduling: p_0 on w0 and p_1 on w1 at 0; at 100 v_0 goes to w1
// (free, and it ran a producer of v_0: p_1 signalled last), v_1 to w0; q at
// 400 to w0, which ran v_1. The makespan is 450 ns whatever the queues.
//  auto: the variable v goes to the JIT queue (created: the graph has none),
//        the others to per-worker AOT queues (created, one per worker).
//  aot:  everything in AOT queues, in each worker's start order.
//  jit:  everything in the JIT queue, in start order; the AOT queues exist
//        but are empty.

// CHECK-LABEL: mega.graph @chain
// CHECK-SAME:    attributes {mega.estimated_makespan_ns = 4.500000e+02 : f64}
// AUTO-NEXT:     mega.queue @jit jit {instances = array<i64: 0, 1>, tasks = [@v, @v]}
// AUTO-NEXT:     mega.queue @w0 aot worker 0 {instances = array<i64: 0, 0>, tasks = [@p, @q]}
// AUTO-NEXT:     mega.queue @w1 aot worker 1 {instances = array<i64: 1>, tasks = [@p]}
// AOT-NEXT:      mega.queue @w0 aot worker 0 {instances = array<i64: 0, 1, 0>, tasks = [@p, @v, @q]}
// AOT-NEXT:      mega.queue @w1 aot worker 1 {instances = array<i64: 1, 0>, tasks = [@p, @v]}
// JIT-NEXT:      mega.queue @jit jit {instances = array<i64: 0, 1, 0, 1, 0>, tasks = [@p, @p, @v, @v, @q]}
// JIT-NEXT:      mega.queue @w0 aot worker 0 {instances = array<i64>, tasks = []}
// JIT-NEXT:      mega.queue @w1 aot worker 1 {instances = array<i64>, tasks = []}
// CHECK-NEXT:    mega.event @e0 trigger 2
// AOT-NOT:       mega.queue
mega.graph @chain(%x: memref<64xf32>) workers 2 {
  mega.event @e0 trigger 2
  mega.event @e1 trigger 2
  mega.task @p body @k2(%x : memref<64xf32>) count 2 signals [@e0]
      {units_per_task = 1, cost_ns = 100.0}
  mega.task @v body @k2(%x : memref<64xf32>) count 2 waits [@e0] signals [@e1]
      {units_per_task = 1, cost_ns = 300.0, variable}
  mega.task @q body @k1(%x : memref<64xf32>) count 1 waits [@e1]
      {units_per_task = 1, cost_ns = 50.0}
}

// -----

func.func @k4(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}

// Pinned queues are kept under every policy: p runs on worker 2 (@mine),
// j in the existing JIT queue @dyn (even under policy aot). c_i waits on p_i
// only; p_0..p_3 finish at 100, 200, 300, 400 on worker 2, and j (rank 50)
// takes w0 and w1 at 0. c_0 (ready at 100) and c_1 (200) go to the first
// free workers, w0 and w1; at 400 c_2 goes to worker 2, which ran p_2, and
// c_3 to w0. Under jit, c joins @dyn after j, in start order.

// New queues come first, the existing ones stay where they were.
// CHECK-LABEL: mega.graph @pinned
// CHECK-SAME:    attributes {mega.estimated_makespan_ns = 7.000000e+02 : f64}
// AUTO-NEXT:     mega.queue @w0 aot worker 0 {instances = array<i64: 0, 3>, tasks = [@c, @c]}
// AUTO-NEXT:     mega.queue @w1 aot worker 1 {instances = array<i64: 1>, tasks = [@c]}
// AUTO:          mega.queue @dyn jit {instances = array<i64: 0, 1>, tasks = [@j, @j]}
// AUTO-NEXT:     mega.queue @mine aot worker 2 {instances = array<i64: 0, 1, 2, 3, 2>, tasks = [@p, @p, @p, @p, @c]}
// AOT-NEXT:      mega.queue @w0 aot worker 0 {instances = array<i64: 0, 3>, tasks = [@c, @c]}
// AOT-NEXT:      mega.queue @w1 aot worker 1 {instances = array<i64: 1>, tasks = [@c]}
// AOT:           mega.queue @dyn jit {instances = array<i64: 0, 1>, tasks = [@j, @j]}
// AOT-NEXT:      mega.queue @mine aot worker 2 {instances = array<i64: 0, 1, 2, 3, 2>, tasks = [@p, @p, @p, @p, @c]}
// JIT-NEXT:      mega.queue @w0 aot worker 0 {instances = array<i64>, tasks = []}
// JIT-NEXT:      mega.queue @w1 aot worker 1 {instances = array<i64>, tasks = []}
// JIT:           mega.queue @dyn jit {instances = array<i64: 0, 1, 0, 1, 2, 3>, tasks = [@j, @j, @c, @c, @c, @c]}
// JIT-NEXT:      mega.queue @mine aot worker 2 {instances = array<i64: 0, 1, 2, 3>, tasks = [@p, @p, @p, @p]}
// CHECK-NOT:     mega.queue
// CHECK:         mega.task @p body
mega.graph @pinned(%x: memref<64xf32>) workers 3 {
  mega.event @p0 trigger 1
  mega.event @p1 trigger 1
  mega.event @p2 trigger 1
  mega.event @p3 trigger 1
  mega.queue @dyn jit
  mega.queue @mine aot worker 2
  mega.task @p body @k4(%x : memref<64xf32>) count 4 queue @mine
      {units_per_task = 1, cost_ns = 100.0,
       instance_signals = [[@p0], [@p1], [@p2], [@p3]]}
  mega.task @c body @k4(%x : memref<64xf32>) count 4
      {units_per_task = 1, cost_ns = 300.0,
       instance_waits = [[@p0], [@p1], [@p2], [@p3]]}
  mega.task @j body @k4(%x : memref<64xf32>) count 2 queue @dyn
      {units_per_task = 2, cost_ns = 50.0}
}

// -----

func.func @k1(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 128 {
  }
  return
}

// Without scheduler warps a variable task stays in an AOT queue under auto
// (and aot), and no JIT queue is made; policy jit is an error.

// AUTO-LABEL: mega.graph @no_schedulers
// AUTO-NEXT:    mega.queue @w0 aot worker 0 {instances = array<i64: 0, 0>, tasks = [@t, @u]}
// AUTO-NOT:     mega.queue
// AOT-LABEL:  mega.graph @no_schedulers
// AOT-NEXT:     mega.queue @w0 aot worker 0 {instances = array<i64: 0, 0>, tasks = [@t, @u]}
// AOT-NOT:      mega.queue
// expected-error @+1 {{cannot use the JIT queue (policy jit): the graph has no scheduler warps (schedulers 0)}}
mega.graph @no_schedulers(%x: memref<64xf32>) workers 1 schedulers 0 {
  mega.task @t body @k1(%x : memref<64xf32>) count 1 {variable}
  mega.task @u body @k1(%x : memref<64xf32>) count 1 {variable}
}

// -----

func.func @k1(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 128 {
  }
  return
}

// A graph whose queues already list entries is left as it is.

// CHECK-LABEL: mega.graph @scheduled
// CHECK-NOT:     mega.estimated_makespan_ns
// CHECK-NEXT:    mega.queue @w1 aot worker 1 {instances = array<i64: 0>, tasks = [@t]}
// CHECK-NEXT:    mega.task @t
// CHECK-NEXT:  {{^  }}}
mega.graph @scheduled(%x: memref<64xf32>) workers 2 {
  mega.queue @w1 aot worker 1 {tasks = [@t], instances = array<i64: 0>}
  mega.task @t body @k1(%x : memref<64xf32>) count 1 {variable}
}

// -----

func.func @k1(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 128 {
  }
  return
}

// New queues get names no symbol of the graph has: here a task is called
// @w1, the name the AOT queue of worker 1 would get, and another @jit.

// CHECK-LABEL: mega.graph @user_names
// CHECK-DAG:     mega.queue @{{.*}} aot worker 0
// CHECK-DAG:     mega.queue @{{.*}} aot worker 1
// AUTO-DAG:      mega.queue @{{.*}} jit {instances = array<i64: 0>, tasks = [@jit]}
// JIT-DAG:       mega.queue @{{.*}} jit {instances = array<i64: 0, 0>, tasks = [@w1, @jit]}
// CHECK-DAG:     mega.task @w1 body @k1
// CHECK-DAG:     mega.task @jit body @k1
mega.graph @user_names(%x: memref<64xf32>) workers 2 {
  mega.task @w1 body @k1(%x : memref<64xf32>) count 1
  mega.task @jit body @k1(%x : memref<64xf32>) count 1 {variable}
}
