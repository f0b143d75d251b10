// RUN: tilemega-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// Traits: InKernel, HasParent
//===----------------------------------------------------------------------===//

func.func @outside_kernel(%A: memref<4xf32>) {
  // expected-error @+1 {{'tile.clear' op must be nested in a tile.kernel}}
  tile.clear %A : memref<4xf32>
  return
}

// -----

func.func @kernel_in_kernel() {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{'tile.kernel' op expects parent op 'func.func'}}
    tile.kernel blocks(%c) in [1] threads 32 {
    }
  }
  return
}

// -----

func.func @alloc_shared_outside_kernel() {
  // expected-error @+1 {{'tile.alloc_shared' op expects parent op 'tile.kernel'}}
  %s = tile.alloc_shared : memref<4xf32, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @alloc_shared_in_parallel() {
  tile.kernel blocks(%b) in [1] threads 32 {
    tile.parallel (%i) in [4] {
      // expected-error @+1 {{'tile.alloc_shared' op expects parent op 'tile.kernel'}}
      %s = tile.alloc_shared : memref<4xf32, #gpu.address_space<workgroup>>
    }
  }
  return
}

// -----

func.func @alloc_fragment_in_pipelined(%c0: index) {
  tile.kernel blocks(%b) in [1] threads 32 {
    tile.pipelined %k = %c0 to %c0 step %c0 num_stages 1 {
      // expected-error @+1 {{'tile.alloc_fragment' op expects parent op 'tile.kernel'}}
      %f = tile.alloc_fragment : memref<32xf32, #tile.fragment>
    }
  }
  return
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

// -----

func.func @shared_dynamic_shape() {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{result #0 must be statically shaped shared-memory memref, but got 'memref<?xf32, #gpu.address_space<workgroup>>'}}
    %s = tile.alloc_shared : memref<?xf32, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @shared_wrong_scope() {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{result #0 must be statically shaped shared-memory memref, but got 'memref<32xf32, #tile.fragment>'}}
    %s = tile.alloc_shared : memref<32xf32, #tile.fragment>
  }
  return
}

// -----

func.func @fragment_wrong_scope() {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{result #0 must be statically shaped fragment memref, but got 'memref<32xf32>'}}
    %f = tile.alloc_fragment : memref<32xf32>
  }
  return
}

// -----

func.func @copy_dynamic_shape(%A: memref<?xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared : memref<32xf32, #gpu.address_space<workgroup>>
    // expected-error @+1 {{operand #0 must be statically shaped memref, but got 'memref<?xf32>'}}
    tile.copy %A[0] to %s[0] sizes [32] : memref<?xf32> to memref<32xf32, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @gemm_c_not_fragment() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared : memref<16x16xf32, #gpu.address_space<workgroup>>
    // expected-error @+1 {{operand #2 must be statically shaped fragment memref, but got 'memref<16x16xf32, #gpu.address_space<workgroup>>'}}
    tile.gemm %a, %a, %a : memref<16x16xf32, #gpu.address_space<workgroup>>, memref<16x16xf32, #gpu.address_space<workgroup>>, memref<16x16xf32, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @fill_index_value(%v: index) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared : memref<32xi64, #gpu.address_space<workgroup>>
    // expected-error @+1 {{operand #1 must be floating-point or signless integer, but got 'index'}}
    tile.fill %s, %v : memref<32xi64, #gpu.address_space<workgroup>>, index
  }
  return
}

//===----------------------------------------------------------------------===//
// Tile buffers (every op)
//===----------------------------------------------------------------------===//

// -----

func.func @unknown_memory_space(%A: memref<32xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %p = memref.alloca() : memref<32xf32, #gpu.address_space<private>>
    // expected-error @+1 {{'tile.copy' op source has memory space #gpu.address_space<private>, which is not global, shared (#gpu.address_space<workgroup>) or #tile.fragment}}
    tile.copy %p[0] to %A[0] sizes [32] : memref<32xf32, #gpu.address_space<private>> to memref<32xf32>
  }
  return
}

// -----

func.func @non_identity_layout() {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{'tile.alloc_shared' op result must have the identity (row-major) layout}}
    %s = tile.alloc_shared : memref<4x4xf32, strided<[8, 1]>, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @rank0_fragment() {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{'tile.alloc_fragment' op result must have rank >= 1}}
    %f = tile.alloc_fragment : memref<f32, #tile.fragment>
  }
  return
}

// -----

// Byte sizes and layouts start from the element's bit width: index has none.
func.func @index_tile() {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{'tile.alloc_shared' op result has elements of type 'index'; a tile buffer holds integers or floats}}
    %s = tile.alloc_shared : memref<32xindex, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @rank0_copy(%A: memref<f32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared : memref<1xf32, #gpu.address_space<workgroup>>
    // expected-error @+1 {{'tile.copy' op source must have rank >= 1}}
    tile.copy %A[] to %s[0] sizes [] : memref<f32> to memref<1xf32, #gpu.address_space<workgroup>>
  }
  return
}

//===----------------------------------------------------------------------===//
// tile.kernel
//===----------------------------------------------------------------------===//

// -----

func.func @grid_rank() {
  // expected-error @+1 {{grid must have 1 to 3 dimensions, got 4}}
  tile.kernel blocks(%a, %b, %c, %d) in [1, 1, 1, 1] threads 32 {
  }
  return
}

// -----

func.func @grid_size() {
  // expected-error @+1 {{grid sizes must be >= 1, got [4, 0]}}
  tile.kernel blocks(%a, %b) in [4, 0] threads 32 {
  }
  return
}

// -----

func.func @threads_not_warp_multiple() {
  // expected-error @+1 {{thread count must be a positive multiple of 32 and at most 1024, got 48}}
  tile.kernel blocks(%a) in [1] threads 48 {
  }
  return
}

// -----

