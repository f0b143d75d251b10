// RUN: tilemega-opt %s -tile-infer-layouts -convert-tile-to-gpu -split-input-file | FileCheck %s

// Tensor-core tile.gemm: f16/bf16 A and B in shared memory, an accumulator
// with the #tile.mma layout (inferred here: 4 warps over 64x64 are
// warpsPerBlock = [2, 2], warp tiles of 32x32 = 2 x 4 mma tiles). Per k-step
// of 16 each warp loads its A tiles with ldmatrix.x4 (plain for M x K) and
// pairs of B tiles with ldmatrix.x4 (transposed for K x N), every address
// swizzled (layout inference gives both tiles a swizzle), then one mma.sync
// per 16x8 tile. clear_accum starts from zeros: the C registers are not read.

// CHECK-LABEL: gpu.func @nn_f16
// CHECK:         %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<2x2xf32>
// CHECK-NOT:     memref.load
// CHECK:         arith.xori
// CHECK:         nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false} : memref<64x32xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// CHECK:         arith.xori
// CHECK:         nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false} : memref<64x32xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// CHECK:         arith.xori
// CHECK:         nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = true} : memref<32x64xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// CHECK:         arith.xori
// CHECK:         nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = true} : memref<32x64xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// CHECK-NOT:     nvgpu.ldmatrix
// CHECK-COUNT-8: nvgpu.mma.sync(%{{.*}}, %{{.*}}, %[[ZERO]]) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
// Second k-step: accumulates onto the first.
// CHECK-COUNT-2: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false} : memref<64x32xf16
// CHECK-COUNT-2: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = true} : memref<32x64xf16
// CHECK-NOT:     %[[ZERO]])
// CHECK-COUNT-8: nvgpu.mma.sync
// CHECK-NOT:     nvgpu.mma.sync
// Written back once: 8 tiles x 4 registers.
// CHECK-COUNT-32: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<?xf32>
// CHECK:         gpu.return
func.func @nn_f16() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %a = tile.alloc_shared : memref<64x32xf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<32x64xf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    tile.gemm %a, %bb, %c {clear_accum}
        : memref<64x32xf16, #gpu.address_space<workgroup>>,
          memref<32x64xf16, #gpu.address_space<workgroup>>,
          memref<64x64xf32, #tile.fragment>
  }
  return
}

// -----

// Both transposed, bf16: A (K x M) with ldmatrix.trans, B (N x K) with plain
// ldmatrix; nvgpu.mma.sync does not lower bf16, so the mma is nvvm.mma.sync
// on the i32 registers. Without clear_accum the C registers are read once.

// CHECK-LABEL: gpu.func @tt_bf16
// CHECK-COUNT-32: memref.load %{{.*}}[%{{.*}}] : memref<?xf32>
// CHECK-NOT:     memref.load
// CHECK-COUNT-2: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = true} : memref<32x64xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK-COUNT-2: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false} : memref<64x32xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK:         vector.bitcast %{{.*}} : vector<2xbf16> to vector<1xi32>
// CHECK-COUNT-8: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK-COUNT-2: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = true} : memref<32x64xbf16
// CHECK-COUNT-2: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false} : memref<64x32xbf16
// CHECK-COUNT-8: nvvm.mma.sync
// CHECK-NOT:     nvgpu.mma.sync
// CHECK-COUNT-32: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<?xf32>
func.func @tt_bf16() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %a = tile.alloc_shared : memref<32x64xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<64x32xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    tile.gemm %a, %bb, %c {transpose_a, transpose_b}
        : memref<32x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x32xbf16, #gpu.address_space<workgroup>>,
          memref<64x64xf32, #tile.fragment>
  }
  return
}

// -----

// f16 accumulators, K = 128 (8 k-steps: an scf.for carrying the three
// accumulator tiles), and an odd number of n8 tiles per warp (24 = 3 x 8):
// one ldmatrix.x4 covers tiles 0 and 1, an ldmatrix.x2 tile 2.

