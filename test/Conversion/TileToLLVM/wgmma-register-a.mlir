// RUN: tilemega-opt %s --pass-pipeline='builtin.module(gpu.module(convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1 index-bitwidth=64}),reconcile-unrealized-casts)' | FileCheck %s
// RUN: tilemega-opt %s --pass-pipeline='builtin.module(gpu.module(convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1 index-bitwidth=64}),reconcile-unrealized-casts,nvvm-attach-target{chip=sm_90a features=+ptx80},gpu-module-to-binary{format=isa})' > %t.mlir
// RUN: %extract-ptx %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx

// tile.wgmma_fence_registers is wgmma.fence with the A registers tied
// through it. tile.wgmma_register_a (wgmma with A from registers, which
// NVVM has no op for) lowers inside convert-gpu-to-nvvm, through the tile dialect's
// ConvertToLLVM interface, to the instruction's PTX as side-effecting
// inline assembly: N / 2 accumulator outputs, each input tied to its
// output, the four A registers, B's descriptor and scale-d as an
// immediate predicate. transpose_b gives imm-trans-b 1, scale_d false
// scale-d 0.

gpu.module @kernels {
  // CHECK-LABEL: llvm.func @step
  // CHECK:         %[[F:.*]] = llvm.inline_asm has_side_effects asm_dialect = att "wgmma.fence.sync.aligned;", "=r,=r,=r,=r,0,1,2,3" %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (i32, i32, i32, i32) -> !llvm.struct<(i32, i32, i32, i32)>
  // CHECK:         %[[A0:.*]] = llvm.extractvalue %[[F]][0]
  // CHECK:         llvm.inline_asm has_side_effects asm_dialect = att "{\0A.reg .pred p;\0Asetp.ne.b32 p, $21, 0;\0Awgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {$0, $1, $2, $3, $4, $5, $6, $7}, {$16, $17, $18, $19}, $20, p, 1, 1, 1;\0A}", "=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7,r,r,r,r,l,n"
  // CHECK:         llvm.inline_asm has_side_effects {{.*}}m64n16k16.f32.f16.f16 {{.*}}, p, 1, 1, 0;
  // PTX-LABEL:   .entry step(
  // PTX:           wgmma.fence.sync.aligned;
  // PTX:           setp.ne.b32 p, 0, 0;
  // PTX-NEXT:      wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%r{{[0-9]+}}, {{.*}}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %rd{{[0-9]+}}, p, 1, 1, 1;
  // PTX:           setp.ne.b32 p, 1, 0;
  // PTX-NEXT:      wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {{.*}}, p, 1, 1, 0;
  gpu.func @step(%out: memref<8xf32>, %a: memref<4xi32>, %desc: i64) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %a0 = memref.load %a[%c0] : memref<4xi32>
    %a1 = memref.load %a[%c1] : memref<4xi32>
    %a2 = memref.load %a[%c2] : memref<4xi32>
    %a3 = memref.load %a[%c3] : memref<4xi32>
    %u = llvm.mlir.undef : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
    %f:4 = tile.wgmma_fence_registers %a0, %a1, %a2, %a3
    %d0 = tile.wgmma_register_a %u, [%f#0, %f#1, %f#2, %f#3], %desc
        {input_type = bf16, scale_d = false, transpose_b = true}
        : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
    %d1 = tile.wgmma_register_a %d0, [%a0, %a1, %a2, %a3], %desc
        {input_type = f16, scale_d = true, transpose_b = false}
        : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
    nvvm.wgmma.commit.group.sync.aligned
    nvvm.wgmma.wait.group.sync.aligned 0
    %v = llvm.extractvalue %d1[7] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
    memref.store %v, %out[%c0] : memref<8xf32>
    gpu.return
  }
}
