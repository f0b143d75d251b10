// RUN: tilemega-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// mega.graph
//===----------------------------------------------------------------------===//

// expected-error @+1 {{workers must be >= 1, got 0}}
mega.graph @g() workers 0 {
}

// -----

// expected-error @+1 {{schedulers must be >= 0, got -1}}
mega.graph @g() workers 1 schedulers -1 {
}

// -----

func.func @f() {
  // expected-error @+1 {{expects parent op 'builtin.module'}}
  mega.graph @g() workers 1 {
  }
  return
}

//===----------------------------------------------------------------------===//
// mega.event
//===----------------------------------------------------------------------===//

// -----

mega.graph @g() workers 1 {
  // expected-error @+1 {{trigger count must be >= 1, got 0}}
  mega.event @e trigger 0
}

// -----

// expected-error @+1 {{expects parent op 'mega.graph'}}
mega.event @e trigger 1

//===----------------------------------------------------------------------===//
// mega.queue
//===----------------------------------------------------------------------===//

// -----

mega.graph @g() workers 4 {
  // expected-error @+1 {{aot queue needs a worker index}}
  mega.queue @q aot
}

// -----

mega.graph @g() workers 4 {
  // expected-error @+1 {{jit queue takes no worker index}}
  mega.queue @q jit worker 0
}

// -----

mega.graph @g() workers 4 {
  // expected-error @+1 {{worker 4 is out of range [0, 4) of the graph's workers}}
  mega.queue @q aot worker 4
}

// -----

mega.graph @g() workers 4 schedulers 0 {
  // expected-error @+1 {{jit queue needs at least one scheduler warp, but the graph has schedulers 0}}
  mega.queue @q jit
}

// -----

mega.graph @g() workers 4 {
  mega.queue @a aot worker 0
  mega.queue @b aot worker 1
  // expected-error @+1 {{is a second aot queue for worker 0, which already has @a}}
  mega.queue @c aot worker 0
}

// -----

mega.graph @g() workers 4 {
  mega.queue @a jit
  // expected-error @+1 {{is a second jit queue; the graph already has @a}}
  mega.queue @b jit
}

// -----

mega.graph @g() workers 4 {
  // expected-note @+1 {{see existing symbol definition here}}
  mega.queue @a jit
  // expected-error @+1 {{redefinition of symbol named 'a'}}
  mega.event @a trigger 1
}

//===----------------------------------------------------------------------===//
// mega.task: local checks
//===----------------------------------------------------------------------===//

// -----

func.func @f(%a: memref<16xf32>) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<16xf32>) workers 1 {
  // expected-error @+1 {{count must be >= 1, got 0}}
  mega.task @t body @f(%a : memref<16xf32>) count 0
}

// -----

func.func @f(%a: f32) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}

mega.graph @g() workers 1 {
  %c = arith.constant 1.0 : f32
  // expected-error @+1 {{operand #0 is not an argument of the enclosing mega.graph}}
  mega.task @t body @f(%c : f32) count 4
}

// -----

func.func @f(%a: memref<16xf32>) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<16xf32>) workers 1 {
  mega.event @e trigger 4
  mega.task @s body @f(%a : memref<16xf32>) count 4 signals [@e]
  // expected-error @+1 {{lists event @e more than once in 'waits'}}
  mega.task @t body @f(%a : memref<16xf32>) count 4 waits [@e, @e]
}

// -----

func.func @f(%a: memref<16xf32>) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<16xf32>) workers 1 {
  mega.event @e trigger 8
  // expected-error @+1 {{lists event @e more than once in 'signals'}}
  mega.task @t body @f(%a : memref<16xf32>) count 4 signals [@e, @e]
}

// -----

// expected-error @+1 {{expects parent op 'mega.graph'}}
mega.task @t body @f() count 1

//===----------------------------------------------------------------------===//
// mega.task: symbols
//===----------------------------------------------------------------------===//

// -----

func.func @f(%a: memref<16xf32>) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<16xf32>) workers 1 {
  mega.queue @q jit
  // expected-error @+1 {{'waits' entry @q does not name a mega.event in the enclosing mega.graph}}
  mega.task @t body @f(%a : memref<16xf32>) count 4 waits [@q]
}

// -----

func.func @f(%a: memref<16xf32>) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<16xf32>) workers 1 {
  mega.event @e trigger 4
  // expected-error @+1 {{queue @e does not name a mega.queue in the enclosing mega.graph}}
  mega.task @t body @f(%a : memref<16xf32>) count 4 signals [@e] queue @e
}

// -----

mega.graph @g(%a: memref<16xf32>) workers 1 {
  // expected-error @+1 {{body @missing does not name a func.func in the enclosing module}}
  mega.task @t body @missing(%a : memref<16xf32>) count 4
}

// -----

func.func @f(%a: memref<16xf32>) -> i32 {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  %c = arith.constant 0 : i32
  return %c : i32
}

mega.graph @g(%a: memref<16xf32>) workers 1 {
  // expected-error @+1 {{tile function @f must not return values, but returns 1}}
  mega.task @t body @f(%a : memref<16xf32>) count 4
}

// -----

