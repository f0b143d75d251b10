// RUN: tilemega-opt %s -tile-pipeline="tma=true" -split-input-file -verify-diagnostics
// RUN: not tilemega-opt %s -tile-pipeline -split-input-file 2>&1 | FileCheck %s --check-prefix=NOTMA

// A loop that requires TMA (tma = true) and has a copy that cannot be one
// TMA box (rows of 20 f16, 40 bytes) is an error at the loop naming the
// copy and the rule; without the pass's TMA path it is an error too.
// NOTMA: asks for TMA (tma = true), but the pipeline has no TMA path here
func.func @required_but_impossible(%A: memref<64x20xf16>, %F: memref<64x8xf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c8 = arith.constant 8 : index
    %a = tile.alloc_shared : memref<64x8xf16, #gpu.address_space<workgroup>>
    // expected-error @+1 {{asks for TMA (tma = true), but the copy at}}
    tile.pipelined %k = %c0 to %c2 step %c1 num_stages 2 attributes {tma = true} {
      %col = arith.muli %k, %c8 : index
      tile.copy %A[%c0, %col] to %a[0, 0] sizes [64, 8] : memref<64x20xf16> to memref<64x8xf16, #gpu.address_space<workgroup>>
      tile.copy %a[0, 0] to %F[0, 0] sizes [64, 8] : memref<64x8xf16, #gpu.address_space<workgroup>> to memref<64x8xf16>
    }
  }
  return
}
