// RUN: tilemega-opt %s -split-input-file -verify-diagnostics -convert-mega-to-gpu="early-loads=false" | FileCheck %s
// RUN: tilemega-opt %s -split-input-file -verify-diagnostics -convert-mega-to-gpu="early-loads=false" | FileCheck %s --check-prefix=NOPREFETCH
// RUN: tilemega-opt %s -split-input-file -verify-diagnostics -convert-mega-to-gpu="early-loads=false" | %check-mega-tables - | FileCheck %s --check-prefix=TABLES
// RUN: tilemega-opt %s -split-input-file -verify-diagnostics -convert-mega-to-gpu="early-loads=false timeline=true watchdog-ms=5" | FileCheck %s --check-prefix=TIMELINE
// RUN: tilemega-opt %s -split-input-file -verify-diagnostics -convert-mega-to-gpu="early-loads=false prefetch-bytes=4096" | FileCheck %s --check-prefix=PREFETCH
// RUN: tilemega-opt %s -split-input-file -verify-diagnostics -convert-mega-to-gpu="early-loads=false prefetch-bytes=256" | FileCheck %s --check-prefix=NOPREFETCH
// RUN: tilemega-opt %s -split-input-file -verify-diagnostics -convert-mega-to-gpu="early-loads=false stream-units=true" | FileCheck %s --check-prefix=STREAM
// RUN: tilemega-opt %s -split-input-file -verify-diagnostics -convert-mega-to-gpu="early-loads=false" | FileCheck %s --check-prefix=NOSTREAM

// A scheduled graph: @a (4 units, 2 an instance) copies x to y through
// shared memory and signals @e0; @b (2 units, a fragment) waits on @e0 and
// reads y. Worker 0 runs a#0 then b#0, worker 1 a#1, the JIT queue b#1.
// Entries: 0 = a#0, 1 = a#1, 2 = b#0, 3 = b#1.

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

func.func @sum(%b: memref<256xf32>, %c: memref<256xf32>) {
  tile.kernel blocks(%i) in [2] threads 64 {
    %f = tile.alloc_fragment : memref<128xf32, #tile.fragment>
    tile.clear %f : memref<128xf32, #tile.fragment>
  }
  return
}

