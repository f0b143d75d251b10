// RUN: not tilemega-opt %s 2>&1 | FileCheck %s
// RUN: not tilemega-opt %s --tilemega-tile-to-ptx-pipeline=chip=sm_90a 2>&1 | FileCheck %s

// Found by scripts/fuzz/fuzz_opt.py: MLIR 22.1.8's parser aborts on a dense
// array of `index` (Type::getIntOrFloatBitWidth asserts); tilemega-opt
// reports it before parsing (tilemega/Support/ParserHazards.h). A comment
// naming array<index: 0> is no hazard.

// CHECK: parser-hazards.mlir:[[@LINE+4]]:58: error: a dense array attribute needs an integer or float element type (array<i64: ...>), got 'index'
// CHECK-NOT: Assertion
// CHECK-NOT: Stack dump
mega.graph @g(%x: memref<64xf32>) workers 1 {
  mega.queue @w0 aot worker 0 {tasks = [@t], instances = array<index: 0>}
  mega.task @t body @k(%x : memref<64xf32>) count 1
}
