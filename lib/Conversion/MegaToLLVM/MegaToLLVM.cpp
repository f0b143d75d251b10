//===- MegaToLLVM.cpp - mega.graph_arg to the LLVM dialect -----------------===//

#include "tilemega/Conversion/MegaToLLVM/MegaToLLVM.h"

#include "tilemega/Dialect/Mega/IR/MegaDialect.h"
#include "tilemega/Dialect/Tile/IR/TileDialect.h"

#include "mlir/Conversion/ConvertToLLVM/ToLLVMInterface.h"
#include "mlir/Conversion/LLVMCommon/MemRefBuilder.h"
#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::mega;

namespace {

/// table[slot] is the argument: one 64-bit load, then for a tensor a
/// descriptor of its static shape around the address, for a scalar its low
/// bits. From a global table the load is invariant (the runtime writes the
/// table before the launch and never during it, so it may take the
/// read-only path); a CTA's copy in shared memory is written at the
/// kernel's start, so there it is a plain load.
struct GraphArgLowering : public ConvertOpToLLVMPattern<GraphArgOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(GraphArgOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    MemRefType tableType = cast<MemRefType>(op.getTable().getType());
    FailureOr<unsigned> tableSpace =
        getTypeConverter()->getMemRefAddressSpace(tableType);
    if (failed(tableSpace))
      return rewriter.notifyMatchFailure(op, "table memory space has no LLVM address space");
    Type i64 = rewriter.getI64Type();
    MemRefDescriptor table(adaptor.getTable());
    Value first = table.alignedPtr(rewriter, loc);
    Value slot = adaptor.getSlot();
    if (slot.getType() != i64)
      slot = LLVM::SExtOp::create(rewriter, loc, i64, slot);
    auto tablePtr = LLVM::LLVMPointerType::get(ctx, *tableSpace);
    Value entry = LLVM::GEPOp::create(rewriter, loc, tablePtr, i64, first,
                                      ArrayRef<LLVM::GEPArg>{slot});
    Value word = LLVM::LoadOp::create(rewriter, loc, i64, entry, /*alignment=*/8,
                                      /*isVolatile=*/false,
                                      /*isNonTemporal=*/false,
                                      /*isInvariant=*/tile::isGlobal(tableType));
    Type type = op.getType();
    if (auto memref = dyn_cast<MemRefType>(type)) {
      FailureOr<unsigned> space = getTypeConverter()->getMemRefAddressSpace(memref);
      if (failed(space))
        return rewriter.notifyMatchFailure(op, "memory space has no LLVM address space");
      Value pointer = LLVM::IntToPtrOp::create(
          rewriter, loc, LLVM::LLVMPointerType::get(ctx, *space), word);
      rewriter.replaceOp(op, Value(MemRefDescriptor::fromStaticShape(
                                 rewriter, loc, *getTypeConverter(), memref, pointer)));
      return success();
    }
    // A scalar: its bits are the word's low bits (the runtime packs them so).
    Type converted = getTypeConverter()->convertType(type);
    unsigned width = converted.getIntOrFloatBitWidth();
    Value bits = word;
    if (width < 64)
      bits = LLVM::TruncOp::create(rewriter, loc, rewriter.getIntegerType(width), word);
    if (isa<FloatType>(converted))
      bits = LLVM::BitcastOp::create(rewriter, loc, converted, bits);
    rewriter.replaceOp(op, bits);
    return success();
  }
};

struct MegaToLLVMDialectInterface : public ConvertToLLVMPatternInterface {
  using ConvertToLLVMPatternInterface::ConvertToLLVMPatternInterface;

  void populateConvertToLLVMConversionPatterns(
      ConversionTarget &target, LLVMTypeConverter &converter,
      RewritePatternSet &patterns) const final {
    target.addIllegalOp<GraphArgOp, PollOp, PeekOp, SignalOp, ClaimOp, ArriveOp, PublishOp,
                        PostOp, RaiseFlagOp, FenceOp, WatchdogExpiredOp,
                        PrefetchL2Op>();
    populateMegaToLLVMConversionPatterns(converter, patterns);
  }
};

} // namespace

void mega::populateMegaToLLVMConversionPatterns(LLVMTypeConverter &converter,
                                                RewritePatternSet &patterns) {
  patterns.add<GraphArgLowering>(converter);
  populateRuntimeProtocolToLLVMPatterns(converter, patterns);
}

void mega::registerConvertMegaToLLVMInterface(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *, MegaDialect *dialect) {
    dialect->addInterfaces<MegaToLLVMDialectInterface>();
  });
}
