// RUN: tilemega-opt %s -tile-pipeline -split-input-file -verify-diagnostics | FileCheck %s

// num_stages 1: no prologue; each iteration copies, commits, waits for
// everything (pending 0), and computes between two barriers.

// CHECK-LABEL: func.func @one_stage
// CHECK-SAME:    (%[[A:.*]]: memref<64x256xf32>)
// CHECK:         %[[BUF:.*]] = tile.alloc_shared : memref<1x64x32xf32, #gpu.address_space<workgroup>>
// CHECK-NOT:     tile.alloc_shared
// CHECK-NOT:     tile.async_commit
// CHECK:         scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:      %[[COL:.*]] = arith.muli %[[I]], %{{.*}} : index
// CHECK:           %[[SN:.*]] = memref.subview %[[BUF]][0, 0, 0] [1, 64, 32] [1, 1, 1]
// CHECK-NEXT:      tile.copy async %[[A]][0, %[[COL]]] to %[[SN]][0, 0] sizes [64, 32]
// CHECK-NEXT:      tile.async_commit
// CHECK-NEXT:      tile.async_wait pending 0
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:      %[[SI:.*]] = memref.subview %[[BUF]][0, 0, 0] [1, 64, 32] [1, 1, 1]
// CHECK-NEXT:      tile.copy %[[SI]][0, 0] to %{{.*}}[0, 0] sizes [64, 32]
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:    }
// CHECK-NOT:     tile.pipelined
func.func @one_stage(%A: memref<64x256xf32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c32 = arith.constant 32 : index
    %s = tile.alloc_shared : memref<64x32xf32, #gpu.address_space<workgroup>>
    %f = tile.alloc_fragment : memref<64x32xf32, #tile.fragment>
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 1 {
      %col = arith.muli %k, %c32 : index
      tile.copy %A[0, %col] to %s[0, 0] sizes [64, 32]
          : memref<64x256xf32> to memref<64x32xf32, #gpu.address_space<workgroup>>
      tile.copy %s[0, 0] to %f[0, 0] sizes [64, 32]
          : memref<64x32xf32, #gpu.address_space<workgroup>> to memref<64x32xf32, #tile.fragment>
    }
  }
  return
}

// -----

// num_stages 2 over K = 1000 in tiles of 32 (32 iterations, the last one
// overhanging the tensor: the async copy zero-fills it). One prologue group,
// then copy i + 1 into stage (i + 1) % 2 while stage i % 2 is read.

