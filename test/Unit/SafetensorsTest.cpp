//===- SafetensorsTest.cpp - safetensors reading and writing --------------===//

#include "SafetensorsTestUtil.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

using namespace pippy::safetensors;
using namespace pippy::safetensors::test;
namespace fs = std::filesystem;

namespace {

/// `n` bytes counting up from `start`.
std::string iota(size_t n, uint8_t start = 1) {
  std::string bytes(n, '\0');
  for (size_t i = 0; i < n; ++i)
    bytes[i] = static_cast<char>(static_cast<uint8_t>(start + i));
  return bytes;
}

/// The little-endian header length at the start of `bytes`.
uint64_t readLength(std::string_view bytes) {
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length = length << 8 | static_cast<uint8_t>(bytes[i]);
  return length;
}

std::string readWholeFile(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

/// A new empty directory, removed with its contents at the end of the test.
class TempDir {
public:
  TempDir() {
    std::string model =
        (fs::temp_directory_path() / "pippy-safetensors-XXXXXX").string();
    if (mkdtemp(model.data()))
      dir = model;
  }
  ~TempDir() {
    std::error_code ec;
    if (!dir.empty())
      fs::remove_all(dir, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  bool ok() const { return !dir.empty(); }
  const fs::path &path() const { return dir; }

private:
  fs::path dir;
};

struct Expect {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

/// The tensors of the round-trip tests, in the order added: different
/// sizes so that offsets are not all multiples of 8, a scalar and an empty
/// tensor in the middle.
std::vector<Expect> sampleTensors() {
  return {
      {"fc.weight", DType::F32, {2, 3}, iota(24)},
      {"fc.bias", DType::F16, {3}, iota(6, 100)},
      {"step", DType::I64, {}, iota(8, 200)},
      {"empty", DType::F32, {0}, ""},
      {"mask", DType::BOOL, {2, 2}, std::string("\x01\x00\x00\x01", 4)},
      {"scale", DType::BF16, {1, 1, 1}, "\x80\x3f"},
  };
}

Writer sampleWriter() {
  Writer writer;
  for (const Expect &e : sampleTensors())
    EXPECT_EQ(writer.add(e.name, e.dtype, e.shape, e.bytes), "");
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
    EXPECT_EQ(file.data(info), e.bytes);
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
  EXPECT_EQ(parseDType(std::string_view("F32\0", 4)), std::nullopt);
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
  uint64_t headerSize = readLength(bytes);
  EXPECT_EQ((8 + headerSize) % 8, 0u) << "data section is not 8-aligned";
  EXPECT_EQ(bytes.size(), 8 + headerSize + 24 + 6 + 8 + 0 + 4 + 2);
  // The header lists the tensors in the order added, padded with spaces.
  std::string header = bytes.substr(8, headerSize);
  EXPECT_LT(header.find("fc.weight"), header.find("fc.bias"));
  EXPECT_LT(header.find("fc.bias"), header.find("step"));
  EXPECT_EQ(header[header.find_last_not_of(' ')], '}');

  std::string error;
  std::optional<File> file = parseBytes(bytes, error);
  ASSERT_TRUE(file) << error;
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

TEST(Safetensors, SerializeIsByteExact) {
  // Compact JSON in the order added, "__metadata__" last with its keys
  // sorted, control characters escaped as JSON does, the header padded with
  // spaces to 144 bytes, then the data.
  Writer writer;
  ASSERT_EQ(writer.add("w", DType::F32, {2}, "ABCDEFGH"), "");
  ASSERT_EQ(writer.add("b\"\t", DType::U8, {}, "Z"), "");
  writer.setMetadata("k", "v\b");
  std::string expected =
      std::string("\x90\0\0\0\0\0\0\0", 8) +
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\\\"\\t\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[8,9]},"
      "\"__metadata__\":{\"k\":\"v\\u0008\"}}    "
      "ABCDEFGHZ";
  EXPECT_EQ(writer.serialize(), expected);

  std::string error;
  std::optional<File> file = parseBytes(expected, error);
  ASSERT_TRUE(file) << error;
  ASSERT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(file->tensors()[1].name, "b\"\t");
  EXPECT_EQ(file->data(file->tensors()[1]), "Z");
  EXPECT_EQ(file->metadata().at("k"), "v\b");
}

TEST(Safetensors, WriteOpenRoundTrip) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  std::string path = (dir.path() / "model.safetensors").string();

  Writer stale;
  ASSERT_EQ(stale.add("old", DType::U8, {1}, "\x07"), "");
  ASSERT_EQ(stale.write(path), "");

  // Overwrites the existing file atomically.
  Writer writer = sampleWriter();
  ASSERT_EQ(writer.write(path), "");

  std::string error;
  std::optional<File> file = File::open(path, error);
  ASSERT_TRUE(file) << error;
  EXPECT_EQ(error, "");
  checkSample(*file);
  EXPECT_EQ(file->find("old"), nullptr);

  // The file on disk is exactly what serialize() produces and no temporary
  // file is left behind.
  EXPECT_EQ(readWholeFile(path), writer.serialize());
  std::vector<std::string> names;
  for (const fs::directory_entry &entry : fs::directory_iterator(dir.path()))
    names.push_back(entry.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"model.safetensors"});
}

TEST(Safetensors, WriteFailsInMissingDirectory) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  std::string path = (dir.path() / "missing" / "model.safetensors").string();
  std::string error = sampleWriter().write(path);
  EXPECT_EQ(error, path + ": cannot write: " + std::strerror(ENOENT));
  EXPECT_FALSE(fs::exists(dir.path() / "missing"));
}

TEST(Safetensors, OpenMissingFile) {
  std::string error;
  std::optional<File> file =
      File::open("/nonexistent/pippy/w.safetensors", error);
  ASSERT_FALSE(file);
  EXPECT_EQ(error, std::string("/nonexistent/pippy/w.safetensors: cannot "
                               "read: ") +
                       std::strerror(ENOENT));
}

TEST(Safetensors, OpenDirectory) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  std::string error;
  ASSERT_FALSE(File::open(dir.path().string(), error));
  EXPECT_EQ(error,
            dir.path().string() + ": cannot read: " + std::strerror(EISDIR));
}

TEST(Safetensors, OpenReportsParseErrorsWithThePath) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  std::string path = (dir.path() / "short.safetensors").string();
  std::ofstream(path, std::ios::binary) << "abc";
  std::string error;
  ASSERT_FALSE(File::open(path, error));
  EXPECT_EQ(error,
            path + ": file has 3 bytes, fewer than the 8-byte header length");
}

TEST(Safetensors, FindHitAndMiss) {
  std::string error;
  std::optional<File> file = parseBytes(sampleWriter().serialize(), error);
  ASSERT_TRUE(file) << error;
  const TensorInfo *bias = file->find("fc.bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->name, "fc.bias");
  EXPECT_EQ(bias->dtype, DType::F16);
  EXPECT_EQ(static_cast<uint8_t>(file->data(*bias)[0]), 100);
  EXPECT_EQ(file->find("fc"), nullptr);
  EXPECT_EQ(file->find("FC.BIAS"), nullptr);
  EXPECT_EQ(file->find("__metadata__"), nullptr);
  EXPECT_EQ(file->find(""), nullptr);
}

TEST(Safetensors, DataAfterMove) {
  // A small file, held in the string's inline buffer: the views come from
  // the moved-to file.
  Writer writer;
  ASSERT_EQ(writer.add("x", DType::U8, {1}, "q"), "");
  std::string error;
  std::optional<File> file = parseBytes(writer.serialize(), error);
  ASSERT_TRUE(file) << error;
  File moved = std::move(*file);
  EXPECT_EQ(moved.data(moved.tensors()[0]), "q");
}

TEST(Safetensors, NoMetadataWhenEmpty) {
  Writer writer;
  ASSERT_EQ(writer.add("x", DType::I32, {1}, iota(4)), "");
  std::string bytes = writer.serialize();
  EXPECT_EQ(bytes.find("__metadata__"), std::string::npos);
  std::string error;
  std::optional<File> file = parseBytes(bytes, error);
  ASSERT_TRUE(file) << error;
  EXPECT_TRUE(file->metadata().empty());
  ASSERT_EQ(file->tensors().size(), 1u);
}

TEST(Safetensors, EmptyWriter) {
  std::string bytes = Writer().serialize();
  // "{}" padded to 8 bytes.
  EXPECT_EQ(bytes, withLength(8, "{}      "));
  std::string error;
  std::optional<File> file = parseBytes(bytes, error);
  ASSERT_TRUE(file) << error;
  EXPECT_TRUE(file->tensors().empty());
}

TEST(Safetensors, MetadataInvalidUTF8IsReplaced) {
  Writer writer;
  // A lone continuation byte, a truncated 3-byte sequence (one U+FFFD for
  // its maximal subpart), an encoded surrogate (one per byte) and valid
  // 2- and 4-byte sequences.
  writer.setMetadata("k\xff", "a\x80"
                              "b\xe6\x9d"
                              "c\xed\xa0\x80"
                              "\xc3\xa9\xf0\x9f\x98\x80");
  std::string error;
  std::optional<File> file = parseBytes(writer.serialize(), error);
  ASSERT_TRUE(file) << error;
  std::map<std::string, std::string> expected = {
      {"k\xef\xbf\xbd", "a\xef\xbf\xbd"
                        "b\xef\xbf\xbd"
                        "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                        "\xc3\xa9\xf0\x9f\x98\x80"}};
  EXPECT_EQ(file->metadata(), expected);
}

TEST(Safetensors, WriterRejectsWrongByteCount) {
  Writer writer;
  EXPECT_EQ(writer.add("fc.weight", DType::F32, {2, 3}, iota(20)),
            "tensor 'fc.weight' has 20 bytes but shape [2, 3] of F32 needs 24");
  EXPECT_EQ(writer.add("s", DType::F64, {}, iota(4)),
            "tensor 's' has 4 bytes but shape [] of F64 needs 8");
  EXPECT_EQ(writer.serialize(), Writer().serialize());
}

TEST(Safetensors, WriterRejectsDuplicateName) {
  Writer writer;
  ASSERT_EQ(writer.add("w", DType::U8, {2}, iota(2)), "");
  EXPECT_EQ(writer.add("w", DType::U8, {1}, iota(1)),
            "cannot add tensor 'w': a tensor of that name was already added");
}

TEST(Safetensors, WriterRejectsMetadataName) {
  Writer writer;
  EXPECT_EQ(writer.add("__metadata__", DType::U8, {1}, iota(1)),
            "cannot add tensor '__metadata__': the name is reserved for "
            "metadata");
}

TEST(Safetensors, WriterRejectsBadShapes) {
  Writer writer;
  EXPECT_EQ(writer.add("n", DType::U8, {2, -1}, ""),
            "tensor 'n' shape [2, -1] dimension 1 is negative");
  int64_t big = int64_t(1) << 32;
  EXPECT_TRUE(contains(writer.add("o", DType::U8, {big, big}, ""),
                       "has too many elements"));
  EXPECT_EQ(writer.add("\xff", DType::U8, {}, "\x01"),
            "cannot add tensor '\\377': the name is not valid UTF-8");
  EXPECT_EQ(writer.serialize(), Writer().serialize());
}

//===----------------------------------------------------------------------===//
// Reading: what is accepted
//===----------------------------------------------------------------------===//

TEST(Safetensors, KeepsHeaderOrder) {
  // Header order differs from data order and from alphabetical order.
  std::string header = "{\"z\":" + entry("U8", "[2]", 4, 6) +
                       ",\"a\":" + entry("U8", "[4]", 0, 4) + "}";
  std::string error;
  std::optional<File> file = parseBytes(makeFile(header, 6), error);
  ASSERT_TRUE(file) << error;
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
  std::string error;
  std::optional<File> file = parseBytes(bytes, error);
  ASSERT_TRUE(file) << error;
  ASSERT_EQ(file->tensors().size(), 4u);
  EXPECT_EQ(file->data(*file->find("b")), "\x01\x02");
}

TEST(Safetensors, AcceptsMetadataOnly) {
  std::string error;
  std::optional<File> file =
      parseBytes(makeFile("{\"__metadata__\":{\"k\":\"v\"}}"), error);
  ASSERT_TRUE(file) << error;
  EXPECT_TRUE(file->tensors().empty());
  EXPECT_EQ(file->metadata().at("k"), "v");
}

} // namespace
