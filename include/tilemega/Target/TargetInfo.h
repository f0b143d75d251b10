//===- TargetInfo.h - hardware limits of a GPU chip -------------*- C++ -*-===//
//
// The one description of the GPU a kernel is compiled for, derived from the
// `chip` pipeline option (sm_90a). The tile verifiers, tile-pipeline,
// convert-mega-to-gpu and the Python package (tilemega.target_info) read
// their limits from here instead of repeating 132 SMs / 227 KiB / 255
// registers.
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_TARGET_TARGETINFO_H
#define TILEMEGA_TARGET_TARGETINFO_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace mlir::tilemega {

/// Hardware limits of one chip (CUDA C Programming Guide, "Technical
/// Specifications per Compute Capability", and the H100/H200 SXM data
/// sheets for the SM count).
struct TargetInfo {
  /// The chip name as ptxas takes it (sm_90a).
  StringRef chip;
  /// Streaming multiprocessors: the CTAs a persistent kernel keeps resident
  /// with one CTA per SM.
  int64_t smCount;
  /// Shared memory one block may use (with the opt-in carve-out).
  int64_t maxSharedBytesPerBlock;
  /// Shared memory of one SM, shared by its resident blocks.
  int64_t sharedBytesPerSm;
  /// Registers one thread may use.
  int64_t maxRegistersPerThread;
  /// 32-bit registers of one SM.
  int64_t registersPerSm;
  /// Threads of one block.
  int64_t maxThreadsPerBlock;
  /// Threads resident on one SM.
  int64_t maxThreadsPerSm;
  /// Blocks resident on one SM.
  int64_t maxCtasPerSm;
};

/// Shared memory the driver sets aside for each resident CTA on sm_8x and
/// sm_90 (cudaDevAttrReservedSharedMemoryPerBlock): CTAs sharing an SM pay
/// it each, on top of their own.
inline constexpr int64_t kReservedSharedBytesPerCta = 1024;

/// The chip every TileMega tool compiles for unless told otherwise.
inline constexpr llvm::StringLiteral kDefaultChip = "sm_90a";

/// The description of `chip`, or failure for a chip TileMega has no
/// description of (see getKnownChips()).
FailureOr<TargetInfo> getTargetInfo(StringRef chip);

/// The description of kDefaultChip.
const TargetInfo &getDefaultTargetInfo();

/// The chips getTargetInfo knows, for diagnostics: "sm_90, sm_90a".
std::string getKnownChips();

/// The most CTAs an SM of any known chip holds (maxCtasPerSm): the bound of
/// a graph's ctas_per_sm before the chip is known (the mega.graph verifier).
int64_t getMaxCtasPerSmOfKnownChips();

/// The most CTAs any known chip keeps resident at once (smCount x
/// maxCtasPerSm): a persistent kernel needs all of its CTAs resident, so a
/// graph of more workers can run on no chip (the mega.graph verifier, which
/// does not know the chip yet, rejects it with this bound).
int64_t getMaxResidentCtasOfKnownChips();

} // namespace mlir::tilemega

#endif // TILEMEGA_TARGET_TARGETINFO_H
