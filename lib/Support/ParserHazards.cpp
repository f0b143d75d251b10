//===- ParserHazards.cpp - inputs the pinned MLIR parser crashes on --------===//

#include "tilemega/Support/ParserHazards.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <functional>

#include <limits>

using namespace mlir;
using namespace mlir::tilemega;

/// Whether `at` is inside a `//` comment of its line.
static bool inComment(StringRef text, size_t at) {
  size_t lineStart = text.rfind('\n', at);
  lineStart = lineStart == StringRef::npos ? 0 : lineStart + 1;
  return text.slice(lineStart, at).contains("//");
}

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
    if (inComment(text, at))
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

/// The decimal integer at the start of `text` if it is one of the values
/// DenseMapInfo<int64_t> reserves (INT64_MAX, its empty key, and
/// INT64_MAX - 1, its tombstone).
static std::optional<int64_t> reservedKey(StringRef text) {
  uint64_t value;
  StringRef digits = text.take_while(llvm::isDigit);
  if (digits.empty() || digits.getAsInteger(10, value))
    return std::nullopt;
  uint64_t most = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (value != most && value != most - 1)
    return std::nullopt;
  return static_cast<int64_t>(value);
}

/// scf::IndexSwitchOp::verify collects the case values in a
/// DenseSet<int64_t>, whose empty and tombstone keys are INT64_MAX and
/// INT64_MAX - 1: a switch with either as a case value aborts the verifier
/// (right after parsing) instead of failing. Reported for the custom form
/// (`case 9223372036854775807 {`) and the generic one (`cases = array<i64:
/// ...>`).
static std::optional<ParserHazard> reservedSwitchCase(StringRef text) {
  auto hazard = [](size_t at, int64_t value) {
    return ParserHazard{at, "scf.index_switch case value " + std::to_string(value) +
                                " is reserved (MLIR 22.1.8's verifier would abort on "
                                "it): case values must be below " +
                                std::to_string(std::numeric_limits<int64_t>::max() - 1)};
  };
  for (size_t at = text.find("case"); at != StringRef::npos;
       at = text.find("case", at + 1)) {
    // The keyword, not part of a name (`%case`, `@cases`, `showcase`).
    if (at > 0 && (llvm::isAlnum(text[at - 1]) ||
                   StringRef("_.%@^#!$").contains(text[at - 1])))
      continue;
    if (inComment(text, at))
      continue;
    StringRef rest = text.drop_front(at + 4);
    if (rest.starts_with("s")) {
      // Generic form: cases = array<i64: a, b, ...>.
      StringRef list = rest.drop_front(1).ltrim(" \t");
      if (!list.consume_front("=") || !list.ltrim(" \t").starts_with("array<i64:"))
        continue;
      list = list.ltrim(" \t").drop_front(10);
      list = list.take_until([](char c) { return c == '>'; });
      size_t offset = list.data() - text.data();
      for (StringRef item = list; !item.empty();) {
        auto [head, tail] = item.split(',');
        StringRef value = head.ltrim(" \t\n");
        if (std::optional<int64_t> key = reservedKey(value))
          return hazard(offset + (value.data() - list.data()), *key);
        item = tail;
      }
      continue;
    }
    if (rest.empty() || !llvm::isSpace(rest[0]))
      continue;
    StringRef value = rest.ltrim(" \t");
    if (std::optional<int64_t> key = reservedKey(value))
      return hazard(value.data() - text.data(), *key);
  }
  return std::nullopt;
}

/// llvm.extractvalue / llvm.insertvalue check a position against the
/// aggregate's size after truncating it to 32 bits, then index with all 64:
/// a position of 2^32 or more (or -2^32 or less) passes the check and
/// aborts on the element lookup instead of failing. Reported for the custom
/// form (`%s[4294967296]`) and the generic one (`position = array<i64: ...>`),
/// on the op's line.
static std::optional<ParserHazard> hugeAggregatePosition(StringRef text) {
  for (StringRef op : {"llvm.extractvalue", "llvm.insertvalue"}) {
    for (size_t at = text.find(op); at != StringRef::npos; at = text.find(op, at + 1)) {
      if (inComment(text, at))
        continue;
      StringRef line = text.drop_front(at + op.size()).take_until([](char c) {
        return c == '\n';
      });
      // The positions: the generic form's array, else the first [...].
      StringRef list;
      if (size_t named = line.find("position"); named != StringRef::npos) {
        size_t open = line.find("array<i64:", named);
        if (open == StringRef::npos)
          continue;
        list = line.drop_front(open + 10).take_until([](char c) { return c == '>'; });
      } else {
        size_t open = line.find('[');
        if (open == StringRef::npos)
          continue;
        list = line.drop_front(open + 1).take_until([](char c) { return c == ']'; });
      }
      for (StringRef item = list; !item.empty();) {
        auto [head, tail] = item.split(',');
        StringRef value = head.trim(" \t");
        bool negative = value.consume_front("-");
        StringRef digits = value.take_while(llvm::isDigit);
        uint64_t magnitude;
        // Longer than any 64-bit value, or at least 2^32: both abort.
        bool huge = !digits.empty() && (digits.getAsInteger(10, magnitude) ||
                                        magnitude >= (uint64_t(1) << 32));
        if (huge)
          return ParserHazard{
              static_cast<size_t>(head.trim(" \t").data() - text.data()),
              (op + " position " + (negative ? "-" : "") + digits +
               " is out of range (MLIR 22.1.8's parser would abort on it): a "
               "position indexes a struct or array and must be in [0, 2^32)")
                  .str()};
        item = tail;
      }
    }
  }
  return std::nullopt;
}

