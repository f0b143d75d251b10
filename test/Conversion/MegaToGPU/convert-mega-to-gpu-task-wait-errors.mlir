// RUN: tilemega-opt %s -split-input-file -verify-diagnostics -convert-mega-to-gpu="early-loads=true"

// What a body does before its tile.task_wait runs while the task's inputs
// are still being produced: it may read a graph tensor no task writes, one
// only tasks after it in the step write, or (in a copy marked tile.early)
// one it writes itself. Each case below breaks one rule and is refused,
// naming the graph argument and the task that writes it.

// A read of %h, which @first (before @second: @second waits for its event)
// writes.

func.func @fill(%H: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %f = tile.alloc_fragment : memref<1024xbf16, #tile.fragment>
    tile.clear %f : memref<1024xbf16, #tile.fragment>
    tile.copy %f[0] to %H[0] sizes [1024]
        : memref<1024xbf16, #tile.fragment> to memref<1024xbf16>
  }
  return
}

// expected-note @below {{in this task body}}
func.func @use(%W: memref<1024xbf16>, %X: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %w_s = tile.alloc_shared : memref<128xbf16, #gpu.address_space<workgroup>>
    %x_s = tile.alloc_shared : memref<128xbf16, #gpu.address_space<workgroup>>
    tile.copy %W[0] to %w_s[0] sizes [128]
        : memref<1024xbf16> to memref<128xbf16, #gpu.address_space<workgroup>>
    // expected-error @below {{'tile.copy' op reads, before the body's tile.task_wait, graph argument 1, which task @first writes}}
    tile.copy %X[0] to %x_s[0] sizes [128]
        : memref<1024xbf16> to memref<128xbf16, #gpu.address_space<workgroup>>
    tile.task_wait
  }
  return
}

mega.graph @read_of_an_earlier_write(%w: memref<1024xbf16>, %h: memref<1024xbf16>)
    workers 1 schedulers 0 {
  mega.event @filled trigger 1
  mega.queue @w0 aot worker 0 {tasks = [@first, @second], instances = array<i64: 0, 0>}
  mega.task @first body @fill(%h : memref<1024xbf16>) count 1 signals [@filled]
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
  mega.task @second body @use(%w, %h : memref<1024xbf16>, memref<1024xbf16>) count 1
      waits [@filled]
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 1024>,
                 #mega.access<read operand 1 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
}

// -----

// The same through a view and a scalar load: the subview reads nothing,
// the memref.load of it is the read.

func.func @fill(%H: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %f = tile.alloc_fragment : memref<1024xbf16, #tile.fragment>
    tile.clear %f : memref<1024xbf16, #tile.fragment>
    tile.copy %f[0] to %H[0] sizes [1024]
        : memref<1024xbf16, #tile.fragment> to memref<1024xbf16>
  }
  return
}

// expected-note @below {{in this task body}}
func.func @use(%X: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %v = memref.subview %X[512] [512] [1] : memref<1024xbf16> to memref<512xbf16, strided<[1], offset: 512>>
    // expected-error @below {{'memref.load' op reads, before the body's tile.task_wait, graph argument 0, which task @first writes}}
    %x = memref.load %v[%c0] : memref<512xbf16, strided<[1], offset: 512>>
    tile.task_wait
  }
  return
}

mega.graph @load_through_a_view(%h: memref<1024xbf16>) workers 1 schedulers 0 {
  mega.event @filled trigger 1
  mega.queue @w0 aot worker 0 {tasks = [@first, @second], instances = array<i64: 0, 0>}
  mega.task @first body @fill(%h : memref<1024xbf16>) count 1 signals [@filled]
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
  mega.task @second body @use(%h : memref<1024xbf16>) count 1 waits [@filled]
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
}

// -----

// A write of a graph tensor before the wait: a task writes only after its
// events fire (here %g, which only @second itself writes).

func.func @fill(%H: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %f = tile.alloc_fragment : memref<1024xbf16, #tile.fragment>
    tile.clear %f : memref<1024xbf16, #tile.fragment>
    tile.copy %f[0] to %H[0] sizes [1024]
        : memref<1024xbf16, #tile.fragment> to memref<1024xbf16>
  }
  return
}

