// RUN: tilemega-opt %s -convert-mega-to-gpu="early-loads=true" | FileCheck %s
// RUN: tilemega-opt %s -convert-mega-to-gpu="early-loads=true" -tile-pipeline | FileCheck %s --check-prefix=PIPE

// Claimed units (claims_units): @second's 4 units run as 2 instances on one
// worker; each runs its own unit (instance i: unit i), then claims units
// from `count` (2) on through its task's counter, state word 16 + task (the
// state buffer grows by one word a task), until a claim passes the last
// unit: one loop around one copy of the body (two copies hung on the GPU:
// docs/mega.md, "Claimed units"). The first claim goes out after the wait,
// before the own unit runs; each next one before the claimed unit it
// follows. Thread 0 claims and stores the unit into a shared word, which
// the CTA reads between two barriers after the unit before it.

func.func @gemv(%W: memref<64x1024xbf16>, %X: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [4] threads 128 {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %c128 = arith.constant 128 : index
    %c1024 = arith.constant 1024 : index
    %row = arith.muli %b, %c16 : index
    %w_s = tile.alloc_shared : memref<16x128xbf16, #gpu.address_space<workgroup>>
    %x_s = tile.alloc_shared : memref<128xbf16, #gpu.address_space<workgroup>>
    %w = tile.alloc_fragment : memref<16x128xbf16, #tile.fragment>
    tile.pipelined %k = %c0 to %c1024 step %c128 num_stages 3 {
      tile.copy %W[%row, %k] to %w_s[0, 0] sizes [16, 128]
          : memref<64x1024xbf16> to memref<16x128xbf16, #gpu.address_space<workgroup>>
      tile.copy %X[%k] to %x_s[0] sizes [128]
          : memref<1024xbf16> to memref<128xbf16, #gpu.address_space<workgroup>>
      tile.copy %w_s[0, 0] to %w[0, 0] sizes [16, 128]
          : memref<16x128xbf16, #gpu.address_space<workgroup>> to memref<16x128xbf16, #tile.fragment>
    }
  }
  return
}

func.func @fill(%H: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %f = tile.alloc_fragment : memref<1024xbf16, #tile.fragment>
    tile.clear %f : memref<1024xbf16, #tile.fragment>
    tile.copy %f[0] to %H[0] sizes [1024]
        : memref<1024xbf16, #tile.fragment> to memref<1024xbf16>
  }
  return
}

// CHECK-LABEL: func.func @claimed(
// CHECK-SAME:    memref<18xi32> {mega.role = "runtime", tile.name = "mega_state"}
// The task's metadata says its units are claimed; the runtime sizes the
// state buffer by state_words.
// CHECK-SAME:    state_words = 18 : i64
// CHECK-SAME:    claims_units = true{{.*}}name = "second"
// CHECK-SAME:    unit_counters = 2 : i64
// One copy of the body, in the case's shared-memory group.
// CHECK:         %[[WORD:.*]] = tile.alloc_shared : memref<1xi32, #gpu.address_space<workgroup>>
// CHECK:         %[[TILE:.*]] = tile.alloc_shared {tile.exclusive_group = 2 : i64} : memref<16x128xbf16
// CHECK-NOT:     tile.exclusive_group = 4
// CHECK:         case 1 {
// CHECK:           %[[W:.*]] = mega.graph_arg %{{.*}}[%c0{{.*}}] {{.*}} -> memref<64x1024xbf16>
// The wait first (as for any entry of several units), then thread 0's
// first claim, stored as the unit it stands for (count 2 + claim), before
// the own unit runs.
// CHECK:             mega.poll
// CHECK:           scf.if %{{.*}} {
// CHECK:             %[[COUNTER:.*]] = arith.addi %{{.*}}, %c16 : index
// CHECK:             scf.if %{{.*}} {
// CHECK:               %[[C:.*]] = mega.claim %[[STATE:.*]][%[[COUNTER]]], %{{.*}} : memref<18xi32>
// CHECK:               %[[UNIT:.*]] = arith.addi %[[C]], %c2_i32 : i32
// CHECK-NEXT:          memref.store %[[UNIT]], %[[WORD]][%{{.*}}]
// The loop starts at the instance's own unit; its copies start in the
// iteration (none is early).
// CHECK:             scf.while (%[[U:.*]] = %{{.*}}) : (i32) -> i32 {
// CHECK:               tile.pipelined
// CHECK-NEXT:            tile.copy %[[W]][%{{.*}}, %{{.*}}] to %[[TILE]][0, 0] sizes [16, 128] :
// CHECK:               gpu.barrier
// CHECK-NEXT:          arith.constant
// CHECK-NEXT:          %[[GOT:.*]] = memref.load %[[WORD]]
// CHECK-NEXT:          gpu.barrier
// CHECK:               %[[MORE:.*]] = arith.cmpi ult, %[[GOT]], %c4_i32 : i32
// CHECK-NEXT:          scf.condition(%[[MORE]]) %[[GOT]] : i32
// CHECK:             } do {
// The next claim goes out before the claimed unit runs.
// CHECK:               scf.if %{{.*}} {
// CHECK:                 mega.claim %[[STATE]][%[[COUNTER]]]
// CHECK:                 memref.store %{{.*}}, %[[WORD]]
// CHECK:               scf.yield
// CHECK:             } attributes {mega.claim_loop}
// The last CTA of the launch zeroes both tasks' counters before it opens the
// next epoch.
// CHECK:         mega.arrive
// CHECK:           mega.post %[[STATE]][%c16], %{{.*}} : memref<18xi32>, i32
// CHECK:           mega.post %[[STATE]][%c17], %{{.*}} : memref<18xi32>, i32
// CHECK:           mega.fence
// CHECK:           mega.post %[[STATE]][%c0{{.*}}]

// After tile-pipeline: one pipelined copy of the body, none of it early.
// PIPE-LABEL: func.func @claimed(
// PIPE:         tile.alloc_shared {tile.exclusive_group = 2 : i64} : memref<3x16x128xbf16
// PIPE-NOT:     tile.exclusive_group = 4
// PIPE:         mega.claim
// PIPE:         scf.while
// PIPE-NOT:       tile.early
// PIPE:           tile.copy async
// PIPE:           mega.claim
mega.graph @claimed(%w: memref<64x1024xbf16>, %h: memref<1024xbf16>)
    workers 1 schedulers 0 {
  mega.event @filled trigger 1
  mega.queue @w0 aot worker 0 {tasks = [@first, @second, @second],
                               instances = array<i64: 0, 0, 1>}
  mega.task @first body @fill(%h : memref<1024xbf16>) count 1 signals [@filled]
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
  mega.task @second body @gemv(%w, %h : memref<64x1024xbf16>, memref<1024xbf16>) count 2
      waits [@filled]
      footprint [#mega.access<read operand 0 offset 16384 * u + 0 size 16384>,
                 #mega.access<read operand 1 offset 0 * u + 0 size 1024>]
      {units_per_task = 2, claims_units}
}
