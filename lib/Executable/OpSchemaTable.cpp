//===- OpSchemaTable.cpp - argument names of operator schemas -------------===//

#include "pippy/Executable/OpSchemaTable.h"

#include <algorithm>
#include <iterator>

namespace {

struct Row {
  const char *op;
  const char *arguments; ///< comma-separated
};

const Row kRows[] = {
#include "OpSchemaTable.inc"
    {"", ""}, // keeps the array non-empty where the table is
};

} // namespace

std::optional<std::vector<std::string_view>>
pippy::exe::schemaArgumentNames(std::string_view op) {
  const Row *end = std::end(kRows) - 1;
  const Row *row = std::lower_bound(std::begin(kRows), end, op,
                                    [](const Row &r, std::string_view key) {
                                      return std::string_view(r.op) < key;
                                    });
  if (row == end || std::string_view(row->op) != op)
    return std::nullopt;
  std::vector<std::string_view> names;
  std::string_view rest = row->arguments;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    names.push_back(rest.substr(0, comma));
    if (comma == std::string_view::npos)
      break;
    rest.remove_prefix(comma + 1);
  }
  return names;
}
