//===- TileToLLVM.cpp - tile.wgmma_register_a to its PTX ------------------===//
//
// wgmma.mma_async with A in registers has no NVVM op (MLIR 22.1.8 has only
// the shared x shared form), so tile.wgmma_register_a becomes the
// instruction as inline PTX, here and nowhere else:
//
//   { .reg .pred p; setp.ne.b32 p, <scale-d>, 0;
//     wgmma.mma_async.sync.aligned.m64n<N>k16.f32.<T>.<T>
//       {d0, ..., d<N/2-1>}, {a0, a1, a2, a3}, b-desc, p, 1, 1, <trans-b>; }
//
// The accumulator is read and written in place: N / 2 "=f" outputs, each
// input tied to its output ("0", "1", ...), as the struct that NVVM's own
// wgmma op lowers to. The fence before it (tile.wgmma_fence_registers) and
// the wait of asynchronous gemms (tile.wgmma_wait_registers) pass their
// registers through in the same way.
//
//===----------------------------------------------------------------------===//

#include "tilemega/Conversion/TileToLLVM/TileToLLVM.h"

#include "tilemega/Dialect/Tile/IR/TileDialect.h"

#include "mlir/Conversion/ConvertToLLVM/ToLLVMInterface.h"
#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/DialectRegistry.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile;

namespace {

/// The PTX of one register-A wgmma step over `accumulators` f32 registers.
std::string registerAPtx(int64_t accumulators, StringRef type, bool transposeB) {
  std::string text;
  llvm::raw_string_ostream os(text);
  int64_t a = 2 * accumulators; // after the outputs and their tied inputs
  os << "{\n.reg .pred p;\nsetp.ne.b32 p, $" << a + 5 << ", 0;\n"
     << "wgmma.mma_async.sync.aligned.m64n" << 2 * accumulators << "k16.f32."
     << type << "." << type << " {";
  for (int64_t i = 0; i < accumulators; ++i)
    os << (i ? ", $" : "$") << i;
  os << "}, {$" << a << ", $" << a + 1 << ", $" << a + 2 << ", $" << a + 3
     << "}, $" << a + 4 << ", p, 1, 1, " << (transposeB ? 1 : 0) << ";\n}";
  return text;
}

struct WgmmaRegisterALowering : public ConvertOpToLLVMPattern<WgmmaRegisterAOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(WgmmaRegisterAOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto dType = cast<LLVM::LLVMStructType>(adaptor.getD().getType());
    int64_t count = static_cast<int64_t>(dType.getBody().size());
    SmallVector<Value> operands;
    std::string constraints;
    for (int64_t i = 0; i < count; ++i)
      constraints += "=f,";
    for (int64_t i = 0; i < count; ++i) {
      operands.push_back(LLVM::ExtractValueOp::create(rewriter, loc, adaptor.getD(), i));
      constraints += std::to_string(i) + ",";
    }
    for (Value a : {adaptor.getA0(), adaptor.getA1(), adaptor.getA2(), adaptor.getA3()})
      operands.push_back(a);
    operands.push_back(adaptor.getBDesc());
    operands.push_back(LLVM::ConstantOp::create(rewriter, loc, rewriter.getI32Type(),
                                                op.getScaleD() ? 1 : 0));
    constraints += "r,r,r,r,l,n";
    StringRef type = op.getInputType().isBF16() ? "bf16" : "f16";
    auto asmDialect = LLVM::AsmDialectAttr::get(rewriter.getContext(),
                                                LLVM::AsmDialect::AD_ATT);
    auto ptx = LLVM::InlineAsmOp::create(
        rewriter, loc, dType, operands, registerAPtx(count, type, op.getTransposeB()),
        constraints, /*has_side_effects=*/true, /*is_align_stack=*/false,
        LLVM::TailCallKind::None, asmDialect, ArrayAttr());
    rewriter.replaceOp(op, ptx.getResult(0));
    return success();
  }
};

