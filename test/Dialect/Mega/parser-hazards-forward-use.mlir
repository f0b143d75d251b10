// RUN: not tilemega-opt %s 2>&1 | FileCheck %s

// Found by scripts/fuzz/fuzz_opt.py (seed 37): the parser binds a use of
// %a before any definition to a later `%a = ...` inside a nested region;
// when the parse then fails (here: the switch has no `default`), it
// destroys that op while the outer use still holds its result, and MLIR
// 22.1.8 aborts ("operation destroyed but still has uses"). tilemega-opt
// reports the use first (tilemega/Support/ParserHazards.h): such a
// definition never dominates it. Forward references a later definition at
// the same or an outer level resolves (branches between blocks) are no
// hazard: test_parser_hazards.py.

// CHECK-NOT: Assertion
// CHECK-NOT: LLVM ERROR
// CHECK: parser-hazards-forward-use.mlir:[[@LINE+2]]:33: error: %a is used here before its definition, which is inside a region nested below this use and so cannot reach it (MLIR 22.1.8's parser would abort on this when the parse fails later)
func.func @f(%case: index, %tid: index, %c8: index) {
  %first = arith.cmpi eq, %tid, %a : index
  scf.index_switch %case
  case 1 {
    %a = arith.muli %tid, %c8 : index
  }
