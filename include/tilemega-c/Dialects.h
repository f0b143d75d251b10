/*===- Dialects.h - C API of the TileMega dialects ----------------*- C -*-===*/

#ifndef TILEMEGA_C_DIALECTS_H
#define TILEMEGA_C_DIALECTS_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(Tile, tile);
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(Mega, mega);

/// Registers the tile and mega dialects and every upstream dialect, interface
/// and translation the TileMega pipelines need.
MLIR_CAPI_EXPORTED void tilemegaRegisterAllDialects(MlirDialectRegistry registry);

/// Registers TileMega's passes and pipelines (and the upstream passes of the
/// GPU lowering) with the global pass registry; safe to call more than once.
MLIR_CAPI_EXPORTED void tilemegaRegisterAllPassesAndPipelines(void);

#ifdef __cplusplus
}
#endif

#endif /* TILEMEGA_C_DIALECTS_H */
