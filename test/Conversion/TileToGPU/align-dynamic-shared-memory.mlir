// RUN: tilemega-opt %s -split-input-file -pass-pipeline='builtin.module(gpu.module(tilemega-align-dynamic-shared-memory))' | FileCheck %s

// The dynamic shared buffer (an external shared array of no elements) takes
// the alignment the module records; other globals keep theirs.

// CHECK-LABEL: gpu.module @aligned
// CHECK:         llvm.mlir.global internal @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
// CHECK:         llvm.mlir.global internal @other() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<4 x i8>
module attributes {gpu.container_module} {
  gpu.module @aligned attributes {tilemega.shared_alignment = 1024 : i64} {
    llvm.mlir.global internal @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
    llvm.mlir.global internal @other() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<4 x i8>
  }
}

// -----

// Without the attribute nothing changes.

// CHECK-LABEL: gpu.module @plain
// CHECK:         llvm.mlir.global internal @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
module attributes {gpu.container_module} {
  gpu.module @plain {
    llvm.mlir.global internal @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
  }
}
