//===- TileMegaExtension.cpp - TileMega's Python site initializer ----------===//
//
// Imported by the embedded MLIR core as `_site_initialize_0`: every Context
// gets our dialects, and our passes and pipelines are registered once, so
// that PassManager.parse("builtin.module(tilemega-...-pipeline)") works.
// Also exposes the target descriptions (target_info), so that Python reads
// the same limits as the C++ passes.
//
//===----------------------------------------------------------------------===//

#include "tilemega-c/Dialects.h"

#include "mlir/Bindings/Python/Nanobind.h"
#include "mlir/Bindings/Python/NanobindAdaptors.h"

#include <string>

namespace nb = nanobind;

NB_MODULE(_site_initialize_0, m) {
  tilemegaRegisterAllPassesAndPipelines();
  m.def(
      "register_dialects",
      [](MlirDialectRegistry registry) {
        tilemegaRegisterAllDialects(registry);
      },
      nb::arg("registry"));

  // The discardable attribute names Python reads or writes, from the
  // dialects that declare them.
  auto str = [](MlirStringRef s) { return std::string(s.data, s.length); };
  nb::dict attrNames;
  attrNames["kernels_metadata"] = str(tilemegaGetKernelsMetadataAttrName());
  attrNames["arg_name"] = str(tilemegaGetArgNameAttrName());
  attrNames["graph_arg_names"] = str(tilemegaGetGraphArgNamesAttrName());
  attrNames["graph_arg_roles"] = str(tilemegaGetGraphArgRolesAttrName());
  attrNames["aligned_barriers"] = str(tilemegaGetAlignedBarriersAttrName());
  m.attr("ATTR_NAMES") = attrNames;

  m.def(
      "count_aligned_barriers",
      [](const std::string &ptx) {
        return tilemegaCountAlignedBarrierInstructions(
            mlirStringRefCreate(ptx.data(), ptx.size()));
      },
      nb::arg("ptx"),
      "How many aligned CTA barrier instructions (bar.sync, bar.red, "
      "bar.arrive, barrier.*.aligned) PTX text holds: the rule "
      "tilemega-record-aligned-barriers applies to inline asm.");

  m.def(
      "find_parser_hazard",
      [](const std::string &text) -> nb::object {
        size_t offset = 0;
        MlirStringRef message;
        if (!tilemegaFindParserHazard(
                mlirStringRefCreate(text.data(), text.size()), &offset,
                &message))
          return nb::none();
        return nb::make_tuple(offset, std::string(message.data, message.length));
      },
      nb::arg("text"),
      "(byte offset, message) of the first construct in MLIR `text` that "
      "the pinned MLIR parser would abort on, or None.");

  MlirStringRef defaultChip = tilemegaGetDefaultChip();
  m.attr("DEFAULT_CHIP") = std::string(defaultChip.data, defaultChip.length);
  m.def(
      "target_info",
      [](const std::string &chip) {
        TilemegaTargetInfo info;
        if (!tilemegaGetTargetInfo(
                mlirStringRefCreate(chip.data(), chip.size()), &info)) {
          MlirStringRef known = tilemegaGetKnownChips();
          throw nb::value_error(
              ("chip: no target description of '" + chip + "' (known: " +
               std::string(known.data, known.length) + ")")
                  .c_str());
        }
        nb::dict d;
        d["chip"] = chip;
        d["sm_count"] = info.smCount;
        d["max_shared_bytes_per_block"] = info.maxSharedBytesPerBlock;
        d["shared_bytes_per_sm"] = info.sharedBytesPerSm;
        d["max_registers_per_thread"] = info.maxRegistersPerThread;
        d["registers_per_sm"] = info.registersPerSm;
        d["max_threads_per_block"] = info.maxThreadsPerBlock;
        d["max_threads_per_sm"] = info.maxThreadsPerSm;
        d["max_ctas_per_sm"] = info.maxCtasPerSm;
        return d;
      },
      nb::arg("chip"),
      "The hardware limits of `chip` (tilemega/Target/TargetInfo.h) as a "
      "dict; ValueError for a chip without a description.");
}
