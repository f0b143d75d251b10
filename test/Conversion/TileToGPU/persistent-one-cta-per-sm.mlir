// RUN: tilemega-opt %s -convert-tile-to-gpu | FileCheck %s

// A persistent kernel (a function convert-mega-to-gpu made: it carries
// tilemega.mega) tells ptxas it runs one CTA per SM (unless mega.ctas_per_sm
// says more), so that ptxas may use
// every register instead of guessing an occupancy and spilling; an
// ordinary kernel does not.

// CHECK-LABEL: gpu.func @persistent
// CHECK-SAME: nvvm.minctasm = 1 : i32
func.func @persistent(%a: memref<64xf32>) attributes {tilemega.mega = {workers = 1 : i64}} {
  tile.kernel blocks(%i) in [1] threads 64 {
  }
  return
}

// CHECK-LABEL: gpu.func @ordinary
// CHECK-NOT: nvvm.minctasm
// CHECK: gpu.return
func.func @ordinary(%a: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 64 {
  }
  return
}

// More CTAs than SMs (convert-mega-to-gpu max-ctas): the kernel's function
// says how many an SM must hold, and ptxas caps the registers to fit them.
// CHECK-LABEL: gpu.func @two_an_sm
// CHECK-SAME: nvvm.minctasm = 2 : i32
func.func @two_an_sm(%a: memref<64xf32>) attributes {tilemega.mega = {workers = 263 : i64}, mega.ctas_per_sm = 2 : i64} {
  tile.kernel blocks(%i) in [263] threads 64 {
  }
  return
}
