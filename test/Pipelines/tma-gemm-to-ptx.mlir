// RUN: tilemega-opt %s --tilemega-tile-to-ptx-pipeline="chip=sm_90a wgmma=1 wgmma-in-flight=1 tma=1" > %t.mlir
// RUN: FileCheck %s < %t.mlir
// RUN: %extract-ptx %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %ptxas -v -arch=sm_90a %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// REQUIRES: ptxas

// The TMA pipeline end to end: the kernel takes its two tensor maps by value
// as 64-byte-aligned 128-byte grid constants after its own parameters
// (tilemega-mark-tensor-map-params), thread 0 issues 2-D tile-mode bulk
// copies completing on the stage's mbarrier, every thread waits on the
// phase parity, and ptxas assembles it without spills or wgmma
// serialisation warnings.

// CHECK: tensor_maps = [{box = array<i64: 128, 64>, param = 0 : i64, swizzle_bytes = 128 : i64}, {box = array<i64: 128, 64>, param = 1 : i64, swizzle_bytes = 128 : i64}]

// PTX-LABEL: .entry tma(
// PTX:         .param .align 64 .b8 tma_param_3[128],
// PTX-NEXT:    .param .align 64 .b8 tma_param_4[128]
// PTX:         cvta.param.u64
// PTX:         mbarrier.init.shared.b64
// PTX:         fence.mbarrier_init.release.cluster
// PTX:         mbarrier.arrive.expect_tx.shared.b64
// PTX:         cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX:         mbarrier.try_wait.parity.shared.b64
// PTX:         wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// PTX-NOT:     cp.async.ca
// PTX-NOT:     cp.async.cg

// PTXAS-NOT:   C75{{[0-9][0-9]}}
// PTXAS:       Compiling entry function 'tma' for 'sm_90a'
// PTXAS:       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   C75{{[0-9][0-9]}}

func.func @tma(%A: memref<128x512xbf16>, %B: memref<128x512xbf16>, %C: memref<128x128xf32>) {
  tile.kernel blocks(%b) in [1] threads 256 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [8, 1]>} : memref<128x128xf32, #tile.fragment>
    tile.clear %c : memref<128x128xf32, #tile.fragment>
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 3 {
      %col = arith.muli %k, %c64 : index
      tile.copy %A[%c0, %col] to %a[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.copy %B[%c0, %col] to %bb[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.gemm %a, %bb, %c {transpose_b}
          : memref<128x64xbf16, #gpu.address_space<workgroup>>,
            memref<128x64xbf16, #gpu.address_space<workgroup>>,
            memref<128x128xf32, #tile.fragment>
    }
    tile.copy %c[0, 0] to %C[0, 0] sizes [128, 128] : memref<128x128xf32, #tile.fragment> to memref<128x128xf32>
  }
  return
}
