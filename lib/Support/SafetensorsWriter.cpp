//===- SafetensorsWriter.cpp - safetensors writing ------------------------===//
//
// Writer: tensors are checked as they are added (a new, valid UTF-8 name;
// exactly shape x dtype-size bytes), metadata is made valid UTF-8, and the
// file is serialized as compact JSON (the tensors in the order added,
// "__metadata__" last) padded so that the data section starts at a multiple
// of 8, then written atomically.
//
//===----------------------------------------------------------------------===//

#include "SafetensorsImpl.h"

#include "pippy/Support/AtomicFile.h"

using namespace pippy::safetensors;
using namespace pippy::safetensors::detail;

namespace {

/// The length of the valid UTF-8 sequence starting at `text[i]`, setting
/// `valid`; or, when there is none, that of the maximal subpart of the
/// ill-formed one (Unicode 15, 3.9 D93b: at least 1), which U+FFFD replaces.
size_t utf8SequenceAt(std::string_view text, size_t i, bool &valid) {
  unsigned char lead = static_cast<unsigned char>(text[i]);
  valid = false;
  if (lead < 0x80) {
    valid = true;
    return 1;
  }
  // Table 3-7 of the Unicode standard: the well-formed byte sequences.
  size_t trailing;
  unsigned char low = 0x80, high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    trailing = 1;
  } else if (lead == 0xe0) {
    trailing = 2;
    low = 0xa0;
  } else if ((lead >= 0xe1 && lead <= 0xec) || lead == 0xee || lead == 0xef) {
    trailing = 2;
  } else if (lead == 0xed) {
    trailing = 2;
    high = 0x9f;
  } else if (lead == 0xf0) {
    trailing = 3;
    low = 0x90;
  } else if (lead >= 0xf1 && lead <= 0xf3) {
    trailing = 3;
  } else if (lead == 0xf4) {
    trailing = 3;
    high = 0x8f;
  } else {
    return 1;
  }
  for (size_t n = 1; n <= trailing; ++n) {
    if (i + n >= text.size())
      return n;
    unsigned char c = static_cast<unsigned char>(text[i + n]);
    if (c < low || c > high)
      return n;
    low = 0x80;
    high = 0xbf;
  }
  valid = true;
  return trailing + 1;
}

bool isUTF8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    bool valid;
    i += utf8SequenceAt(text, i, valid);
    if (!valid)
      return false;
  }
  return true;
}

/// `text` with each maximal ill-formed subpart replaced by U+FFFD.
std::string fixUTF8(std::string_view text) {
  std::string result;
  result.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    bool valid;
    size_t length = utf8SequenceAt(text, i, valid);
    if (valid)
      result.append(text.substr(i, length));
    else
      result += "\xef\xbf\xbd";
    i += length;
  }
  return result;
}

} // namespace

//===----------------------------------------------------------------------===//
// Writer
//===----------------------------------------------------------------------===//

std::string Writer::add(std::string_view name, DType dtype,
                        const std::vector<int64_t> &shape,
                        std::string_view bytes) {
  std::string tensor = "tensor " + singleQuoted(name);
  if (name == kMetadataKey)
    return "cannot add tensor " + singleQuoted(name) +
           ": the name is reserved for metadata";
  if (!isUTF8(name))
    return "cannot add tensor " + singleQuoted(name) +
           ": the name is not valid UTF-8";
  if (names.count(name))
    return "cannot add tensor " + singleQuoted(name) +
           ": a tensor of that name was already added";
  for (size_t index = 0; index < shape.size(); ++index)
    if (shape[index] < 0)
      return tensor + " shape " + formatShape(shape) + " dimension " +
             std::to_string(index) + " is negative";
  std::optional<uint64_t> count = checkedElementCount(shape);
  std::optional<uint64_t> needed =
      count ? checkedByteCount(*count, dtype) : std::nullopt;
  if (!needed)
    return tensor + " shape " + formatShape(shape) +
           " has too many elements (the count overflows)";
  if (bytes.size() != *needed)
    return tensor + " has " + std::to_string(bytes.size()) +
           " bytes but shape " + formatShape(shape) + " of " +
           std::string(dtypeName(dtype)) + " needs " + std::to_string(*needed);
  entries.push_back({std::string(name), dtype, shape, std::string(bytes)});
  names.emplace(name);
  return "";
}

void Writer::setMetadata(std::string_view key, std::string_view value) {
  // The header is JSON, which holds only UTF-8; invalid sequences become
  // U+FFFD here rather than in the middle of serialize().
  metadataMap[fixUTF8(key)] = fixUTF8(value);
}

std::string Writer::serialize() const {
  // Compact JSON, the tensors in the order added and "__metadata__" last.
  std::string json = "{";
  uint64_t offset = 0;
  for (const Entry &entry : entries) {
    uint64_t end = offset + entry.bytes.size();
    if (json.size() > 1)
      json += ',';
    appendJSONString(json, entry.name);
    json += ":{\"dtype\":";
    appendJSONString(json, dtypeName(entry.dtype));
    json += ",\"shape\":[";
    for (size_t i = 0; i < entry.shape.size(); ++i) {
      if (i)
        json += ',';
      json += std::to_string(entry.shape[i]);
    }
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," +
            std::to_string(end) + "]}";
    offset = end;
  }
  if (!metadataMap.empty()) {
    if (json.size() > 1)
      json += ',';
    appendJSONString(json, kMetadataKey);
    json += ":{";
    bool first = true;
    for (const auto &[key, value] : metadataMap) {
      if (!first)
        json += ',';
      first = false;
      appendJSONString(json, key);
      json += ':';
      appendJSONString(json, value);
    }
    json += '}';
  }
  json += '}';
  // Spaces so that the data section starts at a multiple of 8.
  json.append((8 - json.size() % 8) % 8, ' ');

  std::string result(8, '\0');
  uint64_t length = json.size();
  for (int i = 0; i < 8; ++i)
    result[i] = static_cast<char>(length >> (8 * i) & 0xff);
  result.reserve(8 + json.size() + offset);
  result += json;
  for (const Entry &entry : entries)
    result += entry.bytes;
  return result;
}

std::string Writer::write(const std::string &path) const {
  std::string error = pippy::writeFileAtomically(path, serialize());
  if (error.empty())
    return error;
  // "cannot write PATH: why" becomes "PATH: cannot write: why", as every
  // other message of this file starts with the file's name.
  std::string prefix = "cannot write " + path + ": ";
  if (error.compare(0, prefix.size(), prefix) == 0)
    return path + ": cannot write: " + error.substr(prefix.size());
  return error;
}
