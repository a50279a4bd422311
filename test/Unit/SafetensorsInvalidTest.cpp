//===- SafetensorsInvalidTest.cpp - safetensors files the reader rejects --===//

#include "SafetensorsTestUtil.h"

#include <cstdint>

using namespace pippy::safetensors;
using namespace pippy::safetensors::test;

namespace {

/// The error message of parsing `bytes`, or "<ok>" when it parses.
std::string parseError(const std::string &bytes) {
  std::string error;
  std::optional<File> file = parseBytes(bytes, error);
  if (file) {
    EXPECT_EQ(error, "");
    return "<ok>";
  }
  EXPECT_NE(error, "");
  return error;
}

//===----------------------------------------------------------------------===//
// Reading: one test per validation rule
//===----------------------------------------------------------------------===//

TEST(SafetensorsInvalid, ShorterThanLength) {
  EXPECT_EQ(parseError("abc"),
            "t.safetensors: file has 3 bytes, fewer than the 8-byte header "
            "length");
  EXPECT_TRUE(contains(parseError(""), "file has 0 bytes"));
}

TEST(SafetensorsInvalid, HeaderLongerThanFile) {
  EXPECT_EQ(parseError(withLength(100, "{}")),
            "t.safetensors: header length 100 is larger than the 2 bytes "
            "after the length");
  EXPECT_TRUE(contains(parseError(withLength(1, "")),
                       "header length 1 is larger than the 0 bytes"));
}

TEST(SafetensorsInvalid, HeaderOverLimit) {
  EXPECT_TRUE(contains(parseError(withLength(200u << 20, "{}")),
                       "header length 209715200 is larger than the limit of "
                       "104857600 bytes"));
  // 8 + length would wrap around in uint64.
  EXPECT_TRUE(contains(parseError(withLength(UINT64_MAX - 3, "{}")),
                       "is larger than the limit"));
}

TEST(SafetensorsInvalid, NotJSON) {
  EXPECT_TRUE(contains(parseError(makeFile("{\"a\":")),
                       "t.safetensors: header is not valid JSON: "));
  EXPECT_TRUE(contains(parseError(makeFile("")), "not valid JSON"));
  EXPECT_TRUE(contains(parseError(makeFile("{} x")), "not valid JSON"));
  EXPECT_TRUE(contains(parseError(makeFile("{\"\xff\":1}")), "not valid JSON"));
  // Only strict JSON: no leading zeros, '+', bare '.', lone surrogates,
  // numbers beyond double, byte order marks or NUL bytes.
  for (std::string shape : {"[01]", "[+1]", "[.5]", "[1.]", "[1e400]"})
    EXPECT_TRUE(contains(
        parseError(makeFile("{\"a\":" + entry("U8", shape, 0, 0) + "}")),
        "t.safetensors: header is not valid JSON: "))
        << shape;
  EXPECT_TRUE(
      contains(parseError(makeFile("{\"a\\ud800\":null}")), "not valid JSON"));
  EXPECT_EQ(parseError(makeFile("\xef\xbb\xbf{}")),
            "t.safetensors: header is not valid JSON: parse error at line 1, "
            "column 1: syntax error - unexpected byte order mark");
  EXPECT_EQ(parseError(makeFile(std::string("{}\n \0 x", 6))),
            "t.safetensors: header is not valid JSON: parse error at line 2, "
            "column 2: syntax error - unexpected NUL byte; expected end of "
            "input");
}

TEST(SafetensorsInvalid, JSONErrorIsOneShortLine) {
  // An unterminated string of a megabyte that starts with bytes that are
  // not ASCII: the message quotes only its start, escaped.
  std::string header = "{\"a\":\"\xc3\xa9" + std::string(1 << 20, 'x');
  std::string message = parseError(makeFile(header));
  EXPECT_TRUE(contains(message, "t.safetensors: header is not valid JSON: "));
  EXPECT_TRUE(contains(message, "\\303\\251xxx"));
  EXPECT_LT(message.size(), 400u);
  EXPECT_EQ(message.find('\n'), std::string::npos);
  for (char c : message)
    EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "byte " << int(uint8_t(c));
}

TEST(SafetensorsInvalid, TooDeep) {
  std::string deep =
      "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_TRUE(contains(parseError(makeFile(deep)),
                       "header nests JSON deeper than 64 levels"));
  // Reported before the syntax: unbalanced brackets count too.
  EXPECT_EQ(parseError(makeFile(std::string(65, '{'))),
            "t.safetensors: header nests JSON deeper than 64 levels");
  // Brackets inside strings do not count.
  std::string quotedBrackets =
      "{\"__metadata__\":{\"k\":\"" + std::string(1000, '[') + "\\\"\"}}";
  EXPECT_EQ(parseError(makeFile(quotedBrackets)), "<ok>");
}

