// RUN: tilemega-opt %s -tile-infer-layouts -convert-tile-to-gpu -split-input-file -verify-diagnostics | FileCheck %s

// Outlining and launch metadata; shared tiles are views of the dynamic shared
// memory at 128-byte aligned offsets (6 bytes of f16, then 128); a fragment
// becomes numel / threads registers per thread.

// CHECK: module attributes {gpu.container_module, tilemega.kernels = [{block = array<i64: 64, 1, 1>, dynamic_shared_bytes = 640 : i64, grid = array<i64: 4, 2, 1>, name = "metadata", params = [{alignment = 16 : i64, dtype = "float32", kind = "tensor", name = "A", shape = array<i64: 64, 64>, strides = array<i64: 64, 1>}, {dtype = "float32", kind = "scalar", name = "arg1"}]}]}
// CHECK: gpu.module @tilemega_kernels
// CHECK-LABEL: gpu.func @metadata(
// CHECK-SAME:    kernel attributes {known_block_size = array<i32: 64, 1, 1>, known_grid_size = array<i32: 4, 2, 1>}
// CHECK:         gpu.block_id x
// CHECK:         gpu.block_id y
// CHECK:         %[[SMEM0:.*]] = gpu.dynamic_shared_memory
// CHECK:         %[[OFF0:.*]] = arith.constant 0 : index
// CHECK:         memref.view %[[SMEM0]][%[[OFF0]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<3xf16, #gpu.address_space<workgroup>>
// CHECK:         %[[SMEM1:.*]] = gpu.dynamic_shared_memory
// CHECK:         %[[OFF1:.*]] = arith.constant 128 : index
// CHECK:         memref.view %[[SMEM1]][%[[OFF1]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<4x32xf32, #gpu.address_space<workgroup>>
// CHECK:         memref.alloca() : memref<4xf32>
// CHECK:         memref.alloca() : memref<8xf16>
func.func @metadata(%A: memref<64x64xf32> {tile.name = "A"}, %alpha: f32) {
  tile.kernel blocks(%bx, %by) in [4, 2] threads 64 {
    %s0 = tile.alloc_shared : memref<3xf16, #gpu.address_space<workgroup>>
    %s1 = tile.alloc_shared : memref<4x32xf32, #gpu.address_space<workgroup>>
    %f0 = tile.alloc_fragment : memref<4x64xf32, #tile.fragment>
    %f1 = tile.alloc_fragment : memref<8x64xf16, #tile.fragment>
  }
  return
}

// -----

// Static offsets inside the tensor: no masking. f32 moves 4 at a time, and
// the shared write is fenced by barriers on both sides.

// CHECK-LABEL: gpu.func @copy_f32_static
// CHECK:         gpu.barrier
// CHECK-NOT:     scf.if
// CHECK:         %[[V:.*]] = vector.load %{{.*}}[%{{.*}}, %{{.*}}]{{.*}} : memref<64x64xf32>, vector<4xf32>
// CHECK-NEXT:    vector.store %[[V]], %{{.*}}[%{{.*}}, %{{.*}}]{{.*}} : memref<4x32xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-NEXT:    gpu.barrier
// CHECK-NEXT:    gpu.return
func.func @copy_f32_static(%A: memref<64x64xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared : memref<4x32xf32, #gpu.address_space<workgroup>>
    tile.copy %A[8, 32] to %s[0, 0] sizes [4, 32]
        : memref<64x64xf32> to memref<4x32xf32, #gpu.address_space<workgroup>>
  }
  return
}

// -----

// A dynamic global offset is masked: loads read zeros outside, stores are
// dropped. f16 moves 8 at a time.

// CHECK-LABEL: gpu.func @copy_f16_dynamic
// CHECK:         %[[IN:.*]] = arith.cmpi ult, %{{.*}}, %{{.*}} : index
// CHECK:         scf.if %[[IN]] -> (vector<8xf16>) {
// CHECK:           vector.load %{{.*}}[%{{.*}}, %{{.*}}]{{.*}} : memref<64x64xf16>, vector<8xf16>
// CHECK:         } else {
// CHECK:           scf.yield %{{.*}} : vector<8xf16>
// CHECK:         }
// CHECK:         %[[OUT:.*]] = arith.cmpi ult, %{{.*}}, %{{.*}} : index
// CHECK:         scf.if %[[OUT]] {
// CHECK-NEXT:      vector.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}]{{.*}} : memref<64x64xf16>, vector<8xf16>
func.func @copy_f16_dynamic(%A: memref<64x64xf16>, %B: memref<64x64xf16>) {
  tile.kernel blocks(%b) in [16] threads 32 {
    %c4 = arith.constant 4 : index
    %row = arith.muli %b, %c4 : index
    %f = tile.alloc_fragment : memref<4x64xf16, #tile.fragment>
    tile.copy %A[%row, 0] to %f[0, 0] sizes [4, 64]
        : memref<64x64xf16> to memref<4x64xf16, #tile.fragment>
    tile.copy %f[0, 0] to %B[%row, 0] sizes [4, 64]
        : memref<4x64xf16, #tile.fragment> to memref<64x64xf16>
  }
  return
}