func.func @f(%a: memref<16xf32>, %n: i32) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<16xf32>) workers 1 {
  // expected-error @+1 {{has 1 operands but tile function @f takes 2 arguments}}
  mega.task @t body @f(%a : memref<16xf32>) count 4
}

// -----

func.func @f(%a: memref<16xf32>, %n: i32) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<16xf32>, %x: f32) workers 1 {
  // expected-error @+1 {{operand #1 has type 'f32' but tile function @f expects 'i32'}}
  mega.task @t body @f(%a, %x : memref<16xf32>, f32) count 4
}

// -----

func.func @f(%a: memref<16xf32>) {
  return
}

mega.graph @g(%a: memref<16xf32>) workers 1 {
  // expected-error @+1 {{tile function @f must contain exactly one tile.kernel, found 0}}
  mega.task @t body @f(%a : memref<16xf32>) count 4
}

// -----

func.func @f(%a: memref<16xf32>) {
  tile.kernel blocks(%i, %j) in [4, 4] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<16xf32>) workers 1 {
  // expected-error @+1 {{count 8 does not match the 16 blocks of the tile.kernel in @f}}
  mega.task @t body @f(%a : memref<16xf32>) count 8
}

// -----

func.func @f(%a: memref<16xf32>) {
  // expected-error @+1 {{'tile.kernel' op grid dimension 0 has 4294967296 blocks, over CUDA's limit of 2147483647}}
  tile.kernel blocks(%i, %j, %k) in [4294967296, 4294967296, 2] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<16xf32>) workers 1 {
  // expected-error @+1 {{count 8 does not match the tile.kernel in @f, whose grid [4294967296, 4294967296, 2] has more than 9223372036854775807 blocks}}
  mega.task @t body @f(%a : memref<16xf32>) count 8
}

// -----

// A malformed tile function is left to its own verifier.

func.func @f(%a: memref<16xf32>) {
  // expected-error @+1 {{requires attribute 'grid'}}
  "tile.kernel"() <{threads = 128 : i64}> ({
  ^bb0(%i: index):
  }) : () -> ()
  return
}

mega.graph @g(%a: memref<16xf32>) workers 1 {
  mega.task @t body @f(%a : memref<16xf32>) count 4
}

// -----

// Duplicate symbols in the module are reported by the module, not by an
// assertion while the graph looks its tile function up.

// expected-note @+1 {{see existing symbol definition here}}
func.func @f(%a: memref<16xf32>) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}

// expected-error @+1 {{redefinition of symbol named 'f'}}
func.func @f(%a: memref<16xf32>) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<16xf32>) workers 1 {
  mega.task @t body @f(%a : memref<16xf32>) count 4
}

//===----------------------------------------------------------------------===//
// Whole-graph checks: signal counts, unsatisfiable waits, cycles
//===----------------------------------------------------------------------===//

// -----

func.func @f(%a: memref<16xf32>) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<16xf32>) workers 1 {
  mega.event @e trigger 4
  // expected-error @+1 {{waits on event @e, which no task signals, so task @t can never start}}
  mega.task @t body @f(%a : memref<16xf32>) count 4 waits [@e]
}

// -----

func.func @f(%a: memref<16xf32>) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<16xf32>) workers 1 {
  // expected-error @+1 {{event @e has trigger count 12 but is signalled by 8 task instances: a wait on it can never be satisfied}}
  mega.event @e trigger 12
  mega.task @p0 body @f(%a : memref<16xf32>) count 4 signals [@e]
  mega.task @p1 body @f(%a : memref<16xf32>) count 4 signals [@e]
  mega.task @c body @f(%a : memref<16xf32>) count 4 waits [@e]
}

// -----

func.func @f(%a: memref<16xf32>) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<16xf32>) workers 1 {
  // expected-error @+1 {{event @e has trigger count 2 but is signalled by 4 task instances: it is over-signalled}}
  mega.event @e trigger 2
  mega.task @p body @f(%a : memref<16xf32>) count 4 signals [@e]
  mega.task @c body @f(%a : memref<16xf32>) count 4 waits [@e]
}

// -----

func.func @f(%a: memref<16xf32>) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}

// @start feeds a cycle @a -> @b -> @c -> @a; every count matches, so only the
// cycle is wrong.
mega.graph @g(%a: memref<16xf32>) workers 1 {
  mega.event @e0 trigger 4
  mega.event @e1 trigger 4
  mega.event @e2 trigger 4
  mega.event @e3 trigger 4
  mega.task @start body @f(%a : memref<16xf32>) count 4 signals [@e0]
  // expected-error @+1 {{dependency cycle: @a -> @b -> @c -> @a}}
  mega.task @a body @f(%a : memref<16xf32>) count 4 waits [@e0, @e3] signals [@e1]
  mega.task @b body @f(%a : memref<16xf32>) count 4 waits [@e1] signals [@e2]
  mega.task @c body @f(%a : memref<16xf32>) count 4 waits [@e2] signals [@e3]
}

// -----

func.func @f(%a: memref<16xf32>) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<16xf32>) workers 1 {
  mega.event @e trigger 4
  // expected-error @+1 {{dependency cycle: @self -> @self}}
  mega.task @self body @f(%a : memref<16xf32>) count 4 waits [@e] signals [@e]
}
