//===- RuntimeProtocol.cpp - the mega runtime protocol to LLVM and NVVM ---===//
//
// Each protocol op becomes LLVM atomics at device scope (PTX `.gpu`),
// `llvm.fence` and NVVM ops. One trap shapes the patterns: LLVM 22's NVPTX
// backend drops the ordering of `atomicrmw` (any ordering assembles to a
// relaxed `atom.global.add`), while it honours the orderings of atomic
// loads, stores and cmpxchg. A read-modify-write that must order memory is
// therefore a relaxed `atomicrmw` between explicit fences, which is also
// how the PTX memory model defines release and acquire patterns.
//
//===----------------------------------------------------------------------===//

#include "tilemega/Conversion/MegaToLLVM/MegaToLLVM.h"

#include "tilemega/Dialect/Mega/IR/MegaDialect.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::mega;

namespace {

/// PTX `.gpu`: every CTA of the kernel.
constexpr StringLiteral kDeviceScope = "device";
/// PTX `.sys`: every thread of every GPU (and the host).
constexpr StringLiteral kSystemScope = "";

/// The scope of a protocol op: system for ops marked `system` (words other
/// GPUs advance), else device.
static StringRef scopeOf(Operation *op) {
  return op->hasAttr("system") ? kSystemScope : kDeviceScope;
}
constexpr unsigned kGlobalAddressSpace = 1;

/// The address of a protocol op's word as a global pointer. Tile's global
/// scope is the GPU's global memory; saying so lets the backend emit
/// `.global` instructions whatever the pointer's origin.
template <typename Op>
static Value wordPointer(const LLVMTypeConverter &converter, Op op,
                         typename Op::Adaptor adaptor,
                         ConversionPatternRewriter &rewriter) {
  Location loc = op.getLoc();
  auto type = cast<MemRefType>(op.getMemory().getType());
  Value ptr = LLVM::getStridedElementPtr(rewriter, loc, converter, type,
                                         adaptor.getMemory(), adaptor.getIndices());
  auto global = LLVM::LLVMPointerType::get(rewriter.getContext(), kGlobalAddressSpace);
  if (ptr.getType() != global)
    ptr = LLVM::AddrSpaceCastOp::create(rewriter, loc, global, ptr);
  return ptr;
}

static unsigned wordBytes(Type type) { return type.getIntOrFloatBitWidth() / 8; }

static void deviceFence(ConversionPatternRewriter &rewriter, Location loc) {
  LLVM::FenceOp::create(rewriter, loc, LLVM::AtomicOrdering::acq_rel, kDeviceScope);
}

/// An atomic load of the word with `ordering` at device scope.
template <typename Op>
struct ProtocolLoadLowering : public ConvertOpToLLVMPattern<Op> {
  ProtocolLoadLowering(const LLVMTypeConverter &converter,
                       LLVM::AtomicOrdering ordering)
      : ConvertOpToLLVMPattern<Op>(converter), ordering(ordering) {}

  LogicalResult
  matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value ptr = wordPointer(*this->getTypeConverter(), op, adaptor, rewriter);
    Type type = op.getType();
    rewriter.replaceOpWithNewOp<LLVM::LoadOp>(
        op, type, ptr, wordBytes(type), /*isVolatile=*/false,
        /*isNonTemporal=*/false, /*isInvariant=*/false,
        /*isInvariantGroup=*/false, ordering, scopeOf(op));
    return success();
  }
  LLVM::AtomicOrdering ordering;
};

/// An atomic store of the value with `ordering` at device scope.
template <typename Op>
struct ProtocolStoreLowering : public ConvertOpToLLVMPattern<Op> {
  ProtocolStoreLowering(const LLVMTypeConverter &converter,
                        LLVM::AtomicOrdering ordering)
      : ConvertOpToLLVMPattern<Op>(converter), ordering(ordering) {}

  LogicalResult
  matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value ptr = wordPointer(*this->getTypeConverter(), op, adaptor, rewriter);
    Value value = adaptor.getValue();
    rewriter.replaceOpWithNewOp<LLVM::StoreOp>(
        op, value, ptr, wordBytes(value.getType()), /*isVolatile=*/false,
        /*isNonTemporal=*/false, /*isInvariantGroup=*/false, ordering,
        kDeviceScope);
    return success();
  }
  LLVM::AtomicOrdering ordering;
};