// CHECK-LABEL: gpu.func @f16_acc_k_loop
// CHECK-COUNT-12: memref.load %{{.*}}[%{{.*}}] : memref<?xf16>
// CHECK:         scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (vector<2x2xf16>, vector<2x2xf16>, vector<2x2xf16>) {
// CHECK:           nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false} : memref<16x128xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// CHECK:           nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false} : memref<24x128xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// CHECK:           nvgpu.ldmatrix %{{.*}} {numTiles = 2 : i32, transpose = false} : memref<24x128xf16, #gpu.address_space<workgroup>> -> vector<2x2xf16>
// CHECK-COUNT-3:   nvgpu.mma.sync(%{{.*}}, %{{.*}}, %{{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf16>) -> vector<2x2xf16>
// CHECK:           scf.yield
// CHECK-COUNT-12: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<?xf16>
func.func @f16_acc_k_loop() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared : memref<16x128xf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<24x128xf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<16x24xf16, #tile.fragment>
    tile.gemm %a, %bb, %c {transpose_b}
        : memref<16x128xf16, #gpu.address_space<workgroup>>,
          memref<24x128xf16, #gpu.address_space<workgroup>>,
          memref<16x24xf16, #tile.fragment>
  }
  return
}

// -----

// A stage of a multi-buffered tile (what tile-pipeline makes) is read like a
// tile of its own: ldmatrix on the strided subview, swizzled.

// CHECK-LABEL: gpu.func @stage
// CHECK:         arith.xori
// CHECK:         nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false} : memref<16x32xf16, strided<[32, 1], offset: ?>, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// CHECK:         nvgpu.mma.sync
func.func @stage(%i: index) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %buf = tile.alloc_shared : memref<2x16x32xf16, #gpu.address_space<workgroup>>
    %a = memref.subview %buf[%i, 0, 0] [1, 16, 32] [1, 1, 1]
        : memref<2x16x32xf16, #gpu.address_space<workgroup>>
          to memref<16x32xf16, strided<[32, 1], offset: ?>, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<32x8xf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<16x8xf32, #tile.fragment>
    tile.gemm %a, %bb, %c
        : memref<16x32xf16, strided<[32, 1], offset: ?>, #gpu.address_space<workgroup>>,
          memref<32x8xf16, #gpu.address_space<workgroup>>,
          memref<16x8xf32, #tile.fragment>
  }
  return
}

// -----

// A swizzle the user chose is honoured (here: none on A, so no XOR before
// its ldmatrix; B still gets the inferred one).

// CHECK-LABEL: gpu.func @user_swizzle
// CHECK-NOT:     arith.xori
// CHECK:         nvgpu.ldmatrix %{{.*}} : memref<16x32xf16, #gpu.address_space<workgroup>>
// CHECK:         arith.xori
// CHECK:         nvgpu.ldmatrix %{{.*}} : memref<32x16xf16, #gpu.address_space<workgroup>>
func.func @user_swizzle() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 0, base = 0, shift = 0>}
        : memref<16x32xf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<32x16xf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<16x16xf32, #tile.fragment>
    tile.gemm %a, %bb, %c
        : memref<16x32xf16, #gpu.address_space<workgroup>>,
          memref<32x16xf16, #gpu.address_space<workgroup>>,
          memref<16x16xf32, #tile.fragment>
  }
  return
}

// -----

// What stays on the SIMT path: a blocked accumulator, a swizzle that splits
// ldmatrix rows (base < 3), bf16 with f16 accumulation (no such mma.sync).

// CHECK-LABEL: gpu.func @blocked_accumulator
// CHECK-NOT:     nvgpu
// CHECK:         math.fma
func.func @blocked_accumulator() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared : memref<16x16xf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<16x32xf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerBlock = [1, 1], order = [1, 0]>}
        : memref<16x32xf32, #tile.fragment>
    tile.gemm %a, %bb, %c
        : memref<16x16xf16, #gpu.address_space<workgroup>>,
          memref<16x32xf16, #gpu.address_space<workgroup>>,
          memref<16x32xf32, #tile.fragment>
  }
  return
}

// -----

// CHECK-LABEL: gpu.func @narrow_swizzle
// CHECK-NOT:     nvgpu
// CHECK:         math.fma
func.func @narrow_swizzle() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 2, base = 2, shift = 3>}
        : memref<16x16xf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<16x32xf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<16x32xf32, #tile.fragment>
    tile.gemm %a, %bb, %c
        : memref<16x16xf16, #gpu.address_space<workgroup>>,
          memref<16x32xf16, #gpu.address_space<workgroup>>,
          memref<16x32xf32, #tile.fragment>
  }
  return
}