func.func @threads_too_many() {
  // expected-error @+1 {{thread count must be a positive multiple of 32 and at most 1024, got 2048}}
  tile.kernel blocks(%a) in [1] threads 2048 {
  }
  return
}

// -----

func.func @block_index_count() {
  // expected-error @+1 {{expects one block index per grid dimension (2), got 1}}
  tile.kernel blocks(%a) in [4, 2] threads 32 {
  }
  return
}

// -----

func.func @block_index_type() {
  // expected-error @+1 {{block indices must have index type}}
  "tile.kernel"() <{grid = array<i64: 4>, threads = 32 : i64}> ({
  ^bb0(%a: i32):
  }) : () -> ()
  return
}

// -----

func.func @shared_memory_limit() {
  // expected-error @+1 {{allocates 262144 bytes of shared memory, over the 232448-byte (227 KiB) limit of sm_90a by 29696 bytes}}
  tile.kernel blocks(%a) in [1] threads 128 {
    %s0 = tile.alloc_shared : memref<128x256xf32, #gpu.address_space<workgroup>>
    %s1 = tile.alloc_shared : memref<128x256xf32, #gpu.address_space<workgroup>>
  }
  return
}

//===----------------------------------------------------------------------===//
// tile.alloc_fragment
//===----------------------------------------------------------------------===//

// -----

func.func @fragment_registers() {
  tile.kernel blocks(%a) in [1] threads 128 {
    // expected-error @+1 {{fragment of 65536 elements over 128 threads needs 512 registers per thread, over the 255-register limit by 257}}
    %f = tile.alloc_fragment : memref<256x256xf32, #tile.fragment>
  }
  return
}

// -----

// 2^31 x 2^40 elements: the count does not wrap to 0 and pass the limit.
func.func @fragment_bytes_overflow() {
  tile.kernel blocks(%a) in [1] threads 128 {
    // expected-error @+1 {{result of shape [2147483648, 1099511627776] has more than 2^63 - 1 bytes}}
    %f = tile.alloc_fragment : memref<2147483648x1099511627776xf32, #tile.fragment>
  }
  return
}

// -----

func.func @shared_bytes_overflow() {
  tile.kernel blocks(%a) in [1] threads 128 {
    // expected-error @+1 {{result of shape [4611686018427387904, 4] has more than 2^63 - 1 bytes}}
    %s = tile.alloc_shared : memref<4611686018427387904x4xbf16, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @fragment_layout_rank() {
  tile.kernel blocks(%a) in [1] threads 32 {
    // expected-error @+1 {{layout has rank 1 but the fragment has rank 2}}
    %f = tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerBlock = [1], order = [0]>} : memref<4x32xf32, #tile.fragment>
  }
  return
}

// -----

func.func @fragment_layout_threads() {
  tile.kernel blocks(%a) in [1] threads 128 {
    // expected-error @+1 {{layout spreads the fragment over 64 threads but the kernel has 128}}
    %f = tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerBlock = [2], order = [0]>} : memref<128xf32, #tile.fragment>
  }
  return
}

// -----

func.func @fragment_layout_chunk() {
  tile.kernel blocks(%a) in [1] threads 128 {
    // expected-error @+1 {{fragment dimension 0 (size 8) is not a multiple of the layout's chunk extent 16}}
    %f = tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerBlock = [4, 1], order = [1, 0]>} : memref<8x32xf32, #tile.fragment>
  }
  return
}

//===----------------------------------------------------------------------===//
// #tile.blocked and #tile.swizzle
//===----------------------------------------------------------------------===//

// -----

// expected-error @+1 {{blocked layout parameters must all have 2 entries (the length of 'order')}}
#bad = #tile.blocked<sizePerThread = [1], threadsPerWarp = [1, 32], warpsPerBlock = [1, 1], order = [1, 0]>

// -----

// expected-error @+1 {{blocked layout sizes must be >= 1}}
#bad = #tile.blocked<sizePerThread = [0, 4], threadsPerWarp = [1, 32], warpsPerBlock = [1, 1], order = [1, 0]>

// -----

// Found by scripts/fuzz/fuzz_opt.py: convert-tile-to-gpu ran out of memory
// enumerating the elements of a thread.
// expected-error @+1 {{blocked layout entries must be <= 65536}}
#bad = #tile.blocked<sizePerThread = [4294967296], threadsPerWarp = [32], warpsPerBlock = [2], order = [0]>

// -----

// expected-error @+1 {{blocked layout gives each thread 131072 elements per chunk; at most 1024}}
#bad = #tile.blocked<sizePerThread = [512, 256], threadsPerWarp = [1, 32], warpsPerBlock = [1, 1], order = [1, 0]>

// -----

// Found by scripts/fuzz/fuzz_opt.py: the pipeline unrolled 65535 elements
// a thread for over a minute.
// expected-error @+1 {{blocked layout gives each thread 65535 elements per chunk; at most 1024}}
#bad = #tile.blocked<sizePerThread = [65535], threadsPerWarp = [32], warpsPerBlock = [2], order = [0]>

// -----

// expected-error @+1 {{blocked layout threadsPerWarp must multiply to 32, got 16}}
#bad = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 16], warpsPerBlock = [1, 1], order = [1, 0]>

// -----

// expected-error @+1 {{blocked layout order must be a permutation of [0, 2)}}
#bad = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerBlock = [1, 1], order = [1, 1]>


// -----

// expected-error @+1 {{swizzle parameters must be >= 0}}
#bad = #tile.swizzle<bits = 3, base = -1, shift = 3>

// -----

// expected-error @+1 {{swizzle shift (2) must be >= bits (3) so that the XOR source and target bits do not overlap}}
#bad = #tile.swizzle<bits = 3, base = 3, shift = 2>

// -----

// expected-error @+1 {{swizzle parameters must be >= 0}}
#bad = #tile.swizzle<bits = 3, base = 3, shift = 3, columns = -64>

// -----

