// RUN: tilemega-opt %s | tilemega-opt | FileCheck %s

// Every tile op and attribute in its custom syntax, printed back unchanged.

// CHECK-LABEL: func.func @kernel_grids
// CHECK:         tile.kernel blocks(%{{.*}}) in [8] threads 32 {
// CHECK:         tile.kernel blocks(%{{.*}}, %{{.*}}, %{{.*}}) in [2, 3, 4] threads 1024 attributes {foo} {
// CHECK:         tile.kernel blocks(%{{.*}}) in [132] threads 384 cluster 4 resident {
// CHECK-NEXT:      tile.num_blocks 0
// CHECK:         tile.kernel blocks(%{{.*}}) in [16] threads 128 resident {
// CHECK-NEXT:      tile.num_blocks 0
func.func @kernel_grids() {
  tile.kernel blocks(%bx) in [8] threads 32 {
  }
  tile.kernel blocks(%bx, %by, %bz) in [2, 3, 4] threads 1024 attributes {foo} {
  }
  tile.kernel blocks(%b) in [132] threads 384 cluster 4 resident {
    %n = tile.num_blocks 0
  }
  tile.kernel blocks(%b) in [16] threads 128 resident {
    %n = tile.num_blocks 0
  }
  return
}

// CHECK-LABEL: func.func @alloc
// CHECK:         tile.alloc_shared : memref<64x32xf16, #gpu.address_space<workgroup>>
// CHECK:         tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<128x64xf16, #gpu.address_space<workgroup>>
// CHECK:         tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3, columns = 64>} : memref<64x256xf16, #gpu.address_space<workgroup>>
// CHECK:         tile.alloc_fragment : memref<64x128xf32, #tile.fragment>
// CHECK:         tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerBlock = [4, 1], order = [1, 0]>} : memref<64x128xf32, #tile.fragment>
func.func @alloc() {
  tile.kernel blocks(%bx) in [1] threads 128 {
    %s = tile.alloc_shared : memref<64x32xf16, #gpu.address_space<workgroup>>
    %sw = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>}
        : memref<128x64xf16, #gpu.address_space<workgroup>>
    %cb = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3, columns = 64>}
        : memref<64x256xf16, #gpu.address_space<workgroup>>
    %f = tile.alloc_fragment : memref<64x128xf32, #tile.fragment>
    %fl = tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1, 4],
        threadsPerWarp = [1, 32], warpsPerBlock = [4, 1], order = [1, 0]>}
        : memref<64x128xf32, #tile.fragment>
  }
  return
}

// CHECK-LABEL: func.func @copy
// CHECK-SAME:    (%[[A:.*]]: memref<256x256xf32>, %[[B:.*]]: memref<256x256xf16>)
// CHECK:         tile.kernel blocks(%[[BX:.*]], %[[BY:.*]]) in
// CHECK:         tile.copy %[[A]][64, 128] to %[[S:.*]][0, 0] sizes [64, 128] : memref<256x256xf32> to memref<64x128xf32, #gpu.address_space<workgroup>>
// CHECK:         tile.copy %[[A]][%[[BX]], %[[BY]]] to %[[S]][0, 0] sizes [64, 128] : memref<256x256xf32> to memref<64x128xf32, #gpu.address_space<workgroup>>
// CHECK:         tile.copy %[[S]][0, 0] to %[[F:.*]][0, 0] sizes [64, 128] : memref<64x128xf32, #gpu.address_space<workgroup>> to memref<64x128xf32, #tile.fragment>
// CHECK:         tile.copy %[[F]][0, 0] to %[[B]][%[[BX]], 0] sizes [64, 128] : memref<64x128xf32, #tile.fragment> to memref<256x256xf16>
func.func @copy(%A: memref<256x256xf32>, %B: memref<256x256xf16>) {
  tile.kernel blocks(%bx, %by) in [4, 2] threads 128 {
    %s = tile.alloc_shared : memref<64x128xf32, #gpu.address_space<workgroup>>
    %f = tile.alloc_fragment : memref<64x128xf32, #tile.fragment>
    tile.copy %A[64, 128] to %s[0, 0] sizes [64, 128]
        : memref<256x256xf32> to memref<64x128xf32, #gpu.address_space<workgroup>>
    tile.copy %A[%bx, %by] to %s[0, 0] sizes [64, 128]
        : memref<256x256xf32> to memref<64x128xf32, #gpu.address_space<workgroup>>
    tile.copy %s[0, 0] to %f[0, 0] sizes [64, 128]
        : memref<64x128xf32, #gpu.address_space<workgroup>> to memref<64x128xf32, #tile.fragment>
    // Element conversion f32 -> f16 on the way out.
    tile.copy %f[0, 0] to %B[%bx, 0] sizes [64, 128]
        : memref<64x128xf32, #tile.fragment> to memref<256x256xf16>
  }
  return
}