TEST(SafetensorsInvalid, NotAnObject) {
  EXPECT_EQ(parseError(makeFile("[]")),
            "t.safetensors: header is an array, expected a JSON object");
  EXPECT_TRUE(contains(parseError(makeFile("\"x\"")),
                       "header is a string, expected a JSON object"));
}

TEST(SafetensorsInvalid, DuplicateKey) {
  std::string e = entry("U8", "[0]", 0, 0);
  EXPECT_EQ(parseError(makeFile("{\"a\":" + e + ",\"a\":" + e + "}")),
            "t.safetensors: header has duplicate key 'a'");
  // The same key spelled with an escape.
  EXPECT_TRUE(
      contains(parseError(makeFile("{\"a\":" + e + ",\"\\u0061\":" + e + "}")),
               "header has duplicate key 'a'"));
  // Inside a tensor entry.
  EXPECT_TRUE(
      contains(parseError(makeFile(
                   "{\"a\":{\"dtype\":\"U8\",\"dtype\":\"I8\",\"shape\":[0],"
                   "\"data_offsets\":[0,0]}}")),
               "header has duplicate key 'dtype'"));
  // Deeper, inside an array, and reported before any schema error.
  EXPECT_TRUE(
      contains(parseError(makeFile("{\"a\":3,\"b\":[{\"k\":1,\"k\":2}]}")),
               "header has duplicate key 'k'"));
  // The same key in two different objects is fine.
  EXPECT_EQ(
      parseError(makeFile("{\"__metadata__\":{\"a\":\"x\"},\"a\":" + e + "}")),
      "<ok>");
}

TEST(SafetensorsInvalid, EntryNotObject) {
  EXPECT_EQ(parseError(makeFile("{\"a\":3}")),
            "t.safetensors: tensor 'a' is a number, expected an object");
  EXPECT_TRUE(contains(parseError(makeFile("{\"a\":[1]}")),
                       "tensor 'a' is an array, expected an object"));
}

TEST(SafetensorsInvalid, EntryMissingKeys) {
  EXPECT_TRUE(contains(
      parseError(makeFile("{\"a\":{\"shape\":[0],\"data_offsets\":[0,0]}}")),
      "tensor 'a' lacks \"dtype\""));
  EXPECT_TRUE(contains(
      parseError(makeFile("{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,0]}}")),
      "tensor 'a' lacks \"shape\""));
  EXPECT_TRUE(
      contains(parseError(makeFile("{\"a\":{\"dtype\":\"U8\",\"shape\":[0]}}")),
               "tensor 'a' lacks \"data_offsets\""));
}

TEST(SafetensorsInvalid, EntryUnknownKey) {
  EXPECT_EQ(
      parseError(makeFile("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_"
                          "offsets\":[0,0],\"strides\":[1]}}")),
      "t.safetensors: tensor 'a' has unknown key 'strides' (expected only "
      "dtype, shape and data_offsets)");
  // The first unknown key in sorted order, whatever the header's order.
  EXPECT_TRUE(contains(
      parseError(makeFile("{\"a\":{\"z\":1,\"dtype\":\"U8\",\"b\":2}}")),
      "tensor 'a' has unknown key 'b'"));
}

TEST(SafetensorsInvalid, UnknownDType) {
  EXPECT_EQ(
      parseError(makeFile("{\"a\":" + entry("F128", "[1]", 0, 16) + "}", 16)),
      "t.safetensors: tensor 'a' has unknown dtype 'F128'");
  EXPECT_TRUE(contains(parseError(makeFile("{\"a\":{\"dtype\":4,\"shape\":[0],"
                                           "\"data_offsets\":[0,0]}}")),
                       "tensor 'a' dtype is a number, expected a string"));
}