func.func @column_blocks_split_rows() {
  tile.kernel blocks(%b) in [1] threads 128 {
    // expected-error @+1 {{swizzle splits rows into blocks of 64 columns, but the tile's rows are 96 elements}}
    %s = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3, columns = 64>} : memref<64x96xbf16, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @column_blocks_of_a_vector() {
  tile.kernel blocks(%b) in [1] threads 128 {
    // expected-error @+1 {{swizzle splits rows into blocks of 64 columns, but the tile's rows are 128 elements of a 1-d tile}}
    %s = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3, columns = 64>} : memref<128xbf16, #gpu.address_space<workgroup>>
  }
  return
}

//===----------------------------------------------------------------------===//
// tile.copy
//===----------------------------------------------------------------------===//

// -----

func.func @copy_size_zero(%A: memref<64x64xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared : memref<32x32xf32, #gpu.address_space<workgroup>>
    // expected-error @+1 {{sizes must be >= 1, got [32, 0]}}
    tile.copy %A[0, 0] to %s[0, 0] sizes [32, 0] : memref<64x64xf32> to memref<32x32xf32, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @copy_offset_count(%A: memref<64x64xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared : memref<32x32xf32, #gpu.address_space<workgroup>>
    // expected-error @+1 {{expects 2 source offsets, got 1}}
    tile.copy %A[0] to %s[0, 0] sizes [32, 32] : memref<64x64xf32> to memref<32x32xf32, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @copy_dynamic_offset_operands(%A: memref<64xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared : memref<32xf32, #gpu.address_space<workgroup>>
    // expected-error @+1 {{expected 1 dynamic source offset values}}
    "tile.copy"(%A, %s) <{operandSegmentSizes = array<i32: 1, 0, 1, 0>, static_src_offsets = array<i64: -9223372036854775808>, static_dst_offsets = array<i64: 0>, sizes = array<i64: 32>}> : (memref<64xf32>, memref<32xf32, #gpu.address_space<workgroup>>) -> ()
  }
  return
}

// -----

func.func @copy_size_count(%A: memref<64x64xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared : memref<32x32xf32, #gpu.address_space<workgroup>>
    // expected-error @+1 {{expects 2 sizes to match the rank of the source, got 1}}
    tile.copy %A[0, 0] to %s[0, 0] sizes [32] : memref<64x64xf32> to memref<32x32xf32, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @copy_out_of_bounds(%A: memref<64x64xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared : memref<32x32xf32, #gpu.address_space<workgroup>>
    // expected-error @+1 {{destination box [16, 48) in dimension 1 is out of bounds of size 32}}
    tile.copy %A[0, 0] to %s[0, 16] sizes [32, 32] : memref<64x64xf32> to memref<32x32xf32, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @copy_partial_fragment(%A: memref<64x64xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %f = tile.alloc_fragment : memref<32x32xf32, #tile.fragment>
    // expected-error @+1 {{a fragment is copied whole: destination offsets must be 0 and sizes must equal its shape [32, 32]}}
    tile.copy %A[0, 0] to %f[0, 0] sizes [16, 32] : memref<64x64xf32> to memref<32x32xf32, #tile.fragment>
  }
  return
}

// -----

func.func @copy_global_to_global(%A: memref<64xf32>, %B: memref<64xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{cannot copy global to global: stage the tile through shared memory or a fragment}}
    tile.copy %A[0] to %B[0] sizes [64] : memref<64xf32> to memref<64xf32>
  }
  return
}

// -----

func.func @copy_fragment_to_fragment() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %f = tile.alloc_fragment : memref<64xf32, #tile.fragment>
    %g = tile.alloc_fragment : memref<64xf32, #tile.fragment>
    // expected-error @+1 {{cannot copy fragment to fragment: use tile.parallel}}
    tile.copy %f[0] to %g[0] sizes [64] : memref<64xf32, #tile.fragment> to memref<64xf32, #tile.fragment>
  }
  return
}

// -----

func.func @copy_float_to_int(%A: memref<64xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared : memref<64xi32, #gpu.address_space<workgroup>>
    // expected-error @+1 {{cannot convert element type 'f32' to 'i32' (both must be floats or both integers)}}
    tile.copy %A[0] to %s[0] sizes [64] : memref<64xf32> to memref<64xi32, #gpu.address_space<workgroup>>
  }
  return
}

//===----------------------------------------------------------------------===//
// tile.atomic
//===----------------------------------------------------------------------===//

// -----

func.func @atomic_shared_destination() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %f = tile.alloc_fragment : memref<32xf32, #tile.fragment>
    %s = tile.alloc_shared : memref<32xf32, #gpu.address_space<workgroup>>
    // expected-error @+1 {{destination must be global, got shared}}
    tile.atomic add %f to %s[0] : memref<32xf32, #tile.fragment> to memref<32xf32, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @atomic_global_source(%A: memref<32xf32>, %C: memref<32xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{source must be a shared or fragment tile, got global}}
    tile.atomic add %A to %C[0] : memref<32xf32> to memref<32xf32>
  }
  return
}

// -----

func.func @atomic_element_types(%C: memref<32xf16>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %f = tile.alloc_fragment : memref<32xf32, #tile.fragment>
    // expected-error @+1 {{element types differ: 'f32' vs 'f16'}}
    tile.atomic add %f to %C[0] : memref<32xf32, #tile.fragment> to memref<32xf16>
  }
  return
}

// -----

func.func @atomic_i8(%C: memref<32xi8>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %f = tile.alloc_fragment : memref<32xi8, #tile.fragment>
    // expected-error @+1 {{atomics support f16, bf16, f32, f64, i32 and i64, got 'i8'}}
    tile.atomic max %f to %C[0] : memref<32xi8, #tile.fragment> to memref<32xi8>
  }
  return
}

// -----

