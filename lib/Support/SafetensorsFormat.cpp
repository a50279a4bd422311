//===- SafetensorsFormat.cpp - safetensors dtypes and message text --------===//
//
// The parts of the safetensors format that the reader and the writer share:
// the dtype table and its header spellings, element and byte counts in
// uint64 arithmetic that cannot overflow, and the pieces of their messages
// and of the JSON they build (quoted names, shapes, JSON strings).
//
//===----------------------------------------------------------------------===//

#include "SafetensorsImpl.h"

#include <cassert>
#include <cstdlib>

using namespace pippy::safetensors;
using namespace pippy::safetensors::detail;

namespace {

struct DTypeDesc {
  DType dtype;
  std::string_view name;
  size_t size;
};

constexpr DTypeDesc kDTypes[] = {
    {DType::BOOL, "BOOL", 1},       {DType::U8, "U8", 1},
    {DType::I8, "I8", 1},           {DType::I16, "I16", 2},
    {DType::I32, "I32", 4},         {DType::I64, "I64", 8},
    {DType::F16, "F16", 2},         {DType::BF16, "BF16", 2},
    {DType::F32, "F32", 4},         {DType::F64, "F64", 8},
    {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
};

const DTypeDesc &describe(DType dtype) {
  for (const DTypeDesc &desc : kDTypes)
    if (desc.dtype == dtype)
      return desc;
  assert(false && "unknown safetensors dtype");
  std::abort();
}

} // namespace

namespace pippy::safetensors::detail {

/// Appends the three-digit octal escape of `c` ("\377").
void appendOctal(std::string &out, unsigned char c) {
  out += '\\';
  out += static_cast<char>('0' + ((c >> 6) & 7));
  out += static_cast<char>('0' + ((c >> 3) & 7));
  out += static_cast<char>('0' + (c & 7));
}

/// `text` in single quotes with non-printable characters escaped, so that a
/// message stays on one line whatever the tensor is called. Backslash, tab,
/// newline and double quote get C escapes and every other byte outside
/// printable ASCII an octal one.
std::string singleQuoted(std::string_view text) {
  std::string result = "'";
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
    case '\\':
      result += "\\\\";
      break;
    case '\t':
      result += "\\t";
      break;
    case '\n':
      result += "\\n";
      break;
    case '"':
      result += "\\\"";
      break;
    default:
      if (c >= 0x20 && c <= 0x7e)
        result += ch;
      else
        appendOctal(result, c);
    }
  }
  result += '\'';
  return result;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string result = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      result += ", ";
    result += std::to_string(shape[i]);
  }
  result += ']';
  return result;
}

/// Appends `text` as a JSON string: quotes and backslashes escaped, control
/// characters as \t, \n, \r or \u00XX, everything else (UTF-8) as is.
void appendJSONString(std::string &out, std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  out += '"';
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\')
      out += '\\';
    if (c >= 0x20) {
      out += ch;
      continue;
    }
    out += '\\';
    switch (c) {
    case '\t':
      out += 't';
      break;
    case '\n':
      out += 'n';
      break;
    case '\r':
      out += 'r';
      break;
    default:
      out += "u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  out += '"';
}

/// Multiplies the dimensions in uint64, failing when a partial product
/// exceeds INT64_MAX (so numElements() cannot overflow either).
std::optional<uint64_t> checkedElementCount(const std::vector<int64_t> &shape) {
  uint64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      return std::nullopt;
    uint64_t udim = static_cast<uint64_t>(dim);
    if (udim != 0 && count > kMaxElements / udim)
      return std::nullopt;
    count *= udim;
  }
  return count;
}

/// Bytes needed by `count` elements of `dtype`, or none on overflow.
std::optional<uint64_t> checkedByteCount(uint64_t count, DType dtype) {
  uint64_t size = dtypeSize(dtype);
  if (count > std::numeric_limits<uint64_t>::max() / size)
    return std::nullopt;
  return count * size;
}

} // namespace pippy::safetensors::detail

std::string_view pippy::safetensors::dtypeName(DType dtype) {
  return describe(dtype).name;
}

std::optional<DType> pippy::safetensors::parseDType(std::string_view name) {
  for (const DTypeDesc &desc : kDTypes)
    if (desc.name == name)
      return desc.dtype;
  return std::nullopt;
}

size_t pippy::safetensors::dtypeSize(DType dtype) {
  return describe(dtype).size;
}

int64_t TensorInfo::numElements() const {
  // Unsigned arithmetic: wraps instead of undefined behavior for shapes that
  // were never validated.
  uint64_t count = 1;
  for (int64_t dim : shape)
    count *= static_cast<uint64_t>(dim);
  return static_cast<int64_t>(count);
}
