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

// Found by scripts/fuzz/fuzz_opt.py: mega-schedule sized its per-worker
// tables by this and ran out of memory.
// expected-error @+1 {{workers (2147483647) + schedulers (1) exceed the 4224 CTAs that any known chip (sm_90, sm_90a) keeps resident at once}}
mega.graph @g() workers 2147483647 {
}

// -----

// expected-error @+1 {{workers (4224) + schedulers (1) exceed the 4224 CTAs}}
mega.graph @g() workers 4224 schedulers 1 {
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

//===----------------------------------------------------------------------===//
// #mega.access
//===----------------------------------------------------------------------===//

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  mega.task @t body @f(%a : memref<64xf32>) count 8
      // expected-error @+1 {{access operand index must be >= 0, got -1}}
      footprint [#mega.access<read operand -1 offset 8 * u + 0 size 8>]
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  mega.task @t body @f(%a : memref<64xf32>) count 8
      // expected-error @+1 {{access size must be >= 1, got 0}}
      footprint [#mega.access<read operand 0 offset 8 * u + 0 size 0>]
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  mega.task @t body @f(%a : memref<64xf32>) count 8
      // expected-error @+1 {{access unit range 4 to 4 is empty or negative}}
      footprint [#mega.access<write operand 0 offset 8 * u + 0 size 8 units 4 to 4>]
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  mega.task @t body @f(%a : memref<64xf32>) count 8
      // expected-error @+1 {{access unit range 6 to 2 is empty or negative}}
      footprint [#mega.access<write operand 0 offset 8 * u + 0 size 8 units 6 to 2>]
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  mega.task @t body @f(%a : memref<64xf32>) count 8
      // expected-error @+1 {{access unit range -2 to 4 is empty or negative}}
      footprint [#mega.access<write operand 0 offset 8 * u + 16 size 8 units -2 to 4>]
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

// A range that starts at unit 2 but has no end: -1 is the "all units" end.
mega.graph @g(%a: memref<64xf32>) workers 1 {
  mega.task @t body @f(%a : memref<64xf32>) count 8
      // expected-error @+1 {{access unit range starting at 2 needs its end (`units F to L`)}}
      footprint [#mega.access<write operand 0 offset 8 * u + 0 size 8 units 2 to -1>]
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

// Unit 4, the first of the range, would start at 8 * 4 - 40 = -8.
mega.graph @g(%a: memref<64xf32>) workers 1 {
  mega.task @t body @f(%a : memref<64xf32>) count 8
      // expected-error @+1 {{access offset 8 * u + -40 must have a non-negative stride and start at element 0 or later for unit 4}}
      footprint [#mega.access<write operand 0 offset 8 * u + -40 size 8 units 4 to 8>]
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  mega.task @t body @f(%a : memref<64xf32>) count 8
      // expected-error @+1 {{access offset 8 * u + -1 must have a non-negative stride and start at element 0 or later for unit 0}}
      footprint [#mega.access<read operand 0 offset 8 * u + -1 size 8>]
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  mega.task @t body @f(%a : memref<64xf32>) count 8
      // expected-error @+1 {{access offset -8 * u + 56 must have a non-negative stride and start at element 0 or later for unit 0}}
      footprint [#mega.access<read operand 0 offset -8 * u + 56 size 8>]
}

//===----------------------------------------------------------------------===//
// mega.task: footprints
//===----------------------------------------------------------------------===//

// -----

func.func @f(%a: memref<64xf32>, %s: f32) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>, %s: f32) workers 1 {
  // expected-error @+1 {{footprint names operand #2 but the task has 2 operands}}
  mega.task @t body @f(%a, %s : memref<64xf32>, f32) count 8
      footprint [#mega.access<read operand 0 offset 8 * u + 0 size 8>,
                 #mega.access<read operand 2 offset 8 * u + 0 size 8>]
}

// -----

func.func @f(%a: memref<64xf32>, %s: f32) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>, %s: f32) workers 1 {
  // expected-error @+1 {{footprint names operand #1, which is not a statically shaped memref}}
  mega.task @t body @f(%a, %s : memref<64xf32>, f32) count 8
      footprint [#mega.access<read operand 1 offset 0 * u + 0 size 1>]
}

// -----

func.func @f(%a: memref<?xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<?xf32>) workers 1 {
  // expected-error @+1 {{footprint names operand #0, which is not a statically shaped memref}}
  mega.task @t body @f(%a : memref<?xf32>) count 8
      footprint [#mega.access<read operand 0 offset 8 * u + 0 size 8>]
}

// -----

func.func @f(%a: memref<8x8xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

// Unit 7, the last, reads [56, 65) of a 64-element tensor.
mega.graph @g(%a: memref<8x8xf32>) workers 1 {
  // expected-error @+1 {{footprint #mega.access<read operand 0 offset 8 * u + 0 size 9> reaches element 65 of operand #0, which has 64}}
  mega.task @t body @f(%a : memref<8x8xf32>) count 8
      footprint [#mega.access<read operand 0 offset 8 * u + 0 size 9>]
}

// -----

func.func @f(%a: memref<64xf32>, %b: memref<32xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

// With a unit range the last unit is L - 1: unit 6, the last of
// `units 4 to 7`, writes [32, 40) of a 32-element tensor.
mega.graph @g(%a: memref<64xf32>, %b: memref<32xf32>) workers 1 {
  // expected-error @+1 {{footprint #mega.access<write operand 1 offset 8 * u + -16 size 8 units 4 to 7> reaches element 40 of operand #1, which has 32}}
  mega.task @t body @f(%a, %b : memref<64xf32>, memref<32xf32>) count 8
      footprint [#mega.access<write operand 1 offset 8 * u + 0 size 8 units 0 to 4>,
                 #mega.access<write operand 1 offset 8 * u + -16 size 8 units 4 to 7>]
}

//===----------------------------------------------------------------------===//
// mega.task: decomposition and per-instance events
//===----------------------------------------------------------------------===//

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  // expected-error @+1 {{units_per_task must be >= 1, got 0}}
  mega.task @t body @f(%a : memref<64xf32>) count 8 {units_per_task = 0}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  // expected-error @+1 {{claims_units needs units_per_task >= 2 (units beyond the instances' own to claim), got 1}}
  mega.task @t body @f(%a : memref<64xf32>) count 8 {claims_units, units_per_task = 1}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i, %j) in [4, 2] threads 128 {
  }
  return
}

// 8 units at 3 per task are ceil(8 / 3) = 3 instances.
mega.graph @g(%a: memref<64xf32>) workers 1 {
  // expected-error @+1 {{count 2 does not match the 8 blocks of the tile.kernel in @f at 3 units per task}}
  mega.task @t body @f(%a : memref<64xf32>) count 2 {units_per_task = 3}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

// A units_per_task larger than the grid is one instance.
mega.graph @g(%a: memref<64xf32>) workers 1 {
  // expected-error @+1 {{count 2 does not match the 8 blocks of the tile.kernel in @f at 16 units per task}}
  mega.task @t body @f(%a : memref<64xf32>) count 2 {units_per_task = 16}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  mega.event @e trigger 1
  mega.task @p body @f(%a : memref<64xf32>) count 1 signals [@e] {units_per_task = 8}
  // expected-error @+1 {{'instance_waits' has 1 entries for 2 instances}}
  mega.task @c body @f(%a : memref<64xf32>) count 2 {units_per_task = 4, instance_waits = [[@e]]}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  mega.event @e trigger 1
  // expected-error @+1 {{'instance_signals' has 3 entries for 2 instances}}
  mega.task @p body @f(%a : memref<64xf32>) count 2 {units_per_task = 4, instance_signals = [[@e], [], []]}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  mega.event @e trigger 2
  mega.task @p body @f(%a : memref<64xf32>) count 2 signals [@e] {units_per_task = 4}
  // expected-error @+1 {{'instance_waits' entries must be lists of event names}}
  mega.task @c body @f(%a : memref<64xf32>) count 2 {units_per_task = 4, instance_waits = [@e, @e]}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  mega.event @e trigger 1
  // expected-error @+1 {{'instance_signals' entries must be lists of event names}}
  mega.task @p body @f(%a : memref<64xf32>) count 2 {units_per_task = 4, instance_signals = [[@e], ["e"]]}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  mega.event @e trigger 1
  mega.task @p body @f(%a : memref<64xf32>) count 2 {units_per_task = 4, instance_signals = [[@e], []]}
  // expected-error @+1 {{'instance_waits' entry @missing does not name a mega.event in the enclosing mega.graph}}
  mega.task @c body @f(%a : memref<64xf32>) count 2 {units_per_task = 4, instance_waits = [[@e], [@missing]]}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  mega.queue @q aot worker 0
  // expected-error @+1 {{'instance_signals' entry @q does not name a mega.event in the enclosing mega.graph}}
  mega.task @p body @f(%a : memref<64xf32>) count 2 {units_per_task = 4, instance_signals = [[], [@q]]}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

// Per-instance signals count one instance each: @e gets 1 + 1 = 2 signals
// (instances 0 and 1), not the 3 it waits for.
mega.graph @g(%a: memref<64xf32>) workers 1 {
  // expected-error @+1 {{event @e has trigger count 3 but is signalled by 2 task instances: a wait on it can never be satisfied}}
  mega.event @e trigger 3
  mega.task @p body @f(%a : memref<64xf32>) count 4 {units_per_task = 2, instance_signals = [[@e], [@e], [], []]}
  mega.task @c body @f(%a : memref<64xf32>) count 1 waits [@e] {units_per_task = 8}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

// Task-wide signals count every instance, per-instance ones one each: @e is
// signalled 2 (task-wide, @p) + 1 (instance 0 of @q) = 3 times.
mega.graph @g(%a: memref<64xf32>) workers 1 {
  // expected-error @+1 {{event @e has trigger count 2 but is signalled by 3 task instances: it is over-signalled}}
  mega.event @e trigger 2
  mega.task @p body @f(%a : memref<64xf32>) count 2 signals [@e] {units_per_task = 4}
  mega.task @q body @f(%a : memref<64xf32>) count 2 {units_per_task = 4, instance_signals = [[@e], []]}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  mega.event @e trigger 1
  // expected-error @+1 {{waits on event @e, which no task signals, so task @c can never start}}
  mega.task @c body @f(%a : memref<64xf32>) count 2 {units_per_task = 4, instance_waits = [[], [@e]]}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

// Cycles through per-instance lists are found too: an instance of @a waits on
// @b, which waits on @a.
mega.graph @g(%a: memref<64xf32>) workers 1 {
  mega.event @ea trigger 1
  mega.event @eb trigger 1
  // expected-error @+1 {{dependency cycle: @a -> @b -> @a}}
  mega.task @a body @f(%a : memref<64xf32>) count 2 {units_per_task = 4, instance_waits = [[], [@eb]], instance_signals = [[@ea], []]}
  mega.task @b body @f(%a : memref<64xf32>) count 1 {units_per_task = 8, instance_waits = [[@ea]], instance_signals = [[@eb]]}
}

//===----------------------------------------------------------------------===//
// Scheduled queues
//===----------------------------------------------------------------------===//

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  // expected-error @+1 {{needs both 'tasks' and 'instances' or neither}}
  mega.queue @w0 aot worker 0 {tasks = [@t]}
  mega.task @t body @f(%a : memref<64xf32>) count 1 {units_per_task = 8}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  // expected-error @+1 {{needs both 'tasks' and 'instances' or neither}}
  mega.queue @w0 aot worker 0 {instances = array<i64: 0>}
  mega.task @t body @f(%a : memref<64xf32>) count 1 {units_per_task = 8}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  // expected-error @+1 {{lists 2 tasks but 1 instances}}
  mega.queue @w0 aot worker 0 {tasks = [@t, @t], instances = array<i64: 0>}
  mega.task @t body @f(%a : memref<64xf32>) count 2 {units_per_task = 4}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  // expected-error @+1 {{instance index -1 must be >= 0}}
  mega.queue @w0 aot worker 0 {tasks = [@t, @t], instances = array<i64: 0, -1>}
  mega.task @t body @f(%a : memref<64xf32>) count 2 {units_per_task = 4}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  mega.event @e trigger 1
  // expected-error @+1 {{lists @e, which does not name a mega.task}}
  mega.queue @w0 aot worker 0 {tasks = [@t, @e], instances = array<i64: 0, 0>}
  mega.task @t body @f(%a : memref<64xf32>) count 1 signals [@e] {units_per_task = 8}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  // expected-error @+1 {{lists instance 2 of @t, which has 2}}
  mega.queue @w0 aot worker 0 {tasks = [@t, @t, @t], instances = array<i64: 0, 1, 2>}
  mega.task @t body @f(%a : memref<64xf32>) count 2 {units_per_task = 4}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 1 {
  // expected-error @+1 {{lists instance 1 of @t a second time}}
  mega.queue @w0 aot worker 0 {tasks = [@t, @t, @t], instances = array<i64: 1, 0, 1>}
  mega.task @t body @f(%a : memref<64xf32>) count 2 {units_per_task = 4}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

// The same instance in two queues.
mega.graph @g(%a: memref<64xf32>) workers 2 {
  mega.queue @w0 aot worker 0 {tasks = [@t, @t], instances = array<i64: 0, 1>}
  // expected-error @+1 {{lists instance 0 of @t a second time}}
  mega.queue @dyn jit {tasks = [@t], instances = array<i64: 0>}
  mega.task @t body @f(%a : memref<64xf32>) count 2 {units_per_task = 4}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

// Once any queue lists entries, every instance needs a queue, also those of
// tasks that no queue mentions.
mega.graph @g(%a: memref<64xf32>) workers 2 {
  mega.queue @w0 aot worker 0 {tasks = [@t], instances = array<i64: 0>}
  mega.queue @w1 aot worker 1
  // expected-error @+1 {{instance 1 is in no queue, so it would never run}}
  mega.task @t body @f(%a : memref<64xf32>) count 2 {units_per_task = 4}
}

// -----

func.func @f(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<64xf32>) workers 2 {
  mega.queue @w0 aot worker 0 {tasks = [@t, @t], instances = array<i64: 0, 1>}
  mega.task @t body @f(%a : memref<64xf32>) count 2 {units_per_task = 4}
  // expected-error @+1 {{instance 0 is in no queue, so it would never run}}
  mega.task @u body @f(%a : memref<64xf32>) count 1 {units_per_task = 8}
}

// -----

func.func @f(%a: memref<8x8xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

// Decomposed (units_per_task 4): unit 7 of the kernel still reads past the end.
mega.graph @g(%a: memref<8x8xf32>) workers 1 {
  // expected-error @+1 {{footprint #mega.access<read operand 0 offset 8 * u + 0 size 9> reaches element 65 of operand #0 at unit 7, which has 64}}
  mega.task @t body @f(%a : memref<8x8xf32>) count 2
      footprint [#mega.access<read operand 0 offset 8 * u + 0 size 9>]
      {units_per_task = 4 : i64}
}

// -----

func.func @f(%a: memref<8x8xf32>) {
  tile.kernel blocks(%i) in [8] threads 128 {
  }
  return
}

mega.graph @g(%a: memref<8x8xf32>) workers 1 {
  // expected-error @+1 {{footprint #mega.access<read operand 0 offset 8 * u + 0 size 8 units 0 to 100> names units up to 100 but @f has 8 units}}
  mega.task @t body @f(%a : memref<8x8xf32>) count 2
      footprint [#mega.access<read operand 0 offset 8 * u + 0 size 8 units 0 to 100>]
      {units_per_task = 4 : i64}
}

// -----

mega.graph @g(%a: memref<8x8xf32>) workers 1 {
  // expected-error @+2 {{access unit range end -7 must be -1 (all units) or past its start}}
  mega.task @t body @f(%a : memref<8x8xf32>) count 8
      footprint [#mega.access<read operand 0 offset 8 * u + 0 size 8 units 0 to -7>]
}

// -----

//===----------------------------------------------------------------------===//
// mega.graph stop_word / max_steps (a repeating graph)
//===----------------------------------------------------------------------===//

// expected-error @+1 {{stop_word and max_steps go together}}
mega.graph @g(%f: memref<4xi32>) workers 1 attributes {stop_word = array<i64: 0, 1>} {
}

// -----

// expected-error @+1 {{stop_word must be [argument, element], got 1 values}}
mega.graph @g(%f: memref<4xi32>) workers 1 attributes {stop_word = array<i64: 0>, max_steps = 8} {
}

// -----

// expected-error @+1 {{max_steps must be in [1, 16777216], got 0}}
mega.graph @g(%f: memref<4xi32>) workers 1 attributes {stop_word = array<i64: 0, 1>, max_steps = 0} {
}

// -----

// expected-error @+1 {{stop_word argument 3 is not one of the graph's 1 arguments}}
mega.graph @g(%f: memref<4xi32>) workers 1 attributes {stop_word = array<i64: 3, 1>, max_steps = 8} {
}

// -----

// expected-error @+1 {{stop_word argument 0 must be a 1-D i32 memref of static size, got 'memref<4xf32>'}}
mega.graph @g(%f: memref<4xf32>) workers 1 attributes {stop_word = array<i64: 0, 1>, max_steps = 8} {
}

// -----

// expected-error @+1 {{stop_word element 4 is outside argument 0 (4 elements)}}
mega.graph @g(%f: memref<4xi32>) workers 1 attributes {stop_word = array<i64: 0, 4>, max_steps = 8} {
}

//===----------------------------------------------------------------------===//
// mega.graph_arg
//===----------------------------------------------------------------------===//

// -----

func.func @graph_arg_in_shared(%t: memref<4xi64>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{result 'memref<8xf32, #gpu.address_space<workgroup>>': a persistent kernel reaches its graph arguments through its argument table, which holds global, statically shaped, row-major memrefs}}
  %x = mega.graph_arg %t[%c0] : memref<4xi64> -> memref<8xf32, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @graph_arg_strided(%t: memref<4xi64>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{which holds global, statically shaped, row-major memrefs}}
  %x = mega.graph_arg %t[%c0] : memref<4xi64> -> memref<8x4xf32, strided<[8, 2]>>
  return
}

// -----

func.func @graph_arg_past_the_table(%t: memref<4xi64>) {
  %c4 = arith.constant 4 : index
  // expected-error @+1 {{slot 4 is outside the argument table's 4 entries}}
  %x = mega.graph_arg %t[%c4] : memref<4xi64> -> memref<8xf32>
  return
}

// -----

func.func @graph_arg_table_in_fragment(%t: memref<4xi64, #tile.fragment>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{the table must be a row-major global or shared memref}}
  %x = mega.graph_arg %t[%c0] : memref<4xi64, #tile.fragment> -> memref<8xf32>
  return
}

// -----

func.func @graph_arg_vector(%t: memref<4xi64>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{result 'vector<4xf32>': a persistent kernel reaches its graph arguments}}
  %x = mega.graph_arg %t[%c0] : memref<4xi64> -> vector<4xf32>
  return
}

//===----------------------------------------------------------------------===//
// The runtime protocol
//===----------------------------------------------------------------------===//

// -----

func.func @shared_word(%m: memref<4xi32, #gpu.address_space<workgroup>>, %i: index) -> i32 {
  // expected-error @+1 {{'mega.poll' op accesses 'memref<4xi32, #gpu.address_space<workgroup>>': protocol words live in global memory, where every CTA of the kernel sees them}}
  %v = mega.poll %m[%i] : memref<4xi32, #gpu.address_space<workgroup>>
  return %v : i32
}

// -----

func.func @rank(%m: memref<4x4xi32>, %i: index) {
  // expected-error @+1 {{'mega.signal' op has 1 indices for a memref of rank 2}}
  mega.signal %m[%i] : memref<4x4xi32>
  return
}

// -----

func.func @post_type(%m: memref<4xi64>, %i: index, %v: i32) {
  // expected-error @+1 {{'mega.post' op stores a 'i32' into a memref of 'i64'}}
  mega.post %m[%i], %v : memref<4xi64>, i32
  return
}

// -----

func.func @prefetch_size(%w: memref<64xf32>, %off: i64) {
  %bytes = arith.constant 24 : i32
  // expected-error @+1 {{'mega.prefetch_l2' op prefetches 24 bytes: a bulk prefetch moves a positive multiple of 16}}
  mega.prefetch_l2 %w, %off, %bytes : memref<64xf32>
  return
}

// -----

func.func @prefetch_offset(%w: memref<64xf32>, %bytes: i32) {
  %off = arith.constant 8 : i64
  // expected-error @+1 {{'mega.prefetch_l2' op prefetches from byte offset 8: a bulk prefetch starts 16-byte aligned}}
  mega.prefetch_l2 %w, %off, %bytes : memref<64xf32>
  return
}

// -----

func.func @watchdog(%start: i64) -> i1 {
  // expected-error @+1 {{'mega.watchdog_expired' op attribute 'limit_ns' failed to satisfy constraint}}
  %late = mega.watchdog_expired %start {limit_ns = 0} : i64
  return %late : i1
}

// -----

// expected-error @+1 {{ranks must be in [1, 8] (the GPUs of one node), got 9}}
mega.graph @g() workers 1 ranks 9 {
}

// -----

// expected-error @+1 {{ctas_per_sm must be >= 1, got 0}}
mega.graph @g() workers 1 attributes {ctas_per_sm = 0} {
}

// -----

// The claim of workers_by_sm walks the CTAs of an SM one by one: a bound
// no chip reaches is an error before any pass sizes anything by it.
// expected-error @+1 {{ctas_per_sm (2147483647) exceeds the 32 CTAs an SM of any known chip}}
mega.graph @g() workers 1 attributes {ctas_per_sm = 2147483647, workers_by_sm} {
}

// -----

mega.graph @g() workers 1 {
  // expected-error @+1 {{is a peer event in a graph of 1 rank: peer events need `ranks` >= 2}}
  mega.event @e trigger 1 peers
}