func.func @atomic_out_of_bounds(%C: memref<48xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %f = tile.alloc_fragment : memref<32xf32, #tile.fragment>
    // expected-error @+1 {{destination box [32, 64) in dimension 0 is out of bounds of size 48}}
    tile.atomic add %f to %C[32] : memref<32xf32, #tile.fragment> to memref<48xf32>
  }
  return
}

//===----------------------------------------------------------------------===//
// tile.gemm
//===----------------------------------------------------------------------===//

// -----

func.func @gemm_rank() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared : memref<32xf32, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<32x32xf32, #tile.fragment>
    // expected-error @+1 {{A must be a 2-d tile, got rank 1}}
    tile.gemm %a, %a, %c : memref<32xf32, #gpu.address_space<workgroup>>, memref<32xf32, #gpu.address_space<workgroup>>, memref<32x32xf32, #tile.fragment>
  }
  return
}

// -----

func.func @gemm_global_operand(%B: memref<32x32xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared : memref<32x32xf32, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<32x32xf32, #tile.fragment>
    // expected-error @+1 {{operand B must be in shared memory or a fragment, got global}}
    tile.gemm %a, %B, %c : memref<32x32xf32, #gpu.address_space<workgroup>>, memref<32x32xf32>, memref<32x32xf32, #tile.fragment>
  }
  return
}

// -----

func.func @gemm_k_mismatch() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared : memref<32x16xf32, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<16x32xf32, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<16x32xf32, #tile.fragment>
    // expected-error @+1 {{reduction sizes differ: A gives K = 32, B gives K = 16}}
    tile.gemm %a, %bb, %c {transpose_a} : memref<32x16xf32, #gpu.address_space<workgroup>>, memref<16x32xf32, #gpu.address_space<workgroup>>, memref<16x32xf32, #tile.fragment>
  }
  return
}

// -----

func.func @gemm_c_shape() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared : memref<64x16xf32, #gpu.address_space<workgroup>>
    %bt = tile.alloc_shared : memref<32x16xf32, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    // expected-error @+1 {{C must be 64x32 (M x N), got 64x64}}
    tile.gemm %a, %bt, %c {transpose_b} : memref<64x16xf32, #gpu.address_space<workgroup>>, memref<32x16xf32, #gpu.address_space<workgroup>>, memref<64x64xf32, #tile.fragment>
  }
  return
}

// -----

func.func @gemm_input_types() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared : memref<32x32xf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<32x32xf32, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<32x32xf32, #tile.fragment>
    // expected-error @+1 {{A and B element types differ: 'f16' vs 'f32'}}
    tile.gemm %a, %bb, %c : memref<32x32xf16, #gpu.address_space<workgroup>>, memref<32x32xf32, #gpu.address_space<workgroup>>, memref<32x32xf32, #tile.fragment>
  }
  return
}

// -----

func.func @gemm_accumulation() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared : memref<32x32xf32, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<32x32xf16, #tile.fragment>
    // expected-error @+1 {{unsupported accumulation: 'f32' inputs into 'f16' (supported: f16 -> f32/f16, bf16 -> f32, f32 -> f32, i8 -> i32, f8E4M3FN/f8E5M2 -> f32 (wgmma))}}
    tile.gemm %a, %a, %c : memref<32x32xf32, #gpu.address_space<workgroup>>, memref<32x32xf32, #gpu.address_space<workgroup>>, memref<32x32xf16, #tile.fragment>
  }
  return
}

// -----

// bf16 inputs with an f16 accumulator: mma.sync has no such form, and the
// tensor-core rule (TileTensorCores.h) rejects it instead of running it on
// CUDA cores.
func.func @gemm_bf16_into_f16() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared : memref<16x16xbf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<16x32xbf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<16x32xf16, #tile.fragment>
    // expected-error @+1 {{unsupported accumulation: 'bf16' inputs into 'f16' (mma.sync has no bf16-input, f16-accumulator form: accumulate bf16 in f32)}}
    tile.gemm %a, %bb, %c : memref<16x16xbf16, #gpu.address_space<workgroup>>, memref<16x32xbf16, #gpu.address_space<workgroup>>, memref<16x32xf16, #tile.fragment>
  }
  return
}

//===----------------------------------------------------------------------===//
// tile.reduce
//===----------------------------------------------------------------------===//

// -----

func.func @reduce_global(%A: memref<32x32xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %f = tile.alloc_fragment : memref<32xf32, #tile.fragment>
    // expected-error @+1 {{reduces shared or fragment tiles, not global ones}}
    tile.reduce sum %A dim 1 into %f : memref<32x32xf32> into memref<32xf32, #tile.fragment>
  }
  return
}

// -----

func.func @reduce_dim() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_fragment : memref<32x32xf32, #tile.fragment>
    %f = tile.alloc_fragment : memref<32xf32, #tile.fragment>
    // expected-error @+1 {{dim 2 is out of range for a rank-2 source}}
    tile.reduce sum %s dim 2 into %f : memref<32x32xf32, #tile.fragment> into memref<32xf32, #tile.fragment>
  }
  return
}

// -----

func.func @reduce_shape() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_fragment : memref<32x64xf32, #tile.fragment>
    %f = tile.alloc_fragment : memref<64xf32, #tile.fragment>
    // expected-error @+1 {{destination shape must be [32], got [64]}}
    tile.reduce max %s dim 1 into %f : memref<32x64xf32, #tile.fragment> into memref<64xf32, #tile.fragment>
  }
  return
}

// -----

func.func @reduce_element_types() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_fragment : memref<32x32xf32, #tile.fragment>
    %f = tile.alloc_fragment : memref<32xf16, #tile.fragment>
    // expected-error @+1 {{element types differ: 'f32' vs 'f16'}}
    tile.reduce min %s dim 0 into %f : memref<32x32xf32, #tile.fragment> into memref<32xf16, #tile.fragment>
  }
  return
}

//===----------------------------------------------------------------------===//
// tile.fill / tile.clear
//===----------------------------------------------------------------------===//

