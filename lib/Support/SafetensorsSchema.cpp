//===- SafetensorsSchema.cpp - checking a safetensors header --------------===//
//
// The last of the reader's three steps: the parsed header is checked against
// the schema, tensor by tensor, with uint64 arithmetic that cannot overflow:
// keys, dtype, shape and data offsets of each tensor, the "__metadata__"
// strings, and that the byte ranges do not overlap and together cover the
// data section. A message quotes an offending JSON value as compact JSON.
//
//===----------------------------------------------------------------------===//

#include "SafetensorsImpl.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

using namespace pippy::safetensors;
using namespace pippy::safetensors::detail;

namespace {

/// Appends `value` as compact JSON, object keys sorted, non-integers with
/// 17 significant digits. Recurses once per level: only for values whose
/// nesting the raw scan has bounded.
void appendJSON(std::string &out, const Json &value) {
  switch (value.type()) {
  case Json::value_t::null:
  case Json::value_t::discarded:
  case Json::value_t::binary:
    out += "null";
    return;
  case Json::value_t::boolean:
    out += value.get<bool>() ? "true" : "false";
    return;
  case Json::value_t::number_integer:
    out += std::to_string(value.get<int64_t>());
    return;
  case Json::value_t::number_unsigned:
    out += std::to_string(value.get<uint64_t>());
    return;
  case Json::value_t::number_float: {
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), "%.*g",
                  std::numeric_limits<double>::max_digits10,
                  value.get<double>());
    out += buffer;
    return;
  }
  case Json::value_t::string:
    appendJSONString(out, value.get_ref<const std::string &>());
    return;
  case Json::value_t::array: {
    out += '[';
    bool first = true;
    for (const Json &element : value) {
      if (!first)
        out += ',';
      first = false;
      appendJSON(out, element);
    }
    out += ']';
    return;
  }
  case Json::value_t::object: {
    std::vector<const Json::object_t::value_type *> members;
    for (const auto &member : value.get_ref<const Json::object_t &>())
      members.push_back(&member);
    std::sort(members.begin(), members.end(),
              [](const auto *a, const auto *b) { return a->first < b->first; });
    out += '{';
    bool first = true;
    for (const auto *member : members) {
      if (!first)
        out += ',';
      first = false;
      appendJSONString(out, member->first);
      out += ':';
      appendJSON(out, member->second);
    }
    out += '}';
    return;
  }
  }
  out += "null";
}

std::string formatJSON(const Json &value) {
  std::string result;
  appendJSON(result, value);
  return result;
}

/// The value of a JSON integer that is not negative; none for negative
/// numbers, fractions and exponents ("2.0", "1e3" are not integers), as
/// llvm::json::Value::getAsUINT64 did ("-0" is 0).
std::optional<uint64_t> getAsUINT64(const Json &value) {
  if (value.is_number_unsigned())
    return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0)
    return static_cast<uint64_t>(value.get<int64_t>());
  return std::nullopt;
}

/// Checks the "data_offsets" of `tensor` (as messages name it) against the
/// data section size and the `needed` bytes of its shape and dtype, setting
/// `info`'s byte range; an error message, or empty.
std::string checkDataOffsets(const std::string &tensor, const Json &offsets,
                             uint64_t dataSize, uint64_t needed,
                             TensorInfo &info) {
  if (!offsets.is_array())
    return tensor + " data_offsets is " + kindName(offsets) +
           ", expected an array of two non-negative integers";
  if (offsets.size() != 2)
    return tensor + " data_offsets has " + std::to_string(offsets.size()) +
           " elements, expected 2";
  std::optional<uint64_t> begin = getAsUINT64(offsets[0]);
  std::optional<uint64_t> end = getAsUINT64(offsets[1]);
  if (!begin || !end)
    return tensor + " data_offsets " + formatJSON(offsets) +
           " are not two non-negative integers";
  std::string range =
      "[" + std::to_string(*begin) + ", " + std::to_string(*end) + "]";
  if (*begin > *end)
    return tensor + " data_offsets " + range + " begin after their end";
  if (*end > dataSize)
    return tensor + " data_offsets " + range + " end beyond the " +
           std::to_string(dataSize) + "-byte data section";
  info.begin = *begin;
  info.end = *end;

  uint64_t bytes = *end - *begin;
  if (bytes != needed)
    return tensor + " has " + std::to_string(bytes) + " bytes but shape " +
           formatShape(info.shape) + " of " +
           std::string(dtypeName(info.dtype)) + " needs " +
           std::to_string(needed);
  return "";
}

} // namespace

