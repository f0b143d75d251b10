// RUN: not tilemega-opt %s 2>&1 | FileCheck %s

// The generic form of parser-hazards-aggregate-position.mlir's hazard:
// llvm.insertvalue's `position` array, a negative position of magnitude
// 2^32 (truncated to 0 by the parser's bound check).

// CHECK-NOT: Assertion
// CHECK-NOT: Stack dump
// CHECK: parser-hazards-aggregate-position-generic.mlir:[[@LINE+2]]:62: error: llvm.insertvalue position -4294967296 is out of range (MLIR 22.1.8's parser would abort on it)
llvm.func @generic(%s: !llvm.array<2 x f32>, %x: f32) -> !llvm.array<2 x f32> {
  %v = "llvm.insertvalue"(%s, %x) <{position = array<i64: 0, -4294967296>}> : (!llvm.array<2 x f32>, f32) -> !llvm.array<2 x f32>
  llvm.return %v : !llvm.array<2 x f32>
}