// CHECK-LABEL: func.func @atomic
// CHECK:         tile.atomic add %{{.*}} to %{{.*}}[%{{.*}}, 0] : memref<64x64xf32, #tile.fragment> to memref<256x256xf32>
// CHECK:         tile.atomic max %{{.*}} to %{{.*}}[64, 64] : memref<64x64xf32, #gpu.address_space<workgroup>> to memref<256x256xf32>
func.func @atomic(%C: memref<256x256xf32>) {
  tile.kernel blocks(%bx) in [4] threads 128 {
    %f = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    %s = tile.alloc_shared : memref<64x64xf32, #gpu.address_space<workgroup>>
    tile.atomic add %f to %C[%bx, 0] : memref<64x64xf32, #tile.fragment> to memref<256x256xf32>
    tile.atomic max %s to %C[64, 64] : memref<64x64xf32, #gpu.address_space<workgroup>> to memref<256x256xf32>
  }
  return
}

// CHECK-LABEL: func.func @block_atomic_add
// CHECK:         %{{.*}} = tile.block_atomic_add %{{.*}} to %{{.*}}[%{{.*}}] via %{{.*}} : i32, memref<8xi32>, memref<1xi32, #gpu.address_space<workgroup>>
func.func @block_atomic_add(%counts: memref<8xi32>) {
  tile.kernel blocks(%bx) in [8] threads 128 {
    %c1 = arith.constant 1 : i32
    %s = tile.alloc_shared : memref<1xi32, #gpu.address_space<workgroup>>
    %old = tile.block_atomic_add %c1 to %counts[%bx] via %s
        : i32, memref<8xi32>, memref<1xi32, #gpu.address_space<workgroup>>
  }
  return
}

// CHECK-LABEL: func.func @gemm
// CHECK:         tile.gemm %[[A:.*]], %[[B:.*]], %[[C:.*]] : memref<64x32xf16, #gpu.address_space<workgroup>>, memref<32x64xf16, #gpu.address_space<workgroup>>, memref<64x64xf32, #tile.fragment>
// CHECK:         tile.gemm %[[AT:.*]], %[[BT:.*]], %[[C]] {clear_accum, transpose_a, transpose_b} : memref<32x64xf16, #gpu.address_space<workgroup>>, memref<64x32xf16, #tile.fragment>, memref<64x64xf32, #tile.fragment>
func.func @gemm() {
  tile.kernel blocks(%bx) in [1] threads 128 {
    %a = tile.alloc_shared : memref<64x32xf16, #gpu.address_space<workgroup>>
    %b = tile.alloc_shared : memref<32x64xf16, #gpu.address_space<workgroup>>
    %at = tile.alloc_shared : memref<32x64xf16, #gpu.address_space<workgroup>>
    %bt = tile.alloc_fragment : memref<64x32xf16, #tile.fragment>
    %c = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    tile.gemm %a, %b, %c
        : memref<64x32xf16, #gpu.address_space<workgroup>>,
          memref<32x64xf16, #gpu.address_space<workgroup>>,
          memref<64x64xf32, #tile.fragment>
    tile.gemm %at, %bt, %c {transpose_a, transpose_b, clear_accum}
        : memref<32x64xf16, #gpu.address_space<workgroup>>,
          memref<64x32xf16, #tile.fragment>,
          memref<64x64xf32, #tile.fragment>
  }
  return
}

