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
