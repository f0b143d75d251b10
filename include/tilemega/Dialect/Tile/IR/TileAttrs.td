//===- TileAttrs.td - tile dialect attributes --------------*- tablegen -*-===//

#ifndef TILEMEGA_DIALECT_TILE_IR_TILEATTRS_TD
#define TILEMEGA_DIALECT_TILE_IR_TILEATTRS_TD

include "tilemega/Dialect/Tile/IR/TileDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

class Tile_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Tile_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

//===----------------------------------------------------------------------===//
// Memory scope
//===----------------------------------------------------------------------===//

def Tile_FragmentScopeAttr : Tile_Attr<"FragmentScope", "fragment"> {
  let summary = "Memory space of register fragments";
  let description = [{
    A memref in this memory space is a fragment: one logical tile whose
    elements are distributed over the registers of the block's threads. Which
    thread holds which element is the layout of the `tile.alloc_fragment` that
    created it (`#tile.blocked`).

    ```mlir
    %acc = tile.alloc_fragment : memref<128x128xf32, #tile.fragment>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Layouts
//===----------------------------------------------------------------------===//

def Tile_BlockedLayoutAttr : Tile_Attr<"BlockedLayout", "blocked"> {
  let summary = "A blocked thread/register layout for fragments";
  let description = [{
    Assigns every element of an N-d tile to one thread and one register slot,
    as Triton's blocked encoding does. In each dimension `d` a thread holds
    `sizePerThread[d]` consecutive elements; `threadsPerWarp[d]` lanes and
    `warpsPerBlock[d]` warps are laid side by side; `order` lists the
    dimensions from fastest- to slowest-varying when lane and warp ids are
    split over dimensions. A tile larger than
    `sizePerThread * threadsPerWarp * warpsPerBlock` wraps around: each thread
    then holds several such chunks.

    The product of `threadsPerWarp` is 32, and the product of `warpsPerBlock`
    times 32 is the kernel's thread count.

    ```mlir
    // 128 threads over a 64x128 tile: each thread holds 4 contiguous floats
    // (one 128-bit access) per chunk, a warp covers 1x128 elements.
    #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32],
                  warpsPerBlock = [4, 1], order = [1, 0]>
    ```
  }];
  let parameters = (ins
    ArrayRefParameter<"int64_t">:$sizePerThread,
    ArrayRefParameter<"int64_t">:$threadsPerWarp,
    ArrayRefParameter<"int64_t">:$warpsPerBlock,
    ArrayRefParameter<"int64_t">:$order
  );
  let assemblyFormat = [{
    `<` `sizePerThread` `=` `[` $sizePerThread `]` `,`
        `threadsPerWarp` `=` `[` $threadsPerWarp `]` `,`
        `warpsPerBlock` `=` `[` $warpsPerBlock `]` `,`
        `order` `=` `[` $order `]` `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Rank of the tiles this layout applies to.
    unsigned getRank() const { return getOrder().size(); }
    /// Number of threads the layout spreads a tile over.
    int64_t getNumThreads() const;
    /// Elements one chunk covers in dimension `d`.
    int64_t getChunkExtent(unsigned d) const;
  }];
}

def Tile_MmaLayoutAttr : Tile_Attr<"MmaLayout", "mma"> {
  let summary = "The accumulator layout of mma.sync m16n8k16 tensor-core tiles";
  let description = [{
    The register layout of a `tile.gemm` accumulator on tensor cores. The
    block's warps form a `warpsPerBlock[0] x warpsPerBlock[1]` grid over the
    M x N tile; each warp owns an `(M / wm) x (N / wn)` sub-tile made of
    16 x 8 `mma.sync` accumulator tiles, in which lane `l` holds rows
    `l / 4` and `l / 4 + 8`, columns `2 * (l % 4)` and `2 * (l % 4) + 1`
    (PTX's m16n8 C/D fragment). The tile's M must be a multiple of
    `16 * wm` and its N a multiple of `8 * wn`.

    ```mlir
    %acc = tile.alloc_fragment {layout = #tile.mma<warpsPerBlock = [2, 2]>}
        : memref<128x128xf32, #tile.fragment>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$warpsPerBlock);
  let assemblyFormat = "`<` `warpsPerBlock` `=` `[` $warpsPerBlock `]` `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    unsigned getRank() const { return 2; }
    int64_t getNumThreads() const {
      return 32 * getWarpsPerBlock()[0] * getWarpsPerBlock()[1];
    }
  }];
}

def Tile_SliceLayoutAttr : Tile_Attr<"SliceLayout", "slice"> {
  let summary = "A layout with one dimension of its parent removed";
  let description = [{
    The layout of a tile that is its parent tile with dimension `dim`
    reduced away, such as the row maxima of a score tile. A thread holds
    element `e` when, in the parent layout, it holds an element whose indices
    without `dim` are `e`; the threads along `dim` hold copies. This is what
    `tile.reduce` produces and what lets a `tile.parallel` over the parent
    read `row_max[i]` in the thread that holds `scores[i, j]`.

    ```mlir
    #tile.slice<dim = 1, parent = #tile.blocked<sizePerThread = [1, 4],
        threadsPerWarp = [4, 8], warpsPerBlock = [4, 1], order = [1, 0]>>
    ```
  }];
  let parameters = (ins "int64_t":$dim, "::mlir::Attribute":$parent);
  let assemblyFormat = "`<` `dim` `=` $dim `,` `parent` `=` $parent `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    unsigned getRank() const;
    int64_t getNumThreads() const;
  }];
}

