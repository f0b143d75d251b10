// RUN: tilemega-opt %s -split-input-file -verify-diagnostics -convert-mega-to-gpu | FileCheck %s

// A repeating graph (stop_word / max_steps): one launch runs steps of the
// whole graph until element 1 of %flag is nonzero, at most the host's step
// limit (state word 11; one step when unset), each step closed by a grid
// barrier. The tasks are those of convert-mega-to-gpu.mlir's @step.

func.func @copy(%a: memref<256xf32>, %b: memref<256xf32>) {
  tile.kernel blocks(%i) in [4] threads 64 {
    %c64 = arith.constant 64 : index
    %off = arith.muli %i, %c64 : index
    %s = tile.alloc_shared : memref<64xf32, #gpu.address_space<workgroup>>
    tile.copy %a[%off] to %s[0] sizes [64]
        : memref<256xf32> to memref<64xf32, #gpu.address_space<workgroup>>
    tile.copy %s[0] to %b[%off] sizes [64]
        : memref<64xf32, #gpu.address_space<workgroup>> to memref<256xf32>
  }
  return
}

func.func @sum(%b: memref<256xf32>, %c: memref<4xi32>) {
  tile.kernel blocks(%i) in [2] threads 64 {
    %f = tile.alloc_fragment : memref<128xf32, #tile.fragment>
    tile.clear %f : memref<128xf32, #tile.fragment>
  }
  return
}

// CHECK-LABEL: func.func @loop(
// The step bound goes to the metadata for the runtime.
// CHECK-SAME:    loop = {max_steps = 64 : i64, stop_argument = 2 : i64, stop_element = 1 : i64}
// CHECK:         tile.kernel blocks(%[[CTA:.*]]) in [3] threads 64 attributes {tile.persistent} {
// The epoch at entry and the host's step limit (state words 0 and 11),
// clamped to [1, max_steps] with 1 as the default.
// CHECK:           %[[BASE:.*]] = mega.peek %[[STATE:.*]][%c0{{.*}}] : memref<16xi32>
// CHECK:           %[[ASKED:.*]] = mega.peek %[[STATE]][%c11] : memref<16xi32>
// CHECK:           %[[LIMIT:.*]] = arith.select %{{.*}}, %[[ASKED]], %c1_i32
// CHECK:           scf.while (%[[STEP:.*]] = %c0_i32) : (i32) -> i32 {
// Step n waits for counters at trigger * (base + n + 1).
// CHECK:             %[[NEXT:.*]] = arith.addi %[[STEP]], %c1_i32
// CHECK:             %[[TARGET:.*]] = arith.addi %[[BASE]], %[[NEXT]]
// CHECK:             scf.if
// The step barrier: arrive, the last CTA records the steps and opens the
// next epoch, the others spin (with the watchdog) until it does.
// CHECK:             gpu.barrier
// CHECK:             mega.arrive %[[STATE]][%c3{{.*}}], %{{.*}} : memref<16xi32>
// CHECK:             scf.if %{{.*}} {
// CHECK:               mega.post %[[STATE]][%c12]
// CHECK:               mega.fence
// CHECK:             } else {
// CHECK:               %[[SPIN_START:.*]] = nvvm.read.ptx.sreg.globaltimer : i64
// CHECK:               scf.while : () -> () {
// CHECK:                 mega.poll %[[STATE]][%c0{{.*}}] : memref<16xi32>
// CHECK:                 mega.watchdog_expired %[[SPIN_START]]
// Everyone reads the stop word the step left (element 1 of argument 2) and
// agrees through shared memory.
// CHECK:             %[[FLAG:.*]] = mega.graph_arg %{{.*}}[%c2{{.*}}] : memref<3xi64> -> memref<4xi32>
// CHECK:             mega.peek %[[FLAG]][%c1{{.*}}] : memref<4xi32>
// CHECK:             memref.store
// CHECK:             gpu.barrier
// CHECK:             memref.load
// CHECK:             gpu.barrier
// CHECK:             %[[MORE_STEPS:.*]] = arith.cmpi slt, %{{.*}}, %[[LIMIT]] : i32
// CHECK:             scf.condition
mega.graph @loop(%x: memref<256xf32>, %y: memref<256xf32>, %flag: memref<4xi32>)
    workers 2 attributes {mega.arg_names = ["x", "y", "flag"],
                          mega.arg_roles = ["input", "scratch", "cache"],
                          stop_word = array<i64: 2, 1>, max_steps = 64} {
  mega.event @e0 trigger 2
  mega.queue @w0 aot worker 0 {tasks = [@a, @b], instances = array<i64: 0, 0>}
  mega.queue @w1 aot worker 1 {tasks = [@a], instances = array<i64: 1>}
  mega.queue @jit jit {tasks = [@b], instances = array<i64: 1>}
  mega.task @a body @copy(%x, %y : memref<256xf32>, memref<256xf32>) count 2
      signals [@e0]
      footprint [#mega.access<read operand 0 offset 64 * u + 0 size 64>,
                 #mega.access<write operand 1 offset 64 * u + 0 size 64>]
      {units_per_task = 2, cost_ns = 1000.0}
  mega.task @b body @sum(%y, %flag : memref<256xf32>, memref<4xi32>) count 2
      waits [@e0]
      footprint [#mega.access<read operand 0 offset 128 * u + 0 size 128>,
                 #mega.access<write operand 1 offset 0 * u + 0 size 4>]
      {units_per_task = 1, cost_ns = 500.0, variable}
}