/// A release increment of the i32 word at `ptr` at `scope` ("gpu" or
/// "sys"): PTX `red.release.<scope>.global.add.u32`, the protocol's one
/// inline PTX. LLVM 22.1.8's NVPTX drops an atomicrmw's ordering and scope
/// (docs/mega.md), so the LLVM form would be a relaxed `.gpu` add behind a
/// `fence.acq_rel.gpu`: the fence orders every earlier access, the release
/// add only those it must publish, and measured slower (one fence fewer at
/// every stage boundary: docs/results/generate_ab_signal_*.json); a peer
/// GPU's acquire at system scope is not ordered with a `.gpu` add at all.
static void releaseIncrement(ConversionPatternRewriter &rewriter, Location loc,
                             Value ptr, StringRef scope) {
  std::string text = ("red.release." + scope + ".global.add.u32 [$0], 1;").str();
  LLVM::InlineAsmOp::create(rewriter, loc, /*res=*/Type(), ValueRange{ptr}, text,
                            "l,~{memory}", /*has_side_effects=*/true,
                            /*is_align_stack=*/false,
                            LLVM::tailcallkind::TailCallKind::None,
                            LLVM::AsmDialectAttr(), ArrayAttr());
}

/// A release increment at device scope (no result: PTX `red`).
struct SignalLowering : public ConvertOpToLLVMPattern<SignalOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult
  matchAndRewrite(SignalOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value ptr = wordPointer(*this->getTypeConverter(), op, adaptor, rewriter);
    releaseIncrement(rewriter, op.getLoc(), ptr, "gpu");
    rewriter.eraseOp(op);
    return success();
  }
};

/// A release increment of a word at a raw address, at system scope (a peer
/// GPU's events buffer).
struct SignalPeerLowering : public ConvertOpToLLVMPattern<SignalPeerOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult
  matchAndRewrite(SignalPeerOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    auto global = LLVM::LLVMPointerType::get(ctx, kGlobalAddressSpace);
    Value base = LLVM::IntToPtrOp::create(rewriter, loc, global, adaptor.getBase());
    Value index = adaptor.getIndex();
    if (index.getType() != rewriter.getI64Type())
      index = LLVM::ZExtOp::create(rewriter, loc, rewriter.getI64Type(), index);
    Value ptr = LLVM::GEPOp::create(rewriter, loc, global, rewriter.getI32Type(), base,
                                    ArrayRef<LLVM::GEPArg>{index});
    releaseIncrement(rewriter, loc, ptr, "sys");
    rewriter.eraseOp(op);
    return success();
  }
};

/// A fetch-and-`op` (add, umax) of the op's amount: relaxed, or
/// acquire-release as fence, relaxed read-modify-write, fence.
template <typename Op>
struct FetchAndOpLowering : public ConvertOpToLLVMPattern<Op> {
  FetchAndOpLowering(const LLVMTypeConverter &converter, LLVM::AtomicBinOp binOp,
                     bool acquireRelease)
      : ConvertOpToLLVMPattern<Op>(converter), binOp(binOp),
        acquireRelease(acquireRelease) {}

  LogicalResult
  matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value ptr = wordPointer(*this->getTypeConverter(), op, adaptor, rewriter);
    if (acquireRelease)
      deviceFence(rewriter, loc);
    Value old = LLVM::AtomicRMWOp::create(rewriter, loc, binOp, ptr,
                                          adaptor.getOperands().back(),
                                          LLVM::AtomicOrdering::monotonic,
                                          kDeviceScope, 4);
    if (acquireRelease)
      deviceFence(rewriter, loc);
    rewriter.replaceOp(op, old);
    return success();
  }
  LLVM::AtomicBinOp binOp;
  bool acquireRelease;
};

/// cmpxchg 0 -> 1, acq_rel (NVPTX keeps cmpxchg's ordering).
struct RaiseFlagLowering : public ConvertOpToLLVMPattern<RaiseFlagOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult
  matchAndRewrite(RaiseFlagOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value ptr = wordPointer(*this->getTypeConverter(), op, adaptor, rewriter);
    Type i32 = rewriter.getI32Type();
    Value zero = LLVM::ConstantOp::create(rewriter, loc, i32, 0);
    Value one = LLVM::ConstantOp::create(rewriter, loc, i32, 1);
    auto cas = LLVM::AtomicCmpXchgOp::create(
        rewriter, loc, ptr, zero, one, LLVM::AtomicOrdering::acq_rel,
        LLVM::AtomicOrdering::acquire, kDeviceScope, 4);
    rewriter.replaceOpWithNewOp<LLVM::ExtractValueOp>(op, cas, ArrayRef<int64_t>{1});
    return success();
  }
};

