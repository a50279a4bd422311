//===- AsmText.cpp - arranging printed IR for fast reading ----------------===//

#include "pippy/Support/AsmText.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

using llvm::StringRef;

namespace pippy {

namespace {

/// `#name = loc(...)`: an alias definition whose value is a location.
bool isLocationAlias(StringRef line) {
  if (!line.consume_front("#"))
    return false;
  size_t eq = line.find(" = ");
  if (eq == StringRef::npos || eq == 0)
    return false;
  for (char c : line.take_front(eq))
    if (!(llvm::isAlnum(c) || c == '_' || c == '$' || c == '.' || c == '-'))
      return false;
  return line.drop_front(eq + 3).starts_with("loc(");
}

/// A line MLIR prints before the top-level operation: an attribute or type
/// alias definition.
bool isAliasDefinition(StringRef line) {
  return line.starts_with("#") || line.starts_with("!");
}

} // namespace

std::string hoistLocationAliases(StringRef text) {
  llvm::SmallVector<StringRef> lines;
  text.split(lines, '\n');
  // The last element is what follows the final newline (empty for text that
  // ends with one); trailing empty lines stay where they are.
  size_t end = lines.size();
  while (end > 0 && lines[end - 1].empty())
    --end;
  size_t tail = end;
  while (tail > 0 && isLocationAlias(lines[tail - 1]))
    --tail;
  if (tail == end || tail == 0)
    return text.str();
  // The line before the block must close the top-level operation, or the
  // block is not the printer's deferred aliases.
  if (!lines[tail - 1].starts_with("}"))
    return text.str();
  size_t head = 0;
  while (head < tail && isAliasDefinition(lines[head]))
    ++head;

  std::string out;
  out.reserve(text.size() + 1);
  auto emit = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      out += lines[i];
      out += '\n';
    }
  };
  emit(0, head);
  emit(tail, end);
  emit(head, tail);
  // Whatever followed the block (its final newline, trailing empty lines).
  for (size_t i = end; i < lines.size(); ++i) {
    out += lines[i];
    if (i + 1 < lines.size())
      out += '\n';
  }
  return out;
}

} // namespace pippy
