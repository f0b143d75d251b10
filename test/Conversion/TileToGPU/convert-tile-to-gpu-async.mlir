// RUN: tilemega-opt %s -tile-infer-layouts -convert-tile-to-gpu -split-input-file | FileCheck %s

// Async copies: one cp.async (nvgpu.device_async_copy) per chunk a thread
// owns. A dynamic global offset may run past the tensor (K not a multiple of
// the tile): such a chunk reads 0 elements, so cp.async zero-fills it, and
// its source index is clamped to the tensor's start. No barriers around it.
// Commit and wait become the NVVM cp.async group ops.

// CHECK-LABEL: gpu.func @async_f32
// CHECK-SAME:    (%[[A:.*]]: memref<64x1000xf32>
// CHECK-NOT:     gpu.barrier
// CHECK:         %[[VIEW:.*]] = memref.view
// CHECK:         %[[IN:.*]] = arith.cmpi ult, %{{.*}}, %{{.*}} : index
// CHECK:         %[[N:.*]] = arith.select %[[IN]], %{{.*}}, %[[ZERO:.*]] : index
// CHECK-NEXT:    %[[ROW:.*]] = arith.select %[[IN]], %{{.*}}, %[[ZERO]] : index
// CHECK-NEXT:    %[[COL:.*]] = arith.select %[[IN]], %{{.*}}, %[[ZERO]] : index
// CHECK-NEXT:    nvgpu.device_async_copy %[[A]][%[[ROW]], %[[COL]]], %[[VIEW]][%{{.*}}, %{{.*}}], 4, %[[N]] {bypassL1} : memref<64x1000xf32> to memref<4x32xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT:    nvvm.cp.async.commit.group
// CHECK-NEXT:    nvvm.cp.async.wait.group 1
// CHECK-NEXT:    gpu.return
func.func @async_f32(%A: memref<64x1000xf32>, %k: index) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %c32 = arith.constant 32 : index
    %col = arith.muli %k, %c32 : index
    %s = tile.alloc_shared : memref<4x32xf32, #gpu.address_space<workgroup>>
    tile.copy async %A[0, %col] to %s[0, 0] sizes [4, 32]
        : memref<64x1000xf32> to memref<4x32xf32, #gpu.address_space<workgroup>>
    tile.async_commit
    tile.async_wait pending 1
  }
  return
}

// -----

// Statically inside the tensor: no source count. f16 moves 8 (16 bytes).

// CHECK-LABEL: gpu.func @async_static
// CHECK-NOT:     arith.select
// CHECK:         nvgpu.device_async_copy %{{.*}}[%{{.*}}, %{{.*}}], %{{.*}}[%{{.*}}, %{{.*}}], 8 {bypassL1} : memref<64x64xf16> to memref<4x64xf16, #gpu.address_space<workgroup>>
// CHECK-NEXT:    gpu.return
func.func @async_static(%A: memref<64x64xf16>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared : memref<4x64xf16, #gpu.address_space<workgroup>>
    tile.copy async %A[8, 0] to %s[0, 0] sizes [4, 64]
        : memref<64x64xf16> to memref<4x64xf16, #gpu.address_space<workgroup>>
  }
  return
}

// -----

// Rows of 66 floats only allow 8-byte chunks: two per thread, cached in L1
// (bypassL1 is for 16-byte copies only).

// CHECK-LABEL: gpu.func @async_8_bytes
// CHECK-COUNT-2: nvgpu.device_async_copy %{{.*}}, 2, %{{.*}} : memref<64x66xf32> to memref<4x32xf32, #gpu.address_space<workgroup>>
// CHECK-NOT:     nvgpu.device_async_copy
func.func @async_8_bytes(%A: memref<64x66xf32>, %r: index) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared : memref<4x32xf32, #gpu.address_space<workgroup>>
    tile.copy async %A[%r, 0] to %s[0, 0] sizes [4, 32]
        : memref<64x66xf32> to memref<4x32xf32, #gpu.address_space<workgroup>>
  }
  return
}

// -----

// Rows of 33 halves allow only 2-byte chunks, which cp.async cannot move:
// the copy is done synchronously (complete when issued), still without
// barriers.