TEST(SafetensorsInvalid, BadShape) {
  auto withShape = [](std::string_view shape) {
    return parseError(makeFile("{\"a\":" + entry("U8", shape, 0, 0) + "}"));
  };
  EXPECT_TRUE(contains(withShape("3"), "tensor 'a' shape is a number, "
                                       "expected an array of non-negative "
                                       "integers"));
  EXPECT_TRUE(contains(withShape("[2,-1]"),
                       "tensor 'a' shape [2,-1] dimension 1 is not a "
                       "non-negative integer"));
  EXPECT_TRUE(contains(withShape("[1.5]"),
                       "dimension 0 is not a non-negative integer"));
  EXPECT_TRUE(contains(withShape("[2.0]"),
                       "dimension 0 is not a non-negative integer"));
  EXPECT_TRUE(contains(withShape("[\"2\"]"),
                       "dimension 0 is not a non-negative integer"));
  EXPECT_TRUE(contains(withShape("[18446744073709551615]"),
                       "dimension 0 is not a non-negative integer"));
  // The shape is shown compact, numbers with 17 significant digits and
  // object keys sorted.
  EXPECT_EQ(withShape("[ 2.0, 0.1, {\"b\": null, \"a\": [true, \"\\b\"]} ]"),
            "t.safetensors: tensor 'a' shape "
            "[2,0.10000000000000001,{\"a\":[true,\"\\u0008\"],\"b\":null}] "
            "dimension 0 is not a non-negative integer");
  // "-0" is the integer 0.
  EXPECT_EQ(withShape("[-0]"), "<ok>");
}

TEST(SafetensorsInvalid, ShapeOverflow) {
  // 2^32 * 2^32 elements overflow even though a later dimension is 0.
  EXPECT_TRUE(contains(
      parseError(makeFile(
          "{\"a\":" + entry("U8", "[4294967296,4294967296,0]", 0, 0) + "}")),
      "tensor 'a' shape [4294967296, 4294967296, 0] has too many "
      "elements"));
  // 2^62 elements fit in int64 but 2^62 x 8 bytes do not fit in uint64.
  EXPECT_TRUE(contains(
      parseError(makeFile(
          "{\"a\":" + entry("F64", "[4611686018427387904]", 0, 0) + "}")),
      "has too many elements"));
}

TEST(SafetensorsInvalid, BadDataOffsets) {
  auto withOffsets = [](std::string_view offsets, size_t dataSize = 8) {
    return parseError(makeFile("{\"a\":{\"dtype\":\"U8\",\"shape\":[8],"
                               "\"data_offsets\":" +
                                   std::string(offsets) + "}}",
                               dataSize));
  };
  EXPECT_TRUE(contains(withOffsets("[0,8,8]"),
                       "tensor 'a' data_offsets has 3 elements, expected 2"));
  EXPECT_TRUE(contains(withOffsets("[8]"), "has 1 elements, expected 2"));
  EXPECT_TRUE(contains(withOffsets("{}"),
                       "tensor 'a' data_offsets is an object, expected an "
                       "array of two non-negative integers"));
  EXPECT_TRUE(contains(withOffsets("[-1,7]"),
                       "tensor 'a' data_offsets [-1,7] are not two "
                       "non-negative integers"));
  EXPECT_TRUE(
      contains(withOffsets("[0,8.5]"), "are not two non-negative integers"));
  EXPECT_TRUE(contains(withOffsets("[8,0]"),
                       "tensor 'a' data_offsets [8, 0] begin after their "
                       "end"));
}

TEST(SafetensorsInvalid, EndBeyondData) {
  EXPECT_EQ(
      parseError(makeFile("{\"a\":" + entry("U8", "[8]", 4, 12) + "}", 8)),
      "t.safetensors: tensor 'a' data_offsets [4, 12] end beyond the "
      "8-byte data section");
  // Offsets near UINT64_MAX must not wrap around.
  EXPECT_TRUE(
      contains(parseError(makeFile("{\"a\":" +
                                       entry("U8", "[0]", 18446744073709551615u,
                                             18446744073709551615u) +
                                       "}",
                                   8)),
               "end beyond the 8-byte data section"));
}