// expected-note @below {{in this task body}}
func.func @use(%X: memref<1024xbf16>, %G: memref<16xi32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : i32
    // expected-error @below {{'memref.store' op writes graph argument 1 before the body's tile.task_wait}}
    memref.store %c1, %G[%c0] : memref<16xi32>
    tile.task_wait
    %x_s = tile.alloc_shared : memref<128xbf16, #gpu.address_space<workgroup>>
    tile.copy %X[0] to %x_s[0] sizes [128]
        : memref<1024xbf16> to memref<128xbf16, #gpu.address_space<workgroup>>
  }
  return
}

mega.graph @write_before_the_wait(%h: memref<1024xbf16>, %g: memref<16xi32>)
    workers 1 schedulers 0 {
  mega.event @filled trigger 1
  mega.queue @w0 aot worker 0 {tasks = [@first, @second], instances = array<i64: 0, 0>}
  mega.task @first body @fill(%h : memref<1024xbf16>) count 1 signals [@filled]
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
  mega.task @second body @use(%h, %g : memref<1024xbf16>, memref<16xi32>) count 1
      waits [@filled]
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 1024>,
                 #mega.access<write operand 1 offset 0 * u + 0 size 16>]
      {units_per_task = 1}
}

// -----

// The task's own output %c: a plain read before the wait is refused, naming
// the task itself (another unit's write of this step may race it); a copy
// the body marks tile.early is the body vouching that its unit reads no
// element another unit writes, and is accepted.

func.func @fill(%H: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %f = tile.alloc_fragment : memref<1024xbf16, #tile.fragment>
    tile.clear %f : memref<1024xbf16, #tile.fragment>
    tile.copy %f[0] to %H[0] sizes [1024]
        : memref<1024xbf16, #tile.fragment> to memref<1024xbf16>
  }
  return
}

// expected-note @below {{in this task body}}
func.func @accumulate(%X: memref<1024xbf16>, %C: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c_s = tile.alloc_shared : memref<128xbf16, #gpu.address_space<workgroup>>
    tile.copy %C[0] to %c_s[0] sizes [128] {tile.early}
        : memref<1024xbf16> to memref<128xbf16, #gpu.address_space<workgroup>>
    // expected-error @below {{'memref.load' op reads, before the body's tile.task_wait, graph argument 1, which task @second writes}}
    %c = memref.load %C[%c0] : memref<1024xbf16>
    tile.task_wait
    tile.copy %c_s[0] to %C[128] sizes [128]
        : memref<128xbf16, #gpu.address_space<workgroup>> to memref<1024xbf16>
  }
  return
}

mega.graph @own_output(%h: memref<1024xbf16>, %c: memref<1024xbf16>) workers 1 schedulers 0 {
  mega.event @filled trigger 1
  mega.queue @w0 aot worker 0 {tasks = [@first, @second], instances = array<i64: 0, 0>}
  mega.task @first body @fill(%h : memref<1024xbf16>) count 1 signals [@filled]
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
  mega.task @second body @accumulate(%h, %c : memref<1024xbf16>, memref<1024xbf16>) count 1
      waits [@filled]
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 1024>,
                 #mega.access<read operand 1 offset 0 * u + 0 size 1024>,
                 #mega.access<write operand 1 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
}

// -----

// A writer after the task in the queue but not after it through the events
// (@other waits for nothing): it may run alongside @second, so %g is not
// stable before @second's wait.

func.func @fill(%H: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %f = tile.alloc_fragment : memref<1024xbf16, #tile.fragment>
    tile.clear %f : memref<1024xbf16, #tile.fragment>
    tile.copy %f[0] to %H[0] sizes [1024]
        : memref<1024xbf16, #tile.fragment> to memref<1024xbf16>
  }
  return
}

// expected-note @below {{in this task body}}
func.func @use(%X: memref<1024xbf16>, %G: memref<16xi32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    // expected-error @below {{'memref.load' op reads, before the body's tile.task_wait, graph argument 1, which task @other writes}}
    %p = memref.load %G[%c0] : memref<16xi32>
    tile.task_wait
  }
  return
}

func.func @advance(%G: memref<16xi32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : i32
    memref.store %c1, %G[%c0] : memref<16xi32>
  }
  return
}

mega.graph @unordered_writer(%h: memref<1024xbf16>, %g: memref<16xi32>)
    workers 1 schedulers 0 {
  mega.event @filled trigger 1
  mega.queue @w0 aot worker 0 {tasks = [@first, @second, @other],
                               instances = array<i64: 0, 0, 0>}
  mega.task @first body @fill(%h : memref<1024xbf16>) count 1 signals [@filled]
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
  mega.task @second body @use(%h, %g : memref<1024xbf16>, memref<16xi32>) count 1
      waits [@filled]
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 1024>,
                 #mega.access<read operand 1 offset 0 * u + 0 size 16>]
      {units_per_task = 1}
  mega.task @other body @advance(%g : memref<16xi32>) count 1
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 16>]
      {units_per_task = 1}
}

