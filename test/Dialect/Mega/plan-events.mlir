// RUN: tilemega-opt %s -split-input-file -mega-plan-events | FileCheck %s

// Events from footprints. Tile bodies only need their grids here.

func.func @k4(%in: memref<64xf32>, %out: memref<64xf32>) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}
func.func @k4x3(%in0: memref<64xf32>, %in1: memref<64xf32>, %out: memref<64xf32>) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}
func.func @k2(%in: memref<64xf32>, %out: memref<64xf32>) {
  tile.kernel blocks(%i) in [2] threads 128 {
  }
  return
}
func.func @k1(%in: memref<64xf32>, %out: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 128 {
  }
  return
}

// Read after write, per instance:
//  - b_i reads x[16i, 16i + 16), which only a_i wrote: one event per
//    instance (trigger 1), signalled by a_i alone (a reads the weights %w,
//    which nobody writes: no event).
//  - c runs 2 units an instance: c_j reads x and y over units 2j, 2j + 1, so
//    it depends on a_2j, a_2j+1, b_2j, b_2j+1; a_i is implied by b_i, so c_j
//    waits only on {b_2j, b_2j+1} (trigger 2), and no a_i signals it.
//  - d_0 and d_1 both read all of y: one event {b_0..b_3} (trigger 4),
//    waited on task-wide. They both overwrite all of z, yet instances of one
//    task never wait on each other.
//  - e and f read z: both depend on {d_0, d_1}, the same set, so they share
//    one event; every instance of d signals it, so it is task-wide.
//  - b's instances signal different events (the per-c events and the d
//    event): per-instance signals.

