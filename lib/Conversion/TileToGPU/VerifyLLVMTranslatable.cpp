//===- VerifyLLVMTranslatable.cpp - LLVM dialect IR the translation takes -===//
//
// The LLVM dialect's verifiers accept IR that the translation to LLVM IR
// then aborts the process on (an unreachable type switch, an alignment
// assertion). A gpu.module can carry such IR straight from the user
// (tilemega-opt input); this check turns it into a diagnostic at the op.
//
//===----------------------------------------------------------------------===//

#include "tilemega/Conversion/Passes.h"
#include "tilemega/Target/TargetInfo.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"

#include "llvm/Support/MathExtras.h"

namespace mlir::tilemega {
#define GEN_PASS_DEF_VERIFYLLVMTRANSLATABLE
#include "tilemega/Conversion/Passes.h.inc"
} // namespace mlir::tilemega

using namespace mlir;
using namespace mlir::tilemega;

/// LLVM's largest alignment (llvm::Value::MaximumAlignment): 2^32 bytes.
constexpr uint64_t kMaxAlignment = uint64_t(1) << 32;

/// Every type an LLVM op uses, defines or binds in its regions, and with
/// `typeAttrs` those its type attributes hold (a global's type, a
/// function's signature). Only type attributes: the types of other
/// attributes are the translation's to convert (an `index`
/// llvm.mlir.constant value is legal), unlike VerifyNVPTXAddressSpaces,
/// which walks every type an attribute nests for a pointer.
static SmallVector<Type> typesOf(Operation *op, bool typeAttrs) {
  SmallVector<Type> types(op->getOperandTypes());
  llvm::append_range(types, op->getResultTypes());
  for (Region &region : op->getRegions())
    for (Block &block : region)
      llvm::append_range(types, block.getArgumentTypes());
  if (typeAttrs)
    for (NamedAttribute attr : op->getAttrs())
      if (auto typeAttr = dyn_cast<TypeAttr>(attr.getValue()))
        types.push_back(typeAttr.getValue());
  return types;
}

/// The first type of `op` (typesOf) the translation has no LLVM type for.
static std::optional<Type> untranslatableTypeOf(Operation *op) {
  for (Type type : typesOf(op, /*typeAttrs=*/true))
    if (!LLVM::isCompatibleType(type))
      return type;
  return std::nullopt;
}

/// The first vector type inside `type` (itself, or an element of a struct,
/// array or function type) larger than one thread's registers can hold: no
/// GPU code can keep it, and the NVPTX backend aborts on the largest (a
/// vector<2147483648xf32> argument overflows the alignment bitfield of its
/// calling convention) or takes unbounded time splitting them.
static std::optional<VectorType> oversizedVector(Type type, uint64_t maxBits) {
  std::optional<VectorType> found;
  type.walk([&](VectorType vector) {
    if (found || !vector.getElementType().isIntOrFloat())
      return;
    uint64_t bits = vector.getElementType().getIntOrFloatBitWidth();
    for (int64_t dim : vector.getShape())
      bits = dim > 0 && bits <= maxBits ? bits * static_cast<uint64_t>(dim) : maxBits + 1;
    if (bits > maxBits)
      found = vector;
  });
  return found;
}

/// oversizedVector over typesOf(op), a global's own type excepted: memory,
/// not registers, holds a global.
static std::optional<VectorType> oversizedVectorOf(Operation *op, uint64_t maxBits) {
  for (Type type : typesOf(op, /*typeAttrs=*/!isa<LLVM::GlobalOp>(op)))
    if (std::optional<VectorType> vector = oversizedVector(type, maxBits))
      return vector;
  return std::nullopt;
}

namespace {

struct VerifyLLVMTranslatablePass
    : public tilemega::impl::VerifyLLVMTranslatableBase<VerifyLLVMTranslatablePass> {
  void runOnOperation() override {
    // One thread's registers (32-bit each).
    const TargetInfo &target = getDefaultTargetInfo();
    uint64_t maxBits = static_cast<uint64_t>(target.maxRegistersPerThread) * 32;
    WalkResult walk = getOperation().walk([&](Operation *op) {
      if (!isa<LLVM::LLVMDialect>(op->getDialect()))
        return WalkResult::advance();
      if (std::optional<Type> bad = untranslatableTypeOf(op)) {
        op->emitOpError("uses the type ")
            << *bad << ", which has no LLVM IR type (LLVM types, integers, floats "
                       "and vectors of them only)";
        return WalkResult::interrupt();
      }
      if (std::optional<VectorType> big = oversizedVectorOf(op, maxBits)) {
        op->emitOpError("uses the vector type ")
            << *big << ", larger than the " << maxBits << " bits of one thread's "
            << target.maxRegistersPerThread << " registers on " << target.chip
            << ": no GPU code can hold it";
        return WalkResult::interrupt();
      }
      if (auto align = op->getAttrOfType<IntegerAttr>("alignment")) {
        // 0 (none) leaves the choice to LLVM.
        APInt value = align.getValue();
        bool valid = value.isZero() ||
                     (!value.isNegative() && value.ule(kMaxAlignment) &&
                      value.isPowerOf2());
        if (!valid) {
          op->emitOpError("has alignment ")
              << value.getSExtValue()
              << "; LLVM takes a power of two of at most 2^32 bytes";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
