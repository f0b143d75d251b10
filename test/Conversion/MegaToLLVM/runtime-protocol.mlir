// RUN: tilemega-opt %s --pass-pipeline='builtin.module(gpu.module(convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1 index-bitwidth=64}),reconcile-unrealized-casts)' | FileCheck %s
// RUN: tilemega-opt %s --pass-pipeline='builtin.module(gpu.module(convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1 index-bitwidth=64}),reconcile-unrealized-casts,nvvm-attach-target{chip=sm_90a features=+ptx80},gpu-module-to-binary{format=isa})' > %t.mlir
// RUN: %extract-ptx %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx

// Each runtime protocol op lowers (inside convert-gpu-to-nvvm, through the
// mega dialect's ConvertToLLVM interface) to device-scope LLVM atomics,
// fences and NVVM ops on a global pointer: LLVM sees every ordering. LLVM
// 22's NVPTX backend drops an atomicrmw's ordering, so ordered
// read-modify-writes are relaxed ones between fences; the PTX run pins what
// the backend makes of each.

gpu.module @kernels {
  // CHECK-LABEL: llvm.func @protocol
  // PTX-LABEL:   .entry protocol(
  gpu.func @protocol(%events: memref<8xi32>, %state: memref<16xi32>,
                     %times: memref<8xi64>, %w: memref<64x64xbf16>,
                     %out: memref<8xi32>) kernel {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %one = arith.constant 1 : i32
    %off = arith.constant 256 : i64
    %bytes = arith.constant 4096 : i32

    // mega.poll: an acquire load.
    // CHECK: %[[EV:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i32
    // CHECK: %[[EVG:.*]] = llvm.addrspacecast %[[EV]] : !llvm.ptr to !llvm.ptr<1>
    // CHECK: llvm.load %[[EVG]] atomic syncscope("device") acquire {alignment = 4 : i64} : !llvm.ptr<1> -> i32
    // PTX: ld.acquire.gpu.global.b32
    %seen = mega.poll %events[%c2] : memref<8xi32>

    // mega.peek: a relaxed load.
    // CHECK: llvm.load %{{.*}} atomic syncscope("device") monotonic {alignment = 4 : i64} : !llvm.ptr<1> -> i32
    // PTX: ld.relaxed.gpu.global.b32
    %abort = mega.peek %state[%c3] : memref<16xi32>

    // mega.signal: one release add at device scope (PTX red.release.gpu;
    // LLVM's NVPTX would drop an atomicrmw's ordering), no fence.
    // CHECK-NOT: llvm.fence
    // CHECK: llvm.inline_asm has_side_effects "red.release.gpu.global.add.u32 [$0], 1;", "l,~{memory}" %{{.*}} : (!llvm.ptr<1>) -> ()
    // PTX-NOT: fence
    // PTX: red.release.gpu.global.add.u32
    mega.signal %events[%c2] : memref<8xi32>

    // mega.claim: a relaxed add alone (a ticket orders nothing).
    // CHECK-NOT: llvm.fence
    // CHECK: %[[TICKET:.*]] = llvm.atomicrmw add %{{.*}}, %{{.*}} syncscope("device") monotonic {alignment = 4 : i64} : !llvm.ptr<1>, i32
    // CHECK-NOT: llvm.fence
    // PTX-NOT: fence
    // PTX: atom.global.add.u32
    %ticket = mega.claim %state[%c1], %one : memref<16xi32>

    // mega.stake: a relaxed unsigned max alone (a worker index's claim
    // orders nothing: the entries' waits do).
    // CHECK-NOT: llvm.fence
    // CHECK: %[[OLD:.*]] = llvm.atomicrmw umax %{{.*}}, %{{.*}} syncscope("device") monotonic {alignment = 4 : i64} : !llvm.ptr<1>, i32
    // CHECK-NOT: llvm.fence
    // PTX-NOT: fence
    // PTX: atom.global.max.u32
    %old = mega.stake %state[%c3], %one : memref<16xi32>

    // mega.arrive: fence, relaxed add, fence.
    // CHECK: llvm.fence syncscope("device") acq_rel
    // CHECK-NEXT: %[[DONE:.*]] = llvm.atomicrmw add %{{.*}}, %{{.*}} syncscope("device") monotonic
    // CHECK-NEXT: llvm.fence syncscope("device") acq_rel
    // PTX: fence.acq_rel.gpu;
    // PTX-NEXT: atom.global.add.u32
    // PTX-NEXT: fence.acq_rel.gpu;
    %done = mega.arrive %state[%c3], %one : memref<16xi32>

    // mega.publish: a release store.
    // CHECK: llvm.store %[[TICKET]], %{{.*}} atomic syncscope("device") release {alignment = 4 : i64} : i32, !llvm.ptr<1>
    // PTX: st.release.gpu.global.b32
    mega.publish %state[%c2], %ticket : memref<16xi32>

    // mega.post: a relaxed store, 32 or 64 bits.
    // CHECK: llvm.store %{{.*}}, %{{.*}} atomic syncscope("device") monotonic {alignment = 8 : i64} : i64, !llvm.ptr<1>
    // PTX: st.relaxed.gpu.global.b64
    %now = nvvm.read.ptx.sreg.globaltimer : i64
    mega.post %times[%c1], %now : memref<8xi64>, i64

    // mega.raise_flag: cmpxchg 0 -> 1, acq_rel; its success bit.
    // CHECK: %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
    // CHECK: %[[CAS:.*]] = llvm.cmpxchg %{{.*}}, %[[ZERO]], %{{.*}} syncscope("device") acq_rel acquire {alignment = 4 : i64} : !llvm.ptr<1>, i32
    // CHECK-NEXT: llvm.extractvalue %[[CAS]][1] : !llvm.struct<(i32, i1)>
    // PTX: atom.acq_rel.gpu.global.cas.b32
    %raised = mega.raise_flag %state[%c3] : memref<16xi32>

    // mega.fence
    // CHECK: llvm.fence syncscope("device") acq_rel
    mega.fence

    // mega.watchdog_expired: %globaltimer - start > limit.
    // CHECK: %[[T:.*]] = nvvm.read.ptx.sreg.globaltimer : i64
    // CHECK-NEXT: %[[ELAPSED:.*]] = llvm.sub %[[T]], %{{.*}} : i64
    // CHECK-NEXT: %[[LIMIT:.*]] = llvm.mlir.constant(5000 : i64) : i64
    // CHECK-NEXT: llvm.icmp "sgt" %[[ELAPSED]], %[[LIMIT]] : i64
    // PTX: mov.u64 %rd{{[0-9]+}}, %globaltimer;
    %late = mega.watchdog_expired %now {limit_ns = 5000} : i64

    // mega.prefetch_l2: the tensor's data + offset, as a global pointer.
    // CHECK: %[[BASE:.*]] = llvm.addrspacecast %{{.*}} : !llvm.ptr to !llvm.ptr<1>
    // CHECK: %[[AT:.*]] = llvm.getelementptr %[[BASE]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8
    // CHECK: nvvm.cp.async.bulk.prefetch %[[AT]], %{{.*}} : <1>
    // PTX: cp.async.bulk.prefetch.L2.global
    mega.prefetch_l2 %w, %off, %bytes : memref<64x64xbf16>

    // mega.poll system: an acquire load at system scope (a peer event's word).
    // CHECK: llvm.load %{{.*}} atomic acquire {alignment = 4 : i64} : !llvm.ptr<1> -> i32
    // PTX: ld.acquire.sys.global.b32
    %peer_seen = mega.poll %events[%c3] system : memref<8xi32>

    // mega.signal_peer: a release add at system scope on a raw address
    // (another GPU's events buffer): PTX red.release.sys, the one inline PTX
    // of the protocol (LLVM's NVPTX would drop the scope of an atomicrmw).
    // CHECK: %[[PEERS:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr<1>
    // CHECK: %[[WORD:.*]] = llvm.getelementptr %[[PEERS]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
    // CHECK: llvm.inline_asm has_side_effects "red.release.sys.global.add.u32 [$0], 1;", "l,~{memory}" %[[WORD]] : (!llvm.ptr<1>) -> ()
    // PTX: red.release.sys.global.add.u32
    mega.signal_peer %now[%c2]

    // mega.thread_index: %tid.x by side-effecting inline PTX (LLVM may not
    // hoist or merge it, unlike nvvm.read.ptx.sreg.tid.x), widened.
    // CHECK: %[[TID:.*]] = llvm.inline_asm has_side_effects asm_dialect = att "mov.u32 $0, %tid.x;", "=r" {{ *}}: () -> i32
    // CHECK: llvm.zext %[[TID]] : i32 to i64
    // PTX: mov.u32 {{%r[0-9]+}}, %tid.x;
    %tid = mega.thread_index
    %tid32 = arith.index_cast %tid : index to i32

    // CHECK-NOT: mega.
    %late32 = arith.extui %late : i1 to i32
    %raised32 = arith.extui %raised : i1 to i32
    %s0 = arith.addi %seen, %abort : i32
    %s1 = arith.addi %s0, %done : i32
    %s2 = arith.addi %s1, %late32 : i32
    %s3 = arith.addi %s2, %raised32 : i32
    %s4 = arith.addi %s3, %peer_seen : i32
    %s5 = arith.addi %s4, %tid32 : i32
    %s6 = arith.addi %s5, %old : i32
    memref.store %s6, %out[%c1] : memref<8xi32>
    gpu.return
  }
}