// CHECK-LABEL: func.func @reduce
// CHECK:         tile.reduce sum %[[S:.*]] dim 1 into %[[D:.*]] : memref<64x128xf32, #tile.fragment> into memref<64xf32, #tile.fragment>
// CHECK:         tile.reduce max %[[S]] dim 1 into %[[D]] {clear} : memref<64x128xf32, #tile.fragment> into memref<64xf32, #tile.fragment>
// CHECK:         tile.reduce min %[[S]] dim 0 into %{{.*}} : memref<64x128xf32, #tile.fragment> into memref<128xf32, #gpu.address_space<workgroup>>
// CHECK:         tile.reduce absmax %{{.*}} dim 0 into %{{.*}} {clear} : memref<128xf32, #gpu.address_space<workgroup>> into memref<1xf32, #tile.fragment>
func.func @reduce() {
  tile.kernel blocks(%bx) in [1] threads 128 {
    %src = tile.alloc_fragment : memref<64x128xf32, #tile.fragment>
    %rows = tile.alloc_fragment : memref<64xf32, #tile.fragment>
    %cols = tile.alloc_shared : memref<128xf32, #gpu.address_space<workgroup>>
    %all = tile.alloc_fragment : memref<1xf32, #tile.fragment>
    tile.reduce sum %src dim 1 into %rows
        : memref<64x128xf32, #tile.fragment> into memref<64xf32, #tile.fragment>
    tile.reduce max %src dim 1 into %rows {clear}
        : memref<64x128xf32, #tile.fragment> into memref<64xf32, #tile.fragment>
    tile.reduce min %src dim 0 into %cols
        : memref<64x128xf32, #tile.fragment> into memref<128xf32, #gpu.address_space<workgroup>>
    tile.reduce absmax %cols dim 0 into %all {clear}
        : memref<128xf32, #gpu.address_space<workgroup>> into memref<1xf32, #tile.fragment>
  }
  return
}

// CHECK-LABEL: func.func @fill_clear
// CHECK:         tile.fill %{{.*}}, %{{.*}} : memref<64xf32, #tile.fragment>, f32
// CHECK:         tile.fill %{{.*}}, %{{.*}} : memref<32x32xi32, #gpu.address_space<workgroup>>, i32
// CHECK:         tile.clear %{{.*}} : memref<64xf32, #tile.fragment>
// CHECK:         tile.clear %{{.*}} : memref<32x32xi32, #gpu.address_space<workgroup>>
func.func @fill_clear(%v: f32) {
  tile.kernel blocks(%bx) in [1] threads 64 {
    %c7 = arith.constant 7 : i32
    %f = tile.alloc_fragment : memref<64xf32, #tile.fragment>
    %s = tile.alloc_shared : memref<32x32xi32, #gpu.address_space<workgroup>>
    tile.fill %f, %v : memref<64xf32, #tile.fragment>, f32
    tile.fill %s, %c7 : memref<32x32xi32, #gpu.address_space<workgroup>>, i32
    tile.clear %f : memref<64xf32, #tile.fragment>
    tile.clear %s : memref<32x32xi32, #gpu.address_space<workgroup>>
  }
  return
}

// CHECK-LABEL: func.func @parallel
// CHECK:         tile.parallel (%[[I:.*]], %[[J:.*]]) in [64, 128] {
// CHECK:           memref.load %{{.*}}[%[[I]], %[[J]]] : memref<64x128xf32, #tile.fragment>
// CHECK:           memref.store %{{.*}}, %{{.*}}[%[[I]], %[[J]]] : memref<64x128xf32, #tile.fragment>
// CHECK:         tile.parallel (%{{.*}}) in [256] attributes {layout = #tile.blocked<sizePerThread = [2], threadsPerWarp = [32], warpsPerBlock = [4], order = [0]>} {
func.func @parallel(%G: memref<256xf32>) {
  tile.kernel blocks(%bx) in [1] threads 128 {
    %f = tile.alloc_fragment : memref<64x128xf32, #tile.fragment>
    tile.parallel (%i, %j) in [64, 128] {
      %x = memref.load %f[%i, %j] : memref<64x128xf32, #tile.fragment>
      %y = arith.addf %x, %x : f32
      memref.store %y, %f[%i, %j] : memref<64x128xf32, #tile.fragment>
    }
    tile.parallel (%i) in [256] attributes {layout = #tile.blocked<sizePerThread = [2],
        threadsPerWarp = [32], warpsPerBlock = [4], order = [0]>} {
      %x = memref.load %G[%i] : memref<256xf32>
      memref.store %x, %G[%i] : memref<256xf32>
    }
  }
  return
}