// -----

func.func @clear_global(%A: memref<32xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{writes shared or fragment tiles; use tile.copy to write global memory}}
    tile.clear %A : memref<32xf32>
  }
  return
}

// -----

func.func @fill_value_type(%v: f16) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %f = tile.alloc_fragment : memref<32xf32, #tile.fragment>
    // expected-error @+1 {{value type 'f16' differs from the element type 'f32'}}
    tile.fill %f, %v : memref<32xf32, #tile.fragment>, f16
  }
  return
}

//===----------------------------------------------------------------------===//
// tile.parallel
//===----------------------------------------------------------------------===//

// -----

func.func @parallel_no_extent() {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{needs at least one extent}}
    tile.parallel () in [] {
      %x = arith.constant 0 : index
    }
  }
  return
}

// -----

func.func @parallel_extent() {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{extents must be >= 1, got [4, 0]}}
    tile.parallel (%i, %j) in [4, 0] {
    }
  }
  return
}

// -----

// Found by scripts/fuzz/fuzz_opt.py: convert-tile-to-gpu ran out of memory
// enumerating each thread's iterations.
func.func @parallel_too_large() {
  tile.kernel blocks(%b) in [1] threads 64 {
    // expected-error @+1 {{iteration space [2147483648] is over the 1048576 elements a tile may have}}
    tile.parallel (%i) in [2147483648] {
    }
  }
  return
}

// -----

func.func @parallel_too_large_product() {
  tile.kernel blocks(%b) in [1] threads 64 {
    // expected-error @+1 {{iteration space [2048, 1024] is over the 1048576 elements}}
    tile.parallel (%i, %j) in [2048, 1024] {
    }
  }
  return
}

// -----

func.func @parallel_layout_rank() {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{layout has rank 1 but the iteration space has rank 2}}
    tile.parallel (%i, %j) in [4, 32] attributes {layout = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerBlock = [1], order = [0]>} {
    }
  }
  return
}

// -----

func.func @parallel_layout_threads() {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{layout spreads the iterations over 128 threads but the kernel has 32}}
    tile.parallel (%i) in [128] attributes {layout = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerBlock = [4], order = [0]>} {
    }
  }
  return
}

// -----

func.func @parallel_index_count() {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{expects one index per extent (2), got 1}}
    tile.parallel (%i) in [4, 32] {
    }
  }
  return
}

// -----

func.func @parallel_index_type() {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{indices must have index type}}
    "tile.parallel"() <{extents = array<i64: 32>}> ({
    ^bb0(%i: i32):
    }) : () -> ()
  }
  return
}

// -----

func.func @parallel_fragment_indices() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %f = tile.alloc_fragment : memref<4x32xf32, #tile.fragment>
    tile.parallel (%i, %j) in [4, 32] {
      // expected-error @+1 {{accesses a fragment inside tile.parallel with indices other than the parallel's own (fragment shape [4, 32], iteration space [4, 32])}}
      %x = memref.load %f[%j, %i] : memref<4x32xf32, #tile.fragment>
    }
  }
  return
}

// -----

func.func @parallel_fragment_shape() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %f = tile.alloc_fragment : memref<4x32xf32, #tile.fragment>
    tile.parallel (%i, %j) in [2, 32] {
      %x = arith.constant 0.0 : f32
      // expected-error @+1 {{accesses a fragment inside tile.parallel with indices other than the parallel's own (fragment shape [4, 32], iteration space [2, 32])}}
      memref.store %x, %f[%i, %j] : memref<4x32xf32, #tile.fragment>
    }
  }
  return
}

//===----------------------------------------------------------------------===//
// tile.pipelined
//===----------------------------------------------------------------------===//

// -----

func.func @pipelined_stages(%c0: index, %c8: index, %c1: index) {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{num_stages must be >= 1, got 0}}
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 0 {
    }
  }
  return
}

// -----

func.func @pipelined_in_flight_two_stages(%c0: index, %c8: index, %c1: index) {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{wgmma_in_flight needs num_stages >= 3 (a stage that neither the pending wgmma nor the current iteration reads), got 2}}
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 2 wgmma_in_flight {
    }
  }
  return
}

// -----

// Found by scripts/fuzz/fuzz_opt.py: tile-pipeline hung unrolling the
// prologue of this loop, or overflowed sizing its stage buffers.
func.func @pipelined_too_many_stages(%c0: index, %c8: index, %c1: index) {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{num_stages must be <= 32, got 9223372036854775807}}
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 9223372036854775807 {
    }
  }
  return
}

// -----

func.func @pipelined_induction_variable(%c0: index) {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{body must have exactly one index argument (the induction variable)}}
    "tile.pipelined"(%c0, %c0, %c0) <{num_stages = 1 : i64}> ({
    ^bb0(%k: i32):
    }) : (index, index, index) -> ()
  }
  return
}

// -----

func.func @grid_over_limit() {
  // expected-error @+1 {{grid dimension 1 has 70000 blocks, over CUDA's limit of 65535}}
  tile.kernel blocks(%x, %y) in [1, 70000] threads 32 {
  }
  return
}

//===----------------------------------------------------------------------===//
// Async copies
//===----------------------------------------------------------------------===//

// -----

func.func @async_copy_shared_to_fragment() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared : memref<4x32xf32, #gpu.address_space<workgroup>>
    %f = tile.alloc_fragment : memref<4x32xf32, #tile.fragment>
    // expected-error @+1 {{async copies go from global to shared memory, got shared to fragment}}
    tile.copy async %s[0, 0] to %f[0, 0] sizes [4, 32]
        : memref<4x32xf32, #gpu.address_space<workgroup>> to memref<4x32xf32, #tile.fragment>
  }
  return
}

// -----

