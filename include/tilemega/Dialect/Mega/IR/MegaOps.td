//===- MegaOps.td - mega dialect operations ----------------*- tablegen -*-===//

#ifndef TILEMEGA_DIALECT_MEGA_IR_MEGAOPS_TD
#define TILEMEGA_DIALECT_MEGA_IR_MEGAOPS_TD

include "tilemega/Dialect/Mega/IR/MegaDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Mega_Op<string mnemonic, list<Trait> traits = []>
    : Op<Mega_Dialect, mnemonic, traits>;

// A list of event names (`[@e0, @e1]`). Unlike the upstream
// FlatSymbolRefArrayAttr it can be built from a constant, so that it can
// default to the empty list.
def Mega_EventRefArrayAttr
    : TypedArrayAttrBase<FlatSymbolRefAttr, "list of event symbol references"> {
  let constBuilderCall = "$_builder.getArrayAttr($0)";
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Mega_QueueKind : I32EnumAttr<"QueueKind", "task queue kind", [
    I32EnumAttrCase<"aot", 0>, I32EnumAttrCase<"jit", 1>]> {
  let cppNamespace = "::mlir::tilemega::mega";
  let genSpecializedAttr = 0;
}

def Mega_QueueKindAttr : EnumAttr<Mega_Dialect, Mega_QueueKind, "queue_kind"> {
  let summary = "Who hands a queue's tasks to the workers";
  let description = [{
    `aot`: an ahead-of-time queue. The compiler fixes the order of its tasks
    and one worker runs them in that order, waiting on their events itself.
    Good for tasks whose cost is stable.

    `jit`: the just-in-time queue. The graph's scheduler warps watch the
    events and hand tasks that became ready to whichever worker is idle.
    Good for tasks whose cost varies (attention over sequences of different
    lengths, for example).

    Inside `mega.queue` the kind is printed as a bare keyword.

    ```mlir
    mega.queue @w0 aot worker 0
    mega.queue @dyn jit
    ```
  }];
}


//===----------------------------------------------------------------------===//
// #mega.access
//===----------------------------------------------------------------------===//

def Mega_AccessMode : I32EnumAttr<"AccessMode", "how a task touches a tensor", [
    I32EnumAttrCase<"read", 0>, I32EnumAttrCase<"write", 1>]> {
  let cppNamespace = "::mlir::tilemega::mega";
  let genSpecializedAttr = 0;
}

def Mega_AccessAttr : AttrDef<Mega_Dialect, "Access"> {
  let mnemonic = "access";
  let summary = "The flat element range one unit of a task reads or writes";
  let description = [{
    Unit `u` of the task touches the elements
    `[stride * u + base, stride * u + base + size)` of operand `operand`,
    counted in row-major order. A task lists one access per range it reads or
    writes; `mega-plan-events` derives the events from them (a consumer waits
    only for the producer instances whose writes overlap its reads, and a
    writer for the earlier readers and writers of what it overwrites), and
    `mega-decompose` sums their bytes into the task's cost.

    With `units F to L`, only the units `F <= u < L` touch that range (the
    base may then be negative as long as unit `F` starts at element 0 or
    later): a body whose units write different tensors, such as RoPE over q
    heads and then k heads, lists one access per tensor.

    ```mlir
    // Unit u writes 16 rows of a 3072-element vector.
    #mega.access<write operand 2 offset 16 * u + 0 size 16>
    // Units 32..39 write head u - 32 of operand 4.
    #mega.access<write operand 4 offset 64 * u + -2048 size 64 units 32 to 40>
    ```
  }];
  let parameters = (ins
    EnumParameter<Mega_AccessMode>:$mode,
    "int64_t":$operand,
    "int64_t":$stride,
    "int64_t":$base,
    "int64_t":$size,
    DefaultValuedParameter<"int64_t", "0">:$first,
    DefaultValuedParameter<"int64_t", "-1">:$last);
  let assemblyFormat = [{
    `<` $mode `operand` $operand `offset` $stride `*` `u` `+` $base
    `size` $size `` custom<UnitRange>($first, $last) `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    bool isWrite() { return getMode() == AccessMode::write; }
    /// First element unit `u` touches.
    int64_t getBegin(int64_t u) { return getStride() * u + getBase(); }
    /// Whether unit `u` touches the range at all.
    bool coversUnit(int64_t u) {
      return u >= getFirst() && (getLast() < 0 || u < getLast());
    }
  }];
}

def Mega_AccessArrayAttr
    : TypedArrayAttrBase<Mega_AccessAttr, "list of #mega.access">;

//===----------------------------------------------------------------------===//
// mega.graph
//===----------------------------------------------------------------------===//

def Mega_GraphOp : Mega_Op<"graph", [
    Symbol, SymbolTable, IsolatedFromAbove, SingleBlock, NoTerminator,
    HasParent<"::mlir::ModuleOp">]> {
  let summary = "One persistent kernel launch running a graph of tasks";
  let description = [{
    A graph is one launch of a persistent kernel: `workers` worker CTAs (at
    least 1) loop over their queues and run tasks until the graph is done,
    while a scheduler CTA serves the just-in-time queue. `schedulers`
    (default 1) is the number of scheduler warps the graph may use; 0 means
    no JIT queue. Today the lowering serves the queue with the scheduler
    CTA's first warp whatever the number (32 entries checked at once). The region's arguments are the graph's global tensors (memrefs)
    and scalars; tasks pass them to their tile functions.

    The body holds `mega.event`, `mega.queue` and `mega.task` ops, whose
    names share the graph's symbol table. The graph's verifier checks the
    whole task graph: every event is signalled by exactly as many task
    instances as its trigger count, every event that is waited on is
    signalled, and the dependencies (task, event it signals, task waiting on
    that event) form no cycle.

    ```mlir
    // @scale_fn is a func.func of the module, with a 16-block tile.kernel.
    mega.graph @decode(%x: memref<4096xf16>, %y: memref<4096xf16>, %n: i32)
        workers 132 schedulers 4 {
      mega.event @done trigger 16
      mega.task @scale body @scale_fn(%x, %y, %n
          : memref<4096xf16>, memref<4096xf16>, i32) count 16 signals [@done]
    }
    ```

    A graph may repeat on the device: with `stop_word = array<i64: A, W>`
    and `max_steps = N`, one launch runs up to N steps of the whole graph
    (as many as the host sets in the state, one by default), every CTA meeting
    the others at a grid barrier after each step, and stops after the first
    step that leaves element W of argument A (an i32 memref) nonzero. Each
    step is one epoch of the events, so a step waits exactly as a launch
    did; the bodies of step n + 1 see everything step n wrote. This is how
    a decode step becomes a whole generation in one launch.

    With `ctas_per_sm = N` (default 1), N CTAs of the kernel share each SM:
    `convert-mega-to-gpu` then admits up to N x the chip's SMs CTAs and
    tells ptxas to fit N an SM (registers capped to match).

    With `workers_by_sm`, worker w runs on SM w mod G, G = ceil(workers /
    ctas_per_sm): each CTA of the kernel claims, at launch, a worker index
    its SM (`%smid`) stands for (s, s + G, ...), and takes any free one
    when none is left, so every index has exactly one CTA whatever SMs the
    hardware hands out (`mega.stake`, docs/mega.md). `mega-schedule` then
    knows which workers share an SM and keeps the instances of
    `latency_bound` tasks on SMs of their own.

    With `ranks R` (default 1), the graph is one of R identical kernels, one
    per GPU (rank) of a node, that synchronise through **peer events**
    (`mega.event ... peers`): a task instance that signals a peer event
    signals it on every rank, its own included, and an instance that waits
    on one waits until every rank's signalling instances are done. Each
    rank's counters of a peer event are kept per sender (R words), so that a
    rank running a step ahead never stands in for another. The tasks'
    bodies reach the other ranks' memory through graph arguments the
    runtime binds per rank (peer buffers).

    ```mlir
    mega.graph @tp(%part: memref<2048xbf16>, %to_peer: memref<2048xbf16>,
                   %inbox: memref<2048xbf16>, %x: memref<2048xbf16>)
        workers 66 ranks 2 {
      mega.event @pushed trigger 2 peers
      mega.task @push body @push_fn(%part, %to_peer : ...) count 2
          signals [@pushed]
      mega.task @reduce body @reduce_fn(%part, %inbox, %x : ...) count 2
          waits [@pushed]
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$workers,
                       DefaultValuedAttr<I64Attr, "1">:$schedulers,
                       DefaultValuedAttr<I64Attr, "1">:$ranks,
                       OptionalAttr<DenseI64ArrayAttr>:$stop_word,
                       OptionalAttr<I64Attr>:$max_steps,
                       OptionalAttr<I64Attr>:$ctas_per_sm,
                       UnitAttr:$workers_by_sm);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    OpBuilder<(ins "::llvm::StringRef":$name, "::mlir::TypeRange":$globals,
                   "int64_t":$workers, CArg<"int64_t", "1">:$schedulers)>
  ];
  let extraClassDeclaration = [{
    /// The graph's global tensors and scalars (the region's arguments).
    ::mlir::Block::BlockArgListType getGlobals() {
      return getBody().getArguments();
    }
    /// The single block of the body.
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
    /// `workers` and `schedulers` as signed values (the generated getters
    /// of I64Attr return uint64_t).
    int64_t getNumWorkers() { return static_cast<int64_t>(getWorkers()); }
    int64_t getNumSchedulers() { return static_cast<int64_t>(getSchedulers()); }
    /// `ranks` as a signed value: the GPUs that run the graph together.
    int64_t getNumRanks() { return static_cast<int64_t>(getRanks()); }
    /// The CTAs each SM holds: `ctas_per_sm` (several when the bodies'
    /// registers and shared memory let two or more share an SM), else 1.
    int64_t getNumCtasPerSm() {
      return static_cast<int64_t>(getCtasPerSm().value_or(1));
    }
    /// Whether one launch repeats the graph (stop_word and max_steps).
    bool isLooping() { return getStopWord().has_value(); }
    /// The SMs the workers are laid over, ceil(workers / ctas_per_sm): with
    /// `workers_by_sm`, worker w runs on SM w mod this.
    int64_t getNumWorkerSms() {
      return (getNumWorkers() + getNumCtasPerSm() - 1) / getNumCtasPerSm();
    }
    /// The stop_word / max_steps checks of the verifier.
    ::mlir::LogicalResult verifyLoop();
  }];
}

//===----------------------------------------------------------------------===//
// mega.event
//===----------------------------------------------------------------------===//

def Mega_EventOp : Mega_Op<"event", [Symbol, HasParent<"GraphOp">]> {
  let summary = "A dependency counter that fires after N signals";
  let description = [{
    A counter in global memory. Every task instance that lists the event in
    its `signals` increments it once when it finishes (a release); the event
    fires when the counter reaches `trigger` (at least 1), and task instances
    that list it in `waits` start only after that (an acquire). The trigger
    count must equal the number of task instances that signal the event: the
    sum of `count` over the tasks that list it.

    ```mlir
    // Fired once all 32 instances of @norm are done.
    mega.event @normed trigger 32
    ```

    A `peers` event (in a graph of several `ranks`) fires once the
    signalling instances of every rank are done: `trigger` still counts one
    rank's signalling instances, and each rank keeps one counter per sender
    (the graph's description says why).
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$trigger,
                       UnitAttr:$peers);
  let assemblyFormat = "$sym_name `trigger` $trigger (`peers` $peers^)? attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// `trigger` as a signed value.
    int64_t getTriggerCount() { return static_cast<int64_t>(getTrigger()); }
  }];
}

//===----------------------------------------------------------------------===//
// mega.queue
//===----------------------------------------------------------------------===//

def Mega_QueueOp : Mega_Op<"queue", [Symbol, HasParent<"GraphOp">]> {
  let summary = "A queue of tasks for one worker, or the just-in-time queue";
  let description = [{
    An `aot` queue belongs to the worker whose index follows `worker` (in
    `[0, workers)` of the graph; at most one such queue per worker); its
    task order is fixed at compile time. The `jit` queue (at most one per
    graph, and only in a graph with scheduler warps) is fed at run time by
    the scheduler warps with tasks whose events have fired. Tasks name their
    queue with `queue @q`; the scheduling pass assigns tasks that have none.

    ```mlir
    mega.queue @w0 aot worker 0
    mega.queue @w1 aot worker 1
    mega.queue @dyn jit
    ```

    After `mega-schedule`, a queue lists the task instances it runs, in
    order: entry `i` is instance `instances[i]` of task `tasks[i]`.

    ```mlir
    mega.queue @w0 aot worker 0 {tasks = [@norm, @proj, @proj],
                                 instances = array<i64: 0, 0, 7>}
    ```

    `paired` (an `aot` queue, after `mega-pair-entries`) lists positions
    `p` whose entry runs together with entry `p + 1`: one case of the
    persistent kernel holds both bodies, their shared tiles in disjoint
    bytes, so the second body's loads of tensors no task writes (its
    weights) start before the first one waits for its events, while it
    waits and computes. The positions ascend and no entry is in two pairs;
    both tasks run one unit an entry, the second has no `tile.task_wait`
    and reads a tensor no task writes (`mega::getPairProblem`).

    ```mlir
    mega.queue @w0 aot worker 0 {tasks = [@qkv, @wo, @wgu, @wd],
                                 instances = array<i64: 0, 0, 0, 0>,
                                 paired = array<i64: 1>}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Mega_QueueKindAttr:$kind,
                       OptionalAttr<I64Attr>:$worker,
                       OptionalAttr<FlatSymbolRefArrayAttr>:$tasks,
                       OptionalAttr<DenseI64ArrayAttr>:$instances,
                       OptionalAttr<DenseI64ArrayAttr>:$paired);
  // The enum attribute prints its own leading space, hence the `` before it.
  let assemblyFormat = "$sym_name `` $kind (`worker` $worker^)? attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Number of scheduled entries (0 before mega-schedule).
    size_t getNumEntries() {
      return getTasks() ? getTasks()->size() : 0;
    }
    /// `worker` as a signed value; std::nullopt for the jit queue.
    std::optional<int64_t> getWorkerIndex() {
      if (std::optional<uint64_t> worker = getWorker())
        return static_cast<int64_t>(*worker);
      return std::nullopt;
    }
  }];
}

//===----------------------------------------------------------------------===//
// mega.task
//===----------------------------------------------------------------------===//

def Mega_TaskOp : Mega_Op<"task", [
    Symbol, HasParent<"GraphOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "An operator split into SM-level task instances";
  let description = [{
    One operator of the graph, split into `count` task instances, each the
    work of one SM. `body` names a tile function: a `func.func` in the
    enclosing module that contains one `tile.kernel` whose grid has `count`
    blocks in all. Instance `i` runs that kernel's body with block index `i`
    (linearised over the grid), on the operands, which are arguments of the
    enclosing graph and match the tile function's signature.

    An instance starts once every event in `waits` has fired, and signals
    every event in `signals` once when it is done. `queue` names the
    `mega.queue` that runs the task; without it, the scheduling pass picks
    one.

    ```mlir
    mega.task @proj body @gemv(%y, %w, %o : memref<4096xf16>,
        memref<4096x4096xf16>, memref<4096xf16>)
        count 64 waits [@normed] signals [@projected] queue @dyn
    ```

    **Operators.** Before `mega-decompose`, a task is an operator: `count`
    equals the number of blocks (*units*) of its tile kernel, and
    `footprint` lists the `#mega.access` ranges each unit reads and writes.
    `variable` marks an operator whose cost varies at run time (a candidate
    for the JIT queue).

    **Decomposed.** `mega-decompose` groups `units_per_task` consecutive
    units into one instance (so `count = ceil(units / units_per_task)`) and
    records the cost model's estimate of one instance in `cost_ns`.

    **Planned.** `mega-plan-events` adds `instance_waits` and
    `instance_signals`: for each instance, the list of events it waits on
    and signals on top of the task-wide `waits` and `signals`.

    `latency_bound` marks a task whose instances wait on memory round trips
    rather than stream (an attention over a short cache): in a graph with
    `workers_by_sm`, `mega-schedule` gives them SMs that run nothing else
    meanwhile, since another CTA's loads on the same SM (a GEMV's early
    prologue) delay every load and wait of theirs.

    `claims_units` (set by `mega-decompose claim-units`) runs the task's
    units self-scheduled: instance `i` runs unit `i`, then claims the units
    from `count` on, one at a time, from a counter of the task that the
    persistent kernel zeroes at the end of every step, until the counter
    passes the last unit. A CTA that streams faster then runs more units,
    so the operator ends when the CTAs' summed rates have moved its bytes,
    not when its slowest CTA has moved a fixed share. Which instance runs
    which claimed unit is known only at run time: instance `i` may touch
    every unit from `i` on (`mega-plan-events` plans its events so), and
    a consumer of a claimed unit waits for every instance.
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    FlatSymbolRefAttr:$body,
    Variadic<AnyType>:$args,
    I64Attr:$count,
    DefaultValuedAttr<Mega_EventRefArrayAttr, "{}">:$waits,
    DefaultValuedAttr<Mega_EventRefArrayAttr, "{}">:$signals,
    OptionalAttr<FlatSymbolRefAttr>:$queue,
    OptionalAttr<Mega_AccessArrayAttr>:$footprint,
    UnitAttr:$variable,
    OptionalAttr<I64Attr>:$units_per_task,
    OptionalAttr<F64Attr>:$cost_ns,
    OptionalAttr<ArrayAttr>:$instance_waits,
    OptionalAttr<ArrayAttr>:$instance_signals,
    UnitAttr:$latency_bound,
    UnitAttr:$claims_units);
  let assemblyFormat = [{
    $sym_name `body` $body `(` ($args^ `:` type($args))? `)`
    `count` $count (`waits` $waits^)? (`signals` $signals^)?
    (`queue` $queue^)? (`footprint` $footprint^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// `count` (the number of task instances) as a signed value.
    int64_t getNumInstances() { return static_cast<int64_t>(getCount()); }
    /// Number of blocks of the tile kernel that one instance runs.
    int64_t getNumUnitsPerTask() {
      return getUnitsPerTaskAttr() ? static_cast<int64_t>(*getUnitsPerTask()) : 1;
    }
    /// Events instance `i` waits on / signals (task-wide and per instance).
    ::llvm::SmallVector<::mlir::FlatSymbolRefAttr> getInstanceWaitRefs(int64_t i);
    ::llvm::SmallVector<::mlir::FlatSymbolRefAttr> getInstanceSignalRefs(int64_t i);
    /// The graph this task belongs to.
    GraphOp getGraph() { return ::llvm::cast<GraphOp>((*this)->getParentOp()); }
    /// The tile function named by `body`, or null if it does not resolve to
    /// a func.func in the module around the graph.
    ::mlir::func::FuncOp getTileFunction();
  }];
}

//===----------------------------------------------------------------------===//
// mega.graph_arg
//===----------------------------------------------------------------------===//

def Mega_GraphArgOp : Mega_Op<"graph_arg", [
    MemoryEffects<[MemRead]>]> {
  let summary = "A graph argument of a persistent kernel, read from its argument table";
  let description = [{
    The persistent kernel does not take the graph's arguments as kernel
    parameters: the runtime writes them once per binding into the
    `mega_args` table, one 64-bit word per graph argument in argument
    order (a tensor's address, a scalar's bits), and a task body reaches
    argument `slot` through this op. A launch then passes five parameters
    whatever the layer count, and costs the host the same few microseconds
    for any model.

    The result is the graph argument's type: a statically shaped, row-major
    global memref (the runtime checked the bound tensor's dtype, shape,
    strides and alignment against it) or a scalar. The table is the
    kernel's `mega_args` parameter or a CTA's copy of it in shared memory.

    ```mlir
    %w = mega.graph_arg %args[%slot] : memref<263xi64> -> memref<2048x8192xbf16>
    %alpha = mega.graph_arg %args[%c3] : memref<263xi64> -> f32
    ```
  }];
  let arguments = (ins MemRefRankOf<[I64], [1]>:$table, Index:$slot);
  let results = (outs AnyType:$result);
  let assemblyFormat = [{
    $table `[` $slot `]` attr-dict `:` type($table) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// The runtime protocol
//===----------------------------------------------------------------------===//
//
// The persistent kernel's CTAs talk through words in global memory: event
// counters, the JIT queue's head and tail, the epoch, the abort flag and the
// error record (docs/mega.md). Each step of that protocol is one of the ops
// below, with its memory ordering in its name, so that it is findable and
// testable by name; they lower (MegaToLLVM) to LLVM atomics at device
// scope (`syncscope("device")`, PTX `.gpu`), `llvm.fence` and NVVM ops, so
// LLVM sees the orderings rather than opaque inline assembly.
//
// Each op reads or writes one element of a global memref, indexed as
// `memref.load` is. They all order memory, so they declare both read and
// write effects: none may be hoisted out of a spin loop, merged with
// another or moved across one.

// Every protocol op checks its word's memref and indices with one C++ rule
// (verifyProtocolWord, through this trait).
def Mega_ProtocolWord : NativeOpTrait<"ProtocolWord"> {
  let cppNamespace = "::mlir::tilemega::mega";
}

class Mega_ProtocolOp<string mnemonic, list<Trait> traits = []>
    : Mega_Op<mnemonic, !listconcat(traits, [MemoryEffects<[MemRead, MemWrite]>,
                                             Mega_ProtocolWord])>;

def Mega_PollOp : Mega_ProtocolOp<"poll"> {
  let summary = "An acquire read of a word other CTAs advance (a wait's read)";
  let description = [{
    A load with acquire ordering at device scope: what the CTA reads after
    it (a producer's output) is at least as new as the writes the word's
    writer released before advancing it. Waits on event counters, the JIT
    queue's tail and the epoch read through this op.

    ```mlir
    %seen = mega.poll %events[%e] : memref<64xi32>
    ```

    `system`: at system scope (PTX `.sys`) instead: the word is advanced by
    other GPUs too (peer events, `mega.signal_peer`).
  }];
  let arguments = (ins MemRefOf<[I32]>:$memory, Variadic<Index>:$indices,
                       UnitAttr:$system);
  let results = (outs I32:$result);
  let assemblyFormat =
      "$memory `[` $indices `]` (`system` $system^)? attr-dict `:` type($memory)";
}

def Mega_PeekOp : Mega_ProtocolOp<"peek"> {
  let summary = "A relaxed read of a word other CTAs or the host write";
  let description = [{
    A load with relaxed (monotonic) ordering at device scope: always a fresh
    read of memory, ordering nothing. For flags polled only to stop early
    (the abort flag), words the launch alone writes, and words ordered by
    an earlier `mega.poll`.

    ```mlir
    %abort = mega.peek %state[%c10] : memref<16xi32>
    ```
  }];
  let arguments = (ins MemRefOf<[I32]>:$memory, Variadic<Index>:$indices);
  let results = (outs I32:$result);
  let assemblyFormat = "$memory `[` $indices `]` attr-dict `:` type($memory)";
}

def Mega_SignalOp : Mega_ProtocolOp<"signal"> {
  let summary = "A release increment of an event counter";
  let description = [{
    Adds one to the word with release ordering at device scope: a CTA that
    acquires the new count (`mega.poll`) sees everything this thread wrote,
    and everything its CTA wrote before a block barrier, before the signal.

    ```mlir
    mega.signal %events[%e] : memref<64xi32>
    ```
  }];
  let arguments = (ins MemRefOf<[I32]>:$memory, Variadic<Index>:$indices);
  let assemblyFormat = "$memory `[` $indices `]` attr-dict `:` type($memory)";
}

def Mega_SignalPeerOp : Mega_Op<"signal_peer", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "A release increment of a counter in another GPU's memory";
  let description = [{
    Adds one to the i32 word `index` of the buffer at address `base` (a
    peer rank's events buffer, reached over NVLink, or this rank's own),
    with release ordering at system scope (PTX `.sys`): a thread of any GPU
    that acquires the new count at system scope (`mega.poll ... system`)
    sees everything this thread wrote, and everything its CTA wrote before
    a block barrier, before the signal, to its own or a peer's memory.

    ```mlir
    mega.signal_peer %base[%word]
    ```
  }];
  let arguments = (ins I64:$base, Index:$index);
  let assemblyFormat = "$base `[` $index `]` attr-dict";
}

def Mega_ClaimOp : Mega_ProtocolOp<"claim"> {
  let summary = "A relaxed fetch-and-add: take a distinct ticket";
  let description = [{
    Adds `amount` to the word with relaxed (monotonic) ordering at device
    scope and returns the old value: every caller gets a distinct one, and
    nothing else is ordered. Workers draw JIT tickets with it (what a
    ticket's entry may read is ordered by the `mega.poll` of the queue's
    tail, not by the draw).

    ```mlir
    %ticket = mega.claim %state[%c1], %one : memref<16xi32>
    ```
  }];
  let arguments = (ins MemRefOf<[I32]>:$memory, Variadic<Index>:$indices,
                       I32:$amount);
  let results = (outs I32:$result);
  let assemblyFormat = [{
    $memory `[` $indices `]` `,` $amount attr-dict `:` type($memory)
  }];
}

def Mega_StakeOp : Mega_ProtocolOp<"stake"> {
  let summary = "A relaxed fetch-and-max: claim a word for this launch";
  let description = [{
    Sets the word to the unsigned maximum of itself and `tag`, with relaxed
    (monotonic) ordering at device scope, and returns the old value. Of the
    callers that stake one tag on a word, exactly one sees an old value
    below it: that caller holds the word. A launch's tag (its first epoch
    + 1) is larger than every earlier launch's, so claims need no reset
    between launches. The CTAs of a `workers_by_sm` graph claim their
    worker indices with it.

    ```mlir
    %old = mega.stake %state[%w], %tag : memref<280xi32>
    ```
  }];
  let arguments = (ins MemRefOf<[I32]>:$memory, Variadic<Index>:$indices,
                       I32:$tag);
  let results = (outs I32:$result);
  let assemblyFormat = [{
    $memory `[` $indices `]` `,` $tag attr-dict `:` type($memory)
  }];
}

def Mega_ArriveOp : Mega_ProtocolOp<"arrive"> {
  let summary = "An acquire-release fetch-and-add: arrive at a grid barrier";
  let description = [{
    Adds `amount` to the word with acquire-release ordering at device scope
    and returns the old value. CTAs arrive at the end of a step or launch
    with it: the last arriver (old value = CTAs - 1) sees every earlier
    arriver's writes, and what it writes next is ordered after them.

    ```mlir
    %done = mega.arrive %state[%c3], %one : memref<16xi32>
    ```
  }];
  let arguments = (ins MemRefOf<[I32]>:$memory, Variadic<Index>:$indices,
                       I32:$amount);
  let results = (outs I32:$result);
  let assemblyFormat = [{
    $memory `[` $indices `]` `,` $amount attr-dict `:` type($memory)
  }];
}

def Mega_PublishOp : Mega_ProtocolOp<"publish"> {
  let summary = "A release store: hand out what was written before it";
  let description = [{
    Stores `value` with release ordering at device scope. The scheduler
    publishes the JIT queue's tail with it: a worker that acquires the new
    tail (`mega.poll`) also sees the queue entries written before.

    ```mlir
    mega.publish %state[%c2], %tail : memref<16xi32>
    ```
  }];
  let arguments = (ins MemRefOf<[I32]>:$memory, Variadic<Index>:$indices,
                       I32:$value);
  let assemblyFormat = [{
    $memory `[` $indices `]` `,` $value attr-dict `:` type($memory)
  }];
}

def Mega_PostOp : Mega_ProtocolOp<"post"> {
  let summary = "A relaxed store of a word others read (error record, timeline)";
  let description = [{
    Stores `value` with relaxed (monotonic) ordering at device scope: never
    kept in a register or merged with another store, ordering nothing by
    itself (a `mega.fence` or a `mega.publish` after it does). The error
    record, the state words reset at an epoch's end and the timeline's
    stamps are written with it. 32- or 64-bit words.

    ```mlir
    mega.post %timeline[%i], %now : memref<512xi64>
    ```
  }];
  let arguments = (ins MemRefOf<[I32, I64]>:$memory, Variadic<Index>:$indices,
                       AnyTypeOf<[I32, I64]>:$value);
  let assemblyFormat = [{
    $memory `[` $indices `]` `,` $value attr-dict `:` type($memory) `,` type($value)
  }];
  let hasVerifier = 1;
}

def Mega_RaiseFlagOp : Mega_ProtocolOp<"raise_flag"> {
  let summary = "Turn a word from 0 to 1 once; true for the one caller that did";
  let description = [{
    A compare-and-swap of 0 for 1 with acquire-release ordering at device
    scope. The first CTA whose watchdog fires raises the abort flag with it
    and alone writes the error record.

    ```mlir
    %first = mega.raise_flag %state[%c10] : memref<16xi32>
    ```
  }];
  let arguments = (ins MemRefOf<[I32]>:$memory, Variadic<Index>:$indices);
  let results = (outs I1:$raised);
  let assemblyFormat = "$memory `[` $indices `]` attr-dict `:` type($memory)";
}

def Mega_FenceOp : Mega_Op<"fence", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "An acquire-release fence at device scope";
  let description = [{
    Orders this thread's memory operations before it against those after
    it, for every CTA of the GPU (PTX `fence.acq_rel.gpu`).

    ```mlir
    mega.fence
    ```
  }];
  let assemblyFormat = "attr-dict";
}

def Mega_WatchdogExpiredOp : Mega_Op<"watchdog_expired",
    [MemoryEffects<[MemRead]>]> {
  let summary = "Whether more than `limit_ns` passed since a %globaltimer stamp";
  let description = [{
    Reads `%globaltimer` (nanoseconds, one clock for all SMs) and compares
    the time since `start` (an earlier read, `nvvm.read.ptx.sreg.globaltimer`)
    with the watchdog's limit. Every spin-wait of the persistent kernel
    leaves through it when its inputs never come.

    ```mlir
    %late = mega.watchdog_expired %start {limit_ns = 2000000000} : i64
    ```
  }];
  let arguments = (ins I64:$start, ConfinedAttr<I64Attr, [IntPositive]>:$limit_ns);
  let results = (outs I1:$expired);
  let assemblyFormat = "$start attr-dict `:` type($start)";
}

// Read and write effects: never merged with another read of it, nor moved
// out of the region it stands in.
def Mega_ThreadIndexOp : Mega_Op<"thread_index", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "The thread's index in its block, read where it stands";
  let description = [{
    `gpu.thread_id x`, but read anew where the op stands: neither MLIR nor
    LLVM may merge it with another read or move it (and what is computed
    from it) out of its region. In a persistent kernel each task body's
    case reads its own (`mega-fresh-thread-ids`): with the one read at the
    kernel's start, LLVM hoisted every body's per-thread addresses out of
    the worker loop, where all of them stayed live at once (the Llama-3.2-1B
    generation kernel needed 238 registers, 137 with per-case reads). The
    lowering is `mov.u32 %r, %tid.x` as side-effecting inline PTX, this
    op's one place: NVVM's `read.ptx.sreg.tid.x` is a pure intrinsic that
    LLVM hoists.

    ```mlir
    %tid = mega.thread_index
    ```
  }];
  let results = (outs Index:$index);
  let assemblyFormat = "attr-dict";
}

// Read and write effects: an op that only read would be dead without a
// result, and a prefetch exists for its effect on L2.
def Mega_PrefetchL2Op : Mega_Op<"prefetch_l2", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Start bringing bytes of a global tensor into L2";
  let description = [{
    An asynchronous bulk prefetch (`cp.async.bulk.prefetch.L2`) of `bytes`
    bytes from `offset` bytes into `tensor`'s data; nothing waits for it.
    As the instruction requires, `offset` and `bytes` are multiples of 16
    and `bytes` is positive: the caller rounds and guards (a constant that
    breaks this is an error).

    ```mlir
    mega.prefetch_l2 %w, %offset, %bytes : memref<2048x8192xbf16>
    ```
  }];
  let arguments = (ins AnyMemRef:$tensor, I64:$offset, I32:$bytes);
  let assemblyFormat = [{
    $tensor `,` $offset `,` $bytes attr-dict `:` type($tensor)
  }];
  let hasVerifier = 1;
}

#endif // TILEMEGA_DIALECT_MEGA_IR_MEGAOPS_TD
