// RUN: tilemega-opt %s --tilemega-tile-to-ptx-pipeline="chip=sm_90a" > %t.mlir
// RUN: FileCheck %s < %t.mlir
// RUN: %check-mega-tables %t.mlir | FileCheck %s --check-prefix=TABLES
// RUN: %extract-ptx %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: grep -A1 "begin inline asm" %t.ptx | grep -v -e "begin inline asm" -e "^--$" | sed -E 's/%rd?[0-9]+/%R/g' | sort | uniq -c | FileCheck %s --check-prefix=NOASM
// RUN: FileCheck %s --check-prefix=ENTRIES < %t.ptx
// RUN: FileCheck %s --check-prefix=NOLOCAL < %t.ptx
// RUN: %ptxas -v -arch=sm_90a %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// REQUIRES: ptxas

// A two-operator mega graph end to end: the pipeline decomposes, plans the
// events, schedules and builds one persistent kernel, which lowers to PTX
// that ptxas assembles.
//
// @scale (4 units of 128 floats, y = alpha * x) and @shift (2 units of 256,
// z = y + 1, variable) on 2 workers: @scale runs 2 units an instance
// (1024 bytes a unit at 30 bytes/ns: one round of 2 * 34 + 1500 ns beats
// two of 34 + 1500), @shift 1. Instance i of @shift reads what instance i of @scale
// wrote: one event each (trigger 1). @shift is variable, so it goes to the
// JIT queue: 2 workers + the scheduler CTA.

// One kernel, the persistent one; the bodies are not kernels of their own.
// Shared memory at 128-byte aligned offsets: the control words, worker AOT
// records (one 32-byte record), @shift's 1 KiB tile, the CTA's copy of the
// argument table (4 words). The graph's arguments are described in
// `mega.args` (alpha, a scalar, by its bits in the table); the kernel's
// params are the five runtime buffers.
// CHECK:      tilemega.kernels = [{block = array<i64: 128, 1, 1>, dynamic_shared_bytes = 1408 : i64, grid = array<i64: 3, 1, 1>,
// CHECK-SAME:   mega = {args = [
// CHECK-SAME:     {alignment = 16 : i64, dtype = "float32", kind = "tensor", name = "x", shape = array<i64: 512>, strides = array<i64: 1>},
// CHECK-SAME:     {alignment = 16 : i64, dtype = "float32", kind = "tensor", name = "y", shape = array<i64: 512>, strides = array<i64: 1>},
// CHECK-SAME:     {alignment = 16 : i64, dtype = "float32", kind = "tensor", name = "z", shape = array<i64: 512>, strides = array<i64: 1>},
// CHECK-SAME:     {dtype = "float32", kind = "scalar", name = "alpha"}],
// CHECK-SAME:     events = [{name = "ev0", trigger = 1 : i64}, {name = "ev1", trigger = 1 : i64}], graph = "step",
// CHECK-SAME:     num_entries = 4 : i64, num_events = 2 : i64, num_jit = 2 : i64, schedulers = 1 : i64,
// The tables themselves are decoded and checked by check_mega_tables.py
// (TABLES below), not copied here.
// CHECK-SAME:     tables = array<i32: {{[-0-9, ]+}}>,
// CHECK-SAME:     tasks = [{body = "scale", cost_ns = 1568.2{{[0-9]*}} : f64, count = 2 : i64, name = "scale", queue = "aot", units = 4 : i64, units_per_task = 2 : i64},
// CHECK-SAME:              {body = "shift", cost_ns = 1568.2{{[0-9]*}} : f64, count = 2 : i64, name = "shift", queue = "jit", units = 2 : i64, units_per_task = 1 : i64}],
// CHECK-SAME:     threads = 128 : i64, timeline = false, watchdog_ns = 2000000000 : i64, workers = 2 : i64},
// CHECK-SAME:   name = "step", params = [
// CHECK-SAME:     {alignment = 16 : i64, dtype = "int64", kind = "tensor", name = "mega_args", role = "runtime", shape = array<i64: 4>, strides = array<i64: 1>},
// CHECK-SAME:     {alignment = 16 : i64, dtype = "int32", kind = "tensor", name = "mega_tables", role = "runtime", shape = array<i64: {{[0-9]+}}>, strides = array<i64: 1>},
// CHECK-SAME:     {alignment = 16 : i64, dtype = "int32", kind = "tensor", name = "mega_events", role = "runtime", shape = array<i64: 2>, strides = array<i64: 1>},
// CHECK-SAME:     {alignment = 16 : i64, dtype = "int32", kind = "tensor", name = "mega_state", role = "runtime", shape = array<i64: 16>, strides = array<i64: 1>},
// CHECK-SAME:     {alignment = 16 : i64, dtype = "int64", kind = "tensor", name = "mega_timeline", role = "runtime", shape = array<i64: 16>, strides = array<i64: 1>}]}]}
// CHECK:      gpu.binary @tilemega_kernels
// CHECK-NOT:  mega.graph

// The tables, decoded (check_mega_tables.py also fails on any broken
// invariant: sections, records, one place per entry, trigger counts equal to
// signallers, topological lists): instance i of @shift waits for the one
// event that instance i of @scale signals; @scale's instances are the AOT
// lists of the two workers, @shift's the JIT list.
// TABLES:      graph step: 4 entries, 2 events, 2 workers
// TABLES-NEXT: task scale (aot): scale#0 scale#1
// TABLES-NEXT: task shift (jit): shift#0 shift#1
// TABLES-NEXT: event ev0: trigger 1 by scale#0 for shift#0
// TABLES-NEXT: event ev1: trigger 1 by scale#1 for shift#1
// TABLES-NEXT: aot w0: scale#0
// TABLES-NEXT: aot w1: scale#1
// TABLES-NEXT: jit: shift#0 shift#1
// TABLES-NEXT: tables ok