// The graph becomes a tile function of the same name whose arguments are
// the five runtime buffers: the argument table of the graph's 3 tensors, 90
// table words, 1 event, 16 state words, 4 timeline words per entry. The
// tensors themselves are described in the metadata (`tensors`).
// CHECK-LABEL: func.func @step(
// CHECK-SAME:    %[[POINTERS:[^:]*]]: memref<3xi64> {mega.role = "runtime", tile.name = "mega_args"},
// CHECK-SAME:    %[[TABLE_BUF:[^:]*]]: memref<{{[0-9]+}}xi32> {mega.role = "runtime", tile.name = "mega_tables"},
// CHECK-SAME:    %[[EVENT_BUF:[^:]*]]: memref<1xi32> {mega.role = "runtime", tile.name = "mega_events"},
// CHECK-SAME:    %[[STATE_BUF:[^:]*]]: memref<16xi32> {mega.role = "runtime", tile.name = "mega_state"},
// CHECK-SAME:    %[[TIMES:[^:]*]]: memref<16xi64> {mega.role = "runtime", tile.name = "mega_timeline"})
// The metadata; its tables are decoded and checked by check_mega_tables.py
// (TABLES below), not copied here.
// TABLES:      graph step: 4 entries, 1 events, 2 workers
// TABLES-NEXT: task a (aot): a#0 a#1
// TABLES-NEXT: task b (jit): b#0 b#1
// TABLES-NEXT: event e0: trigger 2 by a#0 a#1 for b#0 b#1
// TABLES-NEXT: aot w0: a#0 b#0
// TABLES-NEXT: aot w1: a#1
// TABLES-NEXT: jit: b#1
// CHECK-SAME:  attributes {mega.ctas_per_sm = 1 : i64, tilemega.mega = {
// CHECK-SAME:    args = [{alignment = 16 : i64, dtype = "float32", kind = "tensor", name = "x", role = "input", shape = array<i64: 256>, strides = array<i64: 1>},
// CHECK-SAME:            {alignment = 16 : i64, dtype = "float32", kind = "tensor", name = "y", role = "scratch", shape = array<i64: 256>, strides = array<i64: 1>},
// CHECK-SAME:            {alignment = 16 : i64, dtype = "float32", kind = "tensor", name = "z", role = "output", shape = array<i64: 256>, strides = array<i64: 1>}],
// CHECK-SAME:    events = [{name = "e0", trigger = 2 : i64}], graph = "step",
// CHECK-SAME:    num_entries = 4 : i64, num_events = 1 : i64, num_jit = 1 : i64, schedulers = 1 : i64,
// CHECK-SAME:    table_sections = {{[{][^}]*[}]}},
// CHECK-SAME:    tables = array<i32: {{[-0-9, ]+}}>,
// CHECK-SAME:    tasks = [{body = "copy", cost_ns = 1.000000e+03 : f64, count = 2 : i64, name = "a", queue = "aot", units = 4 : i64, units_per_task = 2 : i64},
// CHECK-SAME:             {body = "sum", cost_ns = 5.000000e+02 : f64, count = 2 : i64, name = "b", queue = "jit", units = 2 : i64, units_per_task = 1 : i64}],
// CHECK-SAME:    threads = 64 : i64, timeline = false, watchdog_ns = 2000000000 : i64, workers = 2 : i64}} {
// Two workers and the scheduler CTA.
// CHECK-NEXT:    tile.kernel blocks(%[[CTA:.*]]) in [3] threads 64 attributes {tile.persistent} {
// The control words (with a JIT queue: 5 + one ready run per scheduler
// warp), worker 0's two 8-word AOT records, then the bodies' tiles,
// hoisted to the kernel, one exclusive group per switch case.
// CHECK-NEXT:      tile.alloc_shared : memref<7xi32, #gpu.address_space<workgroup>>
// CHECK-NEXT:      tile.alloc_shared : memref<16xi32, #gpu.address_space<workgroup>>
// CHECK-NEXT:      %[[TILE:.*]] = tile.alloc_shared {tile.exclusive_group = 1 : i64} : memref<64xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT:      %[[FRAG:.*]] = tile.alloc_fragment {tile.exclusive_group = 2 : i64} : memref<128xf32, #tile.fragment>
// The CTA's copy of the argument table (3 words), filled before anything
// reads it.
// CHECK:           %[[ARGS:.*]] = tile.alloc_shared : memref<3xi64, #gpu.address_space<workgroup>>
// CHECK:           scf.for
// CHECK:             memref.load %[[POINTERS]]
// CHECK:             memref.store %{{.*}}, %[[ARGS]]
// CHECK:           gpu.barrier
// CHECK-NOT:       tile.alloc_
// The epoch: launch n waits for trigger * (n + 1).
// CHECK:           mega.peek %[[STATE_BUF]][%{{.*}}] : memref<16xi32>
// CHECK:           %[[IS_WORKER:.*]] = arith.cmpi ult, %[[CTA]], %c2 : index
// CHECK:           scf.if %[[IS_WORKER]] {
// Worker: copy the AOT records to shared memory, then loop over entries.
// CHECK:             scf.for
// CHECK:             gpu.barrier
// CHECK:             scf.while
// CHECK:               %[[START:.*]] = nvvm.read.ptx.sreg.globaltimer : i64
// Each try reads the abort flag (word 10) first, ahead of the acquire loads
// (so that the two are in flight together).
// CHECK:               scf.while
// CHECK-NOT:             mega.poll
// CHECK:                 mega.peek %[[STATE_BUF]][%c10] : memref<16xi32>
// The held ticket: an acquire read of the JIT queue's tail (word 2).
// CHECK:               mega.poll %[[STATE_BUF]][%c2{{.*}}] : memref<16xi32>
// Readiness: an acquire read of the event counter.
// CHECK:               mega.poll %[[EVENT_BUF]][%{{.*}}] : memref<1xi32>
// A JIT ticket: a relaxed fetch-and-add on the queue's head (word 1).
// CHECK:               mega.claim %[[STATE_BUF]][%c1{{.*}}], %{{.*}} : memref<16xi32>
// The watchdog: past the limit, the first CTA to raise the abort flag
// (word 10) records the error, fenced before its code.
// CHECK:               mega.watchdog_expired %[[START]] {limit_ns = 2000000000 : i64} : i64
// CHECK:               mega.raise_flag %[[STATE_BUF]][%c10{{.*}}] : memref<16xi32>
// CHECK-COUNT-5:       mega.post %[[STATE_BUF]]
// CHECK-NEXT:          mega.fence
// CHECK:               mega.post %[[STATE_BUF]][%c4]
// The task switch: case 0 runs @copy on 2 units an instance (the grid has 4
// units: no bounds check), with a barrier between units, on graph tensors 0
// (x) and 1 (y) from the argument table; case 1 runs @sum.
// CHECK:             scf.index_switch %{{.*}} {tile.exclusive_cases}
// CHECK-NEXT:        case 0 {
// CHECK:               %[[X:.*]] = mega.graph_arg %[[ARGS]][%c0{{.*}}] : memref<3xi64, #gpu.address_space<workgroup>> -> memref<256xf32>
// CHECK:               %[[Y:.*]] = mega.graph_arg %[[ARGS]][%c1{{.*}}] : memref<3xi64, #gpu.address_space<workgroup>> -> memref<256xf32>
// CHECK:               scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT:            %[[UNIT:.*]] = arith.addi %{{.*}}, %[[J]] : index
// CHECK-NEXT:            gpu.barrier
// CHECK-NOT:             scf.if
// CHECK:                 %[[OFF:.*]] = arith.muli %[[UNIT]], %{{.*}} : index
// CHECK-NEXT:            tile.copy %[[X]][%[[OFF]]] to %[[TILE]][0] sizes [64]
// CHECK-NEXT:            tile.copy %[[TILE]][0] to %[[Y]][%[[OFF]]] sizes [64]
// CHECK-NEXT:          }
// CHECK-NEXT:          scf.yield
// CHECK-NEXT:        }
// CHECK-NEXT:        case 1 {
// CHECK-NOT:           scf.for
// CHECK:               tile.clear %[[FRAG]]
// CHECK-NEXT:          scf.yield
// CHECK-NEXT:        }
// CHECK-NEXT:        default {
// CHECK-NEXT:        }
// CHECK-NEXT:        gpu.barrier
// Thread 0 signals (a release increment) the first event, then the rest
// of the entry's signal list.
// CHECK:             mega.signal %[[EVENT_BUF]][%{{.*}}] : memref<1xi32>
// CHECK:             scf.for
// CHECK:               mega.signal %[[EVENT_BUF]][%{{.*}}] : memref<1xi32>
// The scheduler CTA: each warp checks 32 JIT entries at once (lane i of
// warp w entry j + 32 w + i), a ballot finds its window's ready run, lane 0
// posts it; thread 0 joins the runs (a window counts while every one before
// it was all ready: 2 warps of 64 threads here), publishes the run with a
// release store of the tail and hands every thread the next position (-1:
// stop) through control word 0. Only thread 0, which decides, reads the
// abort flag (word 10), ahead of its acquire loads.
// CHECK:           } else {
// CHECK:             scf.while
// CHECK-NEXT:          scf.if %{{.*}} -> (i1) {
// CHECK:                 %{{.*}} = arith.constant 10 : index
// CHECK-NEXT:            mega.peek %[[STATE_BUF]][%{{.*}}] : memref<16xi32>
// CHECK:               } else {
// CHECK-NEXT:            arith.constant false
// CHECK:             mega.poll %[[EVENT_BUF]]
// CHECK:             %[[MASK:.*]] = nvvm.vote.sync  ballot %c-1_i32, %{{.*}} -> i32
// CHECK:             %[[UNSET:.*]] = arith.xori %[[MASK]], %c-1_i32
// CHECK:             %[[READY:.*]] = "llvm.intr.cttz"(%[[UNSET]]) <{is_zero_poison = false}>
// CHECK:             memref.store %[[READY]], %[[CONTROL:.*]][%{{.*}}] : memref<7xi32, #gpu.address_space<workgroup>>
// CHECK:             gpu.barrier
// CHECK:             memref.load %[[CONTROL]][%c5{{.*}}]
// CHECK:             memref.load %[[CONTROL]][%c6{{.*}}]
// CHECK:             mega.publish %[[STATE_BUF]][%c2{{.*}}], %{{.*}} : memref<16xi32>
// CHECK:             memref.store %{{.*}}, %[[CONTROL]][%c0{{.*}}]
// CHECK:             gpu.barrier
// CHECK:             memref.load %[[CONTROL]][%c0{{.*}}]
// CHECK:             gpu.barrier
// CHECK:             scf.condition
// The last CTA to finish resets the JIT ring and opens the next epoch.
// CHECK:           gpu.barrier
// CHECK:           mega.arrive %[[STATE_BUF]][%c3{{.*}}], %{{.*}} : memref<16xi32>
// CHECK-COUNT-3:   mega.post %[[STATE_BUF]]
// CHECK:           mega.fence
// CHECK:           mega.post %[[STATE_BUF]][%c0{{.*}}]
// CHECK:         return
// The bodies live on only inside the persistent kernel.
// CHECK-NOT:     func.func @copy
// CHECK-NOT:     func.func @sum
// CHECK-NOT:     mega.graph

