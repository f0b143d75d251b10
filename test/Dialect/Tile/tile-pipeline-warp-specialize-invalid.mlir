// RUN: tilemega-opt %s -tile-pipeline="wgmma=true tma=true" -split-input-file -verify-diagnostics

// A warp-specialised loop must be at the kernel's top level or in a loop
// that is: two loops deep is neither.
func.func @nested(%A: memref<128x512xbf16>, %F: memref<128x64xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    tile.pipelined %o = %c0 to %c2 step %c1 num_stages 1 {
      tile.pipelined %p = %c0 to %c2 step %c1 num_stages 1 {
        // expected-error @+1 {{is warp-specialised, but is neither at the kernel's top level nor in a loop that is}}
        tile.pipelined %k = %c0 to %c8 step %c1 num_stages 2 attributes {warp_specialize} {
          %col = arith.muli %k, %c64 : index
          tile.copy %A[%c0, %col] to %a[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
          tile.copy %a[0, 0] to %F[0, 0] sizes [128, 64] : memref<128x64xbf16, #gpu.address_space<workgroup>> to memref<128x64xbf16>
        }
      }
    }
  }
  return
}

// -----

// Inside a loop over tiles the loop's trip count must not change from tile
// to tile (the pipeline's iteration is j * trips + i).
func.func @varying_bounds(%A: memref<128x512xbf16>, %F: memref<128x64xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c64 = arith.constant 64 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    tile.pipelined %o = %c0 to %c2 step %c1 num_stages 1 {
      %n = arith.addi %o, %c2 : index
      // expected-error @+1 {{its bounds must not change from one iteration of that loop to the next}}
      tile.pipelined %k = %c0 to %n step %c1 num_stages 2 attributes {warp_specialize} {
        %col = arith.muli %k, %c64 : index
        tile.copy %A[%c0, %col] to %a[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
        tile.copy %a[0, 0] to %F[0, 0] sizes [128, 64] : memref<128x64xbf16, #gpu.address_space<workgroup>> to memref<128x64xbf16>
      }
    }
  }
  return
}

// -----

// Consumers are whole warpgroups (the producer is the one after them).
func.func @partial_warpgroup(%A: memref<128x512xbf16>, %F: memref<128x64xbf16>) {
  tile.kernel blocks(%b) in [1] threads 64 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    // expected-error @+1 {{is warp-specialised, which needs whole warpgroups of consumers (threads a multiple of 128), got 64}}
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 2 attributes {warp_specialize} {
      %col = arith.muli %k, %c64 : index
      tile.copy %A[%c0, %col] to %a[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.copy %a[0, 0] to %F[0, 0] sizes [128, 64] : memref<128x64xbf16, #gpu.address_space<workgroup>> to memref<128x64xbf16>
    }
  }
  return
}

// -----

// The producer issues TMA copies: a copy that cannot be one TMA box (rows
// of 20 f16, 40 bytes) is an error naming it.
func.func @not_tma(%A: memref<64x20xf16>, %F: memref<64x8xf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c8 = arith.constant 8 : index
    %a = tile.alloc_shared : memref<64x8xf16, #gpu.address_space<workgroup>>
    // expected-error @+1 {{is warp-specialised, which needs TMA, but the copy at}}
    tile.pipelined %k = %c0 to %c2 step %c1 num_stages 2 attributes {warp_specialize} {
      %col = arith.muli %k, %c8 : index
      tile.copy %A[%c0, %col] to %a[0, 0] sizes [64, 8] : memref<64x20xf16> to memref<64x8xf16, #gpu.address_space<workgroup>>
      tile.copy %a[0, 0] to %F[0, 0] sizes [64, 8] : memref<64x8xf16, #gpu.address_space<workgroup>> to memref<64x8xf16>
    }
  }
  return
}

// -----

func.func @says_no_tma(%A: memref<128x512xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    // expected-error @+1 {{warp_specialize needs TMA (its producer issues bulk copies), but the loop says tma = false}}
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 2 attributes {tma = false, warp_specialize} {
    }
  }
  return
}

