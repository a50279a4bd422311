//===- SafetensorsTest.cpp - safetensors reading and writing --------------===//

#include "pippy/Support/Safetensors.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include "gtest/gtest.h"

#include <cstring>

using namespace llvm;
using namespace pippy::safetensors;

namespace {

/// Whether `text` contains `phrase`, showing both when it does not.
::testing::AssertionResult contains(const std::string &text, StringRef phrase) {
  if (StringRef(text).contains(phrase))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "\"" << text << "\" does not contain \"" << phrase.str() << "\"";
}

std::vector<uint8_t> iota(size_t n, uint8_t start = 1) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i)
    bytes[i] = static_cast<uint8_t>(start + i);
  return bytes;
}

/// An 8-byte little-endian `length` followed by `rest`.
std::string withLength(uint64_t length, StringRef rest) {
  std::string bytes(8, '\0');
  support::endian::write64le(bytes.data(), length);
  return bytes + rest.str();
}

/// A file with the given header text and `dataSize` data bytes.
std::string makeFile(StringRef header, size_t dataSize = 0) {
  std::string data(dataSize, '\x5a');
  return withLength(header.size(), header) + data;
}

Expected<File> parseBytes(StringRef bytes, StringRef name = "t.safetensors") {
  return File::parse(MemoryBuffer::getMemBufferCopy(bytes, name), name);
}

/// The error message of parsing `bytes`, or "<ok>" when it parses.
std::string parseError(StringRef bytes) {
  Expected<File> file = parseBytes(bytes);
  if (file)
    return "<ok>";
  return toString(file.takeError());
}

/// A well-formed header entry.
std::string entry(StringRef dtype, StringRef shape, uint64_t begin,
                  uint64_t end) {
  return ("{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
          ",\"data_offsets\":[" + Twine(begin) + "," + Twine(end) + "]}")
      .str();
}

struct Expect {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// The tensors of the round-trip tests, in the order added: different
/// sizes so that offsets are not all multiples of 8, a scalar and an empty
/// tensor in the middle.
std::vector<Expect> sampleTensors() {
  return {
      {"fc.weight", DType::F32, {2, 3}, iota(24)},
      {"fc.bias", DType::F16, {3}, iota(6, 100)},
      {"step", DType::I64, {}, iota(8, 200)},
      {"empty", DType::F32, {0}, {}},
      {"mask", DType::BOOL, {2, 2}, {1, 0, 0, 1}},
      {"scale", DType::BF16, {1, 1, 1}, {0x80, 0x3f}},
  };
}

Writer sampleWriter() {
  Writer writer;
  for (const Expect &e : sampleTensors())
    EXPECT_FALSE(errorToBool(writer.add(e.name, e.dtype, e.shape, e.bytes)));
  writer.setMetadata("format", "pt");
  writer.setMetadata("epoch", "3");
  return writer;
}

void checkSample(const File &file) {
  std::vector<Expect> expected = sampleTensors();
  ASSERT_EQ(file.tensors().size(), expected.size());
  uint64_t offset = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const TensorInfo &info = file.tensors()[i];
    const Expect &e = expected[i];
    SCOPED_TRACE(e.name);
    EXPECT_EQ(info.name, e.name);
    EXPECT_EQ(info.dtype, e.dtype);
    EXPECT_EQ(info.shape, e.shape);
    // Laid out in the order added, back to back.
    EXPECT_EQ(info.begin, offset);
    EXPECT_EQ(info.end, offset + e.bytes.size());
    offset = info.end;
    ArrayRef<uint8_t> data = file.data(info);
    EXPECT_EQ(std::vector<uint8_t>(data.begin(), data.end()), e.bytes);
  }
  std::map<std::string, std::string> metadata = {{"epoch", "3"},
                                                 {"format", "pt"}};
  EXPECT_EQ(file.metadata(), metadata);
}

//===----------------------------------------------------------------------===//
// DTypes and shapes
//===----------------------------------------------------------------------===//