namespace pippy::safetensors::detail {

const char *kindName(const Json &value) {
  switch (value.type()) {
  case Json::value_t::null:
    return "null";
  case Json::value_t::boolean:
    return "a boolean";
  case Json::value_t::number_integer:
  case Json::value_t::number_unsigned:
  case Json::value_t::number_float:
    return "a number";
  case Json::value_t::string:
    return "a string";
  case Json::value_t::array:
    return "an array";
  case Json::value_t::object:
    return "an object";
  case Json::value_t::binary:
  case Json::value_t::discarded:
    break;
  }
  return "not JSON";
}

std::optional<std::map<std::string, std::string>>
parseMetadata(const Json &value, std::string &error) {
  if (!value.is_object()) {
    error = std::string("\"__metadata__\" is ") + kindName(value) +
            ", expected an object of strings";
    return std::nullopt;
  }
  std::map<std::string, std::string> metadata;
  for (const auto &[key, entry] : value.get_ref<const Json::object_t &>()) {
    if (!entry.is_string()) {
      error = "\"__metadata__\" value of " + singleQuoted(key) + " is " +
              kindName(entry) + ", expected a string";
      return std::nullopt;
    }
    metadata.emplace(key, entry.get<std::string>());
  }
  return metadata;
}

/// Checks one header entry against the schema and the data section size.
std::optional<TensorInfo> parseTensor(const std::string &name,
                                      const Json &value, uint64_t dataSize,
                                      std::string &error) {
  auto fail = [&](const std::string &message) -> std::optional<TensorInfo> {
    error = message;
    return std::nullopt;
  };
  std::string tensor = "tensor " + singleQuoted(name);
  if (!value.is_object())
    return fail(tensor + " is " + kindName(value) + ", expected an object");

  // Sorted so that the reported key does not depend on the header's order.
  std::vector<std::string> keys;
  for (const auto &entry : value.get_ref<const Json::object_t &>())
    keys.push_back(entry.first);
  std::sort(keys.begin(), keys.end());
  for (const std::string &key : keys)
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      return fail(tensor + " has unknown key " + singleQuoted(key) +
                  " (expected only dtype, shape and data_offsets)");
  for (const char *key : {"dtype", "shape", "data_offsets"})
    if (!value.contains(key))
      return fail(tensor + " lacks \"" + key + "\"");

  TensorInfo info;
  info.name = name;

  const Json &dtypeValue = value.at("dtype");
  if (!dtypeValue.is_string())
    return fail(tensor + " dtype is " + kindName(dtypeValue) +
                ", expected a string");
  const std::string &dtypeStr = dtypeValue.get_ref<const std::string &>();
  std::optional<DType> dtype = parseDType(dtypeStr);
  if (!dtype)
    return fail(tensor + " has unknown dtype " + singleQuoted(dtypeStr));
  info.dtype = *dtype;

  const Json &shape = value.at("shape");
  if (!shape.is_array())
    return fail(tensor + " shape is " + kindName(shape) +
                ", expected an array of non-negative integers");
  for (size_t index = 0; index < shape.size(); ++index) {
    std::optional<uint64_t> udim = getAsUINT64(shape[index]);
    if (!udim || *udim > kMaxElements)
      return fail(tensor + " shape " + formatJSON(shape) + " dimension " +
                  std::to_string(index) + " is not a non-negative integer");
    info.shape.push_back(static_cast<int64_t>(*udim));
  }
  std::optional<uint64_t> count = checkedElementCount(info.shape);
  std::optional<uint64_t> needed =
      count ? checkedByteCount(*count, info.dtype) : std::nullopt;
  if (!needed)
    return fail(tensor + " shape " + formatShape(info.shape) +
                " has too many elements (the count overflows)");

  std::string message = checkDataOffsets(tensor, value.at("data_offsets"),
                                         dataSize, *needed, info);
  if (!message.empty())
    return fail(message);
  return info;
}

/// Checks that the byte ranges, sorted by begin, tile [0, dataSize) exactly.
std::string checkCoverage(const std::vector<TensorInfo> &tensors,
                          uint64_t dataSize) {
  std::vector<const TensorInfo *> sorted;
  sorted.reserve(tensors.size());
  for (const TensorInfo &info : tensors)
    sorted.push_back(&info);
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorInfo *a, const TensorInfo *b) {
              return std::tie(a->begin, a->end, a->name) <
                     std::tie(b->begin, b->end, b->name);
            });
  auto range = [](const TensorInfo *t) {
    return singleQuoted(t->name) + " [" + std::to_string(t->begin) + ", " +
           std::to_string(t->end) + ")";
  };
  uint64_t covered = 0;
  const TensorInfo *previous = nullptr;
  for (const TensorInfo *info : sorted) {
    if (info->begin < covered)
      return "tensors " + range(previous) + " and " + range(info) + " overlap";
    if (info->begin > covered)
      return "data section has a hole of " +
             std::to_string(info->begin - covered) + " bytes at [" +
             std::to_string(covered) + ", " + std::to_string(info->begin) +
             ") before tensor " + singleQuoted(info->name);
    covered = info->end;
    previous = info;
  }
  if (covered != dataSize)
    return "data section has " + std::to_string(dataSize - covered) +
           " trailing bytes at [" + std::to_string(covered) + ", " +
           std::to_string(dataSize) + ") not covered by any tensor";
  return "";
}

} // namespace pippy::safetensors::detail
