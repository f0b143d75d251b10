// RUN: tilemega-opt %s -split-input-file -verify-diagnostics

// A queue's `paired` positions (mega-pair-entries) and the pairs they
// make: each rule of mega::getPairProblem, and the graph around them.

func.func @k(%W: memref<64xbf16>, %X: memref<64xbf16>) {
  tile.kernel blocks(%b) in [2] threads 128 {
  }
  return
}

mega.graph @g(%w: memref<64xbf16>, %x: memref<64xbf16>) workers 1 {
  // expected-error @+1 {{pairs entries, but only an aot queue's entries run in a fixed order}}
  mega.queue @j jit {tasks = [@t, @t], instances = array<i64: 0, 1>, paired = array<i64: 0>}
  mega.task @t body @k(%w, %x : memref<64xbf16>, memref<64xbf16>) count 2
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 64>,
                 #mega.access<write operand 1 offset 0 * u + 0 size 64>]
}

// -----

func.func @k(%W: memref<64xbf16>, %X: memref<64xbf16>) {
  tile.kernel blocks(%b) in [4] threads 128 {
  }
  return
}

mega.graph @g(%w: memref<64xbf16>, %x: memref<64xbf16>) workers 1 schedulers 0 {
  // expected-error @+1 {{pairs entry 1 after entry 1: the positions must ascend and no entry may be in two pairs}}
  mega.queue @w0 aot worker 0 {tasks = [@t, @t, @t, @t], instances = array<i64: 0, 1, 2, 3>,
                               paired = array<i64: 0, 1>}
  mega.task @t body @k(%w, %x : memref<64xbf16>, memref<64xbf16>) count 4
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 64>,
                 #mega.access<write operand 1 offset 0 * u + 0 size 64>]
}

// -----

func.func @k(%W: memref<64xbf16>, %X: memref<64xbf16>) {
  tile.kernel blocks(%b) in [4] threads 128 {
  }
  return
}

mega.graph @g(%w: memref<64xbf16>, %x: memref<64xbf16>) workers 1 schedulers 0 {
  // expected-error @+1 {{pairs entry 3 with entry 4, but the queue has 4 entries}}
  mega.queue @w0 aot worker 0 {tasks = [@t, @t, @t, @t], instances = array<i64: 0, 1, 2, 3>,
                               paired = array<i64: 3>}
  mega.task @t body @k(%w, %x : memref<64xbf16>, memref<64xbf16>) count 4
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 64>,
                 #mega.access<write operand 1 offset 0 * u + 0 size 64>]
}

// -----

func.func @k(%W: memref<64xbf16>, %X: memref<64xbf16>) {
  tile.kernel blocks(%b) in [4] threads 128 {
  }
  return
}

mega.graph @g(%w: memref<64xbf16>, %x: memref<64xbf16>) workers 1 schedulers 0 {
  // expected-error @+1 {{pairs entry -1: positions are >= 0}}
  mega.queue @w0 aot worker 0 {tasks = [@t, @t, @t, @t], instances = array<i64: 0, 1, 2, 3>,
                               paired = array<i64: -1>}
  mega.task @t body @k(%w, %x : memref<64xbf16>, memref<64xbf16>) count 4
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 64>,
                 #mega.access<write operand 1 offset 0 * u + 0 size 64>]
}

// -----

// The second entry's tensors are all written by a task: nothing of it can
// load before its events fire, so a pair gains nothing.
func.func @k(%W: memref<64xbf16>, %X: memref<64xbf16>) {
  tile.kernel blocks(%b) in [2] threads 128 {
  }
  return
}

