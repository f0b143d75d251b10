// RUN: tilemega-opt %s -tile-infer-layouts -convert-tile-to-gpu="wgmma=true" -split-input-file | FileCheck %s
// RUN: tilemega-opt %s -tile-infer-layouts -convert-tile-to-gpu -split-input-file | FileCheck %s --check-prefix=OFF

// Hopper's wgmma (convert-tile-to-gpu wgmma=true): A 128 x 64 and B 128 x 64
// (N x K, transpose_b) in shared memory under the 128-byte swizzle, an f32
// accumulator with 16 rows a warp (warpsPerBlock = [8, 1]: two warpgroups of
// 64 rows). The tiles start on the swizzle's 1024-byte period (after a
// 64-byte tile: offsets 1024 and 17408; the gpu.module asks for that
// alignment); the tiles are fenced for
// the async proxy, then per warpgroup four m64n128k16 steps along K = 64,
// the first with scale-d = 0 (clear_accum: the registers are not read),
// descriptors 32 bytes apart, committed and waited for; the 64 D registers
// go back to the accumulator's slots.

// CHECK:       gpu.module @tilemega_kernels attributes {tilemega.shared_alignment = 1024 : i64}
// CHECK-LABEL: gpu.func @tn_bf16
// CHECK:         memref.view %{{.*}}[%c0{{.*}}][] {{.*}} to memref<16xf32
// CHECK:         memref.view %{{.*}}[%c1024{{.*}}][] {{.*}} to memref<128x64xbf16
// CHECK:         memref.view %{{.*}}[%c17408{{.*}}][] {{.*}} to memref<128x64xbf16
// CHECK-NOT:     memref.load
// CHECK:         nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT:    gpu.barrier
// CHECK:         arith.divui %{{.*}}, %c128
// CHECK:         arith.muli %{{.*}}, %c8192
// CHECK:         memref.extract_aligned_pointer_as_index
// CHECK:         llvm.mlir.undef : !llvm.struct<(f32, {{.*}})>
// CHECK:         nvvm.wgmma.fence.aligned
// CHECK:         arith.ori %{{.*}}, %c4611686293305360384_i64
// CHECK:         nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK:         arith.addi %{{.*}}, %c32_i64
// CHECK-COUNT-3: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>]
// CHECK-NOT:     nvvm.wgmma.mma_async
// CHECK:         nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:    nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-64: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<?xf32>
// CHECK-NOT:     nvgpu.ldmatrix

// Off (the default), the same gemm is mma.sync and the tiles keep their
// 128-byte alignment.
// OFF-NOT:       tilemega.shared_alignment
// OFF-LABEL:     gpu.func @tn_bf16
// OFF:           memref.view %{{.*}}[%c128{{.*}}][] {{.*}} to memref<128x64xbf16
// OFF-NOT:       nvvm.wgmma
// OFF:           nvgpu.ldmatrix
// OFF:           nvvm.mma.sync
func.func @tn_bf16() {
  tile.kernel blocks(%b) in [1] threads 256 {
    %pad = tile.alloc_shared : memref<16xf32, #gpu.address_space<workgroup>>
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [8, 1]>} : memref<128x128xf32, #tile.fragment>
    tile.gemm %a, %bb, %c {clear_accum, transpose_b}
        : memref<128x64xbf16, #gpu.address_space<workgroup>>,
          memref<128x64xbf16, #gpu.address_space<workgroup>>,
          memref<128x128xf32, #tile.fragment>
  }
  return
}

// -----

// Without clear_accum the 32 registers of a 64 x 64 accumulator (one
// warpgroup) are read into the D struct first and every step accumulates.

// CHECK-LABEL: gpu.func @accumulate_f16
// CHECK-COUNT-32: memref.load %{{.*}}[%{{.*}}] : memref<?xf32>
// CHECK:         nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK-NOT:     nvvm.wgmma.mma_async
func.func @accumulate_f16() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<64x64xf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<64x64xf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [4, 1]>} : memref<64x64xf32, #tile.fragment>
    tile.gemm %a, %bb, %c {transpose_b}
        : memref<64x64xf16, #gpu.address_space<workgroup>>,
          memref<64x64xf16, #gpu.address_space<workgroup>>,
          memref<64x64xf32, #tile.fragment>
  }
  return
}

