//===- Passes.td - mega dialect transforms -----------------*- tablegen -*-===//

#ifndef TILEMEGA_DIALECT_MEGA_TRANSFORMS_PASSES_TD
#define TILEMEGA_DIALECT_MEGA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MegaDecompose : Pass<"mega-decompose", "::mlir::ModuleOp"> {
  let summary = "Split every operator of a mega.graph into SM-sized tasks";
  let description = [{
    An operator (a `mega.task` without `units_per_task`) has one *unit* per
    block of its tile kernel. This pass groups `k` consecutive units into one
    task instance, so that the operator runs as `ceil(units / k)` instances,
    and records the estimated cost of one instance in `cost_ns`.

    The cost model charges a unit the bytes of its `footprint` at the
    bandwidth one SM gets when all are busy (`bytes-per-ns`), and every
    instance a fixed dispatch cost (`task-overhead-ns`: waiting, signalling,
    the barrier around the body). `k` minimises the operator's makespan on
    the graph's workers, `ceil(instances / workers) * (k * unit + overhead)`;
    ties go to the smaller `k`, which leaves more instances for load
    balancing.

    With `claim-units`, a task of `k > 1` is marked `claims_units`: its
    instances still number `ceil(units / k)`, but the units beyond each
    instance's own are claimed at run time (see `mega.task`), so the CTAs
    that stream faster take more of them.

    ```mlir
    mega.task @up body @gemv(...) count 512 footprint [...]
    // becomes
    mega.task @up body @gemv(...) count 128 footprint [...]
        {cost_ns = 4.5e+03 : f64, units_per_task = 4 : i64}
    ```
  }];
  let options = [
    Option<"bytesPerNs", "bytes-per-ns", "double", "30.0",
           "Memory bandwidth of one SM when all SMs stream (bytes/ns)">,
    Option<"taskOverheadNs", "task-overhead-ns", "double", "1500.0",
           "Fixed cost of dispatching one task instance (ns)">,
    Option<"maxUnitsPerTask", "max-units-per-task", "int64_t", "64",
           "Largest number of units grouped into one instance">,
    Option<"claimUnits", "claim-units", "bool", "false",
           "Mark tasks of several units an instance claims_units: each "
           "instance runs its own unit, then claims the rest at run time">,
  ];
}

def MegaPlanEvents : Pass<"mega-plan-events", "::mlir::ModuleOp"> {
  let summary = "Derive per-instance events from the tasks' footprints";
  let description = [{
    Tasks run in graph order as far as their data is concerned: an instance
    depends on every earlier instance that wrote an element it reads or
    writes (read-after-write, write-after-write) and on every earlier
    instance that read an element it writes (write-after-read). Ranges come
    from the `#mega.access` footprints, widened to the units an instance
    runs.

    Dependencies implied by others are dropped (if `c` waits on `b` and `b`
    on `a`, `c` does not wait on `a`). Instances with the same set of
    dependencies share one `mega.event` whose trigger count is the size of
    the set; each instance waits on at most one event, and a producer
    signals every event whose set contains it. Where all instances of a task
    wait on (or signal) the same events, they go to the task-wide `waits`
    (`signals`); otherwise to `instance_waits` (`instance_signals`).

    ```mlir
    mega.task @norm body @rmsnorm(...) count 1 footprint [... write operand 2 ...]
    mega.task @proj body @gemv(...) count 64 footprint [... read operand 1 ...]
    // becomes
    mega.event @ev0 trigger 1
    mega.task @norm ... signals [@ev0]
    mega.task @proj ... waits [@ev0]
    ```
  }];
}

