// RUN: tilemega-opt %s -convert-tile-to-gpu="tma=true" -split-input-file -verify-diagnostics

// A tile whose rows (256 bytes) are wider than its 128-byte swizzle span
// without column blocks is no TMA box.
func.func @not_a_box(%C: memref<256x256xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %s = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<64x128xbf16, #gpu.address_space<workgroup>>
    // expected-error @+1 {{asks for a TMA store (tma_store), but the tile's rows are 256 bytes, not the 128 of its swizzle}}
    tile.copy %s[0, 0] to %C[0, 0] sizes [64, 128] {tma_store} : memref<64x128xbf16, #gpu.address_space<workgroup>> to memref<256x256xbf16>
  }
  return
}

// -----

// Part of a tile is no TMA store.
func.func @part_of_a_tile(%C: memref<256x256xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %s = tile.alloc_shared : memref<64x128xbf16, #gpu.address_space<workgroup>>
    // expected-error @+1 {{asks for a TMA store (tma_store), but a TMA store copies a whole shared tile}}
    tile.copy %s[0, 0] to %C[0, 0] sizes [32, 128] {tma_store} : memref<64x128xbf16, #gpu.address_space<workgroup>> to memref<256x256xbf16>
  }
  return
}