// CHECK-LABEL: func.func @two_stages
// CHECK-SAME:    (%[[A:.*]]: memref<64x1000xf32>)
// CHECK-DAG:     %[[C32:.*]] = arith.constant 32 : index
// CHECK:         %[[BUF:.*]] = tile.alloc_shared : memref<2x64x32xf32, #gpu.address_space<workgroup>>
// CHECK:         %[[S0:.*]] = memref.subview %[[BUF]][0, 0, 0] [1, 64, 32] [1, 1, 1] : memref<2x64x32xf32, #gpu.address_space<workgroup>> to memref<64x32xf32, strided<[32, 1]>, #gpu.address_space<workgroup>>
// CHECK-NEXT:    tile.copy async %[[A]][0, %{{.*}}] to %[[S0]][0, 0] sizes [64, 32]
// CHECK-NEXT:    tile.async_commit
// CHECK-NEXT:    scf.for %[[I:.*]] = %{{.*}} to %[[C32]] step %{{.*}} {
// CHECK-NEXT:      tile.async_wait pending 0
// CHECK-NEXT:      gpu.barrier
// CHECK:           %[[NEXT:.*]] = arith.addi %[[I]], %{{.*}} : index
// CHECK-NEXT:      %[[MORE:.*]] = arith.cmpi slt, %[[NEXT]], %[[C32]] : index
// CHECK-NEXT:      scf.if %[[MORE]] {
// CHECK:             %[[NS:.*]] = arith.remui %[[NEXT]], %{{.*}} : index
// CHECK:             %[[COL:.*]] = arith.muli %[[NEXT]], %[[C32]] : index
// CHECK-NEXT:        %[[SN:.*]] = memref.subview %[[BUF]][%[[NS]], 0, 0] [1, 64, 32] [1, 1, 1] : memref<2x64x32xf32, #gpu.address_space<workgroup>> to memref<64x32xf32, strided<[32, 1], offset: ?>, #gpu.address_space<workgroup>>
// CHECK-NEXT:        tile.copy async %[[A]][0, %[[COL]]] to %[[SN]][0, 0] sizes [64, 32]
// CHECK-NEXT:      }
// CHECK-NEXT:      tile.async_commit
// CHECK:           %[[IS:.*]] = arith.remui %[[I]], %{{.*}} : index
// CHECK-NEXT:      %[[SI:.*]] = memref.subview %[[BUF]][%[[IS]], 0, 0] [1, 64, 32] [1, 1, 1]
// CHECK-NEXT:      tile.copy %[[SI]][0, 0] to %[[F:.*]][0, 0] sizes [64, 32]
// CHECK-NEXT:      tile.parallel
// CHECK:           }
// CHECK-NEXT:    }
// CHECK-NEXT:    gpu.barrier
func.func @two_stages(%A: memref<64x1000xf32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %s = tile.alloc_shared : memref<64x32xf32, #gpu.address_space<workgroup>>
    %f = tile.alloc_fragment : memref<64x32xf32, #tile.fragment>
    %acc = tile.alloc_fragment : memref<64x32xf32, #tile.fragment>
    tile.pipelined %k = %c0 to %c32 step %c1 num_stages 2 {
      %col = arith.muli %k, %c32 : index
      tile.copy %A[0, %col] to %s[0, 0] sizes [64, 32]
          : memref<64x1000xf32> to memref<64x32xf32, #gpu.address_space<workgroup>>
      tile.copy %s[0, 0] to %f[0, 0] sizes [64, 32]
          : memref<64x32xf32, #gpu.address_space<workgroup>> to memref<64x32xf32, #tile.fragment>
      tile.parallel (%i, %j) in [64, 32] {
        %x = memref.load %f[%i, %j] : memref<64x32xf32, #tile.fragment>
        %y = memref.load %acc[%i, %j] : memref<64x32xf32, #tile.fragment>
        %z = arith.addf %x, %y : f32
        memref.store %z, %acc[%i, %j] : memref<64x32xf32, #tile.fragment>
      }
    }
  }
  return
}

// -----

// num_stages 3: two prologue groups (iterations 0 and 1 into stages 0 and 1);
// each iteration waits until at most 1 group is pending, then one barrier,
// then refills the stage the previous iteration read.

// CHECK-LABEL: func.func @three_stages
// CHECK:         %[[BUF:.*]] = tile.alloc_shared : memref<3x64x32xf32, #gpu.address_space<workgroup>>
// CHECK:         memref.subview %[[BUF]][0, 0, 0] [1, 64, 32] [1, 1, 1]
// CHECK-NEXT:    tile.copy async
// CHECK-NEXT:    tile.async_commit
// CHECK:         memref.subview %[[BUF]][1, 0, 0] [1, 64, 32] [1, 1, 1] : memref<3x64x32xf32, #gpu.address_space<workgroup>> to memref<64x32xf32, strided<[32, 1], offset: 2048>, #gpu.address_space<workgroup>>
// CHECK-NEXT:    tile.copy async
// CHECK-NEXT:    tile.async_commit
// CHECK-NEXT:    scf.for
// CHECK-NEXT:      tile.async_wait pending 1
// CHECK-NEXT:      gpu.barrier
// CHECK:           scf.if
// CHECK:             tile.copy async
// CHECK:           tile.async_commit
// CHECK-NOT:       gpu.barrier
// CHECK:         }
// CHECK-NEXT:    gpu.barrier
func.func @three_stages(%A: memref<64x1000xf32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %s = tile.alloc_shared : memref<64x32xf32, #gpu.address_space<workgroup>>
    %f = tile.alloc_fragment : memref<64x32xf32, #tile.fragment>
    tile.pipelined %k = %c0 to %c32 step %c1 num_stages 3 {
      %col = arith.muli %k, %c32 : index
      tile.copy %A[0, %col] to %s[0, 0] sizes [64, 32]
          : memref<64x1000xf32> to memref<64x32xf32, #gpu.address_space<workgroup>>
      tile.copy %s[0, 0] to %f[0, 0] sizes [64, 32]
          : memref<64x32xf32, #gpu.address_space<workgroup>> to memref<64x32xf32, #tile.fragment>
    }
  }
  return
}

// -----

