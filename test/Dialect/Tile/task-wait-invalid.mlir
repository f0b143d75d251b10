// RUN: tilemega-opt %s -split-input-file -verify-diagnostics

// convert-mega-to-gpu splits a task body's top-level ops at its
// tile.task_wait: the op must sit directly in the tile.kernel body (a point
// every thread passes once), and a kernel holds at most one.

func.func @in_for(%n: index) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    scf.for %i = %c0 to %n step %c1 {
      // expected-error @+1 {{'tile.task_wait' op must be directly in a tile.kernel body}}
      tile.task_wait
    }
  }
  return
}

// -----

func.func @in_if(%c: i1) {
  tile.kernel blocks(%b) in [1] threads 32 {
    scf.if %c {
      // expected-error @+1 {{'tile.task_wait' op must be directly in a tile.kernel body}}
      tile.task_wait
    }
  }
  return
}

// -----

func.func @in_parallel() {
  tile.kernel blocks(%b) in [1] threads 32 {
    tile.parallel (%i) in [32] {
      // expected-error @+1 {{'tile.task_wait' op must be directly in a tile.kernel body}}
      tile.task_wait
    }
  }
  return
}

// -----

// Outside any kernel, the tile ops' common check (InKernel) reports it.
func.func @outside_kernel() {
  // expected-error @+1 {{'tile.task_wait' op must be nested in a tile.kernel}}
  tile.task_wait
  return
}

// -----

// The second one is reported, not the first.
func.func @twice() {
  tile.kernel blocks(%b) in [1] threads 32 {
    tile.task_wait
    tile.prefetch_point
    // expected-error @+1 {{'tile.task_wait' op is the second in this kernel: a task waits once}}
    tile.task_wait
  }
  return
}