// CHECK-LABEL: gpu.func @async_narrow
// CHECK-NOT:     nvgpu.device_async_copy
// CHECK-NOT:     gpu.barrier
// CHECK:         memref.load %{{.*}} : memref<64x33xf16>
// CHECK-NEXT:    memref.store %{{.*}} : memref<4x32xf16, #gpu.address_space<workgroup>>
func.func @async_narrow(%A: memref<64x33xf16>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %s = tile.alloc_shared : memref<4x32xf16, #gpu.address_space<workgroup>>
    tile.copy async %A[0, 0] to %s[0, 0] sizes [4, 32]
        : memref<64x33xf16> to memref<4x32xf16, #gpu.address_space<workgroup>>
  }
  return
}

// -----

// A stage of a multi-buffered swizzled tile: the copy writes the subview at
// indices swizzled within the stage (o ^ ((o >> 3) & 56)).

// CHECK-LABEL: gpu.func @async_swizzled_stage
// CHECK:         %[[STAGE:.*]] = memref.subview %{{.*}}[%{{.*}}, 0, 0] [1, 4, 64] [1, 1, 1]
// CHECK:         %[[SH:.*]] = arith.shrui %[[LIN:.*]], %{{.*}} : index
// CHECK:         arith.constant 56 : index
// CHECK:         %[[BITS:.*]] = arith.andi %[[SH]], %{{.*}} : index
// CHECK:         arith.xori %[[LIN]], %[[BITS]] : index
// CHECK:         nvgpu.device_async_copy %{{.*}}, %[[STAGE]][%{{.*}}, %{{.*}}], 8 {bypassL1} : memref<64x256xf16> to memref<4x64xf16, strided<[64, 1], offset: ?>, #gpu.address_space<workgroup>>
func.func @async_swizzled_stage(%A: memref<64x256xf16>, %stage: index) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %buf = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>}
        : memref<2x4x64xf16, #gpu.address_space<workgroup>>
    %st = memref.subview %buf[%stage, 0, 0] [1, 4, 64] [1, 1, 1]
        : memref<2x4x64xf16, #gpu.address_space<workgroup>>
          to memref<4x64xf16, strided<[64, 1], offset: ?>, #gpu.address_space<workgroup>>
    tile.copy async %A[0, 0] to %st[0, 0] sizes [4, 64]
        : memref<64x256xf16> to memref<4x64xf16, strided<[64, 1], offset: ?>, #gpu.address_space<workgroup>>
  }
  return
}

// -----

// A pipelined loop after tile-pipeline: the consumer copy reads the stage
// (vectorised, no barrier of its own), the waits and barriers are the pass's.

// CHECK-LABEL: gpu.func @pipelined_consumer
// CHECK:         scf.for
// CHECK:           nvvm.cp.async.commit.group
// CHECK-NEXT:      nvvm.cp.async.wait.group 0
// CHECK-NEXT:      gpu.barrier
// CHECK:           %[[SI:.*]] = memref.subview
// CHECK:           vector.load %[[SI]][%{{.*}}, %{{.*}}]{{.*}} : memref<4x32xf32, strided<[32, 1], offset: ?>, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-NOT:       gpu.barrier
// CHECK:           memref.store
// CHECK:           gpu.barrier
// CHECK-NEXT:    }
func.func @pipelined_consumer(%A: memref<4x1000xf32>, %i: index) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %buf = tile.alloc_shared : memref<2x4x32xf32, #gpu.address_space<workgroup>>
    %f = tile.alloc_fragment : memref<4x32xf32, #tile.fragment>
    scf.for %k = %c0 to %c2 step %c1 {
      tile.async_commit
      tile.async_wait pending 0
      gpu.barrier
      %st = memref.subview %buf[%k, 0, 0] [1, 4, 32] [1, 1, 1]
          : memref<2x4x32xf32, #gpu.address_space<workgroup>>
            to memref<4x32xf32, strided<[32, 1], offset: ?>, #gpu.address_space<workgroup>>
      tile.copy %st[0, 0] to %f[0, 0] sizes [4, 32]
          : memref<4x32xf32, strided<[32, 1], offset: ?>, #gpu.address_space<workgroup>> to memref<4x32xf32, #tile.fragment>
      gpu.barrier
    }
  }
  return
}
