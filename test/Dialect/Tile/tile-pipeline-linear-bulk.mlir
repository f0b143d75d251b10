// RUN: tilemega-opt %s -tile-pipeline=linear-bulk -split-input-file | FileCheck %s
// RUN: tilemega-opt %s -tile-pipeline -split-input-file | FileCheck %s --check-prefix=OFF
// RUN: tilemega-opt %s -tile-pipeline=linear-bulk -split-input-file -debug-only=tile-pipeline 2>&1 | FileCheck %s --check-prefix=WHY
// RUN: tilemega-opt %s -tile-infer-layouts -tile-pipeline=linear-bulk -convert-tile-to-gpu -split-input-file | FileCheck %s --check-prefix=LOWER

// A persistent mega-kernel's GEMV-like loop with linear-bulk: both copies
// become linear bulk copies on one mbarrier a stage. The weight's
// (tile.early) prologue starts at the prefetch point after the barriers'
// initialisation, without arrivals; the loop's prologue issues the
// activation's copies and arrives for each stage (bytes 0: the linear
// copies expected their own); every refill arrives after its copies; the
// wait is the stage's parity.

// CHECK-LABEL: func.func @gemv
// CHECK-SAME:    (%[[W:.*]]: memref<64x1024xbf16>, %[[X:.*]]: memref<1024xbf16>, %[[F:.*]]: memref<1xi32>)
// CHECK:         %[[WBUF:.*]] = tile.alloc_shared : memref<3x16x128xbf16
// CHECK:         %[[XBUF:.*]] = tile.alloc_shared : memref<3x128xbf16
// CHECK:         %[[BARS:.*]] = tile.alloc_shared : memref<3xi64
// CHECK-NOT:     tile.prefetch_point
// CHECK:         tile.mbarrier_init %[[BARS]]
// CHECK-NOT:     tile.mbarrier_arrive_expect_tx
// CHECK:         tile.bulk_copy %[[W]][%{{.*}}, %{{.*}}] to %{{.*}}, %[[BARS]][%{{.*}}] {linear}
// CHECK-NOT:     tile.mbarrier_arrive_expect_tx
// CHECK:         tile.bulk_copy %[[W]][%{{.*}}, %{{.*}}] to %{{.*}}, %[[BARS]][%{{.*}}] {linear}
// CHECK-NOT:     tile.async_commit
// CHECK:         memref.load %[[F]]
// CHECK:         scf.if
// CHECK-NOT:       tile.mbarrier_init
// CHECK:           gpu.barrier
// CHECK:           tile.bulk_copy %[[X]][%{{.*}}] to %{{.*}}, %[[BARS]][%{{.*}}] {linear}
// CHECK-NEXT:      tile.mbarrier_arrive_expect_tx %[[BARS]][%{{.*}}], 0
// CHECK:           tile.bulk_copy %[[X]][%{{.*}}] to %{{.*}}, %[[BARS]][%{{.*}}] {linear}
// CHECK-NEXT:      tile.mbarrier_arrive_expect_tx %[[BARS]][%{{.*}}], 0
// CHECK-NEXT:      scf.for
// CHECK:             tile.mbarrier_wait %[[BARS]]
// CHECK-NEXT:        gpu.barrier
// CHECK:             scf.if
// CHECK:               tile.bulk_copy %[[W]]{{.*}} {linear}
// CHECK:               tile.bulk_copy %[[X]]{{.*}} {linear}
// CHECK-NEXT:          tile.mbarrier_arrive_expect_tx %[[BARS]][%{{.*}}], 0
// CHECK-NOT:     tile.async_commit
// Lowered: thread 0 initialises the barriers, then the first warp's lanes,
// a row each (16 rows of 256 bytes, from the lane's own, step 32), add a
// row's bytes to its stage's barrier and issue one 1-D bulk copy, or, for
// a row outside the tensor, store zeros and fence them from the async
// proxy; the warp synchronises before (the initialisation) and after (the
// arrival); the loop's prologue arrives once a stage, from thread 0.
// LOWER-LABEL: gpu.func @gemv
// LOWER:         nvvm.mbarrier.init
// LOWER:         nvvm.fence.mbarrier.init
// LOWER:         %[[TID:.*]] = gpu.thread_id x
// LOWER:         arith.cmpi ult, %[[TID]], %c32
// LOWER:           nvvm.bar.warp.sync
// LOWER:         scf.for %{{.*}} = %[[TID]] to %c16{{.*}} step %c32
// LOWER:           scf.if
// LOWER:             nvvm.mbarrier.expect_tx %[[BAR:.*]], %c256_i32 : !llvm.ptr<3>, i32
// LOWER:             nvvm.cp.async.bulk.shared.cluster.global %{{.*}}, %{{.*}}, %[[BAR]], %c256_i32 : !llvm.ptr<7>, <1>
// LOWER:           } else {
// LOWER:             vector.store %{{.*}} : memref<16x128xbf16, {{.*}}>, vector<8xbf16>
// LOWER:             nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// LOWER:         nvvm.bar.warp.sync
// LOWER:         nvvm.mbarrier.arrive
// LOWER:         nvvm.mbarrier.try_wait.parity
// Without the option: cp.async, as before.
// OFF-LABEL: func.func @gemv
// OFF-NOT:     tile.bulk_copy
// OFF:         tile.copy async
// WHY-NOT: cp.async for {{.*}}@gemv
func.func @gemv(%W: memref<64x1024xbf16>, %X: memref<1024xbf16>, %F: memref<1xi32>)
    attributes {tilemega.mega = {workers = 4 : i64}} {
  tile.kernel blocks(%b) in [4] threads 128 attributes {tile.persistent} {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %c128 = arith.constant 128 : index
    %c1024 = arith.constant 1024 : index
    %zero = arith.constant 0 : i32
    %w_s = tile.alloc_shared : memref<16x128xbf16, #gpu.address_space<workgroup>>
    %x_s = tile.alloc_shared : memref<128xbf16, #gpu.address_space<workgroup>>
    %w = tile.alloc_fragment : memref<16x128xbf16, #tile.fragment>
    tile.prefetch_point
    %flag = memref.load %F[%c0] : memref<1xi32>
    %go = arith.cmpi ne, %flag, %zero : i32
    scf.if %go {
      %row = arith.muli %b, %c16 : index
      tile.pipelined %k = %c0 to %c1024 step %c128 num_stages 3 {
        tile.copy %W[%row, %k] to %w_s[0, 0] sizes [16, 128] {tile.early}
            : memref<64x1024xbf16> to memref<16x128xbf16, #gpu.address_space<workgroup>>
        tile.copy %X[%k] to %x_s[0] sizes [128]
            : memref<1024xbf16> to memref<128xbf16, #gpu.address_space<workgroup>>
        tile.copy %w_s[0, 0] to %w[0, 0] sizes [16, 128]
            : memref<16x128xbf16, #gpu.address_space<workgroup>> to memref<16x128xbf16, #tile.fragment>
      }
    }
  }
  return
}

