//===- Dialects.cpp - C API of the TileMega dialects ------------------------===//

#include "tilemega-c/Dialects.h"

#include "tilemega/Dialect/Mega/IR/MegaDialect.h"
#include "tilemega/Dialect/Tile/IR/TileDialect.h"
#include "tilemega/InitAll.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"

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
