// RUN: tilemega-opt %s -split-input-file -mega-decompose | FileCheck %s
// RUN: tilemega-opt %s -split-input-file -mega-decompose="max-units-per-task=8" | FileCheck %s --check-prefix=MAX8
// RUN: tilemega-opt %s -split-input-file -mega-decompose="bytes-per-ns=300" | FileCheck %s --check-prefix=FAST
// RUN: tilemega-opt %s -split-input-file -mega-decompose="task-overhead-ns=0" | FileCheck %s --check-prefix=NOOVERHEAD
// RUN: not tilemega-opt %s -split-input-file -mega-decompose="bytes-per-ns=0" 2>&1 | FileCheck %s --check-prefix=ERR
// RUN: not tilemega-opt %s -split-input-file -mega-decompose="task-overhead-ns=-1" 2>&1 | FileCheck %s --check-prefix=ERR
// RUN: not tilemega-opt %s -split-input-file -mega-decompose="max-units-per-task=0" 2>&1 | FileCheck %s --check-prefix=ERR

// ERR: error: mega-decompose needs bytes-per-ns > 0, task-overhead-ns >= 0 and max-units-per-task >= 1

// The cost model: a unit costs its footprint's bytes / bytes-per-ns, an
// instance of k units k * unit + task-overhead-ns, and k minimises
// ceil(ceil(units / k) / workers) * (k * unit + overhead) (ties: smaller k).
// Defaults: 30 bytes/ns, 1500 ns overhead, at most 64 units per instance.

// 64 units of 3000 bytes (2800 read by every unit, 400 written by half of
// them: 200 on average) = 100 ns a unit.
func.func @mid(%w: memref<44800xf32>, %o: memref<3200xf32>) {
  tile.kernel blocks(%i) in [64] threads 128 {
  }
  return
}

// 8 units of 300000 bytes (bf16) = 10000 ns a unit.
func.func @big(%w: memref<1200000xbf16>) {
  tile.kernel blocks(%i, %j) in [2, 4] threads 128 {
  }
  return
}

// 6 units of 30 bytes (i8) = 1 ns a unit.
func.func @tiny(%x: memref<180xi8>) {
  tile.kernel blocks(%i) in [6] threads 128 {
  }
  return
}

// No footprint: units are free, only the overhead counts.
func.func @free() {
  tile.kernel blocks(%i) in [64] threads 128 {
  }
  return
}

// On 4 workers:
//  @mid  k=16: 4 instances, one round of 16 * 100 + 1500 = 3100 ns (k=8:
//        2 rounds of 2300, k=32: one of 4700).
//  @big  k=2: 4 instances, one round of 21500 (k=1: 2 rounds of 11500).
//  @tiny k=2: 3 instances of 2 + 1500 (k=1: 2 rounds of 1501).
//  @free k=16: one round of 1500 ns.
// CHECK-LABEL: mega.graph @four
// CHECK:         mega.task @mid body @mid({{.*}}) count 4
// CHECK-SAME:      {cost_ns = 3.100000e+03 : f64, units_per_task = 16 : i64}
// CHECK:         mega.task @big body @big({{.*}}) count 4
// CHECK-SAME:      {cost_ns = 2.150000e+04 : f64, units_per_task = 2 : i64}
// CHECK:         mega.task @tiny body @tiny({{.*}}) count 3
// CHECK-SAME:      {cost_ns = 1.502000e+03 : f64, units_per_task = 2 : i64, variable}
// CHECK:         mega.task @free body @free() count 4
// CHECK-SAME:      {cost_ns = 1.500000e+03 : f64, units_per_task = 16 : i64}

// At most 8 units an instance: @mid k=8 (8 instances, 2 rounds of 2300).
// MAX8-LABEL: mega.graph @four
// MAX8:         mega.task @mid {{.*}} count 8
// MAX8-SAME:      {cost_ns = 2.300000e+03 : f64, units_per_task = 8 : i64}
// MAX8:         mega.task @big {{.*}} count 4
// MAX8-SAME:      {cost_ns = 2.150000e+04 : f64, units_per_task = 2 : i64}
// MAX8:         mega.task @tiny {{.*}} count 3
// MAX8-SAME:      {cost_ns = 1.502000e+03 : f64, units_per_task = 2 : i64, variable}
// MAX8:         mega.task @free {{.*}} count 8
// MAX8-SAME:      {cost_ns = 1.500000e+03 : f64, units_per_task = 8 : i64}

// 300 bytes/ns: @mid units cost 10 ns: k=16, one round of 160 + 1500 (k=64:
// one of 2140). @big (1000 ns a unit): k=2, one round of 3500 (k=1: 2 rounds
// of 2500). @tiny (0.1 ns a unit): k=2.
// FAST-LABEL: mega.graph @four
// FAST:         mega.task @mid {{.*}} count 4
// FAST-SAME:      {cost_ns = 1.660000e+03 : f64, units_per_task = 16 : i64}
// FAST:         mega.task @big {{.*}} count 4
// FAST-SAME:      {cost_ns = 3.500000e+03 : f64, units_per_task = 2 : i64}
// FAST:         mega.task @tiny {{.*}} count 3
// FAST-SAME:      {cost_ns = 1.500200e+03 : f64, units_per_task = 2 : i64, variable}
// FAST:         mega.task @free {{.*}} count 4
// FAST-SAME:      {cost_ns = 1.500000e+03 : f64, units_per_task = 16 : i64}