// CHECK-LABEL: func.func @pipelined
// CHECK:         %[[C0:.*]] = arith.constant 0 : index
// CHECK:         %[[C8:.*]] = arith.constant 8 : index
// CHECK:         %[[C1:.*]] = arith.constant 1 : index
// CHECK:         tile.pipelined %[[K:.*]] = %[[C0]] to %[[C8]] step %[[C1]] num_stages 3 {
// CHECK:           tile.copy %{{.*}}[0, %[[K]]] to
func.func @pipelined(%A: memref<64x256xf16>) {
  tile.kernel blocks(%bx) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c1 = arith.constant 1 : index
    %s = tile.alloc_shared : memref<64x32xf16, #gpu.address_space<workgroup>>
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 3 {
      tile.copy %A[0, %k] to %s[0, 0] sizes [64, 32]
          : memref<64x256xf16> to memref<64x32xf16, #gpu.address_space<workgroup>>
    }
  }
  return
}

// CHECK-LABEL: func.func @pipelined_wgmma_in_flight
// CHECK:         tile.pipelined %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} num_stages 3 wgmma_in_flight {
func.func @pipelined_wgmma_in_flight(%A: memref<64x256xf16>) {
  tile.kernel blocks(%bx) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c1 = arith.constant 1 : index
    %s = tile.alloc_shared : memref<64x32xf16, #gpu.address_space<workgroup>>
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 3 wgmma_in_flight {
      tile.copy %A[0, %k] to %s[0, 0] sizes [64, 32]
          : memref<64x256xf16> to memref<64x32xf16, #gpu.address_space<workgroup>>
    }
  }
  return
}

// CHECK-LABEL: func.func @async_copy
// CHECK:         tile.copy async %{{.*}}[0, %{{.*}}] to %{{.*}}[0, 0] sizes [64, 32] : memref<64x256xf16> to memref<64x32xf16, #gpu.address_space<workgroup>>
// CHECK-NEXT:    tile.async_commit
// CHECK-NEXT:    tile.async_wait pending 0
// CHECK:         tile.copy async %{{.*}}[0, %{{.*}}] to %[[STAGE:.*]][0, 0] sizes [64, 32] : memref<64x256xf16> to memref<64x32xf16, strided<[32, 1], offset: ?>, #gpu.address_space<workgroup>>
// CHECK-NEXT:    tile.async_commit
// CHECK-NEXT:    tile.async_wait pending 2
// CHECK:         tile.copy %[[STAGE]][0, 0] to %{{.*}}[0, 0] sizes [64, 32] : memref<64x32xf16, strided<[32, 1], offset: ?>, #gpu.address_space<workgroup>> to memref<64x32xf32, #tile.fragment>
func.func @async_copy(%A: memref<64x256xf16>, %k: index, %stage: index) {
  tile.kernel blocks(%bx) in [1] threads 128 {
    %s = tile.alloc_shared : memref<64x32xf16, #gpu.address_space<workgroup>>
    tile.copy async %A[0, %k] to %s[0, 0] sizes [64, 32]
        : memref<64x256xf16> to memref<64x32xf16, #gpu.address_space<workgroup>>
    tile.async_commit
    tile.async_wait pending 0
    // One stage of a three-stage tile.
    %buf = tile.alloc_shared : memref<3x64x32xf16, #gpu.address_space<workgroup>>
    %st = memref.subview %buf[%stage, 0, 0] [1, 64, 32] [1, 1, 1]
        : memref<3x64x32xf16, #gpu.address_space<workgroup>>
          to memref<64x32xf16, strided<[32, 1], offset: ?>, #gpu.address_space<workgroup>>
    tile.copy async %A[0, %k] to %st[0, 0] sizes [64, 32]
        : memref<64x256xf16> to memref<64x32xf16, strided<[32, 1], offset: ?>, #gpu.address_space<workgroup>>
    tile.async_commit
    tile.async_wait pending 2
    %f = tile.alloc_fragment : memref<64x32xf32, #tile.fragment>
    tile.copy %st[0, 0] to %f[0, 0] sizes [64, 32]
        : memref<64x32xf16, strided<[32, 1], offset: ?>, #gpu.address_space<workgroup>> to memref<64x32xf32, #tile.fragment>
  }
  return
}

