//===- VerifyNVPTXAddressSpaces.cpp - address spaces NVPTX can emit --------===//
//
// The NVPTX backend aborts the process ("Bad address space found while
// emitting PTX") on a global or pointer in an address space it has no PTX
// state space for. A gpu.module can carry such IR straight from the user
// (tilemega-opt input); this check turns it into a diagnostic at the op.
//
//===----------------------------------------------------------------------===//

#include "tilemega/Conversion/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

#include "llvm/ADT/STLExtras.h"

namespace mlir::tilemega {
#define GEN_PASS_DEF_VERIFYNVPTXADDRESSSPACES
#include "tilemega/Conversion/Passes.h.inc"
} // namespace mlir::tilemega

using namespace mlir;
using namespace mlir::tilemega;

/// Address spaces of NVPTX globals: generic, global, shared, const, local.
static bool isGlobalSpace(unsigned space) {
  return llvm::is_contained({0u, 1u, 3u, 4u, 5u}, space);
}

/// Address spaces NVPTX pointers may have: those of globals plus tensor,
/// shared::cluster and param.
static bool isPointerSpace(unsigned space) {
  return isGlobalSpace(space) || llvm::is_contained({6u, 7u, 101u}, space);
}

/// The first pointer type in `types` (or inside their LLVM structs and
/// arrays) whose address space NVPTX lacks.
static std::optional<unsigned> badPointerSpace(TypeRange types) {
  std::optional<unsigned> bad;
  for (Type type : types)
    type.walk([&](LLVM::LLVMPointerType ptr) {
      if (!bad && !isPointerSpace(ptr.getAddressSpace()))
        bad = ptr.getAddressSpace();
    });
  return bad;
}

namespace {

struct VerifyNVPTXAddressSpacesPass
    : public tilemega::impl::VerifyNVPTXAddressSpacesBase<
          VerifyNVPTXAddressSpacesPass> {
  void runOnOperation() override {
    WalkResult walk = getOperation().walk([](Operation *op) {
      if (auto global = dyn_cast<LLVM::GlobalOp>(op))
        if (!isGlobalSpace(global.getAddrSpace())) {
          global.emitOpError("is in address space ")
              << global.getAddrSpace()
              << ", which has no PTX state space for globals (0 generic, 1 "
                 "global, 3 shared, 4 const, 5 local)";
          return WalkResult::interrupt();
        }
      std::optional<unsigned> bad = badPointerSpace(op->getOperandTypes());
      if (!bad)
        bad = badPointerSpace(op->getResultTypes());
      // Block arguments and types held by attributes (an llvm.func's
      // signature) reach the translation too: found by scripts/fuzz, an
      // argument of !llvm.ptr<2147483648> aborted LLVM's type translation.
      for (Region &region : op->getRegions())
        for (Block &block : region)
          if (!bad)
            bad = badPointerSpace(block.getArgumentTypes());
      if (!bad)
        op->getAttrDictionary().walk([&](Type type) {
          if (!bad)
            bad = badPointerSpace(type);
        });
      if (bad) {
        op->emitOpError("uses a pointer in address space ")
            << *bad << ", which NVPTX has no PTX state space for";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
