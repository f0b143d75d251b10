// RUN: tilemega-opt %s -split-input-file -verify-diagnostics -convert-mega-to-gpu
// RUN: tilemega-opt %s -split-input-file -verify-diagnostics -convert-mega-to-gpu="early-loads=true"

// What a task loads before its events fire is convert-mega-to-gpu's
// decision (the footprints): a body that marks tile.early a copy of a
// tensor another task writes is refused, naming that task, whether early
// loads are on or not.

func.func @fill(%H: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %f = tile.alloc_fragment : memref<1024xbf16, #tile.fragment>
    tile.clear %f : memref<1024xbf16, #tile.fragment>
    tile.copy %f[0] to %H[0] sizes [1024]
        : memref<1024xbf16, #tile.fragment> to memref<1024xbf16>
  }
  return
}

// expected-note @below {{in this task body}}
func.func @use(%X: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c1024 = arith.constant 1024 : index
    %x_s = tile.alloc_shared : memref<128xbf16, #gpu.address_space<workgroup>>
    %x = tile.alloc_fragment : memref<128xbf16, #tile.fragment>
    tile.pipelined %k = %c0 to %c1024 step %c128 num_stages 2 {
      // expected-error @below {{'tile.copy' op is marked tile.early (load before the task's events fire), but it reads graph argument 0, which task @first writes before the task runs (or alongside it): it would read data from before they ran}}
      tile.copy %X[%k] to %x_s[0] sizes [128] {tile.early}
          : memref<1024xbf16> to memref<128xbf16, #gpu.address_space<workgroup>>
      tile.copy %x_s[0] to %x[0] sizes [128]
          : memref<128xbf16, #gpu.address_space<workgroup>> to memref<128xbf16, #tile.fragment>
    }
  }
  return
}

mega.graph @stale(%h: memref<1024xbf16>) workers 1 schedulers 0 {
  mega.event @filled trigger 1
  mega.queue @w0 aot worker 0 {tasks = [@first, @second], instances = array<i64: 0, 0>}
  mega.task @first body @fill(%h : memref<1024xbf16>) count 1 signals [@filled]
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
  mega.task @second body @use(%h : memref<1024xbf16>) count 1 waits [@filled]
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
}

// -----

// The same copy, with the body's own tile.prefetch_point before its loop:
// the prologue may start there, after the task's wait, so the copy reads
// what @first wrote. Accepted.

func.func @fill(%H: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %f = tile.alloc_fragment : memref<1024xbf16, #tile.fragment>
    tile.clear %f : memref<1024xbf16, #tile.fragment>
    tile.copy %f[0] to %H[0] sizes [1024]
        : memref<1024xbf16, #tile.fragment> to memref<1024xbf16>
  }
  return
}

func.func @use(%X: memref<1024xbf16>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c1024 = arith.constant 1024 : index
    %x_s = tile.alloc_shared : memref<128xbf16, #gpu.address_space<workgroup>>
    %x = tile.alloc_fragment : memref<128xbf16, #tile.fragment>
    tile.prefetch_point
    tile.pipelined %k = %c0 to %c1024 step %c128 num_stages 2 {
      tile.copy %X[%k] to %x_s[0] sizes [128] {tile.early}
          : memref<1024xbf16> to memref<128xbf16, #gpu.address_space<workgroup>>
      tile.copy %x_s[0] to %x[0] sizes [128]
          : memref<128xbf16, #gpu.address_space<workgroup>> to memref<128xbf16, #tile.fragment>
    }
  }
  return
}

mega.graph @after_the_wait(%h: memref<1024xbf16>) workers 1 schedulers 0 {
  mega.event @filled trigger 1
  mega.queue @w0 aot worker 0 {tasks = [@first, @second], instances = array<i64: 0, 0>}
  mega.task @first body @fill(%h : memref<1024xbf16>) count 1 signals [@filled]
      footprint [#mega.access<write operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
  mega.task @second body @use(%h : memref<1024xbf16>) count 1 waits [@filled]
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 1024>]
      {units_per_task = 1}
}
