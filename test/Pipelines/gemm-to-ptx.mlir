// RUN: tilemega-opt %s --tilemega-tile-to-ptx-pipeline="chip=sm_90a" > %t.mlir
// RUN: FileCheck %s < %t.mlir
// RUN: %extract-ptx %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: FileCheck %s --check-prefix=NOLOCAL < %t.ptx
// RUN: %ptxas -v -arch=sm_90a %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// REQUIRES: ptxas

// A tensor-core gemm end to end: 128x128x32 block tiles of a 512x512x512 f16
// product with f32 accumulation, 4 warps (warp tiles of 64x64), the K loop
// software-pipelined 4 stages deep. The accumulator gets the mma layout, the
// shared tiles an ldmatrix swizzle; the gemm becomes ldmatrix + mma.sync
// m16n8k16 and the 128 accumulators per thread stay in registers: no local
// memory, no spills.

// Four stages of 128x32 + 32x128 halves: 64 KiB.
// CHECK: tilemega.kernels = [{block = array<i64: 128, 1, 1>, dynamic_shared_bytes = 65536 : i64, grid = array<i64: 4, 4, 1>, name = "gemm"
// CHECK: gpu.binary @tilemega_kernels

// PTX-LABEL: .entry gemm(
// PTX:         cp.async.cg.shared.global
// PTX:         ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX:         ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// PTX:         mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32

// No local memory anywhere in the module.
// NOLOCAL-NOT: .local

// PTXAS: Compiling entry function 'gemm' for 'sm_90a'
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS: Used {{[0-9]+}} registers
func.func @gemm(%A: memref<512x512xf16> {tile.name = "A"},
                %B: memref<512x512xf16> {tile.name = "B"},
                %C: memref<512x512xf16> {tile.name = "C"}) {
  tile.kernel blocks(%bx, %by) in [4, 4] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %c128 = arith.constant 128 : index
    %ktiles = arith.constant 16 : index
    %row = arith.muli %bx, %c128 : index
    %col = arith.muli %by, %c128 : index
    %a = tile.alloc_shared : memref<128x32xf16, #gpu.address_space<workgroup>>
    %b = tile.alloc_shared : memref<32x128xf16, #gpu.address_space<workgroup>>
    %acc = tile.alloc_fragment : memref<128x128xf32, #tile.fragment>
    tile.clear %acc : memref<128x128xf32, #tile.fragment>
    tile.pipelined %kt = %c0 to %ktiles step %c1 num_stages 4 {
      %k = arith.muli %kt, %c32 : index
      tile.copy %A[%row, %k] to %a[0, 0] sizes [128, 32]
          : memref<512x512xf16> to memref<128x32xf16, #gpu.address_space<workgroup>>
      tile.copy %B[%k, %col] to %b[0, 0] sizes [32, 128]
          : memref<512x512xf16> to memref<32x128xf16, #gpu.address_space<workgroup>>
      tile.gemm %a, %b, %acc
          : memref<128x32xf16, #gpu.address_space<workgroup>>,
            memref<32x128xf16, #gpu.address_space<workgroup>>,
            memref<128x128xf32, #tile.fragment>
    }
    tile.copy %acc[0, 0] to %C[%row, %col] sizes [128, 128]
        : memref<128x128xf32, #tile.fragment> to memref<512x512xf16>
  }
  return
}
