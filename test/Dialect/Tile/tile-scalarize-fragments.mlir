// RUN: tilemega-opt %s -tile-scalarize-fragments -split-input-file | FileCheck %s
// RUN: tilemega-opt %s -tile-scalarize-fragments -mem2reg -split-input-file | FileCheck %s --check-prefix=PROMOTED

// A fragment read and written at constant indices: one rank-0 slot per
// element used, which mem2reg turns into SSA values.
// CHECK-LABEL: func.func @constant_indices
// CHECK-COUNT-2: memref.alloca() : memref<f32>
// CHECK-NOT: memref.alloca
// CHECK: memref.store %{{.*}}, %{{.*}}[] : memref<f32>
// CHECK: memref.load %{{.*}}[] : memref<f32>
// PROMOTED-LABEL: func.func @constant_indices
// PROMOTED-NOT: memref.alloca
// PROMOTED-NOT: memref.load
// PROMOTED: cf.br ^bb1(%{{.*}}, %{{.*}} : index, f32)
func.func @constant_indices(%a: f32, %b: f32, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = memref.alloca() : memref<2x4xf32>
  memref.store %a, %f[%c0, %c1] : memref<2x4xf32>
  memref.store %b, %f[%c1, %c0] : memref<2x4xf32>
  cf.br ^bb1(%c0 : index)
^bb1(%i: index):
  %x = memref.load %f[%c0, %c1] : memref<2x4xf32>
  %y = memref.load %f[%c1, %c0] : memref<2x4xf32>
  %s = arith.addf %x, %y : f32
  memref.store %s, %f[%c0, %c1] : memref<2x4xf32>
  %next = arith.addi %i, %c1 : index
  %more = arith.cmpi slt, %next, %n : index
  cf.cond_br %more, ^bb1(%next : index), ^bb2
^bb2:
  %r = memref.load %f[%c0, %c1] : memref<2x4xf32>
  return %r : f32
}

// -----

// A dynamic index, a view or a fragment bigger than max-elements keeps
// the alloca whole.
// CHECK-LABEL: func.func @left_alone
// CHECK: memref.alloca() : memref<4xf32>
// CHECK: memref.alloca() : memref<4xf32>
// CHECK: memref.alloca() : memref<512xf32>
// CHECK: memref.alloca() : memref<4xf32, 3>
// CHECK-NOT: memref<f32>
func.func @left_alone(%a: f32, %i: index) -> memref<2xf32, strided<[1], offset: 1>> {
  %c0 = arith.constant 0 : index
  %dynamic = memref.alloca() : memref<4xf32>
  memref.store %a, %dynamic[%i] : memref<4xf32>
  %viewed = memref.alloca() : memref<4xf32>
  memref.store %a, %viewed[%c0] : memref<4xf32>
  %v = memref.subview %viewed[1] [2] [1] : memref<4xf32> to memref<2xf32, strided<[1], offset: 1>>
  %big = memref.alloca() : memref<512xf32>
  memref.store %a, %big[%c0] : memref<512xf32>
  %shared = memref.alloca() : memref<4xf32, 3>
  memref.store %a, %shared[%c0] : memref<4xf32, 3>
  return %v : memref<2xf32, strided<[1], offset: 1>>
}

// -----

// An out-of-bounds constant index is not rewritten into a slot.
// CHECK-LABEL: func.func @out_of_bounds
// CHECK: memref.alloca() : memref<2xf32>
func.func @out_of_bounds(%a: f32) {
  %c5 = arith.constant 5 : index
  %f = memref.alloca() : memref<2xf32>
  memref.store %a, %f[%c5] : memref<2xf32>
  return
}
