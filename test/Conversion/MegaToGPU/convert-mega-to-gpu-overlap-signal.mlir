// RUN: tilemega-opt %s -convert-mega-to-gpu="early-loads=true overlap-signal=true" | FileCheck %s
// RUN: tilemega-opt %s -convert-mega-to-gpu="early-loads=false overlap-signal=true" | FileCheck %s --check-prefix=WAITS

// overlap-signal: thread 0 picks the next entry as soon as its part of the
// body is done, one block barrier ends the body and hands the entry out,
// and only then does thread 0 signal the finished entry (carried through
// the loop with its AOT slot) while the other threads go on to the next
// entry's early loads. The last entry is signalled in the final pick's
// turn, before the loop exits; no barrier follows the body inside the loop.

func.func @fill(%H: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %f = tile.alloc_fragment : memref<1024xbf16, #tile.fragment>
    tile.clear %f : memref<1024xbf16, #tile.fragment>
    tile.copy %f[0] to %H[0] sizes [1024]
        : memref<1024xbf16, #tile.fragment> to memref<1024xbf16>
  }
  return
}

func.func @scale(%W: memref<1024xbf16>, %H: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [2] threads 128 {
    %f = tile.alloc_fragment : memref<512xbf16, #tile.fragment>
    %c512 = arith.constant 512 : index
    %at = arith.muli %b, %c512 : index
    tile.copy %W[%at] to %f[0] sizes [512] : memref<1024xbf16> to memref<512xbf16, #tile.fragment>
  }
  return
}

// CHECK-LABEL: func.func @overlap(
// The loop carries the entry run last and its slot (-1: none yet).
// CHECK:         %{{.*}}:4 = scf.while (%[[POS:.*]] = %{{.*}}, %{{.*}} = %{{.*}}, %[[RAN:.*]] = %{{.*}}, %[[SLOT:.*]] = %{{.*}}) : (i32, i32, i32, i32)
// The next pick, then the barrier, then the last entry's signals.
// CHECK:           memref.store %{{.*}}, %[[CONTROL:.*]][%c0{{.*}}] : memref<5xi32, #gpu.address_space<workgroup>>
// CHECK:         gpu.barrier
// CHECK:         scf.if
// CHECK:           arith.cmpi sge, %[[RAN]], %{{.*}} : i32
// CHECK:           memref.load %[[CONTROL]][%c4{{.*}}] : memref<5xi32, #gpu.address_space<workgroup>>
// CHECK:           mega.signal
// CHECK:         scf.condition
// CHECK:       } do {
// CHECK:         scf.index_switch %{{.*}} {tile.exclusive_cases}
// CHECK:         default {
// CHECK-NEXT:    }
// CHECK-NOT:     gpu.barrier
// CHECK-NEXT:    scf.yield %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : i32, i32, i32, i32

// Without early loads a pick waits for its entry's events (which the entry
// before may signal): the signal stays before the pick.
// WAITS-LABEL: func.func @overlap(
// WAITS:         scf.while (%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) : (i32, i32) -> (i32, i32, i32, i32)
mega.graph @overlap(%w: memref<1024xbf16>, %h: memref<1024xbf16>)
    workers 1 schedulers 0 {
  mega.event @filled trigger 1
  mega.queue @w0 aot worker 0 {tasks = [@first, @second, @second],
                               instances = array<i64: 0, 0, 1>}
  mega.task @first body @fill(%h : memref<1024xbf16>) count 1 signals [@filled]
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
  mega.task @second body @scale(%w, %h : memref<1024xbf16>, memref<1024xbf16>) count 2
      waits [@filled]
      footprint [#mega.access<read operand 0 offset 512 * u + 0 size 512>,
                 #mega.access<read operand 1 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
}