// -----

// An early copy in a loop after the wait whose prefetch point is the
// body's, before the wait: its prologue loads before the events fire, so
// it may not read %h, which @first writes (checkEarlyCopies).

func.func @fill(%H: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %f = tile.alloc_fragment : memref<1024xbf16, #tile.fragment>
    tile.clear %f : memref<1024xbf16, #tile.fragment>
    tile.copy %f[0] to %H[0] sizes [1024]
        : memref<1024xbf16, #tile.fragment> to memref<1024xbf16>
  }
  return
}

// expected-note @below {{in this task body}}
func.func @use(%X: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c1024 = arith.constant 1024 : index
    %x_s = tile.alloc_shared : memref<128xbf16, #gpu.address_space<workgroup>>
    %x = tile.alloc_fragment : memref<128xbf16, #tile.fragment>
    tile.prefetch_point
    tile.task_wait
    tile.pipelined %k = %c0 to %c1024 step %c128 num_stages 2 {
      // expected-error @below {{'tile.copy' op is marked tile.early (load before the task's events fire), but it reads graph argument 0, which task @first writes}}
      tile.copy %X[%k] to %x_s[0] sizes [128] {tile.early}
          : memref<1024xbf16> to memref<128xbf16, #gpu.address_space<workgroup>>
      tile.copy %x_s[0] to %x[0] sizes [128]
          : memref<128xbf16, #gpu.address_space<workgroup>> to memref<128xbf16, #tile.fragment>
    }
  }
  return
}

mega.graph @early_copy_from_the_point_before(%h: memref<1024xbf16>) workers 1 schedulers 0 {
  mega.event @filled trigger 1
  mega.queue @w0 aot worker 0 {tasks = [@first, @second], instances = array<i64: 0, 0>}
  mega.task @first body @fill(%h : memref<1024xbf16>) count 1 signals [@filled]
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
  mega.task @second body @use(%h : memref<1024xbf16>) count 1 waits [@filled]
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
}

// -----

func.func @fill(%H: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %f = tile.alloc_fragment : memref<1024xbf16, #tile.fragment>
    tile.clear %f : memref<1024xbf16, #tile.fragment>
    tile.copy %f[0] to %H[0] sizes [1024]
        : memref<1024xbf16, #tile.fragment> to memref<1024xbf16>
  }
  return
}

// Each unit reads %G[0] before its wait.
// expected-note @below {{in this task body}}
func.func @use(%X: memref<1024xbf16>, %G: memref<16xi32>) {
  tile.kernel blocks(%b) in [2] threads 128 {
    %c0 = arith.constant 0 : index
    // expected-error @+1 {{reads, before the body's tile.task_wait, graph argument 1, which task @last writes}}
    %p = memref.load %G[%c0] : memref<16xi32>
    tile.task_wait
  }
  return
}

// Each unit overwrites %G[0].
func.func @advance(%G: memref<16xi32>) {
  tile.kernel blocks(%b) in [2] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : i32
    memref.store %c1, %G[%c0] : memref<16xi32>
  }
  return
}

// Every instance of the writer must come after every instance of the reader:
// here @last's instance 1 waits for nothing, so it may write %g[0] before
// @second's instance 0 has read it (before its wait).
mega.graph @per_instance(%h: memref<1024xbf16>, %g: memref<16xi32>)
    workers 2 schedulers 0 {
  mega.event @filled trigger 1
  mega.event @s trigger 2
  mega.queue @w0 aot worker 0 {tasks = [@first, @second, @last], instances = array<i64: 0, 0, 0>}
  mega.queue @w1 aot worker 1 {tasks = [@second, @last], instances = array<i64: 1, 1>}
  mega.task @first body @fill(%h : memref<1024xbf16>) count 1 signals [@filled]
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
  mega.task @second body @use(%h, %g : memref<1024xbf16>, memref<16xi32>) count 2
      waits [@filled]
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 1024>,
                 #mega.access<read operand 1 offset 0 * u + 0 size 16>]
      {units_per_task = 1, instance_signals = [[@s], [@s]]}
  mega.task @last body @advance(%g : memref<16xi32>) count 2
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 16>]
      {units_per_task = 1, instance_waits = [[@s], []]}
}
