//===- Safetensors.cpp - safetensors reading ------------------------------===//
//
// The reader checks the header in three steps. A raw scan first bounds the
// JSON nesting depth, so that no later step can be driven arbitrarily deep by
// a header of a few megabytes of '['. Then nlohmann-json's SAX parser checks
// the syntax while a handler here builds an nlohmann::ordered_json (which
// keeps the order of the tensors in the header) and notes the first key
// repeated within one object at any depth (which a DOM parse would silently
// resolve to the last value). Only then is the schema checked, tensor by
// tensor (SafetensorsSchema.cpp), with uint64 arithmetic that cannot
// overflow.
//
// The SAX interface reports a syntax error to the handler instead of
// throwing, so no exception is involved.
//
//===----------------------------------------------------------------------===//

#include "SafetensorsImpl.h"

#include "pippy/Support/AtomicFile.h"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <unordered_set>

using namespace pippy::safetensors;
using namespace pippy::safetensors::detail;

namespace {

/// The largest header accepted, as the reference implementation does.
constexpr uint64_t kMaxHeaderSize = 100 * 1024 * 1024;
/// The deepest JSON nesting accepted. A valid header nests three levels
/// (header object, tensor object, shape array); the slack gives a schema error
/// rather than a depth error for slightly wrong headers.
constexpr unsigned kMaxHeaderDepth = 64;
/// The most bytes of the offending token a JSON syntax error quotes.
constexpr size_t kMaxQuotedToken = 64;

/// Returns the deepest nesting of arrays and objects in `text`, stopping early
/// once it exceeds `limit`. Works on any bytes, valid JSON or not.
unsigned nestingDepth(std::string_view text, unsigned limit) {
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

/// The detail of an nlohmann-json syntax error: without the
/// "[json.exception.parse_error.101] " prefix, a long offending token cut
/// short, and bytes outside ASCII escaped, so that it is one short line.
std::string jsonErrorDetail(std::string_view what, std::string_view token) {
  if (!what.empty() && what.front() == '[') {
    size_t close = what.find("] ");
    if (close != std::string_view::npos)
      what.remove_prefix(close + 2);
  }
  std::string detail(what);
  if (token.size() > kMaxQuotedToken) {
    size_t at = detail.find(token);
    if (at != std::string::npos)
      detail.replace(at, token.size(),
                     std::string(token.substr(0, kMaxQuotedToken)) + "...");
  }
  std::string result;
  for (char ch : detail) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f)
      appendOctal(result, c);
    else
      result += ch;
  }
  return result;
}

/// The start of a syntax error message on the byte at `offset`, in the style
/// of nlohmann-json's ("parse error at line 1, column 3: ").
std::string syntaxErrorAt(std::string_view text, size_t offset) {
  size_t line = 1, lineStart = 0;
  for (size_t i = 0; i < offset; ++i)
    if (text[i] == '\n') {
      ++line;
      lineStart = i + 1;
    }
  return "parse error at line " + std::to_string(line) + ", column " +
         std::to_string(offset - lineStart + 1) + ": ";
}

/// Builds the header's value from nlohmann-json's SAX events, noting the
/// first key repeated within one object and the syntax error, if any.
class HeaderBuilder {
public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  Json root;
  /// The first key repeated within an object, in text order.
  std::optional<std::string> duplicate;
  /// The syntax error, set when parsing fails.
  std::string error;

  bool null() { return add(nullptr); }
  bool boolean(bool value) { return add(value); }
  bool number_integer(number_integer_t value) { return add(value); }
  bool number_unsigned(number_unsigned_t value) { return add(value); }
  bool number_float(number_float_t value, const string_t &) {
    return add(value);
  }
  bool string(string_t &value) { return add(std::move(value)); }
  bool binary(binary_t &) { return add(nullptr); } // not in JSON text

  bool start_object(size_t) {
    open.push_back(place(Json::object()));
    keySets.emplace_back();
    return true;
  }
  bool key(string_t &name) {
    if (!duplicate && !keySets.back().insert(name).second)
      duplicate = name;
    pendingKey = std::move(name);
    return true;
  }
  bool end_object() {
    open.pop_back();
    keySets.pop_back();
    return true;
  }
  bool start_array(size_t) {
    open.push_back(place(Json::array()));
    return true;
  }
  bool end_array() {
    open.pop_back();
    return true;
  }

  bool parse_error(size_t, const std::string &token,
                   const nlohmann::json::exception &ex) {
    error = jsonErrorDetail(ex.what(), token);
    return false;
  }

private:
  /// The containers being filled, innermost last (null once values are no
  /// longer kept). Only the innermost one grows, so the pointers to the
  /// others stay valid.
  std::vector<Json *> open;
  /// The keys seen in each open object, innermost last.
  std::vector<std::unordered_set<std::string>> keySets;
  std::string pendingKey;

