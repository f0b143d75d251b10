// RUN: tilemega-opt %s -split-input-file -mega-schedule=policy=aot | FileCheck %s

// Four workers, two CTAs an SM: with workers_by_sm, SM 0 runs workers 0
// and 2, SM 1 workers 1 and 3. s (2 x 100 ns) -> a (latency-bound, 2 x
// 300 ns) and n (2 x 100 ns); m (2 x 100 ns) runs beside s. Streaming
// instances pack two to an SM (s on SM 0, m on SM 1); at 100 a_0 opens an
// SM whose workers are all free (SM 0, worker 0), a_1 joins it (worker 2),
// and n runs on SM 1: no streaming task shares an SM with the
// attention-like task while it runs.

func.func @k2(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [2] threads 128 {
  }
  return
}

// CHECK-LABEL: mega.graph @by_sm
// CHECK:         mega.queue @w0 aot worker 0 {instances = array<i64: 0, 0>, tasks = [@s, @a]}
// CHECK-NEXT:    mega.queue @w1 aot worker 1 {instances = array<i64: 0, 0>, tasks = [@m, @n]}
// CHECK-NEXT:    mega.queue @w2 aot worker 2 {instances = array<i64: 1, 1>, tasks = [@s, @a]}
// CHECK-NEXT:    mega.queue @w3 aot worker 3 {instances = array<i64: 1, 1>, tasks = [@m, @n]}
mega.graph @by_sm(%x: memref<64xf32>) workers 4 attributes {ctas_per_sm = 2, workers_by_sm} {
  mega.event @e0 trigger 2
  mega.task @s body @k2(%x : memref<64xf32>) count 2 signals [@e0]
      {units_per_task = 1, cost_ns = 100.0}
  mega.task @m body @k2(%x : memref<64xf32>) count 2
      {units_per_task = 1, cost_ns = 100.0}
  mega.task @a body @k2(%x : memref<64xf32>) count 2 waits [@e0]
      {units_per_task = 1, cost_ns = 300.0, latency_bound}
  mega.task @n body @k2(%x : memref<64xf32>) count 2 waits [@e0]
      {units_per_task = 1, cost_ns = 100.0}
}

// -----

// The same graph without workers_by_sm: latency_bound changes nothing, a
// runs on workers 0 and 1 (after its producers) and n on 2 and 3, which
// (were the workers laid out by SM) share SMs 0 and 1 with it.

func.func @k2(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [2] threads 128 {
  }
  return
}

// CHECK-LABEL: mega.graph @by_index
// CHECK:         mega.queue @w0 aot worker 0 {instances = array<i64: 0, 1>, tasks = [@s, @a]}
// CHECK-NEXT:    mega.queue @w1 aot worker 1 {instances = array<i64: 1, 0>, tasks = [@s, @a]}
// CHECK-NEXT:    mega.queue @w2 aot worker 2 {instances = array<i64: 0, 0>, tasks = [@m, @n]}
// CHECK-NEXT:    mega.queue @w3 aot worker 3 {instances = array<i64: 1, 1>, tasks = [@m, @n]}
mega.graph @by_index(%x: memref<64xf32>) workers 4 attributes {ctas_per_sm = 2} {
  mega.event @e0 trigger 2
  mega.task @s body @k2(%x : memref<64xf32>) count 2 signals [@e0]
      {units_per_task = 1, cost_ns = 100.0}
  mega.task @m body @k2(%x : memref<64xf32>) count 2
      {units_per_task = 1, cost_ns = 100.0}
  mega.task @a body @k2(%x : memref<64xf32>) count 2 waits [@e0]
      {units_per_task = 1, cost_ns = 300.0, latency_bound}
  mega.task @n body @k2(%x : memref<64xf32>) count 2 waits [@e0]
      {units_per_task = 1, cost_ns = 100.0}
}
