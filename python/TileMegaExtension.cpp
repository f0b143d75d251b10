//===- TileMegaExtension.cpp - TileMega's Python site initializer ----------===//
//
// Imported by the embedded MLIR core as `_site_initialize_0`: every Context
// gets our dialects, and our passes and pipelines are registered once, so
// that PassManager.parse("builtin.module(tilemega-...-pipeline)") works.
//
//===----------------------------------------------------------------------===//

#include "tilemega-c/Dialects.h"

#include "mlir/Bindings/Python/Nanobind.h"
#include "mlir/Bindings/Python/NanobindAdaptors.h"

namespace nb = nanobind;

NB_MODULE(_site_initialize_0, m) {
  tilemegaRegisterAllPassesAndPipelines();
  m.def(
      "register_dialects",
      [](MlirDialectRegistry registry) {
        tilemegaRegisterAllDialects(registry);
      },
      nb::arg("registry"));
}
