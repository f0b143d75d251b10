// RUN: tilemega-opt %s -tile-infer-layouts -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=INFER
// RUN: tilemega-opt %s -tile-infer-layouts -convert-tile-to-gpu -split-input-file | FileCheck %s --check-prefix=LOWER

// One rule (tile::chooseTensorCores) decides whether a gemm runs on tensor
// cores: layout inference gives the accumulator an mma layout exactly when the
// lowering then emits mma.sync, and the SIMT lowering (math.fma) takes the
// rest. Each case checks both sides. (bf16 into f16 never gets here: the gemm
// verifier rejects it, see test/Dialect/Tile/invalid.mlir.)

// f16 x f16 -> f16: tensor cores (nvgpu.mma.sync, f16 accumulator).
// INFER-LABEL: func.func @f16_into_f16
// INFER:         tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [1, 1]>} : memref<16x32xf16
// LOWER-LABEL: gpu.func @f16_into_f16
// LOWER:         nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf16>) -> vector<2x2xf16>
// LOWER-NOT:     math.fma
// LOWER:         gpu.return
func.func @f16_into_f16() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared : memref<16x16xf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<16x32xf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<16x32xf16, #tile.fragment>
    tile.gemm %a, %bb, %c
        : memref<16x16xf16, #gpu.address_space<workgroup>>,
          memref<16x32xf16, #gpu.address_space<workgroup>>,
          memref<16x32xf16, #tile.fragment>
  }
  return
}

// -----

// f16 x f16 -> f32: tensor cores.
// INFER-LABEL: func.func @f16_into_f32
// INFER:         tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [1, 1]>} : memref<16x32xf32
// LOWER-LABEL: gpu.func @f16_into_f32
// LOWER:         nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
// LOWER-NOT:     math.fma
// LOWER:         gpu.return
func.func @f16_into_f32() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared : memref<16x16xf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<16x32xf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<16x32xf32, #tile.fragment>
    tile.gemm %a, %bb, %c
        : memref<16x16xf16, #gpu.address_space<workgroup>>,
          memref<16x32xf16, #gpu.address_space<workgroup>>,
          memref<16x32xf32, #tile.fragment>
  }
  return
}

// -----

// bf16 x bf16 -> f32: tensor cores (nvvm.mma.sync on packed bf16 pairs).
// INFER-LABEL: func.func @bf16_into_f32
// INFER:         tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [1, 1]>} : memref<16x32xf32
// LOWER-LABEL: gpu.func @bf16_into_f32
// LOWER:         nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>{{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 16>
// LOWER-NOT:     math.fma
// LOWER:         gpu.return
func.func @bf16_into_f32() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared : memref<16x16xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<16x32xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<16x32xf32, #tile.fragment>
    tile.gemm %a, %bb, %c
        : memref<16x16xbf16, #gpu.address_space<workgroup>>,
          memref<16x32xbf16, #gpu.address_space<workgroup>>,
          memref<16x32xf32, #tile.fragment>
  }
  return
}

// -----

// A 16-bit gemm the rule turns down (K = 8) says why at inference, keeps a
// blocked accumulator and runs on CUDA cores.
// INFER-LABEL: func.func @f16_short_k
// INFER:         tile.alloc_fragment {layout = #tile.blocked<
// LOWER-LABEL: gpu.func @f16_short_k
// LOWER-NOT:     mma.sync
// LOWER:         math.fma
func.func @f16_short_k() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared : memref<16x8xf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<8x32xf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<16x32xf32, #tile.fragment>
    // expected-warning @+1 {{runs on CUDA cores, not tensor cores: K = 8 is not a multiple of the mma.sync K of 16 (by 8)}}
    tile.gemm %a, %bb, %c
        : memref<16x8xf16, #gpu.address_space<workgroup>>,
          memref<8x32xf16, #gpu.address_space<workgroup>>,
          memref<16x32xf32, #tile.fragment>
  }
  return
}

// -----

// f32 x f32 -> f32: CUDA cores by design, without a warning.
// INFER-LABEL: func.func @f32_into_f32
// INFER:         tile.alloc_fragment {layout = #tile.blocked<
// LOWER-LABEL: gpu.func @f32_into_f32
// LOWER-NOT:     mma.sync
// LOWER:         math.fma
func.func @f32_into_f32() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared : memref<16x16xf32, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<16x32xf32, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<16x32xf32, #tile.fragment>
    tile.gemm %a, %bb, %c
        : memref<16x16xf32, #gpu.address_space<workgroup>>,
          memref<16x32xf32, #gpu.address_space<workgroup>>,
          memref<16x32xf32, #tile.fragment>
  }
  return
}
