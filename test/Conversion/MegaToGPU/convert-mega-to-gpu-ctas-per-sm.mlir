// RUN: tilemega-opt %s -split-input-file -verify-diagnostics -convert-mega-to-gpu="chip=sm_90a" | FileCheck %s --check-prefix=ONE
// RUN: tilemega-opt %s -split-input-file -convert-mega-to-gpu="chip=sm_90a max-ctas=264" | FileCheck %s --check-prefix=TWO

// Every CTA of a persistent kernel is resident at once: with max-ctas above
// the chip's 132 SMs, the graph's 200 workers + the scheduler CTA need two
// an SM, which the kernel's function records for the outlining (ptxas's
// minimum CTAs an SM, persistent-one-cta-per-sm.mlir). 131 workers keep one;
// without max-ctas (or the graph's ctas_per_sm) the 201 CTAs are an error.

// ONE-LABEL: func.func @one_an_sm
// ONE-SAME:    mega.ctas_per_sm = 1 : i64
// TWO-LABEL: func.func @one_an_sm
// TWO-SAME:    mega.ctas_per_sm = 1 : i64
// TWO-LABEL: func.func @two_an_sm
// TWO-SAME:    mega.ctas_per_sm = 2 : i64
// TWO:         tile.kernel blocks(%{{.*}}) in [201] threads 64

func.func @a64(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 64 {
  }
  return
}

mega.graph @one_an_sm(%x: memref<64xf32>) workers 131 {
  mega.queue @dyn jit {tasks = [@t], instances = array<i64: 0>}
  mega.task @t body @a64(%x : memref<64xf32>) count 1
}

// -----

func.func @a64(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 64 {
  }
  return
}

// expected-error @below {{needs 201 CTAs (200 workers + 1 scheduler CTA) but only 132 can be resident at once}}
mega.graph @two_an_sm(%x: memref<64xf32>) workers 200 {
  mega.queue @dyn jit {tasks = [@t], instances = array<i64: 0>}
  mega.task @t body @a64(%x : memref<64xf32>) count 1
}

// -----

// The graph itself may say two CTAs share an SM (ctas_per_sm): 264 fit then
// without max-ctas.
// ONE-LABEL: func.func @two_an_sm_by_the_graph
// ONE-SAME:    mega.ctas_per_sm = 2 : i64
// ONE:         tile.kernel blocks(%{{.*}}) in [201] threads 64

func.func @a64(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 64 {
  }
  return
}

mega.graph @two_an_sm_by_the_graph(%x: memref<64xf32>) workers 200 attributes {ctas_per_sm = 2} {
  mega.queue @dyn jit {tasks = [@t], instances = array<i64: 0>}
  mega.task @t body @a64(%x : memref<64xf32>) count 1
}
