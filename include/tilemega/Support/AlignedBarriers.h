//===- AlignedBarriers.h - Counting PTX's aligned CTA barriers --*- C++ -*-===//
//
// bar.sync, bar.red, bar.arrive and barrier{.cta}.{sync,red,arrive}.aligned
// must be executed by every thread of the CTA at the same instruction: a
// copy of one in code that only some threads run (LLVM unswitching a loop
// on a per-thread condition) hangs the CTA or corrupts it. The compiler
// counts them in the LLVM dialect code it hands to LLVM and again in the
// PTX LLVM returns; more in the PTX means LLVM duplicated some.
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_SUPPORT_ALIGNEDBARRIERS_H
#define TILEMEGA_SUPPORT_ALIGNEDBARRIERS_H

#include "llvm/ADT/StringRef.h"

namespace mlir::tilemega {

/// How many aligned CTA barrier instructions PTX `text` holds (a whole
/// module or one inline-asm string): statements whose mnemonic, after an
/// optional guard predicate, is bar{.cta}.{sync,red,arrive} or
/// barrier{.cta}.{sync,red,arrive} with .aligned. Comments are skipped;
/// bar.warp.sync, barrier.cluster.* and mbarrier.* are not CTA barriers.
unsigned countAlignedBarrierInstructions(llvm::StringRef text);

} // namespace mlir::tilemega

#endif // TILEMEGA_SUPPORT_ALIGNEDBARRIERS_H
