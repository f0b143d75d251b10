// RUN: tilemega-opt %s -split-input-file -mega-pair-entries | FileCheck %s
// RUN: tilemega-opt %s -split-input-file -mega-pair-entries=shared-bytes=40000 | FileCheck %s --check-prefix=SMALL
// RUN: not tilemega-opt %s -split-input-file -mega-pair-entries=chip=sm_75 2>&1 | FileCheck %s --check-prefix=CHIP

// CHIP: error: mega-pair-entries: unknown chip 'sm_75'

// Each streaming body keeps 16 KB of shared tiles (two stages of 8 KB).
func.func @stream(%W: memref<64x1024xbf16>, %X: memref<1024xbf16>, %Y: memref<64xbf16>) {
  tile.kernel blocks(%b) in [2] threads 128 {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %c256 = arith.constant 256 : index
    %c1024 = arith.constant 1024 : index
    %row = arith.muli %b, %c16 : index
    %w_s = tile.alloc_shared : memref<16x256xbf16, #gpu.address_space<workgroup>>
    tile.pipelined %k = %c0 to %c1024 step %c256 num_stages 2 {
      tile.copy %W[%row, %k] to %w_s[0, 0] sizes [16, 256]
          : memref<64x1024xbf16> to memref<16x256xbf16, #gpu.address_space<workgroup>>
    }
  }
  return
}
func.func @latency(%X: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
  }
  return
}

