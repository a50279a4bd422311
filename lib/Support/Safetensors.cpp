//===- Safetensors.cpp - safetensors reading and writing ------------------===//
//
// The reader checks the header in three steps. A raw scan first bounds the
// JSON nesting depth, because llvm::json::parse recurses once per level and a
// header of a few megabytes of '[' would otherwise overflow the stack. Then
// llvm::json::parse checks the syntax. A second raw scan of the now valid JSON
// recovers what llvm::json::Object forgets: the order of the tensors in the
// header and duplicate keys (which llvm::json silently resolves to the last
// value). Only then is the schema checked, tensor by tensor, with uint64
// arithmetic that cannot overflow.
//
//===----------------------------------------------------------------------===//

#include "pippy/Support/Safetensors.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cassert>
#include <limits>

using namespace llvm;
using namespace pippy::safetensors;

namespace {

/// The largest header accepted, as the reference implementation does.
constexpr uint64_t kMaxHeaderSize = 100 * 1024 * 1024;
/// The deepest JSON nesting accepted. A valid header nests three levels
/// (header object, tensor object, shape array); the slack gives a schema error
/// rather than a depth error for slightly wrong headers.
constexpr unsigned kMaxHeaderDepth = 64;
constexpr StringLiteral kMetadataKey = "__metadata__";
constexpr uint64_t kMaxElements =
    static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

struct DTypeDesc {
  DType dtype;
  StringLiteral name;
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
  llvm_unreachable("unknown safetensors dtype");
}

/// `text` in single quotes with non-printable characters escaped, so that a
/// message stays on one line whatever the tensor is called.
std::string quoted(StringRef text) {
  std::string result;
  raw_string_ostream os(result);
  os << '\'';
  os.write_escaped(text);
  os << '\'';
  return result;
}

std::string formatShape(ArrayRef<int64_t> shape) {
  std::string result;
  raw_string_ostream os(result);
  os << '[';
  interleaveComma(shape, os);
  os << ']';
  return result;
}

std::string formatShape(const json::Array &shape) {
  std::string result;
  raw_string_ostream os(result);
  os << json::Value(json::Array(shape));
  return result;
}

StringRef kindName(const json::Value &value) {
  switch (value.kind()) {
  case json::Value::Null:
    return "null";
  case json::Value::Boolean:
    return "a boolean";
  case json::Value::Number:
    return "a number";
  case json::Value::String:
    return "a string";
  case json::Value::Array:
    return "an array";
  case json::Value::Object:
    return "an object";
  }
  llvm_unreachable("unknown JSON kind");
}

/// Multiplies the dimensions in uint64, failing when a partial product
/// exceeds INT64_MAX (so numElements() cannot overflow either).
std::optional<uint64_t> checkedElementCount(ArrayRef<int64_t> shape) {
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

/// Reports errors as "<name>: <message>".
class Diagnoser {
public:
  explicit Diagnoser(StringRef name) : name(name) {}
  Error operator()(const Twine &message) const {
    return createStringError(name + ": " + message);
  }

private:
  StringRef name;
};

/// Returns the deepest nesting of arrays and objects in `text`, stopping early
/// once it exceeds `limit`. Works on any bytes, valid JSON or not.
unsigned nestingDepth(StringRef text, unsigned limit) {
  unsigned depth = 0, deepest = 0;
  bool inString = false;
  for (size_t i = 0, e = text.size(); i < e; ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit)
        return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

/// The keys of the top-level object of `text`, which must be valid JSON whose
/// nesting is bounded, in their order of appearance. Fails on a key repeated
/// within one object at any depth.
Expected<std::vector<std::string>> scanKeys(StringRef text,
                                            const Diagnoser &diag) {
  struct Level {
    bool isObject;
    bool expectingKey;
    StringSet<> keys;
  };
  SmallVector<Level, 4> stack;
  std::vector<std::string> topKeys;
  for (size_t i = 0, e = text.size(); i < e; ++i) {
    char c = text[i];
    if (c == '{' || c == '[') {
      stack.push_back({c == '{', c == '{', {}});
      continue;
    }
    if (c == '}' || c == ']') {
      if (!stack.empty())
        stack.pop_back();
      continue;
    }
    if (c == ',') {
      if (!stack.empty() && stack.back().isObject)
        stack.back().expectingKey = true;
      continue;
    }
    if (c != '"')
      continue;
    size_t start = i;
    for (++i; i < e && text[i] != '"'; ++i)
      if (text[i] == '\\')
        ++i;
    if (stack.empty() || !stack.back().isObject || !stack.back().expectingKey)
      continue;
    stack.back().expectingKey = false;
    // The token is a valid JSON string; let the JSON parser decode escapes so
    // that "a" and "\u0061" are the same key.
    std::string key;
    if (Expected<json::Value> token =
            json::parse(text.slice(start, std::min(i + 1, e)))) {
      if (std::optional<StringRef> str = token->getAsString())
        key = str->str();
    } else {
      consumeError(token.takeError());
    }
    if (!stack.back().keys.insert(key).second)
      return diag("header has duplicate key " + quoted(key));
    if (stack.size() == 1)
      topKeys.push_back(std::move(key));
  }
  return topKeys;
}

Expected<std::map<std::string, std::string>>
parseMetadata(const json::Value &value, const Diagnoser &diag) {
  const json::Object *object = value.getAsObject();
  if (!object)
    return diag("\"__metadata__\" is " + kindName(value) +
                ", expected an object of strings");
  std::map<std::string, std::string> metadata;
  for (const auto &[key, entry] : *object) {
    std::optional<StringRef> str = entry.getAsString();
    if (!str)
      return diag("\"__metadata__\" value of " + quoted(key) + " is " +
                  kindName(entry) + ", expected a string");
    metadata.emplace(key.str(), str->str());
  }
  return metadata;
}

/// Checks one header entry against the schema and the data section size.
Expected<TensorInfo> parseTensor(StringRef name, const json::Value &value,
                                 uint64_t dataSize, const Diagnoser &diag) {
  std::string tensor = "tensor " + quoted(name);
  const json::Object *object = value.getAsObject();
  if (!object)
    return diag(tensor + " is " + kindName(value) + ", expected an object");

  // Sorted so that the reported key does not depend on hash order.
  SmallVector<StringRef> keys;
  for (const auto &entry : *object)
    keys.push_back(entry.first);
  llvm::sort(keys);
  for (StringRef key : keys)
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      return diag(tensor + " has unknown key " + quoted(key) +
                  " (expected only dtype, shape and data_offsets)");
  for (StringRef key : {"dtype", "shape", "data_offsets"})
    if (!object->get(key))
      return diag(tensor + " lacks \"" + key + "\"");

  TensorInfo info;
  info.name = name.str();

  const json::Value &dtypeValue = *object->get("dtype");
  std::optional<StringRef> dtypeStr = dtypeValue.getAsString();
  if (!dtypeStr)
    return diag(tensor + " dtype is " + kindName(dtypeValue) +
                ", expected a string");
  std::optional<DType> dtype = parseDType(*dtypeStr);
  if (!dtype)
    return diag(tensor + " has unknown dtype " + quoted(*dtypeStr));
  info.dtype = *dtype;

  const json::Value &shapeValue = *object->get("shape");
  const json::Array *shape = shapeValue.getAsArray();
  if (!shape)
    return diag(tensor + " shape is " + kindName(shapeValue) +
                ", expected an array of non-negative integers");
  for (auto [index, dim] : enumerate(*shape)) {
    // getAsUINT64 rejects fractions, exponents and negative numbers.
    std::optional<uint64_t> udim = dim.getAsUINT64();
    if (!udim || *udim > kMaxElements)
      return diag(tensor + " shape " + formatShape(*shape) + " dimension " +
                  Twine(index) + " is not a non-negative integer");
    info.shape.push_back(static_cast<int64_t>(*udim));
  }
  std::optional<uint64_t> count = checkedElementCount(info.shape);
  std::optional<uint64_t> needed =
      count ? checkedByteCount(*count, info.dtype) : std::nullopt;
  if (!needed)
    return diag(tensor + " shape " + formatShape(info.shape) +
                " has too many elements (the count overflows)");

  const json::Value &offsetsValue = *object->get("data_offsets");
  const json::Array *offsets = offsetsValue.getAsArray();
  if (!offsets)
    return diag(tensor + " data_offsets is " + kindName(offsetsValue) +
                ", expected an array of two non-negative integers");
  if (offsets->size() != 2)
    return diag(tensor + " data_offsets has " + Twine(offsets->size()) +
                " elements, expected 2");
  std::optional<uint64_t> begin = (*offsets)[0].getAsUINT64();
  std::optional<uint64_t> end = (*offsets)[1].getAsUINT64();
  if (!begin || !end)
    return diag(tensor + " data_offsets " + formatShape(*offsets) +
                " are not two non-negative integers");
  if (*begin > *end)
    return diag(tensor + " data_offsets [" + Twine(*begin) + ", " +
                Twine(*end) + "] begin after their end");
  if (*end > dataSize)
    return diag(tensor + " data_offsets [" + Twine(*begin) + ", " +
                Twine(*end) + "] end beyond the " + Twine(dataSize) +
                "-byte data section");
  info.begin = *begin;
  info.end = *end;

  uint64_t bytes = *end - *begin;
  if (bytes != *needed)
    return diag(tensor + " has " + Twine(bytes) + " bytes but shape " +
                formatShape(info.shape) + " of " + dtypeName(info.dtype) +
                " needs " + Twine(*needed));
  return info;
}

/// Checks that the byte ranges, sorted by begin, tile [0, dataSize) exactly.
Error checkCoverage(ArrayRef<TensorInfo> tensors, uint64_t dataSize,
                    const Diagnoser &diag) {
  std::vector<const TensorInfo *> sorted;
  sorted.reserve(tensors.size());
  for (const TensorInfo &info : tensors)
    sorted.push_back(&info);
  llvm::sort(sorted, [](const TensorInfo *a, const TensorInfo *b) {
    return std::tie(a->begin, a->end, a->name) <
           std::tie(b->begin, b->end, b->name);
  });
  uint64_t covered = 0;
  const TensorInfo *previous = nullptr;
  for (const TensorInfo *info : sorted) {
    auto range = [](const TensorInfo *t) {
      return quoted(t->name) + " [" + std::to_string(t->begin) + ", " +
             std::to_string(t->end) + ")";
    };
    if (info->begin < covered)
      return diag("tensors " + range(previous) + " and " + range(info) +
                  " overlap");
    if (info->begin > covered)
      return diag("data section has a hole of " + Twine(info->begin - covered) +
                  " bytes at [" + Twine(covered) + ", " + Twine(info->begin) +
                  ") before tensor " + quoted(info->name));
    covered = info->end;
    previous = info;
  }
  if (covered != dataSize)
    return diag("data section has " + Twine(dataSize - covered) +
                " trailing bytes at [" + Twine(covered) + ", " +
                Twine(dataSize) + ") not covered by any tensor");
  return Error::success();
}

} // namespace

StringRef pippy::safetensors::dtypeName(DType dtype) {
  return describe(dtype).name;
}

std::optional<DType> pippy::safetensors::parseDType(StringRef name) {
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

//===----------------------------------------------------------------------===//
// File
//===----------------------------------------------------------------------===//

Expected<File> File::open(StringRef path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
      MemoryBuffer::getFile(path, /*IsText=*/false,
                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return createStringError(path +
                             ": cannot read: " + buffer.getError().message());
  return parse(std::move(*buffer), path);
}

Expected<File> File::parse(std::unique_ptr<MemoryBuffer> buffer,
                           StringRef name) {
  Diagnoser diag(name);
  if (!buffer)
    return diag("no buffer to parse");
  StringRef bytes = buffer->getBuffer();
  uint64_t fileSize = bytes.size();
  if (fileSize < 8)
    return diag("file has " + Twine(fileSize) +
                " bytes, fewer than the 8-byte header length");
  uint64_t headerSize = support::endian::read64le(bytes.data());
  if (headerSize > kMaxHeaderSize)
    return diag("header length " + Twine(headerSize) +
                " is larger than the limit of " + Twine(kMaxHeaderSize) +
                " bytes");
  if (headerSize > fileSize - 8)
    return diag("header length " + Twine(headerSize) + " is larger than the " +
                Twine(fileSize - 8) + " bytes after the length");
  StringRef header = bytes.substr(8, headerSize);
  uint64_t dataSize = fileSize - 8 - headerSize;

  unsigned depth = nestingDepth(header, kMaxHeaderDepth);
  if (depth > kMaxHeaderDepth)
    return diag("header nests JSON deeper than " + Twine(kMaxHeaderDepth) +
                " levels");
  Expected<json::Value> root = json::parse(header);
  if (!root)
    return diag("header is not valid JSON: " + toString(root.takeError()));
  const json::Object *object = root->getAsObject();
  if (!object)
    return diag("header is " + kindName(*root) + ", expected a JSON object");
  Expected<std::vector<std::string>> keys = scanKeys(header, diag);
  if (!keys)
    return keys.takeError();

  File file;
  for (const std::string &key : *keys) {
    const json::Value *value = object->get(key);
    assert(value && "scanned key missing from the parsed object");
    if (!value)
      return diag("header key " + quoted(key) + " was not parsed");
    if (key == kMetadataKey) {
      Expected<std::map<std::string, std::string>> metadata =
          parseMetadata(*value, diag);
      if (!metadata)
        return metadata.takeError();
      file.metadataMap = std::move(*metadata);
      continue;
    }
    Expected<TensorInfo> info = parseTensor(key, *value, dataSize, diag);
    if (!info)
      return info.takeError();
    file.tensorList.push_back(std::move(*info));
  }
  if (keys->size() != object->size())
    return diag("header has " + Twine(object->size()) + " keys but " +
                Twine(keys->size()) + " were found");
  if (Error err = checkCoverage(file.tensorList, dataSize, diag))
    return std::move(err);

  file.buffer = std::move(buffer);
  file.dataStart = 8 + headerSize;
  return file;
}

const TensorInfo *File::find(StringRef name) const {
  for (const TensorInfo &info : tensorList)
    if (info.name == name)
      return &info;
  return nullptr;
}

ArrayRef<uint8_t> File::data(const TensorInfo &tensor) const {
  if (!buffer)
    return {};
  uint64_t dataSize = buffer->getBufferSize() - dataStart;
  assert(tensor.begin <= tensor.end && tensor.end <= dataSize &&
         "tensor is not of this file");
  if (tensor.begin > tensor.end || tensor.end > dataSize)
    return {};
  const auto *start =
      reinterpret_cast<const uint8_t *>(buffer->getBufferStart()) + dataStart;
  return ArrayRef(start + tensor.begin, tensor.end - tensor.begin);
}

//===----------------------------------------------------------------------===//
// Writer
//===----------------------------------------------------------------------===//

Error Writer::add(StringRef name, DType dtype, ArrayRef<int64_t> shape,
                  ArrayRef<uint8_t> bytes) {
  std::string tensor = "tensor " + quoted(name);
  if (name == kMetadataKey)
    return createStringError("cannot add tensor " + quoted(name) +
                             ": the name is reserved for metadata");
  if (!json::isUTF8(name))
    return createStringError("cannot add tensor " + quoted(name) +
                             ": the name is not valid UTF-8");
  if (any_of(entries, [&](const Entry &entry) { return entry.name == name; }))
    return createStringError("cannot add tensor " + quoted(name) +
                             ": a tensor of that name was already added");
  for (auto [index, dim] : enumerate(shape))
    if (dim < 0)
      return createStringError(tensor + " shape " + formatShape(shape) +
                               " dimension " + Twine(index) + " is negative");
  std::optional<uint64_t> count = checkedElementCount(shape);
  std::optional<uint64_t> needed =
      count ? checkedByteCount(*count, dtype) : std::nullopt;
  if (!needed)
    return createStringError(tensor + " shape " + formatShape(shape) +
                             " has too many elements (the count overflows)");
  if (bytes.size() != *needed)
    return createStringError(tensor + " has " + Twine(bytes.size()) +
                             " bytes but shape " + formatShape(shape) + " of " +
                             dtypeName(dtype) + " needs " + Twine(*needed));
  entries.push_back({name.str(), dtype, shape.vec(), bytes.vec()});
  return Error::success();
}

void Writer::setMetadata(StringRef key, StringRef value) {
  // The header is JSON, which holds only UTF-8; invalid sequences become
  // U+FFFD here rather than in the middle of serialize().
  auto utf8 = [](StringRef text) {
    return json::isUTF8(text) ? text.str() : json::fixUTF8(text);
  };
  metadataMap[utf8(key)] = utf8(value);
}

namespace {

/// The 8-byte length and the JSON header of a file holding `tensors` laid out
/// in order, padded with spaces so that the data section starts at a multiple
/// of 8. The header lists the tensors in the same order (json::OStream keeps
/// the order of the calls, unlike printing a json::Object).
template <typename EntryT>
std::string buildHeader(ArrayRef<EntryT> tensors,
                        const std::map<std::string, std::string> &metadata) {
  std::string json;
  raw_string_ostream os(json);
  json::OStream out(os);
  out.object([&] {
    uint64_t offset = 0;
    for (const EntryT &entry : tensors) {
      uint64_t end = offset + entry.bytes.size();
      out.attributeObject(entry.name, [&] {
        out.attribute("dtype", dtypeName(entry.dtype));
        out.attributeArray("shape", [&] {
          for (int64_t dim : entry.shape)
            out.value(dim);
        });
        out.attributeArray("data_offsets", [&] {
          out.value(offset);
          out.value(end);
        });
      });
      offset = end;
    }
    if (metadata.empty())
      return;
    out.attributeObject(kMetadataKey, [&] {
      for (const auto &[key, value] : metadata)
        out.attribute(key, value);
    });
  });
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string result(8, '\0');
  support::endian::write64le(result.data(), json.size());
  result += json;
  return result;
}

} // namespace

std::string Writer::serialize() const {
  std::string result = buildHeader(ArrayRef(entries), metadataMap);
  for (const Entry &entry : entries)
    result.append(reinterpret_cast<const char *>(entry.bytes.data()),
                  entry.bytes.size());
  return result;
}

Error Writer::write(StringRef path) const {
  StringRef dir = sys::path::parent_path(path);
  SmallString<256> model(dir.empty() ? StringRef(".") : dir);
  sys::path::append(model, sys::path::filename(path) + ".tmp-%%%%%%%%");
  int fd = -1;
  SmallString<256> tempPath;
  if (std::error_code ec = sys::fs::createUniqueFile(model, fd, tempPath))
    return createStringError(path +
                             ": cannot create a temporary file beside "
                             "it: " +
                             ec.message());

  std::error_code writeError;
  {
    raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << buildHeader(ArrayRef(entries), metadataMap);
    for (const Entry &entry : entries)
      os.write(reinterpret_cast<const char *>(entry.bytes.data()),
               entry.bytes.size());
    os.close();
    if (os.has_error()) {
      writeError = os.error();
      os.clear_error();
    }
  }
  if (writeError) {
    sys::fs::remove(tempPath);
    return createStringError(path + ": cannot write " + quoted(tempPath) +
                             ": " + writeError.message());
  }
  if (std::error_code ec = sys::fs::rename(tempPath, path)) {
    sys::fs::remove(tempPath);
    return createStringError(path + ": cannot rename " + quoted(tempPath) +
                             " to it: " + ec.message());
  }
  return Error::success();
}