mega.graph @g(%w: memref<64xbf16>, %x: memref<64xbf16>) workers 1 schedulers 0 {
  mega.event @e trigger 2
  // expected-error @+1 {{pairs entry 1 (@p instance 1) with entry 2 (@q instance 0), but @q reads no tensor that no task writes: nothing of it may load before its events fire}}
  mega.queue @w0 aot worker 0 {tasks = [@p, @p, @q, @q], instances = array<i64: 0, 1, 0, 1>,
                               paired = array<i64: 1>}
  mega.task @p body @k(%w, %x : memref<64xbf16>, memref<64xbf16>) count 2 signals [@e]
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 64>,
                 #mega.access<write operand 1 offset 0 * u + 0 size 64>]
  mega.task @q body @k(%x, %w : memref<64xbf16>, memref<64xbf16>) count 2 waits [@e]
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 64>]
}

// -----

func.func @k(%W: memref<64xbf16>, %X: memref<64xbf16>) {
  tile.kernel blocks(%b) in [4] threads 128 {
  }
  return
}

mega.graph @g(%w: memref<64xbf16>, %x: memref<64xbf16>) workers 1 schedulers 0 {
  // expected-error @+1 {{pairs entry 0 (@t instance 0) with entry 1 (@t instance 1), but @t runs 2 units an entry; a pair's tasks run one}}
  mega.queue @w0 aot worker 0 {tasks = [@t, @t], instances = array<i64: 0, 1>,
                               paired = array<i64: 0>}
  mega.task @t body @k(%w, %x : memref<64xbf16>, memref<64xbf16>) count 2
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 64>,
                 #mega.access<write operand 1 offset 0 * u + 0 size 64>]
      {units_per_task = 2}
}

// -----

func.func @k(%W: memref<64xbf16>, %X: memref<64xbf16>) {
  tile.kernel blocks(%b) in [2] threads 128 {
    tile.task_wait
  }
  return
}

mega.graph @g(%w: memref<64xbf16>, %x: memref<64xbf16>) workers 1 schedulers 0 {
  // expected-error @+1 {{but @t's body places its own wait (tile.task_wait)}}
  mega.queue @w0 aot worker 0 {tasks = [@t, @t], instances = array<i64: 0, 1>,
                               paired = array<i64: 0>}
  mega.task @t body @k(%w, %x : memref<64xbf16>, memref<64xbf16>) count 2
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 64>,
                 #mega.access<write operand 1 offset 0 * u + 0 size 64>]
}

// -----

func.func @k(%W: memref<64xbf16>, %X: memref<64xbf16>) {
  tile.kernel blocks(%b) in [2] threads 128 {
  }
  return
}

mega.graph @g(%w: memref<64xbf16>, %x: memref<64xbf16>) workers 1 schedulers 0 {
  // expected-error @+1 {{but @t is latency-bound: the second body's loads would slow it}}
  mega.queue @w0 aot worker 0 {tasks = [@t, @t], instances = array<i64: 0, 1>,
                               paired = array<i64: 0>}
  mega.task @t body @k(%w, %x : memref<64xbf16>, memref<64xbf16>) count 2
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 64>,
                 #mega.access<write operand 1 offset 0 * u + 0 size 64>]
      {latency_bound}
}

// -----

func.func @k(%W: memref<64xbf16>, %X: memref<64xbf16>) {
  tile.kernel blocks(%b) in [4] threads 128 {
  }
  return
}

mega.graph @g(%w: memref<64xbf16>, %x: memref<64xbf16>) workers 1 schedulers 1 {
  // expected-error @+1 {{pairs entries, but the graph has JIT entries: a pair's second entry is committed to before the first one's events fire, which needs every entry in an AOT queue of a graph of one rank}}
  mega.queue @w0 aot worker 0 {tasks = [@t, @t], instances = array<i64: 0, 1>,
                               paired = array<i64: 0>}
  mega.queue @j jit {tasks = [@t, @t], instances = array<i64: 2, 3>}
  mega.task @t body @k(%w, %x : memref<64xbf16>, memref<64xbf16>) count 4
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 64>,
                 #mega.access<write operand 1 offset 0 * u + 0 size 64>]
}