TEST(Safetensors, DTypeNamesAndSizes) {
  struct {
    DType dtype;
    const char *name;
    size_t size;
  } table[] = {
      {DType::BOOL, "BOOL", 1},       {DType::U8, "U8", 1},
      {DType::I8, "I8", 1},           {DType::I16, "I16", 2},
      {DType::I32, "I32", 4},         {DType::I64, "I64", 8},
      {DType::F16, "F16", 2},         {DType::BF16, "BF16", 2},
      {DType::F32, "F32", 4},         {DType::F64, "F64", 8},
      {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
  };
  for (const auto &row : table) {
    EXPECT_EQ(dtypeName(row.dtype), row.name);
    EXPECT_EQ(dtypeSize(row.dtype), row.size) << row.name;
    EXPECT_EQ(parseDType(row.name), row.dtype) << row.name;
  }
  EXPECT_EQ(parseDType("f32"), std::nullopt);
  EXPECT_EQ(parseDType("F128"), std::nullopt);
  EXPECT_EQ(parseDType(""), std::nullopt);
}

TEST(Safetensors, NumElements) {
  TensorInfo info;
  EXPECT_EQ(info.numElements(), 1); // scalar
  info.shape = {0};
  EXPECT_EQ(info.numElements(), 0);
  info.shape = {2, 3, 4};
  EXPECT_EQ(info.numElements(), 24);
  info.shape = {5, 0, 7};
  EXPECT_EQ(info.numElements(), 0);
}

//===----------------------------------------------------------------------===//
// Round trips
//===----------------------------------------------------------------------===//

TEST(Safetensors, SerializeParseRoundTrip) {
  std::string bytes = sampleWriter().serialize();
  uint64_t headerSize = support::endian::read64le(bytes.data());
  EXPECT_EQ((8 + headerSize) % 8, 0u) << "data section is not 8-aligned";
  EXPECT_EQ(bytes.size(), 8 + headerSize + 24 + 6 + 8 + 0 + 4 + 2);
  // The header lists the tensors in the order added, padded with spaces.
  StringRef header = StringRef(bytes).substr(8, headerSize);
  EXPECT_LT(header.find("fc.weight"), header.find("fc.bias"));
  EXPECT_LT(header.find("fc.bias"), header.find("step"));
  EXPECT_EQ(header.rtrim(' ').back(), '}');

  Expected<File> file = parseBytes(bytes);
  ASSERT_TRUE(static_cast<bool>(file)) << toString(file.takeError());
  checkSample(*file);

  const TensorInfo *scalar = file->find("step");
  ASSERT_NE(scalar, nullptr);
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->numElements(), 1);
  const TensorInfo *empty = file->find("empty");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->numElements(), 0);
  EXPECT_TRUE(file->data(*empty).empty());
}

