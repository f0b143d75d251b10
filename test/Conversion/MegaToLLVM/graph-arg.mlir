// RUN: tilemega-opt %s --pass-pipeline='builtin.module(gpu.module(convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1 index-bitwidth=64}),reconcile-unrealized-casts)' | FileCheck %s

// mega.graph_arg lowers inside convert-gpu-to-nvvm (the mega dialect's
// ConvertToLLVM interface): one 64-bit load of the table word, invariant
// from a global table; then a descriptor of the static shape around the
// address (a tensor) or the word's low bits (a scalar).

gpu.module @kernels {
  // CHECK-LABEL: llvm.func @read
  gpu.func @read(%args: memref<3xi64>, %out: memref<4xf32>) kernel {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    // CHECK: %[[TABLE:.*]] = llvm.extractvalue %{{.*}}[1]
    // CHECK: %[[ENTRY:.*]] = llvm.getelementptr %[[TABLE]][%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i64
    // CHECK: %[[ADDRESS:.*]] = llvm.load %[[ENTRY]] invariant {alignment = 8 : i64} : !llvm.ptr -> i64
    // CHECK: %[[BASE:.*]] = llvm.inttoptr %[[ADDRESS]] : i64 to !llvm.ptr
    // CHECK: llvm.insertvalue %[[BASE]], %{{.*}}[1]
    %x = mega.graph_arg %args[%c1] : memref<3xi64> -> memref<8x4xf32>
    // Argument 2, an f32: the low 32 bits of its word.
    // CHECK: %[[WORD:.*]] = llvm.load %{{.*}} invariant {alignment = 8 : i64} : !llvm.ptr -> i64
    // CHECK: %[[LOW:.*]] = llvm.trunc %[[WORD]] : i64 to i32
    // CHECK: %[[ALPHA:.*]] = llvm.bitcast %[[LOW]] : i32 to f32
    %alpha = mega.graph_arg %args[%c2] : memref<3xi64> -> f32
    // CHECK-NOT: mega.graph_arg
    %v = memref.load %x[%c2, %c1] : memref<8x4xf32>
    %w = arith.mulf %v, %alpha : f32
    memref.store %w, %out[%c1] : memref<4xf32>
    gpu.return
  }

  // A CTA's copy in shared memory: a plain load (it was written at the
  // kernel's start).
  // CHECK-LABEL: llvm.func @from_shared
  gpu.func @from_shared(%out: memref<4xf32>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %mem = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %table = memref.view %mem[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<3xi64, #gpu.address_space<workgroup>>
    // CHECK: llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, i64
    // CHECK: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<3> -> i64
    %x = mega.graph_arg %table[%c1] : memref<3xi64, #gpu.address_space<workgroup>> -> memref<4xf32>
    %v = memref.load %x[%c1] : memref<4xf32>
    memref.store %v, %out[%c1] : memref<4xf32>
    gpu.return
  }
}
