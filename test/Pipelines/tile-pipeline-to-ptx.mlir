// RUN: tilemega-opt %s --tilemega-tile-to-ptx-pipeline="chip=sm_90a" > %t.mlir
// RUN: FileCheck %s < %t.mlir
// RUN: %extract-ptx %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %ptxas -arch=sm_90a %t.ptx -o %t.cubin
// REQUIRES: ptxas

// Software-pipelined kernels end to end: tile-pipeline turns the K loops into
// cp.async copies into multi-buffered shared tiles with group waits, and the
// PTX assembles. K = 1000 is not a multiple of the 32-wide tiles: the last
// tile's columns past the tensor are zero-filled (a source size operand).

// Three 64x32 f32 stages, 24 KiB; four 64x64 f16 stages, 32 KiB.
// CHECK: tilemega.kernels = [{block = array<i64: 128, 1, 1>, dynamic_shared_bytes = 24576 : i64, grid = array<i64: 4, 1, 1>, name = "row_partials"
// CHECK-SAME: {block = array<i64: 128, 1, 1>, dynamic_shared_bytes = 32768 : i64, grid = array<i64: 2, 1, 1>, name = "row_partials_f16"
// CHECK: gpu.binary @tilemega_kernels

// PTX-LABEL: .entry row_partials(
// PTX:         cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16, {{.*}};
// PTX:         cp.async.commit_group;
// PTX:         cp.async.wait_group 1;
// PTX:         bar.sync 0;
// PTX-LABEL: .entry row_partials_f16(
// PTX:         cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16, {{.*}};
// PTX:         cp.async.commit_group;
// PTX:         cp.async.wait_group 2;
// PTX:         bar.sync 0;

// out[r, j] = sum over k-tiles t of A[r, 32 t + j].
func.func @row_partials(%A: memref<256x1000xf32> {tile.name = "A"},
                        %Out: memref<256x32xf32> {tile.name = "out"}) {
  tile.kernel blocks(%bx) in [4] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %c64 = arith.constant 64 : index
    %ktiles = arith.constant 32 : index
    %row = arith.muli %bx, %c64 : index
    %s = tile.alloc_shared : memref<64x32xf32, #gpu.address_space<workgroup>>
    %f = tile.alloc_fragment : memref<64x32xf32, #tile.fragment>
    %acc = tile.alloc_fragment : memref<64x32xf32, #tile.fragment>
    tile.clear %acc : memref<64x32xf32, #tile.fragment>
    tile.pipelined %k = %c0 to %ktiles step %c1 num_stages 3 {
      %col = arith.muli %k, %c32 : index
      tile.copy %A[%row, %col] to %s[0, 0] sizes [64, 32]
          : memref<256x1000xf32> to memref<64x32xf32, #gpu.address_space<workgroup>>
      tile.copy %s[0, 0] to %f[0, 0] sizes [64, 32]
          : memref<64x32xf32, #gpu.address_space<workgroup>> to memref<64x32xf32, #tile.fragment>
      tile.parallel (%i, %j) in [64, 32] {
        %x = memref.load %f[%i, %j] : memref<64x32xf32, #tile.fragment>
        %y = memref.load %acc[%i, %j] : memref<64x32xf32, #tile.fragment>
        %z = arith.addf %x, %y : f32
        memref.store %z, %acc[%i, %j] : memref<64x32xf32, #tile.fragment>
      }
    }
    tile.copy %acc[0, 0] to %Out[%row, 0] sizes [64, 32]
        : memref<64x32xf32, #tile.fragment> to memref<256x32xf32>
  }
  return
}

func.func @row_partials_f16(%A: memref<128x1000xf16> {tile.name = "A"},
                            %Out: memref<128x64xf32> {tile.name = "out"}) {
  tile.kernel blocks(%bx) in [2] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %ktiles = arith.constant 16 : index
    %row = arith.muli %bx, %c64 : index
    %s = tile.alloc_shared : memref<64x64xf16, #gpu.address_space<workgroup>>
    %f = tile.alloc_fragment : memref<64x64xf16, #tile.fragment>
    %acc = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    tile.clear %acc : memref<64x64xf32, #tile.fragment>
    tile.pipelined %k = %c0 to %ktiles step %c1 num_stages 4 {
      %col = arith.muli %k, %c64 : index
      tile.copy %A[%row, %col] to %s[0, 0] sizes [64, 64]
          : memref<128x1000xf16> to memref<64x64xf16, #gpu.address_space<workgroup>>
      tile.copy %s[0, 0] to %f[0, 0] sizes [64, 64]
          : memref<64x64xf16, #gpu.address_space<workgroup>> to memref<64x64xf16, #tile.fragment>
      tile.parallel (%i, %j) in [64, 64] {
        %x = memref.load %f[%i, %j] : memref<64x64xf16, #tile.fragment>
        %xf = arith.extf %x : f16 to f32
        %y = memref.load %acc[%i, %j] : memref<64x64xf32, #tile.fragment>
        %z = arith.addf %xf, %y : f32
        memref.store %z, %acc[%i, %j] : memref<64x64xf32, #tile.fragment>
      }
    }
    tile.copy %acc[0, 0] to %Out[%row, 0] sizes [64, 64]
        : memref<64x64xf32, #tile.fragment> to memref<128x64xf32>
  }
  return
}
