// RUN: tilemega-opt %s -tile-infer-layouts -convert-tile-to-gpu="wgmma=true" | FileCheck %s
// RUN: not tilemega-opt %s -tile-infer-layouts -convert-tile-to-gpu 2>&1 | FileCheck %s --check-prefix=OFF

// OFF: error: 'tile.gemm' op multiplies 8-bit floats, which only wgmma does, and cannot take it: the wgmma lowering is off

// e4m3 inputs: m64nNk32 steps (four along K = 128), both operands K-major,
// descriptors 32 bytes a step as for 16-bit inputs.

// CHECK-LABEL: gpu.func @fp8_e4m3
// CHECK:         nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 32>, D[<f32>, <zero>], A[<e4m3>, <one>, <row>], B[<e4m3>, <one>, <col>]
// CHECK:         arith.addi %{{.*}}, %c32_i64
// CHECK-COUNT-3: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 32>
// CHECK-NOT:     nvvm.wgmma.mma_async
func.func @fp8_e4m3() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 4, shift = 3>} : memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 4, shift = 3>} : memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [4, 1]>} : memref<64x128xf32, #tile.fragment>
    tile.gemm %a, %bb, %c {clear_accum, transpose_b}
        : memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>,
          memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>,
          memref<64x128xf32, #tile.fragment>
  }
  return
}
