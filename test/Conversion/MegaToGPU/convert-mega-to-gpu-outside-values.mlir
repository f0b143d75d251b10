// RUN: tilemega-opt %s -split-input-file -verify-diagnostics -convert-mega-to-gpu | FileCheck %s

// A task body's tile.kernel may use constants its function defines
// around it: the persistent kernel clones them into the body's case (it
// runs only the tile.kernel of each body). Found by scripts/fuzz/fuzz_opt.py
// (seed 43): such a use was left pointing into the body function, which the
// conversion then erased ("operation destroyed but still has uses").

func.func @advance(%G: memref<16xi32>) {
  %c3 = arith.constant 3 : index
  tile.kernel blocks(%b) in [1] threads 128 {
    %c1 = arith.constant 1 : i32
    memref.store %c1, %G[%c3] : memref<16xi32>
  }
  return
}

// CHECK-LABEL: func.func @outside_constant(
// CHECK:         case 0 {
// CHECK:           %[[G:.*]] = mega.graph_arg
// CHECK:           %[[C3:.*]] = arith.constant 3 : index
// CHECK:           memref.store %{{.*}}, %[[G]][%[[C3]]] : memref<16xi32>
mega.graph @outside_constant(%g: memref<16xi32>) workers 1 schedulers 0 {
  mega.queue @w0 aot worker 0 {tasks = [@t], instances = array<i64: 0>}
  mega.task @t body @advance(%g : memref<16xi32>) count 1
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 16>]
      {units_per_task = 1}
}

// -----

func.func @advance(%G: memref<16xi32>, %n: index) {
  // expected-note @+1 {{defined here}}
  %i = arith.addi %n, %n : index
  // expected-error @+1 {{'tile.kernel' op of task body @advance uses a value defined outside it that is not a constant (arith.addi): a persistent kernel runs only the tile.kernel of each body; compute it inside the tile.kernel}}
  tile.kernel blocks(%b) in [1] threads 128 {
    %c1 = arith.constant 1 : i32
    memref.store %c1, %G[%i] : memref<16xi32>
  }
  return
}

mega.graph @outside_value(%g: memref<16xi32>, %n: index) workers 1 schedulers 0 {
  mega.queue @w0 aot worker 0 {tasks = [@t], instances = array<i64: 0>}
  mega.task @t body @advance(%g, %n : memref<16xi32>, index) count 1
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 16>]
      {units_per_task = 1}
}
