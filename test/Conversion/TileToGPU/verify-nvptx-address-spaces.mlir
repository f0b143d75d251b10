// RUN: tilemega-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(gpu.module(tilemega-verify-nvptx-address-spaces))' | FileCheck %s

// Address spaces NVPTX emits pass untouched.

// CHECK-LABEL: gpu.module @fine
// CHECK:         llvm.mlir.global internal @shared() {addr_space = 3 : i32} : !llvm.array<4 x i8>
module attributes {gpu.container_module} {
  gpu.module @fine {
    llvm.mlir.global internal @shared() {addr_space = 3 : i32} : !llvm.array<4 x i8>
    llvm.func @k(%p: !llvm.ptr<101>) {
      llvm.return
    }
  }
}

// -----

// A global in a space PTX has no state space for is a diagnostic, not an
// abort inside the NVPTX backend.

module attributes {gpu.container_module} {
  gpu.module @bad_global {
    // expected-error @below {{'llvm.mlir.global' op is in address space 100, which has no PTX state space for globals}}
    llvm.mlir.global internal @g() {addr_space = 100 : i32} : !llvm.array<0 x i8>
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @bad_pointer {
    llvm.func @k(%p: !llvm.ptr<3>) {
      // expected-error @below {{'llvm.addrspacecast' op uses a pointer in address space 42, which NVPTX has no PTX state space for}}
      %q = llvm.addrspacecast %p : !llvm.ptr<3> to !llvm.ptr<42>
      llvm.return
    }
  }
}

// -----

// A pointer argument of a function (its signature, not an operand) in an
// address space NVPTX lacks; found by scripts/fuzz (LLVM aborted on it).
module attributes {gpu.container_module} {
  gpu.module @bad_argument {
    // expected-error @+1 {{uses a pointer in address space 2147483648, which NVPTX has no PTX state space for}}
    llvm.func @k(%p: !llvm.ptr<2147483648>) {
      llvm.return
    }
  }
}