TEST(Safetensors, WriteOpenRoundTrip) {
  SmallString<128> dir;
  ASSERT_FALSE(sys::fs::createUniqueDirectory("pippy-safetensors", dir));
  SmallString<128> path(dir);
  sys::path::append(path, "model.safetensors");

  Writer stale;
  ASSERT_FALSE(errorToBool(stale.add("old", DType::U8, {1}, {7})));
  ASSERT_FALSE(errorToBool(stale.write(path)));

  // Overwrites the existing file atomically.
  Writer writer = sampleWriter();
  Error err = writer.write(path);
  ASSERT_FALSE(static_cast<bool>(err)) << toString(std::move(err));

  Expected<File> file = File::open(path);
  ASSERT_TRUE(static_cast<bool>(file)) << toString(file.takeError());
  checkSample(*file);
  EXPECT_EQ(file->find("old"), nullptr);

  // The file on disk is exactly what serialize() produces and no temporary
  // file is left behind.
  auto onDisk = MemoryBuffer::getFile(path);
  ASSERT_TRUE(static_cast<bool>(onDisk));
  EXPECT_EQ((*onDisk)->getBuffer(), writer.serialize());
  std::vector<std::string> names;
  std::error_code ec;
  for (sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    names.push_back(sys::path::filename(it->path()).str());
  EXPECT_EQ(names, std::vector<std::string>{"model.safetensors"});

  EXPECT_FALSE(sys::fs::remove_directories(dir));
}

TEST(Safetensors, WriteFailsInMissingDirectory) {
  SmallString<128> dir;
  ASSERT_FALSE(sys::fs::createUniqueDirectory("pippy-safetensors", dir));
  SmallString<128> path(dir);
  sys::path::append(path, "missing", "model.safetensors");
  Error err = sampleWriter().write(path);
  ASSERT_TRUE(static_cast<bool>(err));
  std::string message = toString(std::move(err));
  EXPECT_TRUE(
      contains(message, path.str().str() + ": cannot create a temporary file"));
  EXPECT_FALSE(sys::fs::remove_directories(dir));
}

TEST(Safetensors, OpenMissingFile) {
  Expected<File> file = File::open("/nonexistent/pippy/w.safetensors");
  ASSERT_FALSE(static_cast<bool>(file));
  EXPECT_TRUE(contains(toString(file.takeError()),
                       "/nonexistent/pippy/w.safetensors: cannot read"));
}

TEST(Safetensors, FindHitAndMiss) {
  Expected<File> file = parseBytes(sampleWriter().serialize());
  ASSERT_TRUE(static_cast<bool>(file)) << toString(file.takeError());
  const TensorInfo *bias = file->find("fc.bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->name, "fc.bias");
  EXPECT_EQ(bias->dtype, DType::F16);
  EXPECT_EQ(file->data(*bias)[0], 100);
  EXPECT_EQ(file->find("fc"), nullptr);
  EXPECT_EQ(file->find("FC.BIAS"), nullptr);
  EXPECT_EQ(file->find("__metadata__"), nullptr);
  EXPECT_EQ(file->find(""), nullptr);
}

TEST(Safetensors, NoMetadataWhenEmpty) {
  Writer writer;
  ASSERT_FALSE(errorToBool(writer.add("x", DType::I32, {1}, iota(4))));
  std::string bytes = writer.serialize();
  EXPECT_EQ(bytes.find("__metadata__"), std::string::npos);
  Expected<File> file = parseBytes(bytes);
  ASSERT_TRUE(static_cast<bool>(file)) << toString(file.takeError());
  EXPECT_TRUE(file->metadata().empty());
  ASSERT_EQ(file->tensors().size(), 1u);
}

TEST(Safetensors, EmptyWriter) {
  std::string bytes = Writer().serialize();
  // "{}" padded to 8 bytes.
  EXPECT_EQ(bytes, withLength(8, "{}      "));
  Expected<File> file = parseBytes(bytes);
  ASSERT_TRUE(static_cast<bool>(file)) << toString(file.takeError());
  EXPECT_TRUE(file->tensors().empty());
}

TEST(Safetensors, WriterRejectsWrongByteCount) {
  Writer writer;
  Error err = writer.add("fc.weight", DType::F32, {2, 3}, iota(20));
  EXPECT_EQ(toString(std::move(err)),
            "tensor 'fc.weight' has 20 bytes but shape [2, 3] of F32 needs 24");
  err = writer.add("s", DType::F64, {}, iota(4));
  EXPECT_EQ(toString(std::move(err)),
            "tensor 's' has 4 bytes but shape [] of F64 needs 8");
  EXPECT_EQ(writer.serialize(), Writer().serialize());
}

TEST(Safetensors, WriterRejectsDuplicateName) {
  Writer writer;
  ASSERT_FALSE(errorToBool(writer.add("w", DType::U8, {2}, iota(2))));
  Error err = writer.add("w", DType::U8, {1}, iota(1));
  EXPECT_TRUE(contains(toString(std::move(err)),
                       "cannot add tensor 'w': a tensor of that name was "
                       "already added"));
}

TEST(Safetensors, WriterRejectsMetadataName) {
  Writer writer;
  Error err = writer.add("__metadata__", DType::U8, {1}, iota(1));
  EXPECT_TRUE(contains(toString(std::move(err)),
                       "cannot add tensor '__metadata__': the name is "
                       "reserved"));
}

TEST(Safetensors, WriterRejectsBadShapes) {
  Writer writer;
  EXPECT_TRUE(contains(toString(writer.add("n", DType::U8, {2, -1}, {})),
                       "tensor 'n' shape [2, -1] dimension 1 is negative"));
  int64_t big = int64_t(1) << 32;
  EXPECT_TRUE(contains(toString(writer.add("o", DType::U8, {big, big}, {})),
                       "has too many elements"));
  EXPECT_TRUE(contains(toString(writer.add("\xff", DType::U8, {}, {1})),
                       "not valid UTF-8"));
}

//===----------------------------------------------------------------------===//
// Reading: what is accepted
//===----------------------------------------------------------------------===//

TEST(Safetensors, KeepsHeaderOrder) {
  // Header order differs from data order and from alphabetical order.
  std::string header = "{\"z\":" + entry("U8", "[2]", 4, 6) +
                       ",\"a\":" + entry("U8", "[4]", 0, 4) + "}";
  Expected<File> file = parseBytes(makeFile(header, 6));
  ASSERT_TRUE(static_cast<bool>(file)) << toString(file.takeError());
  ASSERT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(file->tensors()[0].name, "z");
  EXPECT_EQ(file->tensors()[1].name, "a");
  EXPECT_EQ(file->tensors()[0].begin, 4u);
}

TEST(Safetensors, AcceptsUnpaddedHeaderAndEmptyTensors) {
  std::string header = "{\"e1\":" + entry("F32", "[0]", 0, 0) +
                       ",\"e2\":" + entry("F32", "[3,0]", 0, 0) +
                       ",\"b\":" + entry("I16", "[]", 0, 2) +
                       ",\"e3\":" + entry("F64", "[0]", 2, 2) + "}";
  std::string bytes = makeFile(header) + "\x01\x02";
  Expected<File> file = parseBytes(bytes);
  ASSERT_TRUE(static_cast<bool>(file)) << toString(file.takeError());
  ASSERT_EQ(file->tensors().size(), 4u);
  ArrayRef<uint8_t> b = file->data(*file->find("b"));
  EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.end()),
            (std::vector<uint8_t>{1, 2}));
}