// -----

// B as K x N (no transpose_b: attention's P @ V with V as stored) is
// N-major: imm-trans-b (B's layout <row>), rows of 64 elements of N, and a
// K step of 16 moves B's descriptor by 16 rows of 128 bytes (A's by 32
// bytes, as before).

// CHECK-LABEL: gpu.func @b_n_major
// CHECK-NOT:     nvgpu.ldmatrix
// CHECK:         nvvm.wgmma.fence.aligned
// CHECK:         nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
// CHECK:         arith.addi %{{.*}}, %c32_i64
// CHECK:         arith.addi %{{.*}}, %c2048_i64
// CHECK-COUNT-3: nvvm.wgmma.mma_async {{.*}}, B[<bf16>, <one>, <row>]
// CHECK-NOT:     nvgpu.ldmatrix
func.func @b_n_major() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [4, 1]>} : memref<64x64xf32, #tile.fragment>
    tile.gemm %a, %bb, %c {clear_accum}
        : memref<64x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x64xf32, #tile.fragment>
  }
  return
}

// -----

// Declined by tile::chooseWgmma, so mma.sync even with wgmma=true: an
// accumulator split over warps along N.

// CHECK-LABEL: gpu.func @warps_along_n
// CHECK-NOT:     nvvm.wgmma
// CHECK:         nvgpu.ldmatrix
func.func @warps_along_n() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [2, 2]>} : memref<64x64xf32, #tile.fragment>
    tile.gemm %a, %bb, %c {clear_accum, transpose_b}
        : memref<64x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x64xf32, #tile.fragment>
  }
  return
}

// -----

// MN-major operands in 64-column blocks: A as K x M (transpose_a:
// imm-trans-a, A's layout <col>) with warpgroup g reading block g, 64 rows
// of 128 bytes = 8192 bytes on; B as K x N of two blocks. Both step 16 rows
// (2048 bytes) per K step, and both descriptors carry the block distance,
// 8192 bytes, as the leading byte offset: (8192 >> 4) << 16 on top of the
// stride offset (1024 >> 4) << 32 and the 128-byte swizzle 1 << 62.

// CHECK-LABEL: gpu.func @mn_major_blocks
// CHECK:         %[[GROUP:.*]] = arith.constant 8192 : index
// CHECK:         arith.muli %{{.*}}, %[[GROUP]] : index
// CHECK:         %[[FIELDS:.*]] = arith.constant 4611686293338849280 : i64
// CHECK:         arith.ori %{{.*}}, %[[FIELDS]] : i64
// CHECK:         nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// CHECK:         arith.addi %{{.*}}, %c2048_i64
// CHECK:         arith.addi %{{.*}}, %c2048_i64
// CHECK-COUNT-3: nvvm.wgmma.mma_async {{.*}}, A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
func.func @mn_major_blocks() {
  tile.kernel blocks(%b) in [1] threads 256 {
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3, columns = 64>} : memref<64x128xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3, columns = 64>} : memref<64x128xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [8, 1]>} : memref<128x128xf32, #tile.fragment>
    tile.gemm %a, %bb, %c {clear_accum, transpose_a}
        : memref<64x128xbf16, #gpu.address_space<workgroup>>,
          memref<64x128xbf16, #gpu.address_space<workgroup>>,
          memref<128x128xf32, #tile.fragment>
  }
  return
}

// -----

// Declined: an N-major B wider than 64 elements without column blocks
// (rows of 256 bytes under the plain swizzle are not what wgmma reads).

// CHECK-LABEL: gpu.func @wide_b_without_blocks
// CHECK-NOT:     nvvm.wgmma
// CHECK:         nvgpu.ldmatrix
func.func @wide_b_without_blocks() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 4>} : memref<64x128xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [4, 1]>} : memref<64x128xf32, #tile.fragment>
    tile.gemm %a, %bb, %c {clear_accum}
        : memref<64x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x128xbf16, #gpu.address_space<workgroup>>,
          memref<64x128xf32, #tile.fragment>
  }
  return
}

