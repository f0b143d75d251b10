// RUN: not tilemega-opt %s 2>&1 | FileCheck %s

// Found by scripts/fuzz/fuzz_opt.py: scf.index_switch's verifier puts the
// case values in a DenseSet<int64_t>, whose reserved keys are INT64_MAX and
// INT64_MAX - 1, and aborts on either; tilemega-opt reports them before
// parsing (tilemega/Support/ParserHazards.h), in the custom form (the
// generic one: parser-hazards-switch-case-generic.mlir). Names containing
// `case` and comments (case 9223372036854775807) are no hazard.

// CHECK-NOT: Assertion
// CHECK-NOT: Stack dump
// CHECK: parser-hazards-switch-case.mlir:[[@LINE+4]]:8: error: scf.index_switch case value 9223372036854775807 is reserved (MLIR 22.1.8's verifier would abort on it): case values must be below 9223372036854775806
func.func @custom(%case: index) {
  scf.index_switch %case
  case 1 { scf.yield }
  case 9223372036854775807 { scf.yield }
  default { }
  return
}