def MegaSchedule : Pass<"mega-schedule", "::mlir::ModuleOp"> {
  let summary = "Place task instances in per-worker AOT queues or the JIT queue";
  let description = [{
    List scheduling on the cost model (`cost_ns`): the instance with the
    longest remaining critical path among those whose inputs are done goes
    to the worker that becomes free first, preferring a worker that ran one
    of its producers when several are free (the consumer then finds the
    producer's output in that SM's cache path). The order of each worker's
    `aot` queue is its instances' start order in this simulated schedule,
    and the `jit` queue lists its instances in the same global start order,
    which is a topological order: that is what keeps the persistent kernel
    deadlock-free.

    In a graph with `workers_by_sm` (worker w on SM w mod G), an instance of
    a `latency_bound` task goes to a free worker on an SM that already runs
    such instances, else on an SM whose workers are all free, and other
    instances count a worker as busy while its SM runs one: the latency-bound
    instances get SMs of their own, and the streaming tasks' early loads
    stay off them.

    `policy` picks the queue kind: `aot` puts everything in AOT queues,
    `jit` everything in the JIT queue, and `auto` sends the tasks marked
    `variable` (cost known only at run time) to the JIT queue and the rest
    to AOT queues. A task that names a queue keeps it.

    ```mlir
    mega.queue @w0 aot worker 0 {instances = array<i64: 0, 3>,
                                 tasks = [@norm, @proj]}
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", "\"auto\"",
           "Queue choice: auto (variable tasks JIT), aot or jit">,
  ];
}

def MegaPairEntries : Pass<"mega-pair-entries", "::mlir::ModuleOp"> {
  let summary = "Pair consecutive AOT entries so the second one's weights load under the first";
  let description = [{
    After `mega-schedule`: marks in each `aot` queue the positions `p`
    whose entry runs together with entry `p + 1` (`paired`), for
    `convert-mega-to-gpu` to give the two bodies one case with disjoint
    shared tiles. The second body's loads of tensors no task writes (its
    weights, by the footprints) then start at the case's prefetch point,
    before the first entry waits for its events, and stream while it
    waits and computes: the task after a short, latency-bound stage (the
    output projection behind the attention) loads its own weights and
    the next task's.

    A pair is taken, left to right, where the first task waits only on
    lighter stages (`mega::waitsOnLighterStage`: behind a stage that
    streams its own weights, the loads would compete with it for DRAM),
    `mega::getPairProblem` finds nothing against it, and the two bodies'
    tiles (`mega::estimateBodySharedBytes`) fit `shared-bytes` (0: what a
    CTA has when the graph's `ctas_per_sm` CTAs share an SM of `chip`,
    less the persistent kernel's own records, argument table and control
    words). A graph with JIT entries or several ranks is left alone (its
    workers do not commit to their next entry before it is ready).

    ```mlir
    mega.queue @w0 aot worker 0 {tasks = [@qkv, @wo, @wgu, @wd], ...}
    // becomes
    mega.queue @w0 aot worker 0 {tasks = [@qkv, @wo, @wgu, @wd], ...,
                                 paired = array<i64: 1>}
    ```
  }];
  let options = [
    Option<"sharedBytes", "shared-bytes", "int64_t", "0",
           "Most shared memory the two bodies of a pair may take (0: from "
           "the chip and the graph's ctas_per_sm)">,
    Option<"chip", "chip", "std::string", "\"sm_90a\"",
           "Target GPU architecture, whose shared memory bounds a pair">,
  ];
}

def MegaFreshThreadIds : Pass<"mega-fresh-thread-ids", "::mlir::ModuleOp"> {
  let summary = "Each task body of a persistent kernel reads its thread index itself";
  let description = [{
    In every `scf.index_switch` marked `tile.exclusive_cases` (the
    persistent kernel's switch over task bodies, after
    `convert-tile-to-gpu`), each case starts with a `mega.thread_index`,
    and the uses of `gpu.thread_id x` inside the case use it instead. LLVM
    then computes each body's per-thread addresses inside its case rather
    than once before the worker loop, where every body's stayed live at
    the same time (register pressure: the Llama-3.2-1B generation kernel
    238 registers without, 139 with). Run after the CSE that merges the
    thread ids; `tilemega-tile-to-ptx-pipeline` runs it unless
    `mega-fresh-thread-ids=false` (and then, for claimed units, with
    `cases=false`).

    The `scf.while` of a claiming entry's units (`mega.claim_loop`) gets
    a `mega.thread_index` at the start of each of its regions, whatever
    `cases` says, and every value in them that is computed from the thread
    index outside the loop by side-effect-free ops (the case's read, the
    kernel's `thread 0` test that CSE merged the body's into) is computed
    again from it there: no per-thread condition in the loop is then
    loop-invariant, so LLVM cannot unswitch the loop on one and leave the
    threads of a warp in different copies of its aligned barriers.

    ```mlir
    %tid = gpu.thread_id x
    scf.index_switch %case -> () case 1 { ... %a = arith.muli %tid, %c8 ... }
        {tile.exclusive_cases}
    // becomes
    scf.index_switch %case case 1 {
      %t1 = mega.thread_index
      ... %a = arith.muli %t1, %c8 ...
    }
    ```
  }];
  let options = [
    Option<"cases", "cases", "bool", /*default=*/"true",
           "Give each case of the switch over bodies its own thread index "
           "(claim loops get theirs either way)">,
  ];
  // arith: a claim loop's copy of an i32 thread index is an index_cast.
  let dependentDialects = ["::mlir::tilemega::mega::MegaDialect",
                           "::mlir::arith::ArithDialect"];
}

#endif // TILEMEGA_DIALECT_MEGA_TRANSFORMS_PASSES_TD
