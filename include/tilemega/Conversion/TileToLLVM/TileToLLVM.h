//===- TileToLLVM.h - tile ops that survive into the LLVM dialect -*- C++ -*-===//
//
// convert-tile-to-gpu lowers tile ops to GPU, NVVM and LLVM ops, except
// where NVVM has no op for an instruction a kernel needs: it then emits a
// lowered form of ours (tile.wgmma_register_a), which becomes the
// instruction's PTX here, inside convert-gpu-to-nvvm (which collects the
// patterns through the ConvertToLLVM interface registered here).
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_CONVERSION_TILETOLLVM_TILETOLLVM_H
#define TILEMEGA_CONVERSION_TILETOLLVM_TILETOLLVM_H

namespace mlir {
class DialectRegistry;
class LLVMTypeConverter;
class RewritePatternSet;
} // namespace mlir

namespace mlir::tilemega::tile {

/// The LLVM-dialect lowering of the tile ops a lowered kernel keeps.
void populateTileToLLVMConversionPatterns(LLVMTypeConverter &converter,
                                          RewritePatternSet &patterns);

/// Makes the tile dialect a ConvertToLLVMPatternInterface provider.
void registerConvertTileToLLVMInterface(DialectRegistry &registry);

} // namespace mlir::tilemega::tile

#endif // TILEMEGA_CONVERSION_TILETOLLVM_TILETOLLVM_H
