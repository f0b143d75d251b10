// RUN: tilemega-opt %s -mega-decompose="claim-units=1" | FileCheck %s
// RUN: tilemega-opt %s -mega-decompose | FileCheck %s --check-prefix=OFF

// claim-units marks the tasks of several units an instance claims_units
// (their instances claim the units beyond their own at run time); a task
// of one unit an instance has nothing to claim. Same cost model as
// decompose.mlir: @big k=2 on 4 workers, @one k=1 (2 units of 10000 ns on
// 4 workers: one round either way, ties to the smaller k).

func.func @big(%w: memref<1200000xbf16>) {
  tile.kernel blocks(%i, %j) in [2, 4] threads 128 {
  }
  return
}
func.func @one(%w: memref<300000xbf16>) {
  tile.kernel blocks(%i) in [2] threads 128 {
  }
  return
}

// CHECK-LABEL: mega.graph @four
// CHECK:         mega.task @big body @big({{.*}}) count 4
// CHECK-SAME:      {claims_units, cost_ns = 2.150000e+04 : f64, units_per_task = 2 : i64}
// CHECK:         mega.task @one body @one({{.*}}) count 2
// CHECK-NOT:       claims_units
// CHECK-SAME:      {cost_ns = 1.150000e+04 : f64, units_per_task = 1 : i64}
// OFF-NOT:       claims_units
mega.graph @four(%w: memref<1200000xbf16>, %v: memref<300000xbf16>) workers 4 {
  mega.task @big body @big(%w : memref<1200000xbf16>) count 8
      footprint [#mega.access<read operand 0 offset 150000 * u + 0 size 150000>]
  mega.task @one body @one(%v : memref<300000xbf16>) count 2
      footprint [#mega.access<read operand 0 offset 150000 * u + 0 size 150000>]
}
