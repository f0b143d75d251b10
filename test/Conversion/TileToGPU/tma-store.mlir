// RUN: tilemega-opt %s -convert-tile-to-gpu="tma=true" -split-input-file | FileCheck %s
// RUN: not tilemega-opt %s -convert-tile-to-gpu -split-input-file 2>&1 | FileCheck %s --check-prefix=OFF

// tma_store: the threads' write of the 128 x 128 bf16 tile (128-byte
// swizzle in 64-column blocks) is fenced for the async proxy before the
// barrier that hands it over; thread 0 stores it as two boxes of 128 x 64
// through C's tensor map (the second 64 columns on and 8192 elements into
// the tile), commits the bulk group and waits until the tile was read.

// CHECK:       tensor_maps = [{box = array<i64: 128, 64>, param = 1 : i64, swizzle_bytes = 128 : i64}]
// CHECK-LABEL: gpu.func @tma_store(
// CHECK-SAME:    %{{.*}}: memref<128x128xf32>, %{{.*}}: memref<1000x1000xbf16>, %[[MAP:.*]]: !llvm.ptr)
// CHECK:         nvvm.fence.proxy
// CHECK-NEXT:    gpu.barrier
// CHECK:         scf.if
// CHECK:           nvvm.cp.async.bulk.tensor.global.shared.cta %[[MAP]], %{{.*}}, box[%{{.*}}, %{{.*}}]
// CHECK:           %[[BLOCK:.*]] = arith.constant 8192 : index
// CHECK:           nvvm.cp.async.bulk.tensor.global.shared.cta %[[MAP]], %{{.*}}, box[%{{.*}}, %{{.*}}]
// CHECK-NEXT:      nvvm.cp.async.bulk.commit.group
// CHECK-NEXT:      nvvm.cp.async.bulk.wait_group 0 {read}

// OFF: error: 'tile.copy' op asks for a TMA store (tma_store), but there is no TMA path here
func.func @tma_store(%A: memref<128x128xf32>, %C: memref<1000x1000xbf16>) {
  tile.kernel blocks(%b) in [8] threads 128 {
    %s = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3, columns = 64>} : memref<128x128xbf16, #gpu.address_space<workgroup>>
    %c128 = arith.constant 128 : index
    %r = arith.muli %b, %c128 : index
    tile.copy %A[0, 0] to %s[0, 0] sizes [128, 128] : memref<128x128xf32> to memref<128x128xbf16, #gpu.address_space<workgroup>>
    tile.copy %s[0, 0] to %C[%r, %r] sizes [128, 128] {tma_store} : memref<128x128xbf16, #gpu.address_space<workgroup>> to memref<1000x1000xbf16>
  }
  return
}
