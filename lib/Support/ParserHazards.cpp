//===- ParserHazards.cpp - inputs the pinned MLIR parser crashes on --------===//

#include "tilemega/Support/ParserHazards.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::tilemega;

/// Parser::parseDenseArrayAttr asks the element type for its bit width, and
/// Type::getIntOrFloatBitWidth asserts for any type that is not an integer
/// or a float: `array<index: 0>` (or `array<memref<...>: ...>`) aborts
/// instead of failing to parse. A dense array's element type is always a
/// builtin integer or float keyword, so anything else after `array<` is
/// reported here.
static std::optional<ParserHazard> denseArrayOfNonScalar(StringRef text) {
  for (size_t at = text.find("array<"); at != StringRef::npos;
       at = text.find("array<", at + 1)) {
    // `array<` inside a longer identifier (`dense_array<`, `myarray<`) is
    // not the builtin attribute.
    if (at > 0 && (llvm::isAlnum(text[at - 1]) || text[at - 1] == '_' ||
                   text[at - 1] == '.' || text[at - 1] == '!' ||
                   text[at - 1] == '#'))
      continue;
    // Text after `//` on the same line is a comment (lit's expected-error
    // lines quote such attributes).
    size_t lineStart = text.rfind('\n', at);
    lineStart = lineStart == StringRef::npos ? 0 : lineStart + 1;
    if (text.slice(lineStart, at).contains("//"))
      continue;
    StringRef rest = text.drop_front(at + 6).ltrim(" \t");
    StringRef word = rest.take_while(
        [](char c) { return llvm::isAlnum(c) || c == '_'; });
    auto widthAfter = [&](StringRef prefix) {
      return word.starts_with(prefix) && word.size() > prefix.size() &&
             llvm::all_of(word.drop_front(prefix.size()), llvm::isDigit);
    };
    bool integer = widthAfter("i") || widthAfter("si") || widthAfter("ui");
    bool isFloat = word.starts_with("f") || word.starts_with("bf") ||
                   word.starts_with("tf");
    if (integer || isFloat)
      continue;
    return ParserHazard{
        at, "a dense array attribute needs an integer or float element type "
            "(array<i64: ...>), got '" +
                (word.empty() ? rest.take_front(12) : word).str() +
                "' (MLIR 22.1.8's parser would abort on it)"};
  }
  return std::nullopt;
}

std::optional<ParserHazard> mlir::tilemega::findParserHazard(StringRef text) {
  return denseArrayOfNonScalar(text);
}