// num_stages 4 with two producers (A and B tiles of a gemm), dynamic bounds
// and step 2: the trip count is ceildiv(ub - lb, 2), every prologue copy is
// predicated on it, iteration j copies at lb + 2 j, and both tiles share each
// group.

// CHECK-LABEL: func.func @four_stages
// CHECK-SAME:    (%[[A:.*]]: memref<64x1000xf16>, %[[B:.*]]: memref<1000x64xf16>, %[[LB:.*]]: index, %[[UB:.*]]: index)
// CHECK:         %[[ABUF:.*]] = tile.alloc_shared : memref<4x64x32xf16, #gpu.address_space<workgroup>>
// CHECK:         %[[BBUF:.*]] = tile.alloc_shared : memref<4x32x64xf16, #gpu.address_space<workgroup>>
// CHECK:         %[[SPAN:.*]] = arith.subi %[[UB]], %[[LB]] : index
// CHECK-NEXT:    %[[T:.*]] = arith.ceildivsi %[[SPAN]], %{{.*}} : index
// CHECK:         %[[P0:.*]] = arith.cmpi sgt, %[[T]], %{{.*}} : index
// CHECK-NEXT:    scf.if %[[P0]] {
// CHECK-NEXT:      %[[K0:.*]] = arith.muli %[[LB]], %{{.*}} : index
// CHECK-NEXT:      %[[A0:.*]] = memref.subview %[[ABUF]][0, 0, 0] [1, 64, 32] [1, 1, 1]
// CHECK-NEXT:      tile.copy async %[[A]][0, %[[K0]]] to %[[A0]][0, 0] sizes [64, 32]
// CHECK-NEXT:      %[[B0:.*]] = memref.subview %[[BBUF]][0, 0, 0] [1, 32, 64] [1, 1, 1]
// CHECK-NEXT:      tile.copy async %[[B]][%[[K0]], 0] to %[[B0]][0, 0] sizes [32, 64]
// CHECK-NEXT:    }
// CHECK-NEXT:    tile.async_commit
// CHECK:         scf.if
// CHECK:           memref.subview %[[ABUF]][1, 0, 0]
// CHECK:           memref.subview %[[BBUF]][1, 0, 0]
// CHECK:         tile.async_commit
// CHECK:         scf.if
// CHECK:           memref.subview %[[ABUF]][2, 0, 0]
// CHECK:           memref.subview %[[BBUF]][2, 0, 0]
// CHECK:         tile.async_commit
// CHECK-NEXT:    scf.for %[[I:.*]] = %{{.*}} to %[[T]] step %{{.*}} {
// CHECK-NEXT:      tile.async_wait pending 2
// CHECK-NEXT:      gpu.barrier
// CHECK:           %[[NEXT:.*]] = arith.addi %[[I]], %{{.*}} : index
// CHECK-NEXT:      %[[MORE:.*]] = arith.cmpi slt, %[[NEXT]], %[[T]] : index
// CHECK-NEXT:      scf.if %[[MORE]] {
// CHECK-NEXT:        %[[SCALED:.*]] = arith.muli %[[NEXT]], %{{.*}} : index
// CHECK-NEXT:        %[[IV:.*]] = arith.addi %[[LB]], %[[SCALED]] : index
// CHECK:             %[[NS:.*]] = arith.remui %[[NEXT]], %{{.*}} : index
// CHECK-NEXT:        %[[KN:.*]] = arith.muli %[[IV]], %{{.*}} : index
// CHECK-NEXT:        %[[AN:.*]] = memref.subview %[[ABUF]][%[[NS]], 0, 0]
// CHECK-NEXT:        tile.copy async %[[A]][0, %[[KN]]] to %[[AN]][0, 0]
// CHECK-NEXT:        %[[BN:.*]] = memref.subview %[[BBUF]][%[[NS]], 0, 0]
// CHECK-NEXT:        tile.copy async %[[B]][%[[KN]], 0] to %[[BN]][0, 0]
// CHECK-NEXT:      }
// CHECK-NEXT:      tile.async_commit
// CHECK:           %[[IS:.*]] = arith.remui %[[I]], %{{.*}} : index
// CHECK-NEXT:      %[[AI:.*]] = memref.subview %[[ABUF]][%[[IS]], 0, 0]
// CHECK-NEXT:      %[[BI:.*]] = memref.subview %[[BBUF]][%[[IS]], 0, 0]
// CHECK-NEXT:      tile.gemm %[[AI]], %[[BI]], %{{.*}} : memref<64x32xf16, strided<[32, 1], offset: ?>, #gpu.address_space<workgroup>>, memref<32x64xf16, strided<[64, 1], offset: ?>, #gpu.address_space<workgroup>>, memref<64x64xf32, #tile.fragment>
// CHECK-NEXT:    }
// CHECK-NEXT:    gpu.barrier
func.func @four_stages(%A: memref<64x1000xf16>, %B: memref<1000x64xf16>,
                       %lb: index, %ub: index) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c2 = arith.constant 2 : index
    %c16 = arith.constant 16 : index
    %a = tile.alloc_shared : memref<64x32xf16, #gpu.address_space<workgroup>>
    %bs = tile.alloc_shared : memref<32x64xf16, #gpu.address_space<workgroup>>
    %acc = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    tile.pipelined %k = %lb to %ub step %c2 num_stages 4 {
      %kk = arith.muli %k, %c16 : index
      tile.copy %A[0, %kk] to %a[0, 0] sizes [64, 32]
          : memref<64x1000xf16> to memref<64x32xf16, #gpu.address_space<workgroup>>
      tile.copy %B[%kk, 0] to %bs[0, 0] sizes [32, 64]
          : memref<1000x64xf16> to memref<32x64xf16, #gpu.address_space<workgroup>>
      tile.gemm %a, %bs, %acc
          : memref<64x32xf16, #gpu.address_space<workgroup>>,
            memref<32x64xf16, #gpu.address_space<workgroup>>,
            memref<64x64xf32, #tile.fragment>
    }
  }
  return
}