TEST(Safetensors, AcceptsMetadataOnly) {
  Expected<File> file =
      parseBytes(makeFile("{\"__metadata__\":{\"k\":\"v\"}}"));
  ASSERT_TRUE(static_cast<bool>(file)) << toString(file.takeError());
  EXPECT_TRUE(file->tensors().empty());
  EXPECT_EQ(file->metadata().at("k"), "v");
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
                       "t.safetensors: header is not valid JSON"));
  EXPECT_TRUE(contains(parseError(makeFile("")), "not valid JSON"));
  EXPECT_TRUE(contains(parseError(makeFile("{} x")), "not valid JSON"));
  EXPECT_TRUE(contains(parseError(makeFile("{\"\xff\":1}")), "not valid JSON"));
}

TEST(SafetensorsInvalid, TooDeep) {
  std::string deep =
      "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_TRUE(contains(parseError(makeFile(deep)),
                       "header nests JSON deeper than 64 levels"));
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
  EXPECT_TRUE(
      contains(parseError(makeFile("{\"a\":" + e + ",\"a\":" + e + "}")),
               "header has duplicate key 'a'"));
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
  EXPECT_TRUE(
      contains(parseError(makeFile(
                   "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,"
                   "0],\"strides\":[1]}}")),
               "tensor 'a' has unknown key 'strides'"));
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
  auto withShape = [](StringRef shape) {
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
  auto withOffsets = [](StringRef offsets, size_t dataSize = 8) {
    return parseError(makeFile("{\"a\":{\"dtype\":\"U8\",\"shape\":[8],"
                               "\"data_offsets\":" +
                                   offsets.str() + "}}",
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
}

} // namespace