// With a timeline, entries record %globaltimer, their CTA and %smid.
// TIMELINE-LABEL: func.func @step(
// TIMELINE-SAME:    timeline = true, watchdog_ns = 5000000 : i64
// TIMELINE:         mega.post %{{.*}}[%{{.*}}], %{{.*}} : memref<16xi64>, i64
// TIMELINE:         nvvm.read.ptx.sreg.smid : i32
// TIMELINE:         scf.index_switch
// TIMELINE:         mega.post %{{.*}}[%{{.*}}], %{{.*}} : memref<16xi64>, i64

// Only x is read-only (y is written by @a): @a's range of x, 2 units of 64
// floats = 512 bytes an instance, is prefetched when it fits the budget
// (none by default).
// PREFETCH-LABEL:    func.func @step(
// PREFETCH-COUNT-1:  mega.prefetch_l2 %{{.*}}, %{{.*}}, %{{.*}} : memref<256xf32>
// PREFETCH-NOT:      mega.prefetch_l2
// NOPREFETCH-LABEL:  func.func @step(
// NOPREFETCH-NOT:    mega.prefetch_l2
mega.graph @step(%x: memref<256xf32>, %y: memref<256xf32>, %z: memref<256xf32>)
    workers 2 attributes {mega.arg_names = ["x", "y", "z"],
                          mega.arg_roles = ["input", "scratch", "output"]} {
  mega.event @e0 trigger 2
  mega.queue @w0 aot worker 0 {tasks = [@a, @b], instances = array<i64: 0, 0>}
  mega.queue @w1 aot worker 1 {tasks = [@a], instances = array<i64: 1>}
  mega.queue @jit jit {tasks = [@b], instances = array<i64: 1>}
  mega.task @a body @copy(%x, %y : memref<256xf32>, memref<256xf32>) count 2
      signals [@e0]
      footprint [#mega.access<read operand 0 offset 64 * u + 0 size 64>,
                 #mega.access<write operand 1 offset 64 * u + 0 size 64>]
      {units_per_task = 2, cost_ns = 1000.0}
  mega.task @b body @sum(%y, %z : memref<256xf32>, memref<256xf32>) count 2
      waits [@e0]
      footprint [#mega.access<read operand 0 offset 128 * u + 0 size 128>,
                 #mega.access<write operand 1 offset 128 * u + 0 size 128>]
      {units_per_task = 1, cost_ns = 500.0, variable}
}

// -----

func.func @scale3(%a: memref<192xf32>, %b: memref<192xf32>) {
  tile.kernel blocks(%i) in [3] threads 128 {
    %c64 = arith.constant 64 : index
    %off = arith.muli %i, %c64 : index
    %f = tile.alloc_fragment : memref<64xf32, #tile.fragment>
    tile.copy %a[%off] to %f[0] sizes [64]
        : memref<192xf32> to memref<64xf32, #tile.fragment>
    tile.copy %f[0] to %b[%off] sizes [64]
        : memref<64xf32, #tile.fragment> to memref<192xf32>
  }
  return
}

// No JIT queue: two worker CTAs and no scheduler. One body serves two tasks
// on different tensors, so its operands are picked by task; its 3 units at
// 2 an instance leave the last instance one unit short, which a bounds check
// skips. @p's instances signal two events and @q's instance 0 waits on both:
// its record holds the first, the wait and signal lists the rest.

// CHECK-LABEL: func.func @two(
// CHECK-SAME:    %{{[^:]*}}: memref<3xi64> {mega.role = "runtime", tile.name = "mega_args"},
// CHECK-SAME:    %{{[^:]*}}: memref<{{[0-9]+}}xi32> {mega.role = "runtime", tile.name = "mega_tables"}, %{{[^:]*}}: memref<3xi32> {mega.role = "runtime", tile.name = "mega_events"}
// CHECK-SAME:    events = [{name = "e0", trigger = 2 : i64}, {name = "e1", trigger = 2 : i64}, {name = "e2", trigger = 1 : i64}], graph = "two",
// CHECK-SAME:    num_entries = 4 : i64, num_events = 3 : i64, num_jit = 0 : i64
// Both of @p's instances signal e0 and e1, which q#0 waits for; q#1 signals
// e2 (its record holds the first wait and signal, the lists the rest: the
// script checks records against lists).
// TABLES:      graph two: 4 entries, 3 events, 2 workers
// TABLES-NEXT: task p (aot): p#0 p#1
// TABLES-NEXT: task q (aot): q#0 q#1
// TABLES-NEXT: event e0: trigger 2 by p#0 p#1 for q#0
// TABLES-NEXT: event e1: trigger 2 by p#0 p#1 for q#0
// TABLES-NEXT: event e2: trigger 1 by q#1 for (none)
// TABLES-NEXT: aot w0: p#0 q#0
// TABLES-NEXT: aot w1: p#1 q#1
// TABLES-NEXT: jit: (none)
// TABLES-NEXT: graph policy: 6 entries, 2 events, 1 workers
// (The policy graph's tables, below.)
// CHECK-SAME:    tables = array<i32: {{[-0-9, ]+}}>,
// CHECK-SAME:    tasks = [{body = "scale3", cost_ns = 0.000000e+00 : f64, count = 2 : i64, name = "p", queue = "aot", units = 3 : i64, units_per_task = 2 : i64},
// CHECK-SAME:             {body = "scale3", cost_ns = 0.000000e+00 : f64, count = 2 : i64, name = "q", queue = "aot", units = 3 : i64, units_per_task = 2 : i64}]
// CHECK-SAME:    threads = 128 : i64
// CHECK-NEXT:    tile.kernel blocks(%{{.*}}) in [2] threads 128 attributes {tile.persistent} {
// One case (same body, same units per task), one exclusive group.
// CHECK:           %[[FRAG:.*]] = tile.alloc_fragment {tile.exclusive_group = 1 : i64} : memref<64xf32, #tile.fragment>
// CHECK:           %[[ARGS:.*]] = tile.alloc_shared : memref<3xi64, #gpu.address_space<workgroup>>
// CHECK-NOT:       tile.alloc_
// CHECK:           scf.index_switch %{{.*}} {tile.exclusive_cases}
// CHECK-NEXT:      case 0 {
// @p (task 0) reads u (pointer 0), @q (task 1) reads v (pointer 1)...
// CHECK:             %[[IN_SLOT:.*]] = scf.index_switch %{{.*}} -> index
// CHECK-NEXT:        case 1 {
// CHECK-NEXT:          arith.constant 1 : index
// CHECK-NEXT:          scf.yield
// CHECK-NEXT:        }
// CHECK-NEXT:        default {
// CHECK-NEXT:          arith.constant 0 : index
// CHECK-NEXT:          scf.yield
// CHECK-NEXT:        }
// CHECK-NEXT:        %[[IN:.*]] = mega.graph_arg %[[ARGS]][%[[IN_SLOT]]] : memref<3xi64, #gpu.address_space<workgroup>> -> memref<192xf32>
// ... and writes v or w (pointer 1 or 2).
// CHECK:             %[[OUT_SLOT:.*]] = scf.index_switch %{{.*}} -> index
// CHECK-NEXT:        case 1 {
// CHECK-NEXT:          arith.constant 2 : index
// CHECK-NEXT:          scf.yield
// CHECK-NEXT:        }
// CHECK-NEXT:        default {
// CHECK-NEXT:          arith.constant 1 : index
// CHECK-NEXT:          scf.yield
// CHECK-NEXT:        }
// CHECK-NEXT:        %[[OUT:.*]] = mega.graph_arg %[[ARGS]][%[[OUT_SLOT]]] : memref<3xi64, #gpu.address_space<workgroup>> -> memref<192xf32>
// CHECK:             scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT:          %[[UNIT:.*]] = arith.addi %{{.*}}, %[[J]] : index
// CHECK-NEXT:          gpu.barrier
// With stream-units, the loop over a task's units is marked for
// tile-pipeline (one ring of stages across them).
// STREAM-LABEL:      func.func @two(
// STREAM:              scf.for
// STREAM:                arith.addi
// STREAM:              } {tile.stream_units}
// NOSTREAM-NOT:      tile.stream_units
// CHECK:               %[[IN_GRID:.*]] = arith.cmpi ult, %[[UNIT]], %c3{{.*}} : index
// CHECK-NEXT:          scf.if %[[IN_GRID]] {
// CHECK:                 tile.copy %[[IN]][%{{.*}}] to %[[FRAG]][0] sizes [64]
// CHECK-NEXT:            tile.copy %[[FRAG]][0] to %[[OUT]][%{{.*}}] sizes [64]
// CHECK-NOT:       vote.sync.ballot
// CHECK:         return
mega.graph @two(%u: memref<192xf32>, %v: memref<192xf32>, %w: memref<192xf32>)
    workers 2 schedulers 0 {
  mega.event @e0 trigger 2
  mega.event @e1 trigger 2
  mega.event @e2 trigger 1
  mega.queue @w0 aot worker 0 {tasks = [@p, @q], instances = array<i64: 0, 0>}
  mega.queue @w1 aot worker 1 {tasks = [@p, @q], instances = array<i64: 1, 1>}
  mega.task @p body @scale3(%u, %v : memref<192xf32>, memref<192xf32>) count 2
      signals [@e0, @e1] {units_per_task = 2}
  mega.task @q body @scale3(%v, %w : memref<192xf32>, memref<192xf32>) count 2
      {units_per_task = 2, instance_waits = [[@e0, @e1], []],
       instance_signals = [[], [@e2]]}
}

// -----

func.func @a64(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 64 {
  }
  return
}
func.func @a128(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 128 {
  }
  return
}

mega.graph @mixed(%x: memref<64xf32>) workers 1 {
  mega.queue @w0 aot worker 0 {tasks = [@t, @u], instances = array<i64: 0, 0>}
  mega.task @t body @a64(%x : memref<64xf32>) count 1
  // expected-error @+1 {{body @a128 runs 128 threads, but task @t runs 64: all bodies of a persistent kernel need the same thread count}}
  mega.task @u body @a128(%x : memref<64xf32>) count 1
}

// -----

func.func @a64(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 64 {
  }
  return
}

// 132 workers and the scheduler CTA do not fit 132 SMs.
// expected-error @+1 {{needs 133 CTAs (132 workers + 1 scheduler CTA) but only 132 can be resident at once (max-ctas, or the GPU's SM count x ctas_per_sm), and a persistent kernel needs all of them resident: use at most 131 workers}}
mega.graph @too_many(%x: memref<64xf32>) workers 132 {
  mega.queue @dyn jit {tasks = [@t], instances = array<i64: 0>}
  mega.task @t body @a64(%x : memref<64xf32>) count 1
}

// -----

func.func @a64(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 64 {
  }
  return
}

// expected-error @+1 {{needs 133 CTAs (133 workers) but only 132 can be resident at once (max-ctas, or the GPU's SM count x ctas_per_sm), and a persistent kernel needs all of them resident: use at most 132 workers}}
mega.graph @too_many_workers(%x: memref<64xf32>) workers 133 schedulers 0 {
  mega.queue @w0 aot worker 0 {tasks = [@t], instances = array<i64: 0>}
  mega.task @t body @a64(%x : memref<64xf32>) count 1
}

// -----

func.func @a64(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 64 {
  }
  return
}

// expected-error @+1 {{has no scheduled queues: run mega-schedule before convert-mega-to-gpu}}
mega.graph @unscheduled(%x: memref<64xf32>) workers 1 {
  mega.task @t body @a64(%x : memref<64xf32>) count 1
}

// -----

// expected-error @+1 {{has no tasks to run}}
mega.graph @empty() workers 1 {
}

// -----

// The prefetch policy: a task's read-only inputs are prefetched only when
// every stage it waits on is estimated cheaper than its own. @p waits on
// nothing (its x is prefetched); @q's w1 sits behind @p, 200 ns of stage
// against @q's 2000 (prefetched); @r's w2 sits behind @q, heavier than @r's
// 1000 (not prefetched: the prefetch would compete with @q for DRAM).
// PREFETCH-LABEL:   func.func @policy(
// PREFETCH-DAG:     mega.prefetch_l2 %{{.*}}, %{{.*}}, %{{.*}} : memref<512xf32>
// PREFETCH-DAG:     mega.prefetch_l2 %{{.*}}, %{{.*}}, %{{.*}} : memref<128xf32>
// PREFETCH-NOT:     mega.prefetch_l2 %{{.*}}, %{{.*}}, %{{.*}} : memref<256xf32>
// NOPREFETCH-LABEL: func.func @policy(
// TABLES:           task p (aot): p#0 p#1
// TABLES-NEXT:      task q (aot): q#0 q#1
// TABLES-NEXT:      task r (aot): r#0 r#1
// TABLES-NEXT:      event e0: trigger 2 by p#0 p#1 for q#0 q#1
// TABLES-NEXT:      event e1: trigger 2 by q#0 q#1 for r#0 r#1
// TABLES-NEXT:      aot w0: p#0 p#1 q#0 q#1 r#0 r#1
// TABLES-NEXT:      jit: (none)
// TABLES-NEXT:      tables ok
func.func @spread(%x: memref<512xf32>, %h: memref<128xf32>) {
  tile.kernel blocks(%i) in [2] threads 64 {
    %c64 = arith.constant 64 : index
    %off = arith.muli %i, %c64 : index
    %f = tile.alloc_fragment : memref<64xf32, #tile.fragment>
    tile.copy %x[%off] to %f[0] sizes [64] : memref<512xf32> to memref<64xf32, #tile.fragment>
    tile.copy %f[0] to %h[%off] sizes [64] : memref<64xf32, #tile.fragment> to memref<128xf32>
  }
  return
}

func.func @mix_a(%w: memref<128xf32>, %h: memref<128xf32>, %o: memref<128xf32>) {
  tile.kernel blocks(%i) in [2] threads 64 {
    %c64 = arith.constant 64 : index
    %off = arith.muli %i, %c64 : index
    %f = tile.alloc_fragment : memref<64xf32, #tile.fragment>
    tile.copy %w[%off] to %f[0] sizes [64] : memref<128xf32> to memref<64xf32, #tile.fragment>
    tile.copy %f[0] to %o[%off] sizes [64] : memref<64xf32, #tile.fragment> to memref<128xf32>
  }
  return
}

func.func @mix_b(%w: memref<256xf32>, %h: memref<128xf32>, %o: memref<128xf32>) {
  tile.kernel blocks(%i) in [2] threads 64 {
    %c64 = arith.constant 64 : index
    %off = arith.muli %i, %c64 : index
    %f = tile.alloc_fragment : memref<64xf32, #tile.fragment>
    tile.copy %w[%off] to %f[0] sizes [64] : memref<256xf32> to memref<64xf32, #tile.fragment>
    tile.copy %f[0] to %o[%off] sizes [64] : memref<64xf32, #tile.fragment> to memref<128xf32>
  }
  return
}

mega.graph @policy(%x: memref<512xf32>, %w1: memref<128xf32>, %w2: memref<256xf32>,
                   %h: memref<128xf32>, %o: memref<128xf32>, %z: memref<128xf32>) workers 1 {
  mega.event @e0 trigger 2
  mega.event @e1 trigger 2
  mega.queue @w0 aot worker 0 {tasks = [@p, @p, @q, @q, @r, @r],
                               instances = array<i64: 0, 1, 0, 1, 0, 1>}
  mega.task @p body @spread(%x, %h : memref<512xf32>, memref<128xf32>) count 2
      signals [@e0]
      footprint [#mega.access<read operand 0 offset 64 * u + 0 size 64>,
                 #mega.access<write operand 1 offset 64 * u + 0 size 64>]
      {units_per_task = 1, cost_ns = 100.0}
  mega.task @q body @mix_a(%w1, %h, %o : memref<128xf32>, memref<128xf32>, memref<128xf32>)
      count 2 waits [@e0] signals [@e1]
      footprint [#mega.access<read operand 0 offset 64 * u + 0 size 64>,
                 #mega.access<read operand 1 offset 64 * u + 0 size 64>,
                 #mega.access<write operand 2 offset 64 * u + 0 size 64>]
      {units_per_task = 1, cost_ns = 1000.0}
  mega.task @r body @mix_b(%w2, %o, %z : memref<256xf32>, memref<128xf32>, memref<128xf32>)
      count 2 waits [@e1]
      footprint [#mega.access<read operand 0 offset 64 * u + 0 size 64>,
                 #mega.access<read operand 1 offset 64 * u + 0 size 64>,
                 #mega.access<write operand 2 offset 64 * u + 0 size 64>]
      {units_per_task = 1, cost_ns = 500.0}
}