// -----

// A loop of one iteration with num_stages 3: the prologue issues iteration 0
// and, for iteration 1, which does not exist, only commits an empty group;
// the in-loop copy of iteration 2 is predicated off. The swizzle of the tile
// carries over to the multi-buffered one.

// CHECK-LABEL: func.func @single_iteration
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK:         %[[BUF:.*]] = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 2, shift = 3>} : memref<3x64x32xf32, #gpu.address_space<workgroup>>
// CHECK:         %[[S0:.*]] = memref.subview %[[BUF]][0, 0, 0]
// CHECK-NEXT:    tile.copy async %{{.*}} to %[[S0]][0, 0] sizes [64, 32]
// CHECK-NEXT:    tile.async_commit
// CHECK-NEXT:    tile.async_commit
// CHECK-NEXT:    scf.for %[[I:.*]] = %{{.*}} to %[[C1]] step %{{.*}} {
// CHECK-NEXT:      tile.async_wait pending 1
// CHECK-NEXT:      gpu.barrier
// CHECK:           %[[NEXT:.*]] = arith.addi %[[I]], %{{.*}} : index
// CHECK-NEXT:      %[[MORE:.*]] = arith.cmpi slt, %[[NEXT]], %[[C1]] : index
// CHECK-NEXT:      scf.if %[[MORE]] {
// CHECK:             tile.copy async
// CHECK:           }
// CHECK-NEXT:      tile.async_commit
func.func @single_iteration(%A: memref<64x32xf32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %s = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 2, shift = 3>}
        : memref<64x32xf32, #gpu.address_space<workgroup>>
    %f = tile.alloc_fragment : memref<64x32xf32, #tile.fragment>
    tile.pipelined %k = %c0 to %c1 step %c1 num_stages 3 {
      tile.copy %A[0, %k] to %s[0, 0] sizes [64, 32]
          : memref<64x32xf32> to memref<64x32xf32, #gpu.address_space<workgroup>>
      tile.copy %s[0, 0] to %f[0, 0] sizes [64, 32]
          : memref<64x32xf32, #gpu.address_space<workgroup>> to memref<64x32xf32, #tile.fragment>
    }
  }
  return
}

// -----

// Two sibling loops with different stage counts: each is pipelined on its
// own, with its own buffers and wait depth. The third reuses the first's
// tile: each of the two gets buffers of its own and the tile goes away.

