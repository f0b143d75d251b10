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

/// The hardware limits of one chip (tilemega/Target/TargetInfo.h).
typedef struct {
  int64_t smCount;
  int64_t maxSharedBytesPerBlock;
  int64_t sharedBytesPerSm;
  int64_t maxRegistersPerThread;
  int64_t registersPerSm;
  int64_t maxThreadsPerBlock;
  int64_t maxThreadsPerSm;
  int64_t maxCtasPerSm;
} TilemegaTargetInfo;

/// Fills `info` with the limits of `chip`; returns false (leaving `info`
/// alone) for a chip TileMega has no description of.
MLIR_CAPI_EXPORTED bool tilemegaGetTargetInfo(MlirStringRef chip,
                                              TilemegaTargetInfo *info);

/// The chip TileMega compiles for unless told otherwise ("sm_90a").
MLIR_CAPI_EXPORTED MlirStringRef tilemegaGetDefaultChip(void);

/// The chips tilemegaGetTargetInfo knows, comma-separated ("sm_90, sm_90a").
MLIR_CAPI_EXPORTED MlirStringRef tilemegaGetKnownChips(void);

/// Names of the discardable attributes Python reads or writes, as the
/// dialects declare them: `tilemega.kernels` (launch metadata on the module),
/// `tile.name` (a kernel argument's name), `mega.arg_names` /
/// `mega.arg_roles` (a graph's argument names and roles).
/// Checks MLIR text for a construct the pinned MLIR parser aborts on
/// (tilemega/Support/ParserHazards.h). Returns false when there is none;
/// otherwise true with `*offset` its byte offset and `*message` what is
/// wrong (valid until the next call).
MLIR_CAPI_EXPORTED bool tilemegaFindParserHazard(MlirStringRef text,
                                                 size_t *offset,
                                                 MlirStringRef *message);

MLIR_CAPI_EXPORTED MlirStringRef tilemegaGetKernelsMetadataAttrName(void);
MLIR_CAPI_EXPORTED MlirStringRef tilemegaGetArgNameAttrName(void);
MLIR_CAPI_EXPORTED MlirStringRef tilemegaGetAlignedBarriersAttrName(void);

/// How many aligned CTA barrier instructions (bar.sync, bar.red, bar.arrive,
/// barrier.*.aligned) PTX text holds (tilemega/Support/AlignedBarriers.h).
MLIR_CAPI_EXPORTED unsigned tilemegaCountAlignedBarrierInstructions(MlirStringRef ptx);
MLIR_CAPI_EXPORTED MlirStringRef tilemegaGetGraphArgNamesAttrName(void);
MLIR_CAPI_EXPORTED MlirStringRef tilemegaGetGraphArgRolesAttrName(void);

#ifdef __cplusplus
}
#endif

#endif /* TILEMEGA_C_DIALECTS_H */
