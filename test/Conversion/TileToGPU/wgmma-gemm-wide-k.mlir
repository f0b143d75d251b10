// RUN: tilemega-opt %s -tile-infer-layouts="wgmma=true" -convert-tile-to-gpu="wgmma=true" | FileCheck %s

// K-major operands wider than one swizzle span (K = 128 bf16: two blocks
// of 64 columns, #tile.swizzle<..., columns = 64>, which layout inference
// gives tiles that have no swizzle): the eight K steps of 16 move the
// descriptors 32 bytes within a block, and every fourth step to the next
// block: A (64 rows) 8192 bytes on, B (32 rows, N x K) 4096 bytes on.

// CHECK-LABEL: gpu.func @k_major_k128
// CHECK:         arith.addi %[[A:.*]], %c0_i64
// CHECK:         arith.addi %[[B:.*]], %c0_i64
// CHECK:         nvvm.wgmma.mma_async {{.*}} <m = 64, n = 32, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK:         arith.addi %[[A]], %c32_i64
// CHECK:         arith.addi %[[B]], %c32_i64
// CHECK:         arith.addi %[[A]], %c64_i64
// CHECK:         arith.addi %[[A]], %c96_i64
// CHECK:         arith.addi %[[A]], %c8192_i64
// CHECK:         arith.addi %[[B]], %c4096_i64
// CHECK:         arith.addi %[[A]], %c8224_i64
// CHECK:         arith.addi %[[B]], %c4128_i64
// CHECK:         arith.addi %[[A]], %c8288_i64
// CHECK:         arith.addi %[[B]], %c4192_i64
// CHECK-COUNT-1: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT:     nvvm.mma.sync
func.func @k_major_k128() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %a = tile.alloc_shared : memref<64x128xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<32x128xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<64x32xf32, #tile.fragment>
    tile.gemm %a, %bb, %c {clear_accum, transpose_b}
        : memref<64x128xbf16, #gpu.address_space<workgroup>>,
          memref<32x128xbf16, #gpu.address_space<workgroup>>,
          memref<64x32xf32, #tile.fragment>
  }
  return
}
