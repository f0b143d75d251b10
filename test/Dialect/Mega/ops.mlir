// RUN: tilemega-opt %s | tilemega-opt | FileCheck %s

// Tile functions: the bodies of the operators' tasks.

func.func @rmsnorm(%x: memref<4096xf16>, %y: memref<4096xf16>) {
  tile.kernel blocks(%i) in [32] threads 128 {
  }
  return
}

func.func @gemv(%y: memref<4096xf16>, %w: memref<4096x4096xf16>,
                %o: memref<4096xf16>) {
  tile.kernel blocks(%i, %j) in [16, 4] threads 128 {
  }
  return
}

func.func @scale(%o: memref<4096xf16>, %s: f32) {
  tile.kernel blocks(%i) in [8] threads 256 {
  }
  return
}

// A chain norm -> proj -> scale over aot and jit queues; schedulers printed
// when not the default.

// CHECK-LABEL: mega.graph @layer
// CHECK-SAME:    (%[[X:.*]]: memref<4096xf16>, %[[Y:.*]]: memref<4096xf16>, %[[W:.*]]: memref<4096x4096xf16>, %[[O:.*]]: memref<4096xf16>, %[[S:.*]]: f32)
// CHECK-SAME:    workers 4 schedulers 2 {
// CHECK-NEXT:    mega.event @normed trigger 32
// CHECK-NEXT:    mega.event @projected trigger 64
// CHECK-NEXT:    mega.event @done trigger 8
// CHECK-NEXT:    mega.queue @w0 aot worker 0
// CHECK-NEXT:    mega.queue @w3 aot worker 3
// CHECK-NEXT:    mega.queue @dyn jit
// CHECK-NEXT:    mega.task @norm body @rmsnorm(%[[X]], %[[Y]] : memref<4096xf16>, memref<4096xf16>) count 32 signals [@normed] queue @w0
// CHECK-NEXT:    mega.task @proj body @gemv(%[[Y]], %[[W]], %[[O]] : memref<4096xf16>, memref<4096x4096xf16>, memref<4096xf16>) count 64 waits [@normed] signals [@projected] queue @dyn
// CHECK-NEXT:    mega.task @scale body @scale(%[[O]], %[[S]] : memref<4096xf16>, f32) count 8 waits [@projected] signals [@done]
// CHECK-NEXT:  }
mega.graph @layer(%x: memref<4096xf16>, %y: memref<4096xf16>,
                  %w: memref<4096x4096xf16>, %o: memref<4096xf16>, %s: f32)
    workers 4 schedulers 2 {
  mega.event @normed trigger 32
  mega.event @projected trigger 64
  mega.event @done trigger 8
  mega.queue @w0 aot worker 0
  mega.queue @w3 aot worker 3
  mega.queue @dyn jit
  mega.task @norm body @rmsnorm(%x, %y : memref<4096xf16>, memref<4096xf16>)
      count 32 signals [@normed] queue @w0
  mega.task @proj body @gemv(%y, %w, %o : memref<4096xf16>,
      memref<4096x4096xf16>, memref<4096xf16>)
      count 64 waits [@normed] signals [@projected] queue @dyn
  mega.task @scale body @scale(%o, %s : memref<4096xf16>, f32)
      count 8 waits [@projected] signals [@done]
}

// A diamond: two tasks signal one event together (trigger = 32 + 32), a task
// waits on two events; only aot queues, so no scheduler warps are needed.

// CHECK-LABEL: mega.graph @diamond
// CHECK-SAME:    workers 2 schedulers 0 attributes {note = "diamond"} {
// CHECK:         mega.event @both trigger 64
// CHECK:         mega.task @left body @rmsnorm({{.*}}) count 32 signals [@both]
// CHECK:         mega.task @right body @rmsnorm({{.*}}) count 32 signals [@both]
// CHECK:         mega.task @join body @scale({{.*}}) count 8 waits [@both, @also]
mega.graph @diamond(%x: memref<4096xf16>, %y: memref<4096xf16>,
                    %o: memref<4096xf16>, %s: f32)
    workers 2 schedulers 0 attributes {note = "diamond"} {
  mega.queue @w1 aot worker 1
  mega.event @both trigger 64
  mega.event @also trigger 8
  mega.task @first body @scale(%o, %s : memref<4096xf16>, f32) count 8
      signals [@also] queue @w1
  mega.task @left body @rmsnorm(%x, %y : memref<4096xf16>, memref<4096xf16>)
      count 32 signals [@both]
  mega.task @right body @rmsnorm(%y, %x : memref<4096xf16>, memref<4096xf16>)
      count 32 signals [@both]
  mega.task @join body @scale(%o, %s : memref<4096xf16>, f32) count 8
      waits [@both, @also]
}

// A tile function may take no arguments.

func.func @tick() {
  tile.kernel blocks(%i) in [1] threads 32 {
  }
  return
}

// CHECK-LABEL: mega.graph @no_operands() workers 1 {
// CHECK-NEXT:    mega.task @tick body @tick() count 1
mega.graph @no_operands() workers 1 {
  mega.task @tick body @tick() count 1
}