// CHECK-LABEL: func.func @bulk_copies
// CHECK:         tile.mbarrier_init %[[BARS:.*]] : memref<3xi64, #gpu.address_space<workgroup>>
// CHECK:         tile.mbarrier_arrive_expect_tx %[[BARS]][%{{.*}}], 16384 : memref<3xi64, #gpu.address_space<workgroup>>
// CHECK:         tile.bulk_copy %{{.*}}[0, %{{.*}}] to %{{.*}}, %[[BARS]][%{{.*}}] : memref<128x256xbf16> to memref<128x64xbf16, strided<[64, 1], offset: ?>, #gpu.address_space<workgroup>>, memref<3xi64, #gpu.address_space<workgroup>>
// CHECK:         tile.mbarrier_wait %[[BARS]][%{{.*}}], %{{.*}} : memref<3xi64, #gpu.address_space<workgroup>>
func.func @bulk_copies(%A: memref<128x256xbf16>, %k: index, %stage: index, %parity: index) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %bars = tile.alloc_shared : memref<3xi64, #gpu.address_space<workgroup>>
    tile.mbarrier_init %bars : memref<3xi64, #gpu.address_space<workgroup>>
    %buf = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>} : memref<3x128x64xbf16, #gpu.address_space<workgroup>>
    %st = memref.subview %buf[%stage, 0, 0] [1, 128, 64] [1, 1, 1]
        : memref<3x128x64xbf16, #gpu.address_space<workgroup>>
          to memref<128x64xbf16, strided<[64, 1], offset: ?>, #gpu.address_space<workgroup>>
    tile.mbarrier_arrive_expect_tx %bars[%stage], 16384 : memref<3xi64, #gpu.address_space<workgroup>>
    tile.bulk_copy %A[0, %k] to %st, %bars[%stage]
        : memref<128x256xbf16> to memref<128x64xbf16, strided<[64, 1], offset: ?>, #gpu.address_space<workgroup>>, memref<3xi64, #gpu.address_space<workgroup>>
    tile.mbarrier_wait %bars[%stage], %parity : memref<3xi64, #gpu.address_space<workgroup>>
  }
  return
}

// CHECK-LABEL: func.func @wgmma_register_a
// CHECK:         tile.wgmma_register_a %{{.*}}, [%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}], %{{.*}} {input_type = bf16, scale_d = true, transpose_b = false} : !llvm.struct<(f32, f32, f32, f32)>
func.func @wgmma_register_a(%d: !llvm.struct<(f32, f32, f32, f32)>, %a: i32, %desc: i64) {
  %r = tile.wgmma_register_a %d, [%a, %a, %a, %a], %desc
      {input_type = bf16, scale_d = true, transpose_b = false} : !llvm.struct<(f32, f32, f32, f32)>
  return
}

// CHECK-LABEL: func.func @wgmma_fence_registers
// CHECK:         %{{.*}}:2 = tile.wgmma_fence_registers %{{.*}}, %{{.*}}
func.func @wgmma_fence_registers(%a: i32, %b: i32) -> (i32, i32) {
  %r:2 = tile.wgmma_fence_registers %a, %b
  return %r#0, %r#1 : i32, i32
}