// -----

// A copy whose rows may cross the end of a tensor row (a column offset of
// no known multiple of the box's 128): the loop keeps cp.async, and
// -debug says why.
// CHECK-LABEL: func.func @unaligned
// CHECK-NOT:     tile.bulk_copy
// CHECK:         tile.copy async
// WHY: tile-pipeline: cp.async for {{.*}}: the copy at {{.*}} cannot be linear bulk copies: the box's rows of 128 may cross the end of a tensor row of 1024
func.func @unaligned(%W: memref<64x1024xbf16>, %o: index)
    attributes {tilemega.mega = {workers = 4 : i64}} {
  tile.kernel blocks(%b) in [4] threads 128 attributes {tile.persistent} {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c1 = arith.constant 1 : index
    %w_s = tile.alloc_shared : memref<16x128xbf16, #gpu.address_space<workgroup>>
    %w = tile.alloc_fragment : memref<16x128xbf16, #tile.fragment>
    tile.pipelined %k = %c0 to %c4 step %c1 num_stages 2 {
      %col = arith.addi %o, %k : index
      tile.copy %W[%c0, %col] to %w_s[0, 0] sizes [16, 128]
          : memref<64x1024xbf16> to memref<16x128xbf16, #gpu.address_space<workgroup>>
      tile.copy %w_s[0, 0] to %w[0, 0] sizes [16, 128]
          : memref<16x128xbf16, #gpu.address_space<workgroup>> to memref<16x128xbf16, #tile.fragment>
    }
  }
  return
}