func.func @async_copy_global_to_fragment(%A: memref<64x64xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %f = tile.alloc_fragment : memref<4x32xf32, #tile.fragment>
    // expected-error @+1 {{async copies go from global to shared memory, got global to fragment}}
    tile.copy async %A[0, 0] to %f[0, 0] sizes [4, 32]
        : memref<64x64xf32> to memref<4x32xf32, #tile.fragment>
  }
  return
}

// -----

func.func @async_copy_convert(%A: memref<64x64xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared : memref<4x32xf16, #gpu.address_space<workgroup>>
    // expected-error @+1 {{async copies cannot convert elements: 'f32' vs 'f16'}}
    tile.copy async %A[0, 0] to %s[0, 0] sizes [4, 32]
        : memref<64x64xf32> to memref<4x32xf16, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @async_wait_negative() {
  tile.kernel blocks(%b) in [1] threads 32 {
    // expected-error @+1 {{pending must be >= 0, got -1}}
    tile.async_wait pending -1
  }
  return
}

// -----

func.func @async_commit_outside_kernel() {
  // expected-error @+1 {{must be nested in a tile.kernel}}
  tile.async_commit
  return
}

// -----

// Only a whole leading-dimension slice of a shared alloc is a stage; any
// other strided view is not a tile.

func.func @strided_view_not_a_stage(%A: memref<64x64xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %buf = tile.alloc_shared : memref<2x4x64xf32, #gpu.address_space<workgroup>>
    %half = memref.subview %buf[1, 0, 0] [1, 4, 32] [1, 1, 1]
        : memref<2x4x64xf32, #gpu.address_space<workgroup>>
          to memref<4x32xf32, strided<[64, 1], offset: 256>, #gpu.address_space<workgroup>>
    // expected-error @+1 {{destination must have the identity (row-major) layout}}
    tile.copy %A[0, 0] to %half[0, 0] sizes [4, 32]
        : memref<64x64xf32> to memref<4x32xf32, strided<[64, 1], offset: 256>, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @global_view_not_a_stage(%A: memref<2x64x64xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared : memref<4x32xf32, #gpu.address_space<workgroup>>
    %v = memref.subview %A[1, 0, 0] [1, 64, 64] [1, 1, 1]
        : memref<2x64x64xf32> to memref<64x64xf32, strided<[64, 1], offset: 4096>>
    // expected-error @+1 {{source must have the identity (row-major) layout}}
    tile.copy %v[0, 0] to %s[0, 0] sizes [4, 32]
        : memref<64x64xf32, strided<[64, 1], offset: 4096>> to memref<4x32xf32, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @mma_layout_rank() {
  tile.kernel blocks(%b) in [1] threads 128 {
    // expected-error @+1 {{mma layout warpsPerBlock must have 2 entries (warps along M and N), got 1}}
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [4]>} : memref<64x64xf32, #tile.fragment>
  }
  return
}

// -----

func.func @mma_layout_shape() {
  tile.kernel blocks(%b) in [1] threads 128 {
    // expected-error @+1 {{cannot hold this fragment: an mma layout with warpsPerBlock = [2, 2] needs a 2-d tile whose rows are a multiple of 32 and columns a multiple of 16}}
    %c = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [2, 2]>} : memref<48x64xf32, #tile.fragment>
  }
  return
}

// -----

func.func @slice_parent() {
  tile.kernel blocks(%b) in [1] threads 128 {
    // expected-error @+1 {{slice layout parent must be a #tile.blocked or #tile.mma layout, got 3 : i64}}
    %c = tile.alloc_fragment {layout = #tile.slice<dim = 0, parent = 3>} : memref<64xf32, #tile.fragment>
  }
  return
}

// -----

func.func @slice_dim() {
  tile.kernel blocks(%b) in [1] threads 128 {
    // expected-error @+1 {{slice dim 2 is out of range for a rank-2 parent}}
    %c = tile.alloc_fragment {layout = #tile.slice<dim = 2, parent = #tile.mma<warpsPerBlock = [2, 2]>>} : memref<64xf32, #tile.fragment>
  }
  return
}

// -----

func.func @bulk_copy_not_an_argument(%A: memref<128x512xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %v = memref.subview %A[0, 0] [128, 256] [1, 1] : memref<128x512xbf16> to memref<128x256xbf16, strided<[512, 1]>>
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bars = tile.alloc_shared : memref<2xi64, #gpu.address_space<workgroup>>
    // expected-error @+1 {{source must be an argument of the kernel's function}}
    tile.bulk_copy %v[0, 0] to %a, %bars[%c0] : memref<128x256xbf16, strided<[512, 1]>> to memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @bulk_copy_swizzle(%A: memref<128x512xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 4>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bars = tile.alloc_shared : memref<2xi64, #gpu.address_space<workgroup>>
    // expected-error @+1 {{cannot be one TMA box: the tile's swizzle is none of TMA's 32/64/128-byte modes}}
    tile.bulk_copy %A[0, 0] to %a, %bars[%c0] : memref<128x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>
  }
  return
}

// -----

// A linear bulk copy writes its bytes in order: no swizzled tile.
func.func @linear_bulk_copy_swizzled(%A: memref<128x512xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<16x64xbf16, #gpu.address_space<workgroup>>
    %bars = tile.alloc_shared : memref<2xi64, #gpu.address_space<workgroup>>
    // expected-error @+1 {{cannot be linear bulk copies: the tile is swizzled (a bulk copy writes its bytes in order)}}
    tile.bulk_copy %A[0, 0] to %a, %bars[%c0] {linear} : memref<128x512xbf16> to memref<16x64xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>
  }
  return
}

// -----

// Rows of 8 bytes: a 1-D bulk copy moves multiples of 16.
func.func @linear_bulk_copy_short_rows(%A: memref<128x512xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %a = tile.alloc_shared : memref<16x4xbf16, #gpu.address_space<workgroup>>
    %bars = tile.alloc_shared : memref<2xi64, #gpu.address_space<workgroup>>
    // expected-error @+1 {{cannot be linear bulk copies: the box's rows are 8 bytes, not a multiple of 16}}
    tile.bulk_copy %A[0, 0] to %a, %bars[%c0] {linear} : memref<128x512xbf16> to memref<16x4xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>
  }
  return
}

// -----

// A column offset not known to be a multiple of the box's rows.
func.func @linear_bulk_copy_crossing(%A: memref<128x512xbf16>, %col: index) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %a = tile.alloc_shared : memref<16x64xbf16, #gpu.address_space<workgroup>>
    %bars = tile.alloc_shared : memref<2xi64, #gpu.address_space<workgroup>>
    // expected-error @+1 {{cannot be linear bulk copies: the box's rows of 64 may cross the end of a tensor row of 512}}
    tile.bulk_copy %A[0, %col] to %a, %bars[%c0] {linear} : memref<128x512xbf16> to memref<16x64xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>
  }
  return
}

