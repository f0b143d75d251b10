//===- MegaDialect.td - the mega dialect -------------------*- tablegen -*-===//
//
// The mega dialect: one persistent mega-kernel in the style of the Mirage
// Persistent Kernel. A graph of operators is split into SM-level tasks that
// synchronise through event counters and are fed to the workers by queues.
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_DIALECT_MEGA_IR_MEGADIALECT_TD
#define TILEMEGA_DIALECT_MEGA_IR_MEGADIALECT_TD

include "mlir/IR/OpBase.td"

def Mega_Dialect : Dialect {
  let name = "mega";
  let cppNamespace = "::mlir::tilemega::mega";
  let summary = "A task graph run by one persistent GPU kernel";
  let description = [{
    The `mega` dialect describes a whole model step (for example one decode
    step of a transformer) as a single persistent kernel launch, the way the
    Mirage Persistent Kernel does. A `mega.graph` is that launch: it owns the
    global tensors (its region arguments), a number of worker CTAs and a few
    scheduler warps.

    Inside the graph, every operator is a `mega.task`: its work is split into
    `count` SM-level task instances, and each instance runs the body of a
    *tile function* with the block index set to its instance index. A tile
    function is a `func.func` in the enclosing module whose body is one
    `tile.kernel`; its grid is the number of instances.

    Tasks are ordered by `mega.event`s: counters in global memory that fire
    once they have received their trigger count of signals. A task instance
    starts once every event it waits on has fired and signals every event it
    lists once it is done. `mega.queue`s say who runs a task: an
    ahead-of-time queue holds a static task order for one worker, the
    just-in-time queue is served by the scheduler warps, which hand ready
    tasks to idle workers.

    The verifier checks the graph before any pass runs: symbols resolve, each
    event is signalled exactly as often as its trigger count says, every wait
    can be satisfied, and the task graph has no cycle.

    ```mlir
    func.func @rmsnorm(%x: memref<4096xf16>, %y: memref<4096xf16>) {
      tile.kernel blocks(%i) in [32] threads 128 {
      }
      return
    }
    func.func @gemv(%y: memref<4096xf16>, %w: memref<4096x4096xf16>,
                    %o: memref<4096xf16>) {
      tile.kernel blocks(%i) in [64] threads 128 {
      }
      return
    }
    mega.graph @layer(%x: memref<4096xf16>, %y: memref<4096xf16>,
                      %w: memref<4096x4096xf16>, %o: memref<4096xf16>)
        workers 132 {
      mega.event @normed trigger 32
      mega.queue @jit jit
      mega.task @norm body @rmsnorm(%x, %y : memref<4096xf16>, memref<4096xf16>)
          count 32 signals [@normed]
      mega.task @proj body @gemv(%y, %w, %o : memref<4096xf16>,
          memref<4096x4096xf16>, memref<4096xf16>)
          count 64 waits [@normed] queue @jit
    }
    ```
  }];
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    // Discardable attributes the mega passes and the tile lowering exchange;
    // declared once here, never spelled out elsewhere.

    /// On a mega.graph: the names of its region arguments (an array of
    /// strings), set by the Python graph builder, read by convert-mega-to-gpu.
    static ::llvm::StringRef getArgNamesAttrName() { return "mega.arg_names"; }
    /// On a mega.graph: the role of each region argument (input, weight,
    /// cache, output, scratch).
    static ::llvm::StringRef getArgRolesAttrName() { return "mega.arg_roles"; }
    /// On an argument of a persistent kernel's function: its role, which
    /// convert-tile-to-gpu copies into the launch metadata.
    static ::llvm::StringRef getRoleAttrName() { return "mega.role"; }
    /// On a mega.graph: the makespan mega-schedule's list schedule predicts
    /// (ns, from the cost model).
    static ::llvm::StringRef getEstimatedMakespanAttrName() {
      return "mega.estimated_makespan_ns";
    }
    /// On a persistent kernel's function: the launch metadata of the graph
    /// (tables, events, tasks), which convert-tile-to-gpu passes on to the
    /// artifact.
    static ::llvm::StringRef getMegaMetadataAttrName() { return "tilemega.mega"; }
    /// On a persistent kernel's function: the CTAs each SM must keep
    /// resident (every CTA of a persistent kernel runs at once), which
    /// convert-tile-to-gpu gives ptxas as the kernel's minimum CTAs an SM.
    static ::llvm::StringRef getCtasPerSmAttrName() { return "mega.ctas_per_sm"; }
    /// On the scf.while of a claiming entry's units (convert-mega-to-gpu):
    /// mega-fresh-thread-ids reads the thread index anew in each iteration,
    /// so that no per-thread condition in the loop is loop-invariant (LLVM
    /// unswitched the loop on one, splitting its barriers between threads).
    static ::llvm::StringRef getClaimLoopAttrName() { return "mega.claim_loop"; }
  }];
}

#endif // TILEMEGA_DIALECT_MEGA_IR_MEGADIALECT_TD
