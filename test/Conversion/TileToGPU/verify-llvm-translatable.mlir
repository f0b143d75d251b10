// RUN: tilemega-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(gpu.module(tilemega-verify-llvm-translatable))' | FileCheck %s

// What the translation to LLVM IR takes passes untouched.

// CHECK-LABEL: gpu.module @fine
// CHECK:         llvm.mlir.global internal @shared() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<4 x i8>
module attributes {gpu.container_module} {
  gpu.module @fine {
    llvm.mlir.global internal @shared() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<4 x i8>
    llvm.func @k(%p: !llvm.ptr<1>, %v: vector<4xf32>) {
      %x = llvm.load %p {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
      llvm.return
    }
  }
}

// -----

// Found by scripts/fuzz: the translation's type switch had no case for
// index inside an LLVM array and aborted.

module attributes {gpu.container_module} {
  gpu.module @index_global {
    // expected-error @below {{'llvm.mlir.global' op uses the type '!llvm.array<0 x index>', which has no LLVM IR type}}
    llvm.mlir.global internal @g() {} : !llvm.array<0 x index>
  }
}

// -----

// Found by scripts/fuzz: LLVM asserts on an alignment over 2^32.

module attributes {gpu.container_module} {
  gpu.module @huge_alignment {
    // expected-error @below {{'llvm.mlir.global' op has alignment -9223372036854775808; LLVM takes a power of two of at most 2^32 bytes}}
    llvm.mlir.global internal @g() {addr_space = 3 : i32, alignment = -9223372036854775808 : i64} : !llvm.array<4 x i8>
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @odd_alignment {
    llvm.func @k(%p: !llvm.ptr<1>) {
      // expected-error @below {{'llvm.load' op has alignment 12; LLVM takes a power of two of at most 2^32 bytes}}
      %x = llvm.load %p {alignment = 12 : i64} : !llvm.ptr<1> -> i32
      llvm.return
    }
  }
}

// -----

// Found by scripts/fuzz/fuzz_opt.py (seed 43): a vector argument of
// 2^31 f32 overflowed the NVPTX calling convention's alignment bitfield
// (an assertion); a value of a vector type no thread's registers can hold
// is refused, also inside another type (a struct's field), while 255 x 32
// bits and a global of any size (memory holds it) pass.

module attributes {gpu.container_module} {
  gpu.module @huge_vector {
    // expected-error @below {{'llvm.func' op uses the vector type 'vector<2147483648xf32>', larger than the 8160 bits of one thread's 255 registers on sm_90a: no GPU code can hold it}}
    llvm.func @k(%p: !llvm.ptr<1>, %v: vector<2147483648xf32>) {
      llvm.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @vector_in_struct {
    // expected-error @below {{'llvm.func' op uses the vector type 'vector<256xf32>'}}
    llvm.func @k(%s: !llvm.struct<(i32, vector<256xf32>)>) {
      llvm.return
    }
  }
}

// -----

// CHECK-LABEL: gpu.module @registers_full
module attributes {gpu.container_module} {
  gpu.module @registers_full {
    llvm.mlir.global internal @g() {addr_space = 3 : i32} : !llvm.struct<(i32, vector<4096xf32>)>
    llvm.func @k(%v: vector<255xf32>) {
      llvm.return
    }
  }
}