  /// Stores `value` in the innermost container (under the pending key in an
  /// object), or as the root. Once a key is repeated the header is an error
  /// whatever follows, and the values are only checked, no longer kept: so
  /// each key is new where it is stored, and is appended without a search
  /// (a search of an ordered_json object is linear).
  Json *place(Json &&value) {
    if (open.empty()) {
      root = std::move(value);
      return &root;
    }
    Json *parent = open.back();
    if (duplicate || !parent)
      return nullptr;
    if (parent->is_array()) {
      parent->push_back(std::move(value));
      return &parent->back();
    }
    Json::object_t &object = parent->get_ref<Json::object_t &>();
    object.emplace_back(std::move(pendingKey), std::move(value));
    return &object.back().second;
  }
  template <typename T> bool add(T &&value) {
    place(Json(std::forward<T>(value)));
    return true;
  }
};

} // namespace

//===----------------------------------------------------------------------===//
// File
//===----------------------------------------------------------------------===//

std::optional<File> File::open(const std::string &path, std::string &error) {
  pippy::ReadError readError;
  std::optional<FileBytes> bytes = FileBytes::open(path, readError);
  if (!bytes) {
    error = path + ": cannot read: " + std::strerror(readError.code);
    return std::nullopt;
  }
  return parse(std::move(*bytes), path, error);
}

std::optional<File> File::parse(FileBytes file, const std::string &name,
                                std::string &error) {
  std::string_view bytes = file.view();
  auto fail = [&](const std::string &message) -> std::optional<File> {
    error = name + ": " + message;
    return std::nullopt;
  };
  uint64_t fileSize = bytes.size();
  if (fileSize < 8)
    return fail("file has " + std::to_string(fileSize) +
                " bytes, fewer than the 8-byte header length");
  uint64_t headerSize = 0;
  for (int i = 7; i >= 0; --i)
    headerSize = headerSize << 8 | static_cast<unsigned char>(bytes[i]);
  if (headerSize > kMaxHeaderSize)
    return fail("header length " + std::to_string(headerSize) +
                " is larger than the limit of " +
                std::to_string(kMaxHeaderSize) + " bytes");
  if (headerSize > fileSize - 8)
    return fail("header length " + std::to_string(headerSize) +
                " is larger than the " + std::to_string(fileSize - 8) +
                " bytes after the length");
  std::string_view header = bytes.substr(8, headerSize);
  uint64_t dataSize = fileSize - 8 - headerSize;

  unsigned depth = nestingDepth(header, kMaxHeaderDepth);
  if (depth > kMaxHeaderDepth)
    return fail("header nests JSON deeper than " +
                std::to_string(kMaxHeaderDepth) + " levels");
  // nlohmann-json skips a leading byte order mark and takes a NUL byte for
  // the end of the input; neither is JSON.
  if (header.substr(0, 3) == "\xef\xbb\xbf")
    return fail("header is not valid JSON: " + syntaxErrorAt(header, 0) +
                "syntax error - unexpected byte order mark");
  HeaderBuilder builder;
  if (!Json::sax_parse(header, &builder))
    return fail("header is not valid JSON: " + builder.error);
  if (size_t nul = header.find('\0'); nul != std::string_view::npos)
    return fail("header is not valid JSON: " + syntaxErrorAt(header, nul) +
                "syntax error - unexpected NUL byte; expected end of "
                "input");
  const Json &root = builder.root;
  if (!root.is_object())
    return fail(std::string("header is ") + kindName(root) +
                ", expected a JSON object");
  if (builder.duplicate)
    return fail("header has duplicate key " + singleQuoted(*builder.duplicate));

  File result;
  std::string message;
  for (const auto &[key, value] : root.get_ref<const Json::object_t &>()) {
    if (key == kMetadataKey) {
      std::optional<std::map<std::string, std::string>> metadata =
          parseMetadata(value, message);
      if (!metadata)
        return fail(message);
      result.metadataMap = std::move(*metadata);
      continue;
    }
    std::optional<TensorInfo> info = parseTensor(key, value, dataSize, message);
    if (!info)
      return fail(message);
    result.tensorList.push_back(std::move(*info));
  }
  message = checkCoverage(result.tensorList, dataSize);
  if (!message.empty())
    return fail(message);

  result.bytes = std::move(file);
  result.dataStart = 8 + headerSize;
  return result;
}

const TensorInfo *File::find(std::string_view name) const {
  for (const TensorInfo &info : tensorList)
    if (info.name == name)
      return &info;
  return nullptr;
}

std::string_view File::data(const TensorInfo &tensor) const {
  std::string_view bytes = this->bytes.view();
  if (bytes.size() < dataStart)
    return {};
  uint64_t dataSize = bytes.size() - dataStart;
  assert(tensor.begin <= tensor.end && tensor.end <= dataSize &&
         "tensor is not of this file");
  if (tensor.begin > tensor.end || tensor.end > dataSize)
    return {};
  return bytes.substr(dataStart + tensor.begin, tensor.end - tensor.begin);
}
