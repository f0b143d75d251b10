//===- Passes.td - tile dialect transforms -----------------*- tablegen -*-===//

#ifndef TILEMEGA_DIALECT_TILE_TRANSFORMS_PASSES_TD
#define TILEMEGA_DIALECT_TILE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def TileInferLayouts : Pass<"tile-infer-layouts", "::mlir::func::FuncOp"> {
  let summary = "Assign thread/register layouts to fragments and parallel loops";
  let description = [{
    Gives every `tile.alloc_fragment` without a `layout` a `#tile.blocked`
    layout, and every `tile.parallel` the layout of its iterations, so that the
    lowering knows which thread holds which element.

    Fragments that one `tile.parallel` touches must share a layout (a thread
    computes an element only where it holds all the operands), so they are
    grouped and given one layout. A group's layout makes each thread hold
    consecutive elements of the innermost dimension, as many as fit one
    128-bit access of the group's widest element type, with the lanes of a
    warp side by side along that dimension: global and shared accesses are
    then coalesced and vectorised. A user-annotated layout is kept and imposed
    on its group; two different annotations in one group are an error that
    names both fragments and both layouts.

    ```mlir
    %f = tile.alloc_fragment : memref<64x128xf32, #tile.fragment>
    // becomes
    %f = tile.alloc_fragment {layout = #tile.blocked<sizePerThread = [1, 4],
        threadsPerWarp = [1, 32], warpsPerBlock = [4, 1], order = [1, 0]>}
        : memref<64x128xf32, #tile.fragment>
    ```
  }];
  let dependentDialects = ["::mlir::tilemega::tile::TileDialect"];
}

#endif // TILEMEGA_DIALECT_TILE_TRANSFORMS_PASSES_TD
