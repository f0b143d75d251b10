//===- MegaToLLVM.h - mega ops that survive into the LLVM dialect -*- C++ -*-===//
//
// The few mega ops a persistent kernel keeps after convert-mega-to-gpu
// (mega.graph_arg and the runtime protocol's ops) lower to the LLVM dialect inside convert-gpu-to-nvvm,
// which collects them through the ConvertToLLVM interface registered here.
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_CONVERSION_MEGATOLLVM_MEGATOLLVM_H
#define TILEMEGA_CONVERSION_MEGATOLLVM_MEGATOLLVM_H

namespace mlir {
class DialectRegistry;
class LLVMTypeConverter;
class RewritePatternSet;
} // namespace mlir

namespace mlir::tilemega::mega {

/// The LLVM-dialect lowering of the mega ops a kernel body contains.
void populateMegaToLLVMConversionPatterns(LLVMTypeConverter &converter,
                                          RewritePatternSet &patterns);

/// The runtime protocol ops (mega.poll, mega.signal, ...): LLVM atomics at
/// device scope, fences and NVVM ops (RuntimeProtocol.cpp).
void populateRuntimeProtocolToLLVMPatterns(LLVMTypeConverter &converter,
                                           RewritePatternSet &patterns);

/// Makes the mega dialect a ConvertToLLVMPatternInterface provider.
void registerConvertMegaToLLVMInterface(DialectRegistry &registry);

} // namespace mlir::tilemega::mega

#endif // TILEMEGA_CONVERSION_MEGATOLLVM_MEGATOLLVM_H
