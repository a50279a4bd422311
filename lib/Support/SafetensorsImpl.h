//===- SafetensorsImpl.h - what the safetensors sources share ---*- C++ -*-===//
//
// Internal to lib/Support: the parts of the safetensors reader and writer
// that more than one of their files uses. The files are:
//   Safetensors.cpp        File: reading, the header's JSON syntax
//   SafetensorsSchema.cpp  the header's schema, tensor by tensor
//   SafetensorsWriter.cpp  Writer: the serialized header, UTF-8 checks
//   SafetensorsFormat.cpp  dtypes, element counts, the text of messages
//
// The messages and the compact JSON written by the Writer are built by hand,
// byte for byte as earlier versions built them with llvm::json.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_LIB_SUPPORT_SAFETENSORSIMPL_H
#define PIPPY_LIB_SUPPORT_SAFETENSORSIMPL_H

#include "pippy/Support/Safetensors.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pippy::safetensors::detail {

using Json = nlohmann::ordered_json;

inline constexpr std::string_view kMetadataKey = "__metadata__";
inline constexpr uint64_t kMaxElements =
    static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// Messages and counts (SafetensorsFormat.cpp).

/// Appends the three-digit octal escape of `c` ("\377").
void appendOctal(std::string &out, unsigned char c);
/// `text` in single quotes with non-printable characters escaped.
std::string singleQuoted(std::string_view text);
/// `shape` as "[2, 3]".
std::string formatShape(const std::vector<int64_t> &shape);
/// Appends `text` as a JSON string.
void appendJSONString(std::string &out, std::string_view text);
/// The product of `shape`; none when a dimension is negative or the product
/// exceeds INT64_MAX.
std::optional<uint64_t> checkedElementCount(const std::vector<int64_t> &shape);
/// Bytes needed by `count` elements of `dtype`, or none on overflow.
std::optional<uint64_t> checkedByteCount(uint64_t count, DType dtype);

// The header's schema (SafetensorsSchema.cpp).

/// The kind of a JSON value for messages ("an array").
const char *kindName(const Json &value);
/// The "__metadata__" object's entries; none with `error` set.
std::optional<std::map<std::string, std::string>>
parseMetadata(const Json &value, std::string &error);
/// Checks one header entry against the schema and the data section size.
std::optional<TensorInfo> parseTensor(const std::string &name,
                                      const Json &value, uint64_t dataSize,
                                      std::string &error);
/// Checks that the byte ranges tile [0, dataSize) exactly; an error message,
/// or empty.
std::string checkCoverage(const std::vector<TensorInfo> &tensors,
                          uint64_t dataSize);

} // namespace pippy::safetensors::detail

#endif // PIPPY_LIB_SUPPORT_SAFETENSORSIMPL_H