struct FenceLowering : public ConvertOpToLLVMPattern<FenceOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult
  matchAndRewrite(FenceOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    deviceFence(rewriter, op.getLoc());
    rewriter.eraseOp(op);
    return success();
  }
};

/// %globaltimer - start > limit_ns.
struct WatchdogExpiredLowering : public ConvertOpToLLVMPattern<WatchdogExpiredOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult
  matchAndRewrite(WatchdogExpiredOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type i64 = rewriter.getI64Type();
    Value now = NVVM::GlobalTimerOp::create(rewriter, loc, i64);
    Value elapsed = LLVM::SubOp::create(rewriter, loc, now, adaptor.getStart());
    Value limit = LLVM::ConstantOp::create(rewriter, loc, i64, op.getLimitNs());
    rewriter.replaceOpWithNewOp<LLVM::ICmpOp>(op, LLVM::ICmpPredicate::sgt, elapsed,
                                              limit);
    return success();
  }
};

/// cp.async.bulk.prefetch.L2 at the tensor's data + offset.
struct PrefetchL2Lowering : public ConvertOpToLLVMPattern<PrefetchL2Op> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult
  matchAndRewrite(PrefetchL2Op op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto global = LLVM::LLVMPointerType::get(rewriter.getContext(), kGlobalAddressSpace);
    Value base = MemRefDescriptor(adaptor.getTensor()).alignedPtr(rewriter, loc);
    if (base.getType() != global)
      base = LLVM::AddrSpaceCastOp::create(rewriter, loc, global, base);
    Value start = LLVM::GEPOp::create(rewriter, loc, global, rewriter.getI8Type(), base,
                                      ArrayRef<LLVM::GEPArg>{adaptor.getOffset()});
    rewriter.replaceOpWithNewOp<NVVM::CpAsyncBulkPrefetchOp>(op, start, adaptor.getBytes(),
                                                             Value());
    return success();
  }
};

/// %tid.x by side-effecting inline PTX (not hoisted, not merged), widened
/// to the index type.
struct ThreadIndexLowering : public ConvertOpToLLVMPattern<ThreadIndexOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult
  matchAndRewrite(ThreadIndexOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type i32 = rewriter.getI32Type();
    auto asmDialect = LLVM::AsmDialectAttr::get(rewriter.getContext(),
                                                LLVM::AsmDialect::AD_ATT);
    Value tid = LLVM::InlineAsmOp::create(
                    rewriter, loc, i32, ValueRange{}, "mov.u32 $0, %tid.x;", "=r",
                    /*has_side_effects=*/true, /*is_align_stack=*/false,
                    LLVM::TailCallKind::None, asmDialect, ArrayAttr())
                    .getResult(0);
    Type index = getTypeConverter()->convertType(op.getType());
    rewriter.replaceOpWithNewOp<LLVM::ZExtOp>(op, index, tid);
    return success();
  }
};

} // namespace

void mega::populateRuntimeProtocolToLLVMPatterns(LLVMTypeConverter &converter,
                                                 RewritePatternSet &patterns) {
  patterns.add<ProtocolLoadLowering<PollOp>>(converter, LLVM::AtomicOrdering::acquire);
  patterns.add<ProtocolLoadLowering<PeekOp>>(converter, LLVM::AtomicOrdering::monotonic);
  patterns.add<ProtocolStoreLowering<PublishOp>>(converter, LLVM::AtomicOrdering::release);
  patterns.add<ProtocolStoreLowering<PostOp>>(converter, LLVM::AtomicOrdering::monotonic);
  patterns.add<FetchAndOpLowering<ClaimOp>>(converter, LLVM::AtomicBinOp::add,
                                            /*acquireRelease=*/false);
  patterns.add<FetchAndOpLowering<ArriveOp>>(converter, LLVM::AtomicBinOp::add,
                                             /*acquireRelease=*/true);
  patterns.add<FetchAndOpLowering<StakeOp>>(converter, LLVM::AtomicBinOp::umax,
                                            /*acquireRelease=*/false);
  patterns.add<SignalLowering, SignalPeerLowering, RaiseFlagLowering, FenceLowering,
               WatchdogExpiredLowering, PrefetchL2Lowering, ThreadIndexLowering>(converter);
}