// ENTRIES:     .entry step(
// ENTRIES-NOT: .entry

// The runtime protocol's ops as LLVM emits them: waits are acquire loads,
// claims relaxed adds, acquire-release read-modify-writes a relaxed one
// between fences (LLVM 22's NVPTX drops an atomicrmw's ordering, so the
// ordering is in the fences), the JIT tail a release store, the abort flag
// a cas, error and reset words relaxed stores; and both bodies' arithmetic.
// Signals are release adds (inline PTX, below).
// PTX-LABEL: .entry step(
// PTX-DAG:     mov.u64 %rd{{[0-9]+}}, %globaltimer;
// PTX-DAG:     ld.acquire.gpu.global.b32
// PTX-DAG:     ld.relaxed.gpu.global.b32
// PTX-DAG:     atom.global.add.u32
// PTX-DAG:     atom.acq_rel.gpu.global.cas.b32
// PTX-DAG:     mul.rn.f32
// PTX-DAG:     add.rn.f32 {{.*}}, 0f3F800000;
// PTX-DAG:     fence.acq_rel.gpu;
// PTX-DAG:     st.relaxed.gpu.global.b32
// PTX-DAG:     vote.sync.ballot.b32
// PTX-DAG:     st.release.gpu.global.b32
// PTX-DAG:     bar.sync 0;
// The argument table's words: copied to shared memory once, read from there.
// PTX-DAG:     st.shared.b64
// PTX-DAG:     ld.shared.b64

// The only inline assembly (counted, registers renamed): each task body's
// own read of %tid.x (mega.thread_index, mega-fresh-thread-ids:
// side-effecting, so LLVM keeps it in its case), one for each of the two
// bodies, and every mega.signal's release add (red.release.gpu: no fence).
// NOASM:      {{^ *}}2 {{[[:space:]]*}}mov.u32 %R, %tid.x;{{$}}
// NOASM-NEXT: {{^ *}}10 {{[[:space:]]*}}red.release.gpu.global.add.u32 [%R], 1;{{$}}
// NOASM-NOT:  {{.}}

// NOLOCAL-NOT: .local

// PTXAS: Compiling entry function 'step' for 'sm_90a'
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

func.func @scale(%x: memref<512xf32>, %y: memref<512xf32>, %alpha: f32) {
  tile.kernel blocks(%i) in [4] threads 128 {
    %c128 = arith.constant 128 : index
    %off = arith.muli %i, %c128 : index
    %f = tile.alloc_fragment : memref<128xf32, #tile.fragment>
    tile.copy %x[%off] to %f[0] sizes [128]
        : memref<512xf32> to memref<128xf32, #tile.fragment>
    tile.parallel (%j) in [128] {
      %v = memref.load %f[%j] : memref<128xf32, #tile.fragment>
      %w = arith.mulf %v, %alpha : f32
      memref.store %w, %f[%j] : memref<128xf32, #tile.fragment>
    }
    tile.copy %f[0] to %y[%off] sizes [128]
        : memref<128xf32, #tile.fragment> to memref<512xf32>
  }
  return
}

func.func @shift(%y: memref<512xf32>, %z: memref<512xf32>) {
  tile.kernel blocks(%i) in [2] threads 128 {
    %c256 = arith.constant 256 : index
    %off = arith.muli %i, %c256 : index
    %s = tile.alloc_shared : memref<256xf32, #gpu.address_space<workgroup>>
    %f = tile.alloc_fragment : memref<256xf32, #tile.fragment>
    tile.copy %y[%off] to %s[0] sizes [256]
        : memref<512xf32> to memref<256xf32, #gpu.address_space<workgroup>>
    tile.copy %s[0] to %f[0] sizes [256]
        : memref<256xf32, #gpu.address_space<workgroup>> to memref<256xf32, #tile.fragment>
    tile.parallel (%j) in [256] {
      %v = memref.load %f[%j] : memref<256xf32, #tile.fragment>
      %one = arith.constant 1.0 : f32
      %w = arith.addf %v, %one : f32
      memref.store %w, %f[%j] : memref<256xf32, #tile.fragment>
    }
    tile.copy %f[0] to %z[%off] sizes [256]
        : memref<256xf32, #tile.fragment> to memref<512xf32>
  }
  return
}

mega.graph @step(%x: memref<512xf32>, %y: memref<512xf32>, %z: memref<512xf32>,
                 %alpha: f32)
    workers 2 attributes {mega.arg_names = ["x", "y", "z", "alpha"]} {
  mega.task @scale body @scale(%x, %y, %alpha
      : memref<512xf32>, memref<512xf32>, f32) count 4
      footprint [#mega.access<read operand 0 offset 128 * u + 0 size 128>,
                 #mega.access<write operand 1 offset 128 * u + 0 size 128>]
  mega.task @shift body @shift(%y, %z : memref<512xf32>, memref<512xf32>)
      count 2
      footprint [#mega.access<read operand 0 offset 256 * u + 0 size 256>,
                 #mega.access<write operand 1 offset 256 * u + 0 size 256>]
      {variable}
}