// -----

// A swizzled shared tile permutes the element offset:
// o ^ ((o >> 3) & (7 << 3)).

// CHECK-LABEL: gpu.func @swizzle
// CHECK:         %[[V:.*]] = vector.load %{{.*}} : memref<64x64xf16>, vector<8xf16>
// CHECK:         %[[SH:.*]] = arith.shrui %[[LIN:.*]], %{{.*}} : index
// CHECK:         arith.constant 56 : index
// CHECK:         %[[BITS:.*]] = arith.andi %[[SH]], %{{.*}} : index
// CHECK:         arith.xori %[[LIN]], %[[BITS]] : index
// CHECK:         vector.store %[[V]], %{{.*}} : memref<4x64xf16, #gpu.address_space<workgroup>>, vector<8xf16>
func.func @swizzle(%A: memref<64x64xf16>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>}
        : memref<4x64xf16, #gpu.address_space<workgroup>>
    tile.copy %A[0, 0] to %s[0, 0] sizes [4, 64]
        : memref<64x64xf16> to memref<4x64xf16, #gpu.address_space<workgroup>>
  }
  return
}

// -----

// A row of 192 elements (not a power of two) spans a multiple of the 64
// elements the XOR's bits (3-5) cover: the XOR permutes the column index
// within its row, and no division by 192 splits the offset back (one per
// element, which spilled registers in a 192-column GEMM epilogue).

// CHECK-LABEL: gpu.func @swizzle_row_of_192
// CHECK:         %[[COL:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// CHECK:         %[[V:.*]] = vector.load %{{.*}}[%[[ROW:.*]], %[[COL]]] {{.*}} : memref<64x192xf16>, vector<8xf16>
// CHECK:         %[[SH:.*]] = arith.shrui %{{.*}}, %{{.*}} : index
// CHECK:         %[[BITS:.*]] = arith.andi %[[SH]], %{{.*}} : index
// CHECK:         %[[SW:.*]] = arith.xori %[[COL]], %[[BITS]] : index
// CHECK-NEXT:    vector.store %[[V]], %{{.*}}[%[[ROW]], %[[SW]]] {{.*}} : memref<4x192xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK-NOT:     arith.divui %{{.*}}, %c192
// CHECK:         gpu.return
func.func @swizzle_row_of_192(%A: memref<64x192xf16>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 4>}
        : memref<4x192xf16, #gpu.address_space<workgroup>>
    tile.copy %A[0, 0] to %s[0, 0] sizes [4, 192]
        : memref<64x192xf16> to memref<4x192xf16, #gpu.address_space<workgroup>>
  }
  return
}

// -----

// With column blocks (columns = 64) the same 192-element rows keep their
// physical order, block then row then column, which TMA and wgmma read: the
// permuted offset is split back into the row-major indices (by 192), not
// XORed in place (which kept whole rows: a 192-column C tile stored by TMA
// came out wrong on the H100).

// CHECK-LABEL: gpu.func @swizzle_row_of_192_in_column_blocks
// CHECK:         arith.divui %{{.*}}, %c64
// CHECK:         arith.remui %{{.*}}, %c64
// CHECK:         arith.muli %{{.*}}, %c256
// CHECK:         arith.remui %{{.*}}, %c192
// CHECK:         arith.divui %{{.*}}, %c192
// CHECK:         vector.store
func.func @swizzle_row_of_192_in_column_blocks(%A: memref<64x192xf16>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3, columns = 64>}
        : memref<4x192xf16, #gpu.address_space<workgroup>>
    tile.copy %A[0, 0] to %s[0, 0] sizes [4, 192]
        : memref<64x192xf16> to memref<4x192xf16, #gpu.address_space<workgroup>>
  }
  return
}

// -----

// CHECK-LABEL: gpu.func @pipelined
// CHECK:         scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:           gpu.barrier
// CHECK:           vector.load %{{.*}} : memref<4x256xf32>, vector<4xf32>
// CHECK:           vector.store
// CHECK:           gpu.barrier
// CHECK:         }
// CHECK-NEXT:    gpu.return
func.func @pipelined(%A: memref<4x256xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %s = tile.alloc_shared : memref<4x32xf32, #gpu.address_space<workgroup>>
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 2 {
      %col = arith.muli %k, %c32 : index
      tile.copy %A[0, %col] to %s[0, 0] sizes [4, 32]
          : memref<4x256xf32> to memref<4x32xf32, #gpu.address_space<workgroup>>
    }
  }
  return
}

// -----

// SIMT gemm: a K loop carrying one accumulator per owned C element (4 here),
// zero-initialised by clear_accum, stored back into the fragment registers.

