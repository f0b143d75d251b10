//===- ParserHazards.h - inputs the pinned MLIR parser crashes on -*- C++ -*-===//
//
// MLIR 22.1.8's parser aborts the process on some malformed inputs instead
// of reporting an error (found by scripts/fuzz/fuzz_opt.py). Every entry
// point that parses text (tilemega-opt, tilemega.compile) checks the text
// here first and reports a diagnostic at the offending position instead.
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_SUPPORT_PARSERHAZARDS_H
#define TILEMEGA_SUPPORT_PARSERHAZARDS_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <optional>
#include <string>

namespace mlir::tilemega {

/// A construct at byte `offset` of the text that the parser would crash on.
struct ParserHazard {
  size_t offset;
  std::string message;
};

/// The first hazard in `text`, or none.
std::optional<ParserHazard> findParserHazard(llvm::StringRef text);

} // namespace mlir::tilemega

#endif // TILEMEGA_SUPPORT_PARSERHAZARDS_H