// No overhead: the work is the same at every k that splits the units evenly
// over the workers (@mid: 16 rounds of 100 ns = one of 1600), and the tie
// goes to the smaller k: one unit an instance everywhere.
// NOOVERHEAD-LABEL: mega.graph @four
// NOOVERHEAD:         mega.task @mid {{.*}} count 64
// NOOVERHEAD-SAME:      {cost_ns = 1.000000e+02 : f64, units_per_task = 1 : i64}
// NOOVERHEAD:         mega.task @big {{.*}} count 8
// NOOVERHEAD-SAME:      {cost_ns = 1.000000e+04 : f64, units_per_task = 1 : i64}
// NOOVERHEAD:         mega.task @tiny {{.*}} count 6
// NOOVERHEAD-SAME:      {cost_ns = 1.000000e+00 : f64, units_per_task = 1 : i64, variable}
// NOOVERHEAD:         mega.task @free {{.*}} count 64
// NOOVERHEAD-SAME:      {cost_ns = 0.000000e+00 : f64, units_per_task = 1 : i64}
mega.graph @four(%w: memref<44800xf32>, %o: memref<3200xf32>,
                 %wb: memref<1200000xbf16>, %x: memref<180xi8>) workers 4 {
  mega.task @mid body @mid(%w, %o : memref<44800xf32>, memref<3200xf32>) count 64
      footprint [#mega.access<read operand 0 offset 700 * u + 0 size 700>,
                 #mega.access<write operand 1 offset 100 * u + -3200 size 100 units 32 to 64>]
  mega.task @big body @big(%wb : memref<1200000xbf16>) count 8
      footprint [#mega.access<read operand 0 offset 150000 * u + 0 size 150000>]
  mega.task @tiny body @tiny(%x : memref<180xi8>) count 6
      footprint [#mega.access<read operand 0 offset 30 * u + 0 size 30>] {variable}
  mega.task @free body @free() count 64
}

// -----

func.func @mid(%w: memref<44800xf32>, %o: memref<3200xf32>) {
  tile.kernel blocks(%i) in [64] threads 128 {
  }
  return
}

func.func @big(%w: memref<1200000xbf16>) {
  tile.kernel blocks(%i, %j) in [2, 4] threads 128 {
  }
  return
}

// The same operators on more workers: more, smaller instances.
// 16 workers: @mid k=4 (16 instances, one round of 1900); @big k=1 (one
// round of 11500).
// CHECK-LABEL: mega.graph @sixteen
// CHECK:         mega.task @mid {{.*}} count 16
// CHECK-SAME:      {cost_ns = 1.900000e+03 : f64, units_per_task = 4 : i64}
// CHECK:         mega.task @big {{.*}} count 8
// CHECK-SAME:      {cost_ns = 1.150000e+04 : f64, units_per_task = 1 : i64}
mega.graph @sixteen(%w: memref<44800xf32>, %o: memref<3200xf32>,
                    %wb: memref<1200000xbf16>) workers 16 {
  mega.task @mid body @mid(%w, %o : memref<44800xf32>, memref<3200xf32>) count 64
      footprint [#mega.access<read operand 0 offset 700 * u + 0 size 700>,
                 #mega.access<write operand 1 offset 100 * u + -3200 size 100 units 32 to 64>]
  mega.task @big body @big(%wb : memref<1200000xbf16>) count 8
      footprint [#mega.access<read operand 0 offset 150000 * u + 0 size 150000>]
}

// 64 workers: every unit its own instance (k=1: 1600 ns, k=2: 1700).
// CHECK-LABEL: mega.graph @sixty_four
// CHECK:         mega.task @mid {{.*}} count 64
// CHECK-SAME:      {cost_ns = 1.600000e+03 : f64, units_per_task = 1 : i64}
mega.graph @sixty_four(%w: memref<44800xf32>, %o: memref<3200xf32>) workers 64 {
  mega.task @mid body @mid(%w, %o : memref<44800xf32>, memref<3200xf32>) count 64
      footprint [#mega.access<read operand 0 offset 700 * u + 0 size 700>,
                 #mega.access<write operand 1 offset 100 * u + -3200 size 100 units 32 to 64>]
}

// -----

func.func @mid(%w: memref<44800xf32>, %o: memref<3200xf32>) {
  tile.kernel blocks(%i) in [64] threads 128 {
  }
  return
}

// A task that is already decomposed is left alone.
// CHECK-LABEL: mega.graph @done
// CHECK:         mega.task @mid {{.*}} count 32
// CHECK-SAME:      {cost_ns = 1.230000e+02 : f64, units_per_task = 2 : i64}
mega.graph @done(%w: memref<44800xf32>, %o: memref<3200xf32>) workers 4 {
  mega.task @mid body @mid(%w, %o : memref<44800xf32>, memref<3200xf32>) count 32
      footprint [#mega.access<read operand 0 offset 700 * u + 0 size 700>]
      {units_per_task = 2, cost_ns = 123.0}
}
