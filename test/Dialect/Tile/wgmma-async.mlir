// RUN: tilemega-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// Asynchronous gemms and their waits (tile::verifyAsyncGemms): two groups
// into the same accumulator chain (the second wgmma reads the first's
// registers, which PTX allows between wgmmas), a wait with one group left
// pending hands back only what no pending group still writes, and the
// round trip prints what it parsed.

// CHECK-LABEL: func.func @valid
// CHECK:         tile.gemm {{.*}} {async, clear_accum, transpose_b}
// CHECK:         tile.wgmma_wait pending 1 %{{.*}} : memref<64x64xf32, #tile.fragment>
// CHECK:         tile.wgmma_wait pending 0 %{{.*}} : memref<64x64xf32, #tile.fragment>
// CHECK:         tile.wgmma_wait pending 0{{$}}
func.func @valid() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %q = tile.alloc_shared : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %k = tile.alloc_shared : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %s = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    %o = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    tile.gemm %q, %k, %s {async, clear_accum, transpose_b} : memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xf32, #tile.fragment>
    tile.gemm %q, %k, %s {async, transpose_b} : memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xf32, #tile.fragment>
    tile.gemm %q, %k, %o {async} : memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xf32, #tile.fragment>
    tile.wgmma_wait pending 1 %s : memref<64x64xf32, #tile.fragment>
    tile.clear %s : memref<64x64xf32, #tile.fragment>
    tile.wgmma_wait pending 0 %o : memref<64x64xf32, #tile.fragment>
    tile.wgmma_wait pending 0
  }
  return
}

// -----

func.func @use_before_wait() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %q = tile.alloc_shared : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %s = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    tile.gemm %q, %q, %s {async, clear_accum, transpose_b} : memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xf32, #tile.fragment>
    // expected-error @+1 {{'tile.clear' op uses the accumulator of an asynchronous tile.gemm still in flight}}
    tile.clear %s : memref<64x64xf32, #tile.fragment>
    tile.wgmma_wait pending 0 %s : memref<64x64xf32, #tile.fragment>
  }
  return
}

// -----

func.func @use_in_parallel_before_wait() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %q = tile.alloc_shared : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %s = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    tile.gemm %q, %q, %s {async, clear_accum, transpose_b} : memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xf32, #tile.fragment>
    // expected-error @+1 {{'tile.parallel' op uses the accumulator of an asynchronous tile.gemm still in flight}}
    tile.parallel (%i, %j) in [64, 64] {
      %v = memref.load %s[%i, %j] : memref<64x64xf32, #tile.fragment>
      memref.store %v, %s[%i, %j] : memref<64x64xf32, #tile.fragment>
    }
    tile.wgmma_wait pending 0 %s : memref<64x64xf32, #tile.fragment>
  }
  return
}

// -----

func.func @operand_written_in_flight(%g: memref<64x64xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %q = tile.alloc_shared : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %s = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    tile.gemm %q, %q, %s {async, clear_accum, transpose_b} : memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xf32, #tile.fragment>
    // expected-error @+1 {{'tile.copy' op writes an operand of an asynchronous tile.gemm still in flight}}
    tile.copy %g[0, 0] to %q[0, 0] sizes [64, 64] : memref<64x64xbf16> to memref<64x64xbf16, #gpu.address_space<workgroup>>
    tile.wgmma_wait pending 0 %s : memref<64x64xf32, #tile.fragment>
  }
  return
}

// -----

func.func @in_flight_at_block_end() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %q = tile.alloc_shared : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %s = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    // expected-error @+1 {{'tile.gemm' op is asynchronous and still in flight at the end of its block}}
    tile.gemm %q, %q, %s {async, clear_accum, transpose_b} : memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xf32, #tile.fragment>
  }
  return
}

// -----

func.func @wait_lists_too_few() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %q = tile.alloc_shared : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %s = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    %o = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    tile.gemm %q, %q, %s {async, clear_accum, transpose_b} : memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xf32, #tile.fragment>
    tile.gemm %q, %q, %o {async, clear_accum} : memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xf32, #tile.fragment>
    // expected-error @+1 {{'tile.wgmma_wait' op must list every accumulator it completes, but not the one of the asynchronous tile.gemm at}}
    tile.wgmma_wait pending 0 %o : memref<64x64xf32, #tile.fragment>
  }
  return
}

// -----

func.func @wait_lists_one_still_pending() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %q = tile.alloc_shared : memref<64x64xbf16, #gpu.address_space<workgroup>>
    %s = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    %o = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    tile.gemm %q, %q, %s {async, clear_accum, transpose_b} : memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xf32, #tile.fragment>
    tile.gemm %q, %q, %o {async, clear_accum} : memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xf32, #tile.fragment>
    // expected-error @+1 {{'tile.wgmma_wait' op lists fragment #1, which no gemm it completes accumulates into (with 1 group(s) left pending it completes 1 accumulator(s))}}
    tile.wgmma_wait pending 1 %s, %o : memref<64x64xf32, #tile.fragment>, memref<64x64xf32, #tile.fragment>
    tile.wgmma_wait pending 0 %o : memref<64x64xf32, #tile.fragment>
  }
  return
}

// -----

func.func @negative_pending() {
  tile.kernel blocks(%b) in [1] threads 128 {
    // expected-error @+1 {{'tile.wgmma_wait' op pending must be >= 0, got -1}}
    tile.wgmma_wait pending -1
  }
  return
}
