// RUN: not tilemega-opt %s 2>&1 | FileCheck %s

// Found by scripts/fuzz/fuzz_opt.py (seed 31): llvm.extractvalue and
// llvm.insertvalue check a position against the aggregate's size after
// truncating it to 32 bits, then index with all 64, so a position of 2^32
// aborts MLIR 22.1.8's parser; tilemega-opt reports it before parsing
// (tilemega/Support/ParserHazards.h), in the custom form (the generic
// one: parser-hazards-aggregate-position-generic.mlir; a position below
// 2^32 keeps the parser's own error: test_parser_hazards.py). Comments
// (llvm.extractvalue %s[4294967296]) are no hazard.

// CHECK-NOT: Assertion
// CHECK-NOT: Stack dump
// CHECK: parser-hazards-aggregate-position.mlir:[[@LINE+2]]:29: error: llvm.extractvalue position 4294967296 is out of range (MLIR 22.1.8's parser would abort on it): a position indexes a struct or array and must be in [0, 2^32)
llvm.func @custom(%s: !llvm.struct<(f32, f32)>) -> f32 {
  %v = llvm.extractvalue %s[4294967296] : !llvm.struct<(f32, f32)>
  llvm.return %v : f32
}
