// RUN: tilemega-opt %s -split-input-file -verify-diagnostics -convert-tile-to-gpu

// A persistent kernel keeps mega.ctas_per_sm CTAs on each SM for its whole
// life: two CTAs of 120 KB of shared memory (plus 1 KB each the driver
// reserves) do not fit the 228 KB of an sm_90a SM, so the kernel could
// never start; the error gives the numbers before anything runs.

// expected-error @below {{persistent kernel keeps 2 CTAs resident on each SM, each with 122880 bytes of shared memory (and 1024 the driver reserves a CTA): 247808 bytes, over the 233472 of an SM of sm_90a by 14336}}
func.func @too_much(%a: memref<64xf32>) attributes {tilemega.mega = {workers = 263 : i64}, mega.ctas_per_sm = 2 : i64} {
  tile.kernel blocks(%i) in [263] threads 64 {
    %s = tile.alloc_shared : memref<61440xbf16, #gpu.address_space<workgroup>>
    tile.copy %a[0] to %s[0] sizes [64] : memref<64xf32> to memref<61440xbf16, #gpu.address_space<workgroup>>
  }
  return
}

// -----

// The same tile with one CTA an SM fits (no error), and so do two CTAs of
// 112 KB (2 x 113 KB = 226 KB).
func.func @one_an_sm(%a: memref<64xf32>) attributes {tilemega.mega = {workers = 132 : i64}} {
  tile.kernel blocks(%i) in [132] threads 64 {
    %s = tile.alloc_shared : memref<61440xbf16, #gpu.address_space<workgroup>>
    tile.copy %a[0] to %s[0] sizes [64] : memref<64xf32> to memref<61440xbf16, #gpu.address_space<workgroup>>
  }
  return
}

func.func @two_that_fit(%a: memref<64xf32>) attributes {tilemega.mega = {workers = 263 : i64}, mega.ctas_per_sm = 2 : i64} {
  tile.kernel blocks(%i) in [263] threads 64 {
    %s = tile.alloc_shared : memref<57344xbf16, #gpu.address_space<workgroup>>
    tile.copy %a[0] to %s[0] sizes [64] : memref<64xf32> to memref<57344xbf16, #gpu.address_space<workgroup>>
  }
  return
}