// The default scheduler count is elided; a graph may be empty.

// CHECK-LABEL: mega.graph @empty() workers 1 {
// CHECK-NEXT:  }
mega.graph @empty() workers 1 schedulers 1 {
}

// Operator footprints: #mega.access with and without a unit range. The
// default range (all units) is elided; `units F to L` is kept, F = 0 (the
// default of F) included, and so is a negative base.

func.func @rope(%x: memref<64xf32>, %q: memref<32xf32>, %k: memref<32xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

// CHECK-LABEL: mega.graph @footprints
// CHECK-NEXT:    mega.task @rope body @rope({{.*}}) count 8
// CHECK-SAME:      footprint [#mega.access<read operand 0 offset 8 * u + 0 size 8>,
// CHECK-SAME:                 #mega.access<write operand 1 offset 8 * u + 0 size 8 units 0 to 4>,
// CHECK-SAME:                 #mega.access<write operand 2 offset 8 * u + -32 size 8 units 4 to 8>,
// CHECK-SAME:                 #mega.access<read operand 0 offset 0 * u + 0 size 64>]
// CHECK-SAME:      {variable}
// CHECK-NEXT:  }
mega.graph @footprints(%x: memref<64xf32>, %q: memref<32xf32>,
                       %k: memref<32xf32>) workers 2 {
  mega.task @rope body @rope(%x, %q, %k : memref<64xf32>, memref<32xf32>,
      memref<32xf32>) count 8
      footprint [#mega.access<read operand 0 offset 8 * u + 0 size 8>,
                 #mega.access<write operand 1 offset 8 * u + 0 size 8 units 0 to 4>,
                 #mega.access<write operand 2 offset 8 * u + -32 size 8 units 4 to 8>,
                 #mega.access<read operand 0 offset 0 * u + 0 size 64>]
      {variable}
}

// A decomposed, planned and scheduled graph: units_per_task, cost_ns,
// per-instance waits and signals (the attribute dictionary is sorted), and
// queues listing their entries (task, instance).

func.func @copy8(%a: memref<64xf32>, %b: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

// CHECK-LABEL: mega.graph @scheduled
// CHECK-NEXT:    mega.event @e0 trigger 1
// CHECK-NEXT:    mega.event @e1 trigger 1
// CHECK-NEXT:    mega.event @all trigger 2
// CHECK-NEXT:    mega.queue @w0 aot worker 0 {instances = array<i64: 0, 0>, tasks = [@p, @c]}
// CHECK-NEXT:    mega.queue @w1 aot worker 1 {instances = array<i64: 1>, tasks = [@p]}
// CHECK-NEXT:    mega.queue @jit jit {instances = array<i64: 1, 0>, tasks = [@c, @last]}
// CHECK-NEXT:    mega.task @p body @copy8({{.*}}) count 2 signals [@all]
// CHECK-SAME:      {cost_ns = 2.500000e+03 : f64, instance_signals = {{\[}}[@e0], [@e1]], units_per_task = 4 : i64}
// CHECK-NEXT:    mega.task @c body @copy8({{.*}}) count 2
// CHECK-SAME:      {cost_ns = 1.250000e+03 : f64, instance_waits = {{\[}}[@e0], [@e1]], units_per_task = 4 : i64, variable}
// CHECK-NEXT:    mega.task @last body @copy8({{.*}}) count 1 waits [@all] queue @jit
// CHECK-SAME:      {instance_signals = {{\[}}[]], units_per_task = 8 : i64}
// CHECK-NEXT:  }
mega.graph @scheduled(%a: memref<64xf32>, %b: memref<64xf32>) workers 2 {
  mega.event @e0 trigger 1
  mega.event @e1 trigger 1
  mega.event @all trigger 2
  mega.queue @w0 aot worker 0 {tasks = [@p, @c], instances = array<i64: 0, 0>}
  mega.queue @w1 aot worker 1 {tasks = [@p], instances = array<i64: 1>}
  mega.queue @jit jit {tasks = [@c, @last], instances = array<i64: 1, 0>}
  mega.task @p body @copy8(%a, %b : memref<64xf32>, memref<64xf32>) count 2
      signals [@all]
      {units_per_task = 4, cost_ns = 2500.0,
       instance_signals = [[@e0], [@e1]]}
  mega.task @c body @copy8(%b, %a : memref<64xf32>, memref<64xf32>) count 2
      {units_per_task = 4 : i64, cost_ns = 1.25e3 : f64, variable,
       instance_waits = [[@e0], [@e1]]}
  mega.task @last body @copy8(%a, %b : memref<64xf32>, memref<64xf32>) count 1
      waits [@all] queue @jit {units_per_task = 8, instance_signals = [[]]}
}

// A graph argument read from a persistent kernel's argument table.
// CHECK-LABEL: func.func @bound_tensor
// CHECK: mega.graph_arg %{{.*}}[%{{.*}}] : memref<3xi64> -> memref<2048x8192xbf16>
func.func @bound_tensor(%pointers: memref<3xi64>, %slot: index) {
  %w = mega.graph_arg %pointers[%slot] : memref<3xi64> -> memref<2048x8192xbf16>
  return
}
