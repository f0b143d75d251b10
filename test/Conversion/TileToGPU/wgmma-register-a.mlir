// RUN: tilemega-opt %s -tile-infer-layouts="wgmma=true" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=INFER
// RUN: tilemega-opt %s -tile-infer-layouts="wgmma=true" -convert-tile-to-gpu="wgmma=true" -split-input-file -verify-diagnostics | FileCheck %s

// A 16-bit fragment A is wgmma's register form (FlashAttention's P @ V:
// P is the bf16 fragment softmax wrote from the scores). Inference gives
// A's fragment - and the scores it shares a tile.parallel with - the
// accumulator's layout (16 rows a warp), B the 128-byte swizzle (V as
// stored: K x N, N-major); the lowering packs each k-step's eight A
// elements of the thread into four 32-bit registers (two bf16 each, the
// lower column in the low half), all steps' before the warpgroup's fence
// that they pass through (tile.wgmma_fence_registers, no plain
// wgmma.fence), and issues tile.wgmma_register_a per k-step of 16: scale-d 0 on the first (clear_accum), B read N-major
// (transpose_b = true). No descriptor of A, no shared tile of P.

// INFER-LABEL: func.func @p_times_v
// INFER:         tile.alloc_fragment {layout = #[[M:tile.mma<warpsPerBlock = \[4, 1\]>]]} : memref<64x64xf32, #tile.fragment>
// INFER:         tile.alloc_fragment {layout = #[[M]]} : memref<64x64xbf16, #tile.fragment>
// INFER:         tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<64x64xbf16
// INFER:         tile.alloc_fragment {layout = #[[M]]} : memref<64x64xf32, #tile.fragment>

// CHECK-LABEL: gpu.func @p_times_v
// CHECK-NOT:     nvvm.wgmma.fence.aligned
// CHECK:         arith.bitcast %{{.*}} : bf16 to i16
// CHECK:         arith.shli %{{.*}}, %c16_i32
// CHECK:         %[[R:.*]]:16 = tile.wgmma_fence_registers {{(%[^,]+, ){15}%[^,]+$}}
// CHECK-NOT:     arith.shli
// CHECK:         tile.wgmma_register_a %{{.*}}, [%[[R]]#0, %[[R]]#1, %[[R]]#2, %[[R]]#3], %{{.*}} {input_type = bf16, scale_d = false, transpose_b = true} : !llvm.struct<(f32
// CHECK-COUNT-3: tile.wgmma_register_a %{{.*}} {input_type = bf16, scale_d = true, transpose_b = true}
// CHECK-NOT:     tile.wgmma_register_a
// CHECK-NOT:     nvvm.wgmma.mma_async
// CHECK:         nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:    nvvm.wgmma.wait.group.sync.aligned 0
func.func @p_times_v() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %s = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    %p = tile.alloc_fragment : memref<64x64xbf16, #tile.fragment>
    %v = tile.alloc_shared : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %o = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    tile.parallel (%i, %j) in [64, 64] {
      %x = memref.load %s[%i, %j] : memref<64x64xf32, #tile.fragment>
      %y = arith.truncf %x : f32 to bf16
      memref.store %y, %p[%i, %j] : memref<64x64xbf16, #tile.fragment>
    }
    tile.gemm %p, %v, %o {clear_accum}
        : memref<64x64xbf16, #tile.fragment>,
          memref<64x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x64xf32, #tile.fragment>
  }
  return
}

// -----

// A fragment A the user laid out otherwise cannot be wgmma's A registers,
// and nothing else multiplies a fragment A: inference says which layout it
// needed, at the gemm.

func.func @p_laid_out_otherwise() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %p = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [2, 2]>} : memref<64x64xbf16, #tile.fragment>
    %v = tile.alloc_shared : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %o = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    // expected-error @+1 {{takes A from registers (a fragment), which only wgmma's register form does, and cannot: A in registers must have the accumulator's layout #tile.mma<warpsPerBlock = [4, 1]> (the threads' A registers are their D registers of the same rows and columns); got #tile.mma<warpsPerBlock = [2, 2]>}}
    tile.gemm %p, %v, %o {clear_accum}
        : memref<64x64xbf16, #tile.fragment>,
          memref<64x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x64xf32, #tile.fragment>
  }
  return
}

// -----

// f32 A in registers: wgmma's register form is 16-bit only.

func.func @f32_a_in_registers() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %p = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    %v = tile.alloc_shared : memref<64x64xf32, #gpu.address_space<workgroup>>
    %o = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    // expected-error @+1 {{takes A from registers (a fragment), which only wgmma's register form does, and cannot: wgmma takes A from registers for bf16 and f16 inputs only}}
    tile.gemm %p, %v, %o
        : memref<64x64xf32, #tile.fragment>,
          memref<64x64xf32, #gpu.address_space<workgroup>>,
          memref<64x64xf32, #tile.fragment>
  }
  return
}