// -----

// Linear bulk copies do not multicast.
func.func @linear_bulk_copy_multicast(%A: memref<128x512xbf16>) {
  tile.kernel blocks(%b) in [2] threads 128 cluster 2 {
    %c0 = arith.constant 0 : index
    %a = tile.alloc_shared : memref<16x64xbf16, #gpu.address_space<workgroup>>
    %bars = tile.alloc_shared : memref<2xi64, #gpu.address_space<workgroup>>
    // expected-error @+1 {{is linear (1-D bulk copies), which do not multicast}}
    tile.bulk_copy %A[0, 0] to %a, %bars[%c0] {linear, multicast = 2 : i64} : memref<128x512xbf16> to memref<16x64xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @bulk_copy_box(%A: memref<512x512xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %a = tile.alloc_shared : memref<512x8xbf16, #gpu.address_space<workgroup>>
    %bars = tile.alloc_shared : memref<2xi64, #gpu.address_space<workgroup>>
    // expected-error @+1 {{cannot be one TMA box: a TMA box extent is at most 256, the box has 512}}
    tile.bulk_copy %A[0, 0] to %a, %bars[%c0] : memref<512x512xbf16> to memref<512x8xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @expect_tx_bytes() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %bars = tile.alloc_shared : memref<2xi64, #gpu.address_space<workgroup>>
    // expected-error @+1 {{expects 0 to 1048575 bytes per phase, got 1048576}}
    tile.mbarrier_arrive_expect_tx %bars[%c0], 1048576 : memref<2xi64, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @barriers_type() {
  tile.kernel blocks(%b) in [1] threads 128 {
    %bars = tile.alloc_shared : memref<2xi32, #gpu.address_space<workgroup>>
    // expected-error @+1 {{1-D shared-memory memref of i64 (mbarriers)}}
    tile.mbarrier_init %bars : memref<2xi32, #gpu.address_space<workgroup>>
  }
  return
}

//===----------------------------------------------------------------------===//
// tile.wgmma_register_a (the lowered form, outside tile.kernel)
//===----------------------------------------------------------------------===//

// -----

func.func @wgmma_register_a_odd_n(%d: !llvm.struct<(f32, f32, f32)>, %a: i32, %desc: i64) {
  // expected-error @+1 {{d holds 3 f32, so N = 6, which is not a wgmma N (a multiple of 8 up to 256)}}
  %r = tile.wgmma_register_a %d, [%a, %a, %a, %a], %desc
      {input_type = bf16, scale_d = true, transpose_b = true} : !llvm.struct<(f32, f32, f32)>
  return
}

// -----

func.func @wgmma_register_a_not_f32(%d: !llvm.struct<(f32, f32, f32, i32)>, %a: i32, %desc: i64) {
  // expected-error @+1 {{d must be a literal LLVM struct of f32 (wgmma's D fragment)}}
  %r = tile.wgmma_register_a %d, [%a, %a, %a, %a], %desc
      {input_type = bf16, scale_d = true, transpose_b = true} : !llvm.struct<(f32, f32, f32, i32)>
  return
}

// -----

func.func @wgmma_register_a_fp8(%d: !llvm.struct<(f32, f32, f32, f32)>, %a: i32, %desc: i64) {
  // expected-error @+1 {{A in registers takes 16-bit inputs (bf16, f16), got 'f8E4M3FN'}}
  %r = tile.wgmma_register_a %d, [%a, %a, %a, %a], %desc
      {input_type = f8E4M3FN, scale_d = true, transpose_b = false} : !llvm.struct<(f32, f32, f32, f32)>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Clusters
//===----------------------------------------------------------------------===//

func.func @cluster_too_large() {
  // expected-error @+1 {{cluster must be 2 to 8 blocks, got 16}}
  tile.kernel blocks(%b) in [32] threads 128 cluster 16 {
  }
  return
}

// -----

func.func @resident_grid_of_two_dimensions() {
  // expected-error @+1 {{is resident, which needs a 1-D grid (the runtime sizes its one dimension), got 2 dimensions}}
  tile.kernel blocks(%b, %c) in [8, 2] threads 128 resident {
  }
  return
}

// -----

func.func @resident_grid_never_read() {
  // expected-error @+1 {{is resident, so the runtime may launch fewer than its 8 blocks, but never reads how many (tile.num_blocks 0): its work would not be strided over the blocks launched}}
  tile.kernel blocks(%b) in [8] threads 128 resident {
  }
  return
}

// -----

func.func @resident_persistent_mega_kernel() {
  // expected-error @+1 {{is a persistent mega-kernel, whose grid its schedule fixes; it cannot be resident}}
  tile.kernel blocks(%b) in [8] threads 128 resident attributes {tile.persistent} {
  }
  return
}

// -----

func.func @num_blocks_past_the_grid() {
  tile.kernel blocks(%b, %c) in [8, 2] threads 128 {
    // expected-error @+1 {{asks for grid dimension 2 of a 2-D grid}}
    %n = tile.num_blocks 2
  }
  return
}

// -----

func.func @num_blocks_outside_a_kernel() {
  // expected-error @+1 {{'tile.num_blocks' op}}
  %n = tile.num_blocks 0
  return
}

// -----

func.func @cluster_grid_not_multiple() {
  // expected-error @+1 {{clusters of 2 blocks along the first grid dimension need it to be a multiple of 2, got 3}}
  tile.kernel blocks(%b, %c) in [3, 2] threads 128 cluster 2 {
  }
  return
}

// -----

func.func @cluster_sync_without_cluster() {
  tile.kernel blocks(%b) in [2] threads 128 {
    // expected-error @+1 {{synchronises a cluster, but its kernel has none}}
    tile.cluster_sync
  }
  return
}

// -----

func.func @arrive_other_cluster() {
  tile.kernel blocks(%b) in [4] threads 128 cluster 2 {
    %c0 = arith.constant 0 : index
    %bars = tile.alloc_shared : memref<2xi64, #gpu.address_space<workgroup>>
    // expected-error @+1 {{arrives on the barriers of a cluster of 4 blocks, but its kernel's cluster is 2}}
    tile.mbarrier_arrive %bars[%c0] {cluster = 4 : i64} : memref<2xi64, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @multicast_offsets_differ(%A: memref<512x512xbf16>) {
  tile.kernel blocks(%b) in [4] threads 128 cluster 2 {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %row = arith.muli %b, %c128 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bars = tile.alloc_shared : memref<2xi64, #gpu.address_space<workgroup>>
    // expected-error @+1 {{multicasts a box whose offsets differ between the blocks of a cluster of 2}}
    tile.bulk_copy %A[%row, 0] to %a, %bars[%c0] {multicast = 2 : i64} : memref<512x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @multicast_run_unevenly(%A: memref<512x512xbf16>) {
  tile.kernel blocks(%b) in [4] threads 128 cluster 2 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %first = arith.cmpi eq, %b, %c0 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bars = tile.alloc_shared : memref<2xi64, #gpu.address_space<workgroup>>
    scf.if %first {
      // expected-error @+1 {{multicasts, but not every block of its cluster runs it as often}}
      tile.bulk_copy %A[0, 0] to %a, %bars[%c0] {multicast = 2 : i64} : memref<512x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>
    }
  }
  return
}

// -----

func.func @multicast_without_cluster(%A: memref<512x512xbf16>) {
  tile.kernel blocks(%b) in [4] threads 128 {
    %c0 = arith.constant 0 : index
    %a = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bars = tile.alloc_shared : memref<2xi64, #gpu.address_space<workgroup>>
    // expected-error @+1 {{multicasts to 2 blocks, but its kernel's cluster is 1}}
    tile.bulk_copy %A[0, 0] to %a, %bars[%c0] {multicast = 2 : i64} : memref<512x512xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>
  }
  return
}

// -----

//===----------------------------------------------------------------------===//
// tile.block_atomic_add
//===----------------------------------------------------------------------===//

func.func @block_atomic_add_shared_counter() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %c1 = arith.constant 1 : i32
    %c = tile.alloc_shared : memref<4xi32, #gpu.address_space<workgroup>>
    %s = tile.alloc_shared : memref<1xi32, #gpu.address_space<workgroup>>
    // expected-error @+1 {{'tile.block_atomic_add' op destination must be global, got shared}}
    %old = tile.block_atomic_add %c1 to %c[%b] via %s
        : i32, memref<4xi32, #gpu.address_space<workgroup>>, memref<1xi32, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @block_atomic_add_float(%counts: memref<8xf32>) {
  tile.kernel blocks(%b) in [8] threads 32 {
    %c1 = arith.constant 1 : i32
    %s = tile.alloc_shared : memref<1xi32, #gpu.address_space<workgroup>>
    // expected-error @+1 {{'tile.block_atomic_add' op adds to i32 or i64 counters, got 'f32'}}
    %old = tile.block_atomic_add %c1 to %counts[%b] via %s
        : i32, memref<8xf32>, memref<1xi32, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @block_atomic_add_indices(%counts: memref<8x2xi32>) {
  tile.kernel blocks(%b) in [8] threads 32 {
    %c1 = arith.constant 1 : i32
    %s = tile.alloc_shared : memref<1xi32, #gpu.address_space<workgroup>>
    // expected-error @+1 {{'tile.block_atomic_add' op expects 2 indices for the destination, got 1}}
    %old = tile.block_atomic_add %c1 to %counts[%b] via %s
        : i32, memref<8x2xi32>, memref<1xi32, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @block_atomic_add_scratch(%counts: memref<8xi32>) {
  tile.kernel blocks(%b) in [8] threads 32 {
    %c1 = arith.constant 1 : i32
    %s = tile.alloc_shared : memref<2xi32, #gpu.address_space<workgroup>>
    // expected-error @+1 {{'tile.block_atomic_add' op scratch must be one shared 'i32' word, got 'memref<2xi32, #gpu.address_space<workgroup>>'}}
    %old = tile.block_atomic_add %c1 to %counts[%b] via %s
        : i32, memref<8xi32>, memref<2xi32, #gpu.address_space<workgroup>>
  }
  return
}

// -----

func.func @block_atomic_add_in_parallel(%counts: memref<8xi32>) {
  tile.kernel blocks(%b) in [8] threads 32 {
    %c1 = arith.constant 1 : i32
    %s = tile.alloc_shared : memref<1xi32, #gpu.address_space<workgroup>>
    tile.parallel (%i) in [32] {
      // expected-error @+1 {{'tile.block_atomic_add' op must be reached by every thread of the block, not inside tile.parallel}}
      %old = tile.block_atomic_add %c1 to %counts[%b] via %s
          : i32, memref<8xi32>, memref<1xi32, #gpu.address_space<workgroup>>
    }
  }
  return
}
