// RUN: not tilemega-opt %s 2>&1 | FileCheck %s

// The generic form of parser-hazards-switch-case.mlir: a reserved value in
// the `cases` array is reported before parsing.

// CHECK-NOT: Assertion
// CHECK-NOT: Stack dump
// CHECK: parser-hazards-switch-case-generic.mlir:[[@LINE+2]]:50: error: scf.index_switch case value 9223372036854775806 is reserved
func.func @generic(%c: index) {
  "scf.index_switch"(%c) <{cases = array<i64: 1, 9223372036854775806>}> ({
    scf.yield
  }, {
    scf.yield
  }, {
    scf.yield
  }) : (index) -> ()
  return
}