// CHECK-LABEL: func.func @siblings
// CHECK-DAG:     %[[BUF1:.*]] = tile.alloc_shared : memref<2x64x32xf32, #gpu.address_space<workgroup>>
// CHECK-DAG:     %[[BUF2:.*]] = tile.alloc_shared : memref<4x64x32xf32, #gpu.address_space<workgroup>>
// CHECK-DAG:     %[[BUF3:.*]] = tile.alloc_shared : memref<3x64x32xf32, #gpu.address_space<workgroup>>
// CHECK-NOT:     tile.alloc_shared
// CHECK:         memref.subview %[[BUF1]][0, 0, 0]
// CHECK:         tile.async_commit
// CHECK-NEXT:    scf.for
// CHECK-NEXT:      tile.async_wait pending 0
// CHECK-NEXT:      gpu.barrier
// CHECK:           memref.subview %[[BUF1]]
// CHECK:         gpu.barrier
// CHECK:         memref.subview %[[BUF2]][2, 0, 0]
// CHECK:         tile.async_commit
// CHECK-NEXT:    scf.for
// CHECK-NEXT:      tile.async_wait pending 2
// CHECK-NEXT:      gpu.barrier
// CHECK:           memref.subview %[[BUF2]]
// CHECK:         gpu.barrier
// CHECK:         memref.subview %[[BUF3]][1, 0, 0]
// CHECK:         tile.async_commit
// CHECK-NEXT:    scf.for
// CHECK-NEXT:      tile.async_wait pending 1
// CHECK-NEXT:      gpu.barrier
// CHECK:           memref.subview %[[BUF3]]
// CHECK:         gpu.barrier
func.func @siblings(%A: memref<64x1000xf32>, %B: memref<64x1000xf32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %s1 = tile.alloc_shared : memref<64x32xf32, #gpu.address_space<workgroup>>
    %s2 = tile.alloc_shared : memref<64x32xf32, #gpu.address_space<workgroup>>
    %f = tile.alloc_fragment : memref<64x32xf32, #tile.fragment>
    tile.pipelined %k = %c0 to %c32 step %c1 num_stages 2 {
      %col = arith.muli %k, %c32 : index
      tile.copy %A[0, %col] to %s1[0, 0] sizes [64, 32]
          : memref<64x1000xf32> to memref<64x32xf32, #gpu.address_space<workgroup>>
      tile.copy %s1[0, 0] to %f[0, 0] sizes [64, 32]
          : memref<64x32xf32, #gpu.address_space<workgroup>> to memref<64x32xf32, #tile.fragment>
    }
    tile.pipelined %k = %c0 to %c32 step %c1 num_stages 4 {
      %col = arith.muli %k, %c32 : index
      tile.copy %B[0, %col] to %s2[0, 0] sizes [64, 32]
          : memref<64x1000xf32> to memref<64x32xf32, #gpu.address_space<workgroup>>
      tile.copy %s2[0, 0] to %f[0, 0] sizes [64, 32]
          : memref<64x32xf32, #gpu.address_space<workgroup>> to memref<64x32xf32, #tile.fragment>
    }
    tile.pipelined %k = %c0 to %c32 step %c1 num_stages 3 {
      %col = arith.muli %k, %c32 : index
      tile.copy %B[0, %col] to %s1[0, 0] sizes [64, 32]
          : memref<64x1000xf32> to memref<64x32xf32, #gpu.address_space<workgroup>>
      tile.copy %s1[0, 0] to %f[0, 0] sizes [64, 32]
          : memref<64x32xf32, #gpu.address_space<workgroup>> to memref<64x32xf32, #tile.fragment>
    }
  }
  return
}

// -----

// Copies that cannot run ahead stay where they are, synchronous, and a loop
// left without producers stays a tile.pipelined: a partial tile (the rest of
// it carries over), a tile read before it is written (that read sees the
// previous iteration), a tile read after the loop, an offset loaded from
// memory in the body.