def Tile_SwizzleAttr : Tile_Attr<"Swizzle", "swizzle"> {
  let summary = "An XOR swizzle of shared-memory element offsets";
  let description = [{
    The swizzle `Swizzle<bits, base, shift>` of CUTLASS/CuTe: an element at
    linear offset `o` is stored at `o ^ ((o >> shift) & mask) ` where
    `mask = ((1 << bits) - 1) << base`. It spreads the rows of a tile over the
    32 shared-memory banks so that column accesses and `ldmatrix` do not
    conflict. `bits = 0` is no swizzle.

    With `columns = c` (> 0) the tile's rows are first split into blocks of
    `c` columns stored one after another: block j holds columns
    `j c .. j c + c - 1` of every row, row after row, and `o` is the offset
    in that blocked order. That is the layout of a Hopper operand whose rows
    are wider than the 128-byte swizzle span (an N-major wgmma B of N > 64,
    an M-major A): each block is 128-byte rows under the 128-byte swizzle,
    what one TMA box writes and one wgmma descriptor atom reads.

    ```mlir
    %s = tile.alloc_shared {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3>}
        : memref<128x64xf16, #gpu.address_space<workgroup>>
    %b = tile.alloc_shared
        {swizzle = #tile.swizzle<bits = 3, base = 3, shift = 3, columns = 64>}
        : memref<64x256xbf16, #gpu.address_space<workgroup>>
    ```
  }];
  let parameters = (ins "int64_t":$bits, "int64_t":$base, "int64_t":$shift,
                        DefaultValuedParameter<"int64_t", "0">:$columns);
  let builders = [
    AttrBuilder<(ins "int64_t":$bits, "int64_t":$base, "int64_t":$shift), [{
      return $_get($_ctxt, bits, base, shift, 0);
    }]>
  ];
  let assemblyFormat = [{
    `<` `bits` `=` $bits `,` `base` `=` $base `,` `shift` `=` $shift
    (`,` `columns` `=` $columns^)? `>`
  }];
  let extraClassDeclaration = [{
    /// The longest run of consecutive row elements that stays contiguous in
    /// memory (the widest vector access): 2^base under an XOR, at most the
    /// column block.
    int64_t getContiguousElements() const;
  }];
  let genVerifyDecl = 1;
}

/// Any layout a fragment or a tile.parallel may carry.
def Tile_FragmentLayoutAttr : AnyAttrOf<[Tile_BlockedLayoutAttr,
                                        Tile_MmaLayoutAttr,
                                        Tile_SliceLayoutAttr]>;

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Tile_ReduceKind : I32EnumAttr<"ReduceKind", "reduction kind", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"max", 1>,
    I32EnumAttrCase<"min", 2>, I32EnumAttrCase<"absmax", 3>]> {
  let cppNamespace = "::mlir::tilemega::tile";
  let genSpecializedAttr = 0;
}
def Tile_ReduceKindAttr : EnumAttr<Tile_Dialect, Tile_ReduceKind, "reduce_kind">;

def Tile_AtomicKind : I32EnumAttr<"AtomicKind", "atomic update kind", [
    I32EnumAttrCase<"add", 0>, I32EnumAttrCase<"max", 1>]> {
  let cppNamespace = "::mlir::tilemega::tile";
  let genSpecializedAttr = 0;
}
def Tile_AtomicKindAttr : EnumAttr<Tile_Dialect, Tile_AtomicKind, "atomic_kind">;

#endif // TILEMEGA_DIALECT_TILE_IR_TILEATTRS_TD
