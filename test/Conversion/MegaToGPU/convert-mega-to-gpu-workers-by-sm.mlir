// RUN: tilemega-opt %s -split-input-file -convert-mega-to-gpu="chip=sm_90a" | FileCheck %s

// workers_by_sm: 5 workers, two CTAs an SM, so G = 3 SMs and worker w runs
// on SM w mod 3. mega_state grows by one claim word a CTA (16 + 5 words,
// field state_words). Thread 0 stakes the launch's tag (epoch + 1) on the
// indices its SM stands for (smid, smid + 3), then, without one, on every
// index in order; with none free (only a state whose claim words outran
// its epoch) it records error 5 with its block index, SM and tag. Its CTA
// then runs the role of the index it holds, not of its block index.

// CHECK-LABEL: func.func @by_sm
// CHECK-SAME:    %[[STATE:[a-z0-9]+]]: memref<21xi32> {mega.role = "runtime", tile.name = "mega_state"}
// CHECK-SAME:    state_words = 21 : i64
// CHECK:         %[[HELD:.*]] = tile.alloc_shared : memref<1xi32, #gpu.address_space<workgroup>>
// CHECK:         scf.if
// CHECK:           %[[EPOCH:.*]] = mega.peek %[[STATE]][%{{.*}}] : memref<21xi32>
// CHECK:           %[[TAG:.*]] = arith.addi %[[EPOCH]], %{{.*}} : i32
// CHECK:           %[[SM:.*]] = nvvm.read.ptx.sreg.smid : i32
// CHECK:           %[[C3:.*]] = arith.constant 3 : i32
// CHECK:           arith.cmpi ult, %[[SM]], %[[C3]] : i32
// CHECK:           mega.stake %[[STATE]][%{{.*}}], %[[TAG]] : memref<21xi32>
// CHECK:           arith.addi %[[SM]], %{{.*}} : i32
// CHECK:           mega.stake %[[STATE]][%{{.*}}], %[[TAG]] : memref<21xi32>
// CHECK:           %[[SCAN:.*]]:2 = scf.while
// CHECK:             mega.stake %[[STATE]][%{{.*}}], %[[TAG]] : memref<21xi32>
// CHECK:           mega.raise_flag
// CHECK:           mega.post %[[STATE]][%{{.*}}], %[[SM]] : memref<21xi32>, i32
// CHECK:           mega.post %[[STATE]][%{{.*}}], %[[TAG]] : memref<21xi32>, i32
// CHECK:           %[[FIVE:.*]] = arith.constant 5 : i32
// CHECK:           mega.post %[[STATE]][%{{.*}}], %[[FIVE]] : memref<21xi32>, i32
// CHECK:           memref.store %[[SCAN]]#1, %[[HELD]][%{{.*}}]
// CHECK:         gpu.barrier
// CHECK:         %[[MINE:.*]] = memref.load %[[HELD]]
// CHECK:         %[[W:.*]] = arith.index_castui %[[MINE]] : i32 to index
// CHECK:         arith.cmpi ult, %[[W]], %{{.*}} : index
// A worker's watchdog record names its claimed index, read again from
// shared memory (kept live instead, it cost registers everywhere).
// CHECK:         mega.raise_flag
// CHECK-NEXT:    scf.if
// CHECK-NEXT:      arith.constant 0 : index
// CHECK-NEXT:      %[[AGAIN:.*]] = memref.load %[[HELD]]
// CHECK:           mega.post %[[STATE]][%{{.*}}], %[[AGAIN]] : memref<21xi32>, i32

func.func @a64(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 64 {
  }
  return
}

mega.graph @by_sm(%x: memref<64xf32>) workers 5 attributes {ctas_per_sm = 2, workers_by_sm} {
  mega.queue @w0 aot worker 0 {tasks = [@t], instances = array<i64: 0>}
  mega.task @t body @a64(%x : memref<64xf32>) count 1
}

// -----

// Without workers_by_sm the state is 16 words and nothing is claimed.
// CHECK-LABEL: func.func @by_index
// CHECK-SAME:    memref<16xi32> {mega.role = "runtime", tile.name = "mega_state"}
// CHECK-NOT:     state_words
// CHECK-NOT:     mega.stake
// CHECK-NOT:     nvvm.read.ptx.sreg.smid

func.func @a64(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 64 {
  }
  return
}

mega.graph @by_index(%x: memref<64xf32>) workers 5 attributes {ctas_per_sm = 2} {
  mega.queue @w0 aot worker 0 {tasks = [@t], instances = array<i64: 0>}
  mega.task @t body @a64(%x : memref<64xf32>) count 1
}