/// A forward reference that a definition inside a nested region resolves:
/// the parser binds the earlier use (`%first = arith.cmpi eq, %t, %a`) to
/// a later `%a = ...` inside a region below it, and when the parse then
/// fails, destroying the nested op while the outer use still holds its
/// result aborts the process ("operation destroyed but still has uses").
/// Such a definition never dominates the use, so the input is invalid
/// whether or not the parse fails; reported at the use. Only operands of an
/// op with results (`%x = op ..., %a`) count as uses, scopes are tracked by
/// braces outside comments and strings, a closing region forgets its uses,
/// and a `func.func`, `llvm.func` or `gpu.func` (isolated from above: names
/// start afresh) or a return to the top level forgets them all.
static std::optional<ParserHazard> forwardUseDefinedBelow(StringRef text) {
  struct Use {
    size_t offset;
    int depth;
  };
  llvm::StringMap<SmallVector<Use, 1>> pending;
  llvm::StringSet<> defined;
  int depth = 0;
  auto isNameChar = [](char c) {
    return llvm::isAlnum(c) || c == '_' || c == '$' || c == '.' || c == '-';
  };
  auto skipSpaces = [&](size_t at) {
    while (at < text.size() && (text[at] == ' ' || text[at] == '\t'))
      ++at;
    return at;
  };
  // Whether the name ending at `end` is defined there: `%a = `, `%a:2 = `,
  // `%a, %b = ` (a result list), `%a: type` (an argument).
  std::function<bool(size_t)> definesAt = [&](size_t end) {
    size_t at = end;
    if (at < text.size() && text[at] == ':' && at + 1 < text.size() &&
        llvm::isDigit(text[at + 1])) {
      ++at;
      while (at < text.size() && llvm::isDigit(text[at]))
        ++at;
    } else if (at < text.size() && text[at] == ':') {
      return true;
    }
    at = skipSpaces(at);
    if (at >= text.size())
      return false;
    if (text[at] == '=')
      return at + 1 >= text.size() || text[at + 1] != '=';
    if (text[at] != ',')
      return false;
    at = skipSpaces(at + 1);
    if (at >= text.size() || text[at] != '%')
      return false;
    size_t next = at + 1;
    while (next < text.size() && isNameChar(text[next]))
      ++next;
    return definesAt(next);
  };
  // Whether the name at `at` is an operand of an op that defines results
  // (`%x = op ..., %name`): not a name a custom syntax introduces for its
  // region (`tile.parallel (%i, %j) in [...] {`), which reads as a use.
  auto isOperandOfResult = [&](size_t at) {
    size_t lineStart = text.rfind('\n', at);
    StringRef before = text.slice(lineStart == StringRef::npos ? 0 : lineStart + 1, at);
    size_t eq = before.find('=');
    return eq != StringRef::npos && before.ltrim(" \t").starts_with("%") &&
           (eq + 1 >= before.size() || before[eq + 1] != '=');
  };
  for (size_t at = 0; at < text.size(); ++at) {
    char c = text[at];
    if (c == '/' && text.drop_front(at).starts_with("//")) {
      at = text.find('\n', at);
      if (at == StringRef::npos)
        break;
      continue;
    }
    if (c == '"') {
      for (++at; at < text.size() && text[at] != '"'; ++at)
        if (text[at] == '\\')
          ++at;
      continue;
    }
    if (c == '{') {
      ++depth;
      continue;
    }
    if (c == '}') {
      if (--depth <= 0) {
        depth = 0;
        pending.clear();
        defined.clear();
        continue;
      }
      // Names used in a region that closed do not reach its siblings (the
      // printer reuses %argN across them).
      for (auto &entry : pending)
        llvm::erase_if(entry.second, [&](const Use &use) { return use.depth > depth; });
      continue;
    }
    if (c == 'f' && (at == 0 || !isNameChar(text[at - 1])) &&
        (text.drop_front(at).starts_with("func.func") ||
         (at >= 4 && (text.substr(at - 4).starts_with("llvm.func") ||
                      text.substr(at - 4).starts_with("gpu.func") ||
                      text.substr(at - 3).starts_with("gpu.func"))))) {
      pending.clear();
      defined.clear();
      continue;
    }
    if (c != '%' || at + 1 >= text.size() || !isNameChar(text[at + 1]))
      continue;
    size_t end = at + 1;
    while (end < text.size() && isNameChar(text[end]))
      ++end;
    StringRef name = text.slice(at + 1, end);
    if (definesAt(end)) {
      auto it = pending.find(name);
      if (it != pending.end()) {
        for (const Use &use : it->second)
          if (use.depth < depth)
            return ParserHazard{
                use.offset,
                "%" + name.str() +
                    " is used here before its definition, which is inside a "
                    "region nested below this use and so cannot reach it "
                    "(MLIR 22.1.8's parser would abort on this when the parse "
                    "fails later)"};
        pending.erase(it);
      }
      defined.insert(name);
    } else if (!defined.contains(name) && isOperandOfResult(at)) {
      pending[name].push_back({at, depth});
    }
    at = end - 1;
  }
  return std::nullopt;
}

std::optional<ParserHazard> mlir::tilemega::findParserHazard(StringRef text) {
  if (std::optional<ParserHazard> hazard = denseArrayOfNonScalar(text))
    return hazard;
  if (std::optional<ParserHazard> hazard = hugeAggregatePosition(text))
    return hazard;
  if (std::optional<ParserHazard> hazard = forwardUseDefinedBelow(text))
    return hazard;
  return reservedSwitchCase(text);
}