// -----

// One producer warpgroup a kernel: a second warp-specialised loop is an
// error at the second.
func.func @two_loops(%A: memref<128x512xbf16>, %F: memref<128x64xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %a2 = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 2 attributes {warp_specialize} {
      %col = arith.muli %k, %c64 : index
      tile.copy %A[%c0, %col] to %a[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.copy %a[0, 0] to %F[0, 0] sizes [128, 64] : memref<128x64xbf16, #gpu.address_space<workgroup>> to memref<128x64xbf16>
    }
    // expected-error @+1 {{is the kernel's second warp-specialised loop; a kernel has one producer warpgroup}}
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 2 attributes {warp_specialize} {
      %col = arith.muli %k, %c64 : index
      tile.copy %A[%c0, %col] to %a2[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.copy %a2[0, 0] to %F[0, 0] sizes [128, 64] : memref<128x64xbf16, #gpu.address_space<workgroup>> to memref<128x64xbf16>
    }
  }
  return
}

// -----

// An address the producer would have to load again from memory the kernel
// writes (the store below) cannot be recomputed inside it: the repeat could
// read another value.
func.func @loaded_address(%A: memref<128x512xbf16>, %F: memref<128x64xbf16>, %I: memref<4xindex>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %base = memref.load %I[%c0] : memref<4xindex>
    // expected-error @+1 {{copies from an address computed by 'memref.load'}}
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 2 attributes {warp_specialize} {
      %col = arith.muli %k, %c64 : index
      %at = arith.addi %col, %base : index
      tile.copy %A[%c0, %at] to %a[0, 0] sizes [128, 64] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.copy %a[0, 0] to %F[0, 0] sizes [128, 64] : memref<128x64xbf16, #gpu.address_space<workgroup>> to memref<128x64xbf16>
    }
    memref.store %c0, %I[%c1] : memref<4xindex>
  }
  return
}

// -----

// A cluster whose blocks copy different boxes (B's offsets use %bx itself)
// has nothing to multicast: the cluster is an error, not silently useless.
func.func @cluster_nothing_shared(%A: memref<512x512xbf16>, %B: memref<512x512xbf16>, %C: memref<512x512xf32>) {
  // expected-error @+1 {{runs clusters of 2 blocks, but multicasts no copy}}
  tile.kernel blocks(%bx) in [4] threads 128 cluster 2 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %row = arith.muli %bx, %c128 : index
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 2 attributes {warp_specialize} {
      %col = arith.muli %k, %c64 : index
      tile.copy %A[%row, %col] to %a[0, 0] sizes [128, 64] : memref<512x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.copy %a[0, 0] to %C[%row, %col] sizes [128, 64] : memref<128x64xbf16, #gpu.address_space<workgroup>> to memref<512x512xf32>
    }
  }
  return
}

// -----

// B's box (constant offsets) is the same in both blocks of a cluster, but
// the loop's trip count depends on %bx: one block would issue copies the other does not
// (its barrier would wait for ever), so nothing is multicast.
func.func @cluster_trips_differ(%A: memref<512x512xbf16>, %B: memref<512x512xbf16>, %C: memref<512x512xf32>) {
  // expected-error @+1 {{runs clusters of 2 blocks, but multicasts no copy}}
  tile.kernel blocks(%bx) in [4] threads 128 cluster 2 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %b = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %trips = arith.addi %bx, %c1 : index
    tile.pipelined %k = %c0 to %trips step %c1 num_stages 2 attributes {warp_specialize} {
      %col = arith.muli %k, %c64 : index
      tile.copy %B[%c0, %c0] to %b[0, 0] sizes [128, 64] : memref<512x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
      tile.copy %b[0, 0] to %C[%c0, %col] sizes [128, 64] : memref<128x64xbf16, #gpu.address_space<workgroup>> to memref<512x512xf32>
    }
  }
  return
}
