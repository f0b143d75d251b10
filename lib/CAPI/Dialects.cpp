//===- Dialects.cpp - C API of the TileMega dialects ------------------------===//

#include "tilemega-c/Dialects.h"

#include "tilemega/Dialect/Mega/IR/MegaDialect.h"
#include "tilemega/Dialect/Tile/IR/TileDialect.h"
#include "tilemega/InitAll.h"
#include "tilemega/Support/AlignedBarriers.h"
#include "tilemega/Support/ParserHazards.h"
#include "tilemega/Target/TargetInfo.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/CAPI/Support.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(Tile, tile,
                                      mlir::tilemega::tile::TileDialect)
MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(Mega, mega,
                                      mlir::tilemega::mega::MegaDialect)

void tilemegaRegisterAllDialects(MlirDialectRegistry registry) {
  mlir::tilemega::registerAllTileMegaDialects(*unwrap(registry));
}

void tilemegaRegisterAllPassesAndPipelines(void) {
  // The pass registry is global: register once per process.
  static bool registered = [] {
    mlir::tilemega::registerAllTileMegaPassesAndPipelines();
    return true;
  }();
  (void)registered;
}

bool tilemegaGetTargetInfo(MlirStringRef chip, TilemegaTargetInfo *info) {
  llvm::FailureOr<mlir::tilemega::TargetInfo> target =
      mlir::tilemega::getTargetInfo(unwrap(chip));
  if (llvm::failed(target))
    return false;
  *info = {target->smCount,           target->maxSharedBytesPerBlock,
           target->sharedBytesPerSm,  target->maxRegistersPerThread,
           target->registersPerSm,    target->maxThreadsPerBlock,
           target->maxThreadsPerSm,   target->maxCtasPerSm};
  return true;
}

MlirStringRef tilemegaGetDefaultChip(void) {
  return wrap(llvm::StringRef(mlir::tilemega::kDefaultChip));
}

MlirStringRef tilemegaGetKnownChips(void) {
  static const std::string chips = mlir::tilemega::getKnownChips();
  return wrap(llvm::StringRef(chips));
}

MlirStringRef tilemegaGetKernelsMetadataAttrName(void) {
  return wrap(mlir::tilemega::tile::TileDialect::getKernelsMetadataAttrName());
}

MlirStringRef tilemegaGetAlignedBarriersAttrName(void) {
  return wrap(mlir::tilemega::tile::TileDialect::getAlignedBarriersAttrName());
}

unsigned tilemegaCountAlignedBarrierInstructions(MlirStringRef ptx) {
  return mlir::tilemega::countAlignedBarrierInstructions(unwrap(ptx));
}

MlirStringRef tilemegaGetArgNameAttrName(void) {
  return wrap(mlir::tilemega::tile::TileDialect::getArgNameAttrName());
}

MlirStringRef tilemegaGetGraphArgNamesAttrName(void) {
  return wrap(mlir::tilemega::mega::MegaDialect::getArgNamesAttrName());
}

MlirStringRef tilemegaGetGraphArgRolesAttrName(void) {
  return wrap(mlir::tilemega::mega::MegaDialect::getArgRolesAttrName());
}

bool tilemegaFindParserHazard(MlirStringRef text, size_t *offset,
                              MlirStringRef *message) {
  static thread_local std::string last;
  std::optional<mlir::tilemega::ParserHazard> hazard =
      mlir::tilemega::findParserHazard(unwrap(text));
  if (!hazard)
    return false;
  last = std::move(hazard->message);
  *offset = hazard->offset;
  *message = wrap(llvm::StringRef(last));
  return true;
}
