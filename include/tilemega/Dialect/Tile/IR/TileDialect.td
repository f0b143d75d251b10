//===- TileDialect.td - the tile dialect -------------------*- tablegen -*-===//
//
// The tile dialect: TileLang's programming model as MLIR. A kernel works on
// tiles held in three memory scopes: global (memrefs without a memory space,
// the kernel's arguments), shared (memrefs in `#gpu.address_space<workgroup>`)
// and fragment (memrefs in `#tile.fragment`: a tile distributed over the
// threads' registers by a layout).
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_DIALECT_TILE_IR_TILEDIALECT_TD
#define TILEMEGA_DIALECT_TILE_IR_TILEDIALECT_TD

include "mlir/IR/OpBase.td"

def Tile_Dialect : Dialect {
  let name = "tile";
  let cppNamespace = "::mlir::tilemega::tile";
  let summary = "Tile-level GPU kernels with explicit memory scopes";
  let description = [{
    The `tile` dialect describes one GPU kernel the way TileLang does: the
    kernel body runs once per thread block and moves whole tiles between
    memory scopes with `tile.copy`, multiplies them with `tile.gemm`, reduces
    them with `tile.reduce`, and computes elementwise with `tile.parallel`.
    Which thread touches which element, how wide the vector accesses are and
    how shared memory is swizzled is decided by the compiler (layout inference)
    unless the user annotates it.

    Memory scopes are memref memory spaces:

    | scope    | memref memory space            | lives in                       |
    |----------|--------------------------------|--------------------------------|
    | global   | none                           | device memory (arguments)      |
    | shared   | `#gpu.address_space<workgroup>`| the block's shared memory      |
    | fragment | `#tile.fragment`               | registers, spread over threads |

    ```mlir
    func.func @scale(%A: memref<1024x1024xf32>, %B: memref<1024x1024xf32>) {
      tile.kernel blocks(%bx, %by) in [16, 8] threads 128 {
        %s = tile.alloc_shared : memref<64x128xf32, #gpu.address_space<workgroup>>
        %f = tile.alloc_fragment : memref<64x128xf32, #tile.fragment>
        ...
      }
      return
    }
    ```
  }];
  let dependentDialects = [
    "::mlir::memref::MemRefDialect",
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect"
  ];
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    /// Registers the attributes (defined in TileAttrs.cpp, next to their
    /// storage classes).
    void registerAttributes();

    // Discardable attributes the passes exchange; declared once here, never
    // spelled out elsewhere.

    /// On a shared tile: the exclusive group (an integer) whose tiles are
    /// live only while that group runs, so groups share one region of shared
    /// memory (TileSharedMemory.h).
    static ::llvm::StringRef getExclusiveGroupAttrName() {
      return "tile.exclusive_group";
    }
    /// On a tile.copy from global memory: its source is never written while
    /// the kernel runs (a weight), so tile-pipeline may issue the copies of
    /// its loop's prologue at an earlier tile.prefetch_point (unit).
    static ::llvm::StringRef getEarlyAttrName() { return "tile.early"; }
    /// On an scf.for: its iterations run the same tile.pipelined loop on
    /// independent units of work, one after another, so tile-pipeline may
    /// issue the next iteration's first copies while the current one's
    /// last iterations compute (one ring of stages across them; unit).
    static ::llvm::StringRef getStreamUnitsAttrName() {
      return "tile.stream_units";
    }
    /// On a tile.kernel: it is persistent (convert-mega-to-gpu's), its warps
    /// run different roles at once, so its shared tiles never share bytes by
    /// live range (unit; TileSharedMemory.h).
    static ::llvm::StringRef getPersistentAttrName() {
      return "tile.persistent";
    }
    /// On an scf.index_switch: its cases are the exclusive groups (unit).
    static ::llvm::StringRef getExclusiveCasesAttrName() {
      return "tile.exclusive_cases";
    }
    /// On a kernel function's argument: the parameter name the artifact
    /// records (a string).
    static ::llvm::StringRef getArgNameAttrName() { return "tile.name"; }
    /// On the module after convert-tile-to-gpu: the launch metadata of every
    /// kernel (an array of dictionaries), which tilemega.compile reads.
    static ::llvm::StringRef getKernelsMetadataAttrName() {
      return "tilemega.kernels";
    }
    /// On the module before gpu-module-to-binary
    /// (tilemega-record-aligned-barriers): how many aligned CTA barriers its
    /// gpu.modules' LLVM dialect code holds (an i64), which tilemega.compile
    /// checks the PTX against.
    static ::llvm::StringRef getAlignedBarriersAttrName() {
      return "tilemega.aligned_barriers";
    }
  }];
}

#endif // TILEMEGA_DIALECT_TILE_IR_TILEDIALECT_TD