// CHECK-LABEL: func.func @not_pipelined
// CHECK-NOT:     tile.copy async
// CHECK-NOT:     tile.async_commit
// CHECK-COUNT-4: tile.pipelined
// CHECK-NOT:     scf.for
func.func @not_pipelined(%A: memref<64x1000xf32>, %I: memref<32xindex>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %f = tile.alloc_fragment : memref<64x32xf32, #tile.fragment>
    %half = tile.alloc_shared : memref<64x64xf32, #gpu.address_space<workgroup>>
    tile.pipelined %k = %c0 to %c32 step %c1 num_stages 2 {
      %col = arith.muli %k, %c32 : index
      tile.copy %A[0, %col] to %half[0, 0] sizes [64, 32]
          : memref<64x1000xf32> to memref<64x64xf32, #gpu.address_space<workgroup>>
      tile.copy %half[0, 32] to %f[0, 0] sizes [64, 32]
          : memref<64x64xf32, #gpu.address_space<workgroup>> to memref<64x32xf32, #tile.fragment>
    }
    %carried = tile.alloc_shared : memref<64x32xf32, #gpu.address_space<workgroup>>
    tile.pipelined %k = %c0 to %c32 step %c1 num_stages 2 {
      tile.copy %carried[0, 0] to %f[0, 0] sizes [64, 32]
          : memref<64x32xf32, #gpu.address_space<workgroup>> to memref<64x32xf32, #tile.fragment>
      %col = arith.muli %k, %c32 : index
      tile.copy %A[0, %col] to %carried[0, 0] sizes [64, 32]
          : memref<64x1000xf32> to memref<64x32xf32, #gpu.address_space<workgroup>>
    }
    %last = tile.alloc_shared : memref<64x32xf32, #gpu.address_space<workgroup>>
    tile.pipelined %k = %c0 to %c32 step %c1 num_stages 2 {
      %col = arith.muli %k, %c32 : index
      tile.copy %A[0, %col] to %last[0, 0] sizes [64, 32]
          : memref<64x1000xf32> to memref<64x32xf32, #gpu.address_space<workgroup>>
    }
    tile.copy %last[0, 0] to %f[0, 0] sizes [64, 32]
        : memref<64x32xf32, #gpu.address_space<workgroup>> to memref<64x32xf32, #tile.fragment>
    %gathered = tile.alloc_shared : memref<64x32xf32, #gpu.address_space<workgroup>>
    tile.pipelined %k = %c0 to %c32 step %c1 num_stages 2 {
      %col = memref.load %I[%k] : memref<32xindex>
      tile.copy %A[0, %col] to %gathered[0, 0] sizes [64, 32]
          : memref<64x1000xf32> to memref<64x32xf32, #gpu.address_space<workgroup>>
      tile.copy %gathered[0, 0] to %f[0, 0] sizes [64, 32]
          : memref<64x32xf32, #gpu.address_space<workgroup>> to memref<64x32xf32, #tile.fragment>
    }
  }
  return
}

// -----

func.func @too_much_shared_memory(%A: memref<256x1024xf32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c128 = arith.constant 128 : index
    %s = tile.alloc_shared : memref<128x128xf32, #gpu.address_space<workgroup>>
    %f = tile.alloc_fragment : memref<128x128xf32, #tile.fragment>
    // expected-error @+1 {{'tile.pipelined' op with num_stages 4 needs 262144 bytes of multi-buffered shared tiles; the kernel would then allocate 262144 bytes of shared memory, over the 232448-byte (227 KiB) limit of sm_90a by 29696 bytes: use fewer stages or smaller tiles}}
    tile.pipelined %k = %c0 to %c8 step %c1 num_stages 4 {
      %col = arith.muli %k, %c128 : index
      tile.copy %A[0, %col] to %s[0, 0] sizes [128, 128]
          : memref<256x1024xf32> to memref<128x128xf32, #gpu.address_space<workgroup>>
      tile.copy %s[0, 0] to %f[0, 0] sizes [128, 128]
          : memref<128x128xf32, #gpu.address_space<workgroup>> to memref<128x128xf32, #tile.fragment>
    }
  }
  return
}

// -----

func.func @zero_step(%A: memref<64x1000xf32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c32 = arith.constant 32 : index
    %s = tile.alloc_shared : memref<64x32xf32, #gpu.address_space<workgroup>>
    %f = tile.alloc_fragment : memref<64x32xf32, #tile.fragment>
    // expected-error @+1 {{'tile.pipelined' op step must be positive, got 0}}
    tile.pipelined %k = %c0 to %c32 step %c0 num_stages 2 {
      %col = arith.muli %k, %c32 : index
      tile.copy %A[0, %col] to %s[0, 0] sizes [64, 32]
          : memref<64x1000xf32> to memref<64x32xf32, #gpu.address_space<workgroup>>
      tile.copy %s[0, 0] to %f[0, 0] sizes [64, 32]
          : memref<64x32xf32, #gpu.address_space<workgroup>> to memref<64x32xf32, #tile.fragment>
    }
  }
  return
}
