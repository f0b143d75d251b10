//===- AlignedBarriers.cpp - Counting PTX's aligned CTA barriers ----------===//

#include "tilemega/Support/AlignedBarriers.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

using namespace llvm;

/// Whether one PTX statement (no `;`, no braces) is an aligned CTA barrier.
static bool isAlignedBarrier(StringRef statement) {
  statement = statement.trim();
  // A guard predicate: @p, @!p, @%p1.
  if (statement.consume_front("@")) {
    size_t end = statement.find_first_of(" \t");
    if (end == StringRef::npos)
      return false;
    statement = statement.drop_front(end).ltrim();
  }
  StringRef mnemonic = statement.take_until([](char c) { return isSpace(c); });
  SmallVector<StringRef> parts;
  mnemonic.split(parts, '.');
  if (parts.size() < 2 || (parts[0] != "bar" && parts[0] != "barrier"))
    return false;
  ArrayRef<StringRef> modifiers = ArrayRef<StringRef>(parts).drop_front();
  if (modifiers.front() == "cta")
    modifiers = modifiers.drop_front();
  if (modifiers.empty() ||
      !is_contained({StringRef("sync"), StringRef("red"), StringRef("arrive")},
                    modifiers.front()))
    return false;
  // bar.* is always aligned; barrier.* only with .aligned.
  return parts[0] == "bar" || is_contained(modifiers, "aligned");
}

unsigned mlir::tilemega::countAlignedBarrierInstructions(StringRef text) {
  unsigned count = 0;
  while (!text.empty()) {
    StringRef line;
    std::tie(line, text) = text.split('\n');
    line = line.take_front(line.find("//"));
    while (!line.empty()) {
      size_t end = line.find_first_of(";{}");
      count += isAlignedBarrier(line.take_front(end));
      line = end == StringRef::npos ? StringRef() : line.drop_front(end + 1);
    }
  }
  return count;
}