// CHECK-LABEL: mega.graph @raw
// CHECK-NEXT:    mega.event @[[A0:ev0]] trigger 1
// CHECK-NEXT:    mega.event @[[A1:ev1]] trigger 1
// CHECK-NEXT:    mega.event @[[A2:ev2]] trigger 1
// CHECK-NEXT:    mega.event @[[A3:ev3]] trigger 1
// CHECK-NEXT:    mega.event @[[B01:ev4]] trigger 2
// CHECK-NEXT:    mega.event @[[B23:ev5]] trigger 2
// CHECK-NEXT:    mega.event @[[BALL:ev6]] trigger 4
// CHECK-NEXT:    mega.event @[[D:ev7]] trigger 2
// CHECK-NEXT:    mega.task @a body @k4
// CHECK-NOT:       waits
// CHECK-SAME:      instance_signals = {{\[}}[@[[A0]]], [@[[A1]]], [@[[A2]]], [@[[A3]]]]
// CHECK-NOT:       instance_waits
// CHECK-NEXT:    mega.task @b body @k4
// CHECK-SAME:      instance_signals = {{\[}}[@[[B01]], @[[BALL]]], [@[[B01]], @[[BALL]]], [@[[B23]], @[[BALL]]], [@[[B23]], @[[BALL]]]]
// CHECK-SAME:      instance_waits = {{\[}}[@[[A0]]], [@[[A1]]], [@[[A2]]], [@[[A3]]]]
// CHECK-NEXT:    mega.task @c body @k4x3
// CHECK-NOT:       signals
// CHECK-SAME:      instance_waits = {{\[}}[@[[B01]]], [@[[B23]]]]
// CHECK-NOT:       signals
// CHECK-NEXT:    mega.task @d body @k2({{.*}}) count 2 waits [@[[BALL]]] signals [@[[D]]] footprint
// CHECK-NOT:       instance_
// CHECK-NEXT:    mega.task @e body @k1({{.*}}) count 1 waits [@[[D]]] footprint
// CHECK-NOT:       signals
// CHECK-NEXT:    mega.task @f body @k2({{.*}}) count 2 waits [@[[D]]] footprint
// CHECK-NOT:       instance_
// CHECK-NEXT:  {{^  }}}
mega.graph @raw(%w: memref<64xf32>, %x: memref<64xf32>, %y: memref<64xf32>,
                %z: memref<64xf32>, %o: memref<64xf32>, %p: memref<64xf32>)
    workers 4 {
  mega.task @a body @k4(%w, %x : memref<64xf32>, memref<64xf32>) count 4
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 64>,
                 #mega.access<write operand 1 offset 16 * u + 0 size 16>]
      {units_per_task = 1}
  mega.task @b body @k4(%x, %y : memref<64xf32>, memref<64xf32>) count 4
      footprint [#mega.access<read operand 0 offset 16 * u + 0 size 16>,
                 #mega.access<write operand 1 offset 16 * u + 0 size 16>]
      {units_per_task = 1}
  mega.task @c body @k4x3(%x, %y, %o : memref<64xf32>, memref<64xf32>,
      memref<64xf32>) count 2
      footprint [#mega.access<read operand 0 offset 16 * u + 0 size 16>,
                 #mega.access<read operand 1 offset 16 * u + 0 size 16>,
                 #mega.access<write operand 2 offset 16 * u + 0 size 16>]
      {units_per_task = 2}
  mega.task @d body @k2(%y, %z : memref<64xf32>, memref<64xf32>) count 2
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 64>,
                 #mega.access<write operand 1 offset 0 * u + 0 size 64>]
      {units_per_task = 1}
  mega.task @e body @k1(%z, %p : memref<64xf32>, memref<64xf32>) count 1
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 64>]
  mega.task @f body @k2(%z, %p : memref<64xf32>, memref<64xf32>) count 2
      footprint [#mega.access<read operand 0 offset 32 * u + 0 size 32>]
      {units_per_task = 1}
}

// -----

func.func @k4(%in: memref<64xf32>, %out: memref<64xf32>) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}
func.func @k2(%in: memref<64xf32>, %out: memref<64xf32>) {
  tile.kernel blocks(%i) in [2] threads 128 {
  }
  return
}
func.func @k1(%in: memref<64xf32>, %out: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 128 {
  }
  return
}

// Write after read and write after write; events the graph already has keep
// their names and uses, new ones are numbered after them.
//  - Reads after reads order nothing: r reads x after start did, and waits
//    only on the event it had.
//  - w_i overwrites x[16i, 16i + 16), which start and r_(i/2) read: w_0 and
//    w_1 share the event {start, r_0}, w_2 and w_3 the event {start, r_1}.
//    (The existing event @user, start -> r, is not used to prune start.)
//  - w2 overwrites all of x: it follows the writers w_0..w_3 (one event of
//    trigger 4); the readers start, r_0 and r_1 are implied by them.

// CHECK-LABEL: mega.graph @war_waw
// CHECK-NEXT:    mega.event @[[R0:ev0]] trigger 2
// CHECK-NEXT:    mega.event @[[R1:ev1]] trigger 2
// CHECK-NEXT:    mega.event @[[W:ev2]] trigger 4
// CHECK-NEXT:    mega.event @user trigger 1
// CHECK-NEXT:    mega.task @start body @k1({{.*}}) count 1 signals [@user, @[[R0]], @[[R1]]] footprint
// CHECK-NOT:       instance_
// CHECK-NEXT:    mega.task @r body @k2({{.*}}) count 2 waits [@user] footprint
// CHECK-SAME:      instance_signals = {{\[}}[@[[R0]]], [@[[R1]]]]
// CHECK-NOT:       instance_waits
// CHECK-NEXT:    mega.task @w body @k4({{.*}}) count 4 signals [@[[W]]] footprint
// CHECK-SAME:      instance_waits = {{\[}}[@[[R0]]], [@[[R0]]], [@[[R1]]], [@[[R1]]]]
// CHECK-NEXT:    mega.task @w2 body @k1({{.*}}) count 1 waits [@[[W]]] footprint
// CHECK-NOT:       instance_
// CHECK-NEXT:  }
mega.graph @war_waw(%x: memref<64xf32>, %s: memref<64xf32>,
                    %t: memref<64xf32>) workers 2 {
  mega.event @user trigger 1
  mega.task @start body @k1(%x, %t : memref<64xf32>, memref<64xf32>) count 1
      signals [@user]
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 64>]
  mega.task @r body @k2(%x, %s : memref<64xf32>, memref<64xf32>) count 2
      waits [@user]
      footprint [#mega.access<read operand 0 offset 32 * u + 0 size 32>]
  mega.task @w body @k4(%s, %x : memref<64xf32>, memref<64xf32>) count 4
      footprint [#mega.access<write operand 1 offset 16 * u + 0 size 16>]
  mega.task @w2 body @k1(%s, %x : memref<64xf32>, memref<64xf32>) count 1
      footprint [#mega.access<write operand 1 offset 0 * u + 0 size 64>]
}

// -----

func.func @rope(%x: memref<64xf32>, %q: memref<32xf32>, %k: memref<32xf32>) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}
func.func @attend(%q: memref<32xf32>, %o: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 128 {
  }
  return
}

// Unit ranges: units 0-1 of @rope write q, units 2-3 write k, so the q
// reader waits on rope_0 and rope_1 only, the k reader on rope_2 and rope_3.
// @rope2 runs the same body two units an instance: instance 0 overwrites
// only q, after its reader qc (write after read; rope_0 and rope_1 are
// implied by qc), instance 1 only k, after kc.

// CHECK-LABEL: mega.graph @heads
// CHECK-NEXT:    mega.event @[[Q:ev0]] trigger 2
// CHECK-NEXT:    mega.event @[[K:ev1]] trigger 2
// CHECK-NEXT:    mega.event @[[QC:ev2]] trigger 1
// CHECK-NEXT:    mega.event @[[KC:ev3]] trigger 1
// CHECK-NEXT:    mega.task @rope body @rope
// CHECK-SAME:      instance_signals = {{\[}}[@[[Q]]], [@[[Q]]], [@[[K]]], [@[[K]]]]
// CHECK-NOT:       instance_waits
// CHECK-NEXT:    mega.task @qc body @attend({{.*}}) count 1 waits [@[[Q]]] signals [@[[QC]]] footprint
// CHECK-NEXT:    mega.task @kc body @attend({{.*}}) count 1 waits [@[[K]]] signals [@[[KC]]] footprint
// CHECK-NEXT:    mega.task @rope2 body @rope
// CHECK-NOT:       signals
// CHECK-SAME:      instance_waits = {{\[}}[@[[QC]]], [@[[KC]]]]
// CHECK-NOT:       signals
// CHECK-NEXT:  {{^  }}}
mega.graph @heads(%x: memref<64xf32>, %q: memref<32xf32>, %k: memref<32xf32>,
                  %o: memref<64xf32>, %o2: memref<64xf32>) workers 2 {
  mega.task @rope body @rope(%x, %q, %k : memref<64xf32>, memref<32xf32>,
      memref<32xf32>) count 4
      footprint [#mega.access<write operand 1 offset 16 * u + 0 size 16 units 0 to 2>,
                 #mega.access<write operand 2 offset 16 * u + -32 size 16 units 2 to 4>]
      {units_per_task = 1}
  mega.task @qc body @attend(%q, %o : memref<32xf32>, memref<64xf32>) count 1
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 32>]
  mega.task @kc body @attend(%k, %o2 : memref<32xf32>, memref<64xf32>) count 1
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 32>]
  mega.task @rope2 body @rope(%x, %q, %k : memref<64xf32>, memref<32xf32>,
      memref<32xf32>) count 2
      footprint [#mega.access<write operand 1 offset 16 * u + 0 size 16 units 0 to 2>,
                 #mega.access<write operand 2 offset 16 * u + -32 size 16 units 2 to 4>]
      {units_per_task = 2}
}

// -----

func.func @k2(%in: memref<64xf32>, %out: memref<64xf32>) {
  tile.kernel blocks(%i) in [2] threads 128 {
  }
  return
}

// Without footprints there is nothing to order: no events.

// CHECK-LABEL: mega.graph @opaque
// CHECK-NOT:     mega.event
// CHECK-NOT:     waits
// CHECK-NOT:     signals
// CHECK:       {{^  }}}
mega.graph @opaque(%x: memref<64xf32>, %y: memref<64xf32>) workers 2 {
  mega.task @a body @k2(%x, %y : memref<64xf32>, memref<64xf32>) count 2
  mega.task @b body @k2(%y, %x : memref<64xf32>, memref<64xf32>) count 2
}

// -----

func.func @k1(%in: memref<64xf32>, %out: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 128 {
  }
  return
}

// New events get names no symbol of the graph has: the graph's own event is
// called @ev1, the name a counter that starts after the one existing event
// would pick.

// CHECK-LABEL: mega.graph @user_names
// CHECK-DAG:     mega.event @ev1 trigger 1
// CHECK-DAG:     mega.event @[[NEW:[A-Za-z0-9_]+]] trigger 1
// CHECK:         mega.task @start {{.*}} signals [@ev1]
// CHECK:         mega.task @p {{.*}} signals [@[[NEW]]]
// CHECK:         mega.task @c {{.*}} waits [@[[NEW]]]
mega.graph @user_names(%x: memref<64xf32>, %s: memref<64xf32>) workers 2 {
  mega.event @ev1 trigger 1
  mega.task @start body @k1(%s, %s : memref<64xf32>, memref<64xf32>) count 1
      signals [@ev1]
  mega.task @p body @k1(%s, %x : memref<64xf32>, memref<64xf32>) count 1
      footprint [#mega.access<write operand 1 offset 0 * u + 0 size 64>]
  mega.task @c body @k1(%x, %s : memref<64xf32>, memref<64xf32>) count 1
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 64>]
}

// -----

func.func @k2(%in: memref<64xf32>, %out: memref<64xf32>) {
  tile.kernel blocks(%i) in [2] threads 128 {
  }
  return
}

// Per-instance lists the graph already has are kept, as task-wide lists are:
// c_1 still waits on @user (start_0 signals it) besides its new event.

// CHECK-LABEL: mega.graph @user_lists
// CHECK:         mega.task @start {{.*}} {instance_signals = {{\[}}[@user], []]}
// CHECK-NEXT:    mega.task @p {{.*}}instance_signals = {{\[}}[@[[P0:[A-Za-z0-9_]+]]], [@[[P1:[A-Za-z0-9_]+]]]]
// CHECK-NEXT:    mega.task @c {{.*}}instance_waits = {{\[}}[@[[P0]]], [@user, @[[P1]]]]
mega.graph @user_lists(%x: memref<64xf32>, %s: memref<64xf32>) workers 2 {
  mega.event @user trigger 1
  mega.task @start body @k2(%s, %s : memref<64xf32>, memref<64xf32>) count 2
      {instance_signals = [[@user], []]}
  mega.task @p body @k2(%s, %x : memref<64xf32>, memref<64xf32>) count 2
      footprint [#mega.access<write operand 1 offset 32 * u + 0 size 32>]
  mega.task @c body @k2(%x, %s : memref<64xf32>, memref<64xf32>) count 2
      footprint [#mega.access<read operand 0 offset 32 * u + 0 size 32>]
      {instance_waits = [[], [@user]]}
}

// -----

func.func @k4c(%in: memref<64xf32>, %out: memref<64xf32>) {
  tile.kernel blocks(%i) in [4] threads 128 {
  }
  return
}

// Claimed units (claims_units): instance i runs unit i, then any unit from
// `count` (2) on; its footprint is taken over units [i, 4), one range (a_0's
// covers unit 1 too, which only a_1 runs: a safe overestimate). The
// consumer's instance 0 reads unit 0, which only a_0 may write; the others
// read units that both of a's instances may write, and wait for both.

// CHECK-LABEL: mega.graph @claimed
// CHECK-NEXT:    mega.event @[[A0:ev0]] trigger 1
// CHECK-NEXT:    mega.event @[[A01:ev1]] trigger 2
// CHECK-NEXT:    mega.task @a body @k4c
// CHECK-SAME:      instance_signals = {{\[}}[@[[A0]], @[[A01]]], [@[[A01]]]]
// CHECK-NEXT:    mega.task @b body @k4c
// CHECK-SAME:      instance_waits = {{\[}}[@[[A0]]], [@[[A01]]], [@[[A01]]], [@[[A01]]]]
mega.graph @claimed(%x: memref<64xf32>, %y: memref<64xf32>, %o: memref<64xf32>)
    workers 2 {
  mega.task @a body @k4c(%x, %y : memref<64xf32>, memref<64xf32>) count 2
      footprint [#mega.access<read operand 0 offset 0 * u + 0 size 64>,
                 #mega.access<write operand 1 offset 16 * u + 0 size 16>]
      {units_per_task = 2, claims_units}
  mega.task @b body @k4c(%y, %o : memref<64xf32>, memref<64xf32>) count 4
      footprint [#mega.access<read operand 0 offset 16 * u + 0 size 16>,
                 #mega.access<write operand 1 offset 16 * u + 0 size 16>]
      {units_per_task = 1}
}
