//===- TargetInfo.cpp - hardware limits of a GPU chip ----------------------===//

#include "tilemega/Target/TargetInfo.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::tilemega;

/// Hopper (compute capability 9.0) as in the H100 SXM and H200: sm_90a is
/// sm_90 plus the architecture-specific instructions (wgmma, setmaxnreg),
/// with the same limits.
static constexpr TargetInfo hopper(StringRef chip) {
  return TargetInfo{
      /*chip=*/chip,
      /*smCount=*/132,
      /*maxSharedBytesPerBlock=*/227 * 1024,
      /*sharedBytesPerSm=*/228 * 1024,
      /*maxRegistersPerThread=*/255,
      /*registersPerSm=*/64 * 1024,
      /*maxThreadsPerBlock=*/1024,
      /*maxThreadsPerSm=*/2048,
      /*maxCtasPerSm=*/32,
  };
}

static constexpr TargetInfo kTargets[] = {hopper("sm_90"), hopper("sm_90a")};

FailureOr<TargetInfo> mlir::tilemega::getTargetInfo(StringRef chip) {
  for (const TargetInfo &target : kTargets)
    if (target.chip == chip)
      return target;
  return failure();
}

const TargetInfo &mlir::tilemega::getDefaultTargetInfo() {
  static const TargetInfo target = *getTargetInfo(kDefaultChip);
  return target;
}

std::string mlir::tilemega::getKnownChips() {
  std::string result;
  for (const TargetInfo &target : kTargets) {
    if (!result.empty())
      result += ", ";
    result += target.chip.str();
  }
  return result;
}

int64_t mlir::tilemega::getMaxCtasPerSmOfKnownChips() {
  int64_t most = 0;
  for (const TargetInfo &target : kTargets)
    most = std::max(most, target.maxCtasPerSm);
  return most;
}

int64_t mlir::tilemega::getMaxResidentCtasOfKnownChips() {
  int64_t most = 0;
  for (const TargetInfo &target : kTargets)
    most = std::max(most, target.smCount * target.maxCtasPerSm);
  return most;
}