/// wgmma.fence with the A registers tied through it ("=r" outputs, each
/// input tied to its output): their values exist before the fence and the
/// wgmma reads the asm's outputs, so nothing can move their computation
/// after it.
/// `text` as side-effecting inline PTX through which `registers` (all of
/// one type, `constraint` "r" or "f") pass: one output per register, each
/// input tied to its output, so whatever computes them comes before the
/// asm and whatever reads its results comes after. The results, in order.
SmallVector<Value> tiedRegistersAsm(ConversionPatternRewriter &rewriter, Location loc,
                                    ValueRange registers, StringRef constraint,
                                    const std::string &text) {
  int64_t count = static_cast<int64_t>(registers.size());
  std::string constraints;
  for (int64_t i = 0; i < count; ++i)
    constraints += "=" + constraint.str() + ",";
  for (int64_t i = 0; i < count; ++i)
    constraints += std::to_string(i) + (i + 1 < count ? "," : "");
  Type type = count ? registers.front().getType() : Type();
  Type result = count == 0 ? Type()
                : count == 1
                    ? type
                    : LLVM::LLVMStructType::getLiteral(rewriter.getContext(),
                                                       SmallVector<Type>(count, type));
  auto asmDialect = LLVM::AsmDialectAttr::get(rewriter.getContext(),
                                              LLVM::AsmDialect::AD_ATT);
  auto ptx = LLVM::InlineAsmOp::create(
      rewriter, loc, result, registers, text, constraints,
      /*has_side_effects=*/true, /*is_align_stack=*/false, LLVM::TailCallKind::None,
      asmDialect, ArrayAttr());
  SmallVector<Value> values;
  if (count == 1)
    values.push_back(ptx.getResult(0));
  for (int64_t i = 0; count > 1 && i < count; ++i)
    values.push_back(LLVM::ExtractValueOp::create(rewriter, loc, ptx.getResult(0), i));
  return values;
}

/// wgmma.fence with the A registers tied through it: their values exist
/// before the fence and the wgmma reads the asm's outputs, so nothing can
/// move their computation after it.
struct WgmmaFenceRegistersLowering
    : public ConvertOpToLLVMPattern<WgmmaFenceRegistersOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(WgmmaFenceRegistersOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, tiedRegistersAsm(rewriter, op.getLoc(), adaptor.getRegisters(),
                                            "r", "wgmma.fence.sync.aligned;"));
    return success();
  }
};

/// wgmma.wait_group with the completed accumulators tied through it:
/// whatever reads them reads the asm's outputs, so it comes after the wait.
/// With no registers, NVVM's own wait.
struct WgmmaWaitRegistersLowering
    : public ConvertOpToLLVMPattern<WgmmaWaitRegistersOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(WgmmaWaitRegistersOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    int64_t pending = op.getPendingAttr().getInt();
    if (adaptor.getRegisters().empty()) {
      NVVM::WgmmaWaitGroupSyncOp::create(rewriter, op.getLoc(), pending);
      rewriter.eraseOp(op);
      return success();
    }
    rewriter.replaceOp(
        op, tiedRegistersAsm(rewriter, op.getLoc(), adaptor.getRegisters(), "f",
                             "wgmma.wait_group.sync.aligned " + std::to_string(pending) + ";"));
    return success();
  }
};

struct TileToLLVMDialectInterface : public ConvertToLLVMPatternInterface {
  using ConvertToLLVMPatternInterface::ConvertToLLVMPatternInterface;

  void populateConvertToLLVMConversionPatterns(
      ConversionTarget &target, LLVMTypeConverter &converter,
      RewritePatternSet &patterns) const final {
    target.addIllegalOp<WgmmaRegisterAOp, WgmmaFenceRegistersOp, WgmmaWaitRegistersOp>();
    populateTileToLLVMConversionPatterns(converter, patterns);
  }
};

} // namespace

void tile::populateTileToLLVMConversionPatterns(LLVMTypeConverter &converter,
                                                RewritePatternSet &patterns) {
  patterns.add<WgmmaRegisterALowering, WgmmaFenceRegistersLowering,
               WgmmaWaitRegistersLowering>(converter);
}

void tile::registerConvertTileToLLVMInterface(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *, TileDialect *dialect) {
    dialect->addInterfaces<TileToLLVMDialectInterface>();
  });
}
