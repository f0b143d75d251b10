// RUN: tilemega-opt %s -split-input-file -verify-diagnostics -convert-mega-to-gpu="chip=sm_90" | FileCheck %s
// RUN: not tilemega-opt %s -convert-mega-to-gpu="max-ctas=2" 2>&1 | FileCheck %s --check-prefix=OVERRIDE
// RUN: not tilemega-opt %s -convert-mega-to-gpu="chip=sm_80" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// The resident CTAs come from the chip's target description
// (tilemega/Target/TargetInfo.h): 132 SMs on sm_90 / sm_90a, so 131 workers
// and the scheduler CTA fit; max-ctas overrides it; an unknown chip is an
// error that lists the known ones.

// UNKNOWN: error: convert-mega-to-gpu: unknown chip 'sm_80' (known: sm_90, sm_90a)

func.func @a64(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 64 {
  }
  return
}

// CHECK-LABEL: func.func @fits_the_sms
// CHECK:         tile.kernel blocks(%{{.*}}) in [132] threads 64
// OVERRIDE:      error: 'mega.graph' op needs 132 CTAs (131 workers + 1 scheduler CTA) but only 2 can be resident at once
mega.graph @fits_the_sms(%x: memref<64xf32>) workers 131 {
  mega.queue @dyn jit {tasks = [@t], instances = array<i64: 0>}
  mega.task @t body @a64(%x : memref<64xf32>) count 1
}