TEST(SafetensorsInvalid, ByteCountMismatch) {
  EXPECT_EQ(parseError(makeFile(
                "{\"fc.weight\":" + entry("F32", "[2,3]", 0, 20) + "}", 20)),
            "t.safetensors: tensor 'fc.weight' has 20 bytes but shape [2, 3] "
            "of F32 needs 24");
  EXPECT_TRUE(contains(
      parseError(makeFile("{\"s\":" + entry("I64", "[]", 0, 4) + "}", 4)),
      "tensor 's' has 4 bytes but shape [] of I64 needs 8"));
}

TEST(SafetensorsInvalid, Overlap) {
  std::string header = "{\"a\":" + entry("F32", "[2]", 0, 8) +
                       ",\"b\":" + entry("F32", "[2]", 4, 12) + "}";
  EXPECT_EQ(parseError(makeFile(header, 12)),
            "t.safetensors: tensors 'a' [0, 8) and 'b' [4, 12) overlap");
  // Two tensors on the same bytes.
  header = "{\"a\":" + entry("U8", "[4]", 0, 4) +
           ",\"b\":" + entry("I8", "[4]", 0, 4) + "}";
  EXPECT_TRUE(contains(parseError(makeFile(header, 4)),
                       "tensors 'a' [0, 4) and 'b' [0, 4) overlap"));
  // An empty tensor inside another one's bytes.
  header = "{\"a\":" + entry("U8", "[4]", 0, 4) +
           ",\"e\":" + entry("U8", "[0]", 2, 2) + "}";
  EXPECT_TRUE(contains(parseError(makeFile(header, 4)),
                       "tensors 'a' [0, 4) and 'e' [2, 2) overlap"));
}

TEST(SafetensorsInvalid, Hole) {
  std::string header = "{\"a\":" + entry("F32", "[2]", 0, 8) +
                       ",\"b\":" + entry("F32", "[2]", 12, 20) + "}";
  EXPECT_EQ(parseError(makeFile(header, 20)),
            "t.safetensors: data section has a hole of 4 bytes at [8, 12) "
            "before tensor 'b'");
  header = "{\"a\":" + entry("U8", "[4]", 2, 6) + "}";
  EXPECT_TRUE(contains(parseError(makeFile(header, 6)),
                       "hole of 2 bytes at [0, 2) before tensor 'a'"));
}

TEST(SafetensorsInvalid, TrailingBytes) {
  std::string header = "{\"a\":" + entry("F32", "[2]", 0, 8) + "}";
  EXPECT_EQ(parseError(makeFile(header, 12)),
            "t.safetensors: data section has 4 trailing bytes at [8, 12) not "
            "covered by any tensor");
  EXPECT_TRUE(contains(parseError(makeFile("{}", 3)),
                       "data section has 3 trailing bytes at [0, 3)"));
}

TEST(SafetensorsInvalid, BadMetadata) {
  EXPECT_EQ(parseError(makeFile("{\"__metadata__\":[\"x\"]}")),
            "t.safetensors: \"__metadata__\" is an array, expected an object "
            "of strings");
  EXPECT_TRUE(contains(parseError(makeFile("{\"__metadata__\":{\"epoch\":3}}")),
                       "\"__metadata__\" value of 'epoch' is a number, "
                       "expected a string"));
  EXPECT_TRUE(contains(parseError(makeFile("{\"__metadata__\":{\"k\":{}}}")),
                       "value of 'k' is an object"));
}

TEST(SafetensorsInvalid, NamesAreEscapedInMessages) {
  EXPECT_EQ(parseError(makeFile("{\"a\\nb\":null}")),
            "t.safetensors: tensor 'a\\nb' is null, expected an object");
  EXPECT_EQ(parseError(makeFile("{\"\\t\\\"\\\\\\u0001\xc3\xa9\":true}")),
            "t.safetensors: tensor '\\t\\\"\\\\\\001\\303\\251' is a boolean, "
            "expected an object");
}

} // namespace