// CHECK-LABEL: gpu.func @gemm
// CHECK:         %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:         %[[R:.*]]:4 = scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:[a-z0-9_]+]] = %[[ZERO]], {{.*}}) -> (f32, f32, f32, f32) {
// CHECK:           %[[A:.*]] = memref.load %{{.*}}[%{{.*}}, %[[K]]] : memref<4x8xf32, #gpu.address_space<workgroup>>
// CHECK:           %[[B:.*]] = memref.load %{{.*}}[%[[K]], %{{.*}}] : memref<8x32xf32, #gpu.address_space<workgroup>>
// CHECK:           math.fma %[[A]], %[[B]], %[[ACC]] : f32
// CHECK:           scf.yield
// CHECK:         memref.store %[[R]]#0, %{{.*}}[%{{.*}}] : memref<?xf32>
func.func @gemm() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared : memref<4x8xf32, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<8x32xf32, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<4x32xf32, #tile.fragment>
    tile.gemm %a, %bb, %c {clear_accum}
        : memref<4x8xf32, #gpu.address_space<workgroup>>,
          memref<8x32xf32, #gpu.address_space<workgroup>>,
          memref<4x32xf32, #tile.fragment>
  }
  return
}

// -----

// CHECK-LABEL: gpu.func @atomic
// CHECK:         scf.if
// CHECK-NEXT:      memref.atomic_rmw addf %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : (f32, memref<64x64xf32>) -> f32
// CHECK:         memref.atomic_rmw maxs %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : (i32, memref<4x32xi32>) -> i32
func.func @atomic(%C: memref<64x64xf32>, %D: memref<4x32xi32>) {
  tile.kernel blocks(%b) in [16] threads 32 {
    %f = tile.alloc_fragment : memref<4x32xf32, #tile.fragment>
    %i = tile.alloc_shared : memref<4x32xi32, #gpu.address_space<workgroup>>
    tile.atomic add %f to %C[%b, 32] : memref<4x32xf32, #tile.fragment> to memref<64x64xf32>
    tile.atomic max %i to %D[0, 0] : memref<4x32xi32, #gpu.address_space<workgroup>> to memref<4x32xi32>
  }
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 0 has type 'memref<64xf32, #gpu.address_space<workgroup>>': kernel tensors must be global, statically shaped, row-major memrefs of f16, bf16, f32, f64 or i8-i64}}
func.func @shared_argument(%A: memref<64xf32, #gpu.address_space<workgroup>>) {
  tile.kernel blocks(%b) in [1] threads 32 {
  }
  return
}

// -----

func.func @op_beside_kernel(%A: memref<64xf32>) {
  // expected-error @+1 {{'arith.constant' op cannot stand beside a tile.kernel in its function: move it into the kernel body}}
  %c0 = arith.constant 0 : index
  tile.kernel blocks(%b) in [1] threads 32 {
  }
  return
}

// -----

// expected-error @+1 {{'func.func' op holds more than one tile.kernel; put each kernel in a function of its own}}
func.func @two_kernels(%A: memref<64xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
  }
  tile.kernel blocks(%b) in [1] threads 32 {
  }
  return
}

// -----

func.func @reduce_to_scalar() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_fragment : memref<128xf32, #tile.fragment>
    %d = tile.alloc_fragment : memref<1xf32, #tile.fragment>
    // expected-error-re @+1 {{'tile.reduce' op needs a slice of the 1-d layout {{.*}}; reducing a 1-d tile to one value is not supported yet}}
    tile.reduce sum %s dim 0 into %d : memref<128xf32, #tile.fragment> into memref<1xf32, #tile.fragment>
  }
  return
}

// -----

func.func @gemm_fragment_operand() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_fragment : memref<4x32xf32, #tile.fragment>
    %bb = tile.alloc_shared : memref<32x32xf32, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<4x32xf32, #tile.fragment>
    // expected-error @+2 {{'tile.gemm' op reads A from registers (a fragment), which only wgmma's register form multiplies (sm_90a with wgmma, bf16 or f16 into f32, B in shared memory): the wgmma lowering is off; or keep A in shared memory}}
    // expected-error @+1 {{failed to legalize operation 'tile.gemm'}}
    tile.gemm %a, %bb, %c : memref<4x32xf32, #tile.fragment>, memref<32x32xf32, #gpu.address_space<workgroup>>, memref<4x32xf32, #tile.fragment>
  }
  return
}

// -----

func.func @gemm_fragment_b() {
  tile.kernel blocks(%b) in [1] threads 32 {
    %a = tile.alloc_shared : memref<4x32xf32, #gpu.address_space<workgroup>>
    %bb = tile.alloc_fragment : memref<32x32xf32, #tile.fragment>
    %c = tile.alloc_fragment : memref<4x32xf32, #tile.fragment>
    // expected-error @+2 {{'tile.gemm' op reads B from a fragment, which no lowering multiplies: keep B in shared memory}}
    // expected-error @+1 {{failed to legalize operation 'tile.gemm'}}
    tile.gemm %a, %bb, %c : memref<4x32xf32, #gpu.address_space<workgroup>>, memref<32x32xf32, #tile.fragment>, memref<4x32xf32, #tile.fragment>
  }
  return
}
