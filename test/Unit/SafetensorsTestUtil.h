//===- SafetensorsTestUtil.h - safetensors test helpers ---------*- C++ -*-===//
//
// What the safetensors unit tests share: building raw files from header text
// and parsing them.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_TEST_UNIT_SAFETENSORSTESTUTIL_H
#define PIPPY_TEST_UNIT_SAFETENSORSTESTUTIL_H

#include "pippy/Support/Safetensors.h"

#include "gtest/gtest.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pippy::safetensors::test {

/// Whether `text` contains `phrase`, showing both when it does not.
inline ::testing::AssertionResult contains(const std::string &text,
                                           std::string_view phrase) {
  if (text.find(phrase) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "\"" << text << "\" does not contain \"" << phrase << "\"";
}

/// An 8-byte little-endian `length` followed by `rest`.
inline std::string withLength(uint64_t length, std::string_view rest) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>(length >> (8 * i) & 0xff);
  return bytes + std::string(rest);
}

/// A file with the given header text and `dataSize` data bytes.
inline std::string makeFile(std::string_view header, size_t dataSize = 0) {
  std::string data(dataSize, '\x5a');
  return withLength(header.size(), header) + data;
}

inline std::optional<File> parseBytes(const std::string &bytes,
                                      std::string &error) {
  error.clear();
  return File::parse(bytes, "t.safetensors", error);
}

/// A well-formed header entry.
inline std::string entry(std::string_view dtype, std::string_view shape,
                         uint64_t begin, uint64_t end) {
  return "{\"dtype\":\"" + std::string(dtype) +
         "\",\"shape\":" + std::string(shape) + ",\"data_offsets\":[" +
         std::to_string(begin) + "," + std::to_string(end) + "]}";
}

} // namespace pippy::safetensors::test

#endif // PIPPY_TEST_UNIT_SAFETENSORSTESTUTIL_H