// w0: the attention-like @attn is latency-bound (nothing is paired after
// it); @wo waits on its light stage, so @wgu's weights may load under @wo.
// w1: the same pair first; @wd waits on @wgu, a stage as heavy as its own.
// Two bodies of 16 KB also fit 40000 bytes.
// CHECK-LABEL: mega.graph @layer
// CHECK:         mega.queue @w0 aot worker 0 {instances = array<i64: 0, 0, 0, 0>, paired = array<i64: 1>, tasks = [@attn, @wo, @wgu, @wd]}
// CHECK:         mega.queue @w1 aot worker 1 {instances = array<i64: 1, 1, 1>, paired = array<i64: 0>, tasks = [@wo, @wgu, @wd]}
// SMALL-LABEL: mega.graph @layer
// SMALL:         paired = array<i64: 1>
mega.graph @layer(%w: memref<64x1024xbf16>, %u: memref<64x1024xbf16>, %v: memref<64x1024xbf16>,
                  %x: memref<1024xbf16>, %h: memref<64xbf16>, %g: memref<64xbf16>,
                  %o: memref<64xbf16>) workers 2 schedulers 0 {
  mega.event @a trigger 1
  mega.event @b trigger 2
  mega.event @c trigger 2
  mega.queue @w0 aot worker 0 {tasks = [@attn, @wo, @wgu, @wd], instances = array<i64: 0, 0, 0, 0>}
  mega.queue @w1 aot worker 1 {tasks = [@wo, @wgu, @wd], instances = array<i64: 1, 1, 1>}
  mega.task @attn body @latency(%x : memref<1024xbf16>) count 1 signals [@a]
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1, cost_ns = 100.0, latency_bound}
  mega.task @wo body @stream(%w, %x, %h : memref<64x1024xbf16>, memref<1024xbf16>, memref<64xbf16>)
      count 2 waits [@a] signals [@b]
      footprint [#mega.access<read operand 0 offset 16384 * u + 0 size 16384>,
                 #mega.access<read operand 1 offset 0 * u + 0 size 1024>,
                 #mega.access<write operand 2 offset 16 * u + 0 size 16>]
      {units_per_task = 1, cost_ns = 1000.0}
  mega.task @wgu body @stream(%u, %x, %g : memref<64x1024xbf16>, memref<1024xbf16>, memref<64xbf16>)
      count 2 waits [@b] signals [@c]
      footprint [#mega.access<read operand 0 offset 16384 * u + 0 size 16384>,
                 #mega.access<read operand 1 offset 0 * u + 0 size 1024>,
                 #mega.access<write operand 2 offset 16 * u + 0 size 16>]
      {units_per_task = 1, cost_ns = 1000.0}
  mega.task @wd body @stream(%v, %x, %o : memref<64x1024xbf16>, memref<1024xbf16>, memref<64xbf16>)
      count 2 waits [@c]
      footprint [#mega.access<read operand 0 offset 16384 * u + 0 size 16384>,
                 #mega.access<read operand 1 offset 0 * u + 0 size 1024>,
                 #mega.access<write operand 2 offset 16 * u + 0 size 16>]
      {units_per_task = 1, cost_ns = 1000.0}
}

// -----

func.func @wide(%W: memref<64x1024xbf16>) {
  tile.kernel blocks(%b) in [4] threads 128 {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %c1024 = arith.constant 1024 : index
    %c512 = arith.constant 512 : index
    %row = arith.muli %b, %c16 : index
    %w_s = tile.alloc_shared : memref<16x512xbf16, #gpu.address_space<workgroup>>
    tile.pipelined %k = %c0 to %c1024 step %c512 num_stages 2 {
      tile.copy %W[%row, %k] to %w_s[0, 0] sizes [16, 512]
          : memref<64x1024xbf16> to memref<16x512xbf16, #gpu.address_space<workgroup>>
    }
  }
  return
}
func.func @light(%X: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
  }
  return
}

// Bodies of 32 KB: @pre (no events to wait for) pairs with the first @p,
// each @q (behind the light @pre) with the @p after it. Two bodies of
// 32 KB fit the default budget (an SM's shared memory for one CTA), not
// 40000 bytes: then only the first pair is left.
// CHECK-LABEL: mega.graph @wide_pair
// CHECK:         paired = array<i64: 0, 2, 4, 6>
// SMALL-LABEL: mega.graph @wide_pair
// SMALL:         paired = array<i64: 0>,
mega.graph @wide_pair(%w: memref<64x1024xbf16>, %u: memref<64x1024xbf16>, %x: memref<1024xbf16>)
    workers 1 schedulers 0 {
  mega.event @a trigger 1
  mega.queue @w0 aot worker 0 {tasks = [@pre, @p, @q, @p, @q, @p, @q, @p, @q],
                               instances = array<i64: 0, 0, 0, 1, 1, 2, 2, 3, 3>}
  mega.task @pre body @light(%x : memref<1024xbf16>) count 1 signals [@a]
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1, cost_ns = 100.0}
  mega.task @p body @wide(%w : memref<64x1024xbf16>) count 4 waits [@a]
      footprint [#mega.access<read operand 0 offset 16384 * u + 0 size 16384>]
      {units_per_task = 1, cost_ns = 1000.0}
  mega.task @q body @wide(%u : memref<64x1024xbf16>) count 4 waits [@a]
      footprint [#mega.access<read operand 0 offset 16384 * u + 0 size 16384>]
      {units_per_task = 1, cost_ns = 1000.0}
}

// -----

func.func @light(%X: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
  }
  return
}
func.func @k(%X: memref<1024xbf16>, %W: memref<64x1024xbf16>) {
  tile.kernel blocks(%b) in [2] threads 128 {
  }
  return
}

// A graph with JIT entries is left alone.
// CHECK-LABEL: mega.graph @jit
// CHECK-NOT:     paired
mega.graph @jit(%x: memref<1024xbf16>, %w: memref<64x1024xbf16>) workers 1 schedulers 1 {
  mega.event @a trigger 1
  mega.queue @w0 aot worker 0 {tasks = [@pre, @p], instances = array<i64: 0, 0>}
  mega.queue @j jit {tasks = [@p], instances = array<i64: 1>}
  mega.task @pre body @light(%x : memref<1024xbf16>) count 1 signals [@a]
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1, cost_ns = 1.0}
  mega.task @p body @k(%x, %w : memref<1024xbf16>, memref<64x1024xbf16>) count 2 waits [@a]
      footprint [#mega.access<read operand 1 offset 0 * u + 0 size 64>]
      {units_per_task = 1, cost_ns = 1000.0}
}
