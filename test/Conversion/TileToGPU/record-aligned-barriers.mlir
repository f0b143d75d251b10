// RUN: tilemega-opt %s -split-input-file -tilemega-record-aligned-barriers | FileCheck %s

// Every aligned CTA barrier the gpu.modules hand to LLVM: the NVVM barrier
// ops and the bar/barrier statements of inline asm (a named barrier with a
// thread count included). bar.warp.sync, mbarrier and barrier.cluster are
// not CTA barriers.

// CHECK: module attributes {gpu.container_module, tilemega.aligned_barriers = 6 : i64}
module attributes {gpu.container_module} {
  gpu.module @kernels {
    llvm.func @k(%n: i32) {
      nvvm.barrier0
      nvvm.barrier
      nvvm.barrier id = %n
      llvm.inline_asm has_side_effects "@%p1 bar.sync 1, 64; bar.warp.sync -1;", "" : () -> ()
      llvm.inline_asm has_side_effects "{ barrier.sync.aligned 2; barrier.sync 3; }", "" : () -> ()
      llvm.inline_asm has_side_effects "// bar.sync 0 in a comment\nmbarrier.arrive.b64 _, [$0];", "l" %n : (i32) -> ()
      llvm.inline_asm has_side_effects "barrier.cluster.arrive.aligned;", "" : () -> ()
      llvm.return
    }
    llvm.func @helper() {
      nvvm.barrier0
      llvm.return
    }
  }
}

// -----

// A module with no barrier records zero, and code outside gpu.modules is
// not counted.

// CHECK: module attributes {gpu.container_module, tilemega.aligned_barriers = 0 : i64}
module attributes {gpu.container_module} {
  llvm.func @host() {
    llvm.inline_asm has_side_effects "bar.sync 0;", "" : () -> ()
    llvm.return
  }
  gpu.module @kernels {
    llvm.func @k() {
      llvm.return
    }
  }
}
