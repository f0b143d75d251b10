// RUN: tilemega-opt %s --pass-pipeline='builtin.module(gpu.module(convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1 index-bitwidth=64}),reconcile-unrealized-casts)' | FileCheck %s
// RUN: tilemega-opt %s --pass-pipeline='builtin.module(gpu.module(convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1 index-bitwidth=64}),reconcile-unrealized-casts,nvvm-attach-target{chip=sm_90a features=+ptx80},gpu-module-to-binary{format=isa})' > %t.mlir
// RUN: %extract-ptx %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx

// tile.wgmma_wait_registers (the wait of asynchronous gemms) is
// wgmma.wait_group N with the completed accumulator registers tied through
// it: "=f" outputs, each input tied to its output, so the multiply that
// reads them reads the asm's results and stays after the wait. With no
// registers it is NVVM's own wait.

gpu.module @kernels {
  // CHECK-LABEL: llvm.func @wait
  // CHECK:         %[[W:.*]] = llvm.inline_asm has_side_effects asm_dialect = att "wgmma.wait_group.sync.aligned 1;", "=f,=f,0,1" %{{.*}}, %{{.*}} : (f32, f32) -> !llvm.struct<(f32, f32)>
  // CHECK:         %[[X:.*]] = llvm.extractvalue %[[W]][0]
  // CHECK:         llvm.fmul %[[X]]
  // CHECK:         nvvm.wgmma.wait.group.sync.aligned 0
  // PTX-LABEL:   .entry wait(
  // PTX:           wgmma.wait_group.sync.aligned 1;
  // PTX:           mul.rn.f32
  // PTX:           wgmma.wait_group.sync.aligned 0;
  gpu.func @wait(%io: memref<2xf32>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %a = memref.load %io[%c0] : memref<2xf32>
    %b = memref.load %io[%c1] : memref<2xf32>
    %w:2 = tile.wgmma_wait_registers %a, %b pending 1 : f32, f32
    %p = arith.mulf %w#0, %w#1 : f32
    memref.store %p, %io[%c0] : memref<2xf32>
    tile.wgmma_wait_registers pending 0
    gpu.return
  }
}
