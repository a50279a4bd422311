//===- Safetensors.h - safetensors reading and writing ----------*- C++ -*-===//
//
// The weights, data, gradients and checkpoints of pippy are safetensors files,
// the format the model hubs use: an 8-byte little-endian header length N, N
// bytes of JSON header, then the raw tensor bytes. The header maps each tensor
// name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to
// the start of the data section), plus an optional "__metadata__" object of
// string values.
//
// Reading validates everything before any tensor is touched: the header size,
// the JSON, every dtype and shape, that each byte range is inside the data
// section and has exactly shape x dtype-size bytes, and that the ranges do not
// overlap and together cover the data section. A corrupt file is an error,
// never a crash or an out-of-bounds read.
//
// No LLVM or libtorch: only the standard library and nlohmann-json (in the
// implementation), so that the runtime-only build uses it too. Errors are
// returned as one-line messages (empty for success), never thrown.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_SUPPORT_SAFETENSORS_H
#define PIPPY_SUPPORT_SAFETENSORS_H

#include "pippy/Support/AtomicFile.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace pippy::safetensors {

/// The element types of the format, spelled as in the header.
enum class DType {
  BOOL,    // "BOOL", 1 byte
  U8,      // "U8"
  I8,      // "I8"
  I16,     // "I16"
  I32,     // "I32"
  I64,     // "I64"
  F16,     // "F16"
  BF16,    // "BF16"
  F32,     // "F32"
  F64,     // "F64"
  F8_E4M3, // "F8_E4M3"
  F8_E5M2, // "F8_E5M2"
};

/// The header spelling of `dtype` ("F32").
std::string_view dtypeName(DType dtype);
/// Parses a header spelling; none for an unknown dtype.
std::optional<DType> parseDType(std::string_view name);
/// Bytes per element.
size_t dtypeSize(DType dtype);

/// One tensor of a file.
struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  /// Byte range in the data section, `end - begin` = elements x dtype size.
  uint64_t begin = 0, end = 0;

  /// Product of the shape (1 for a scalar).
  int64_t numElements() const;
};

/// A validated, read-only safetensors file held in memory.
class File {
public:
  /// Reads and validates `path`; none with `error` set to one line naming
  /// the file and the problem ("PATH: ...").
  static std::optional<File> open(const std::string &path, std::string &error);
  /// Validates bytes already in memory; `name` is used in errors.
  static std::optional<File> parse(std::string bytes, const std::string &name,
                                   std::string &error) {
    return parse(FileBytes(std::move(bytes)), name, error);
  }
  static std::optional<File> parse(FileBytes bytes, const std::string &name,
                                   std::string &error);

  /// Tensors in header order.
  const std::vector<TensorInfo> &tensors() const { return tensorList; }
  /// The tensor called `name`, or null.
  const TensorInfo *find(std::string_view name) const;
  /// The raw little-endian bytes of `tensor` (a tensor of this file).
  std::string_view data(const TensorInfo &tensor) const;
  /// The "__metadata__" entries.
  const std::map<std::string, std::string> &metadata() const {
    return metadataMap;
  }

private:
  File() = default;

  FileBytes bytes; ///< a file is mapped, not copied
  uint64_t dataStart = 0;
  std::vector<TensorInfo> tensorList;
  std::map<std::string, std::string> metadataMap;
};

/// Builds a safetensors file. Tensors are laid out in the order added.
class Writer {
public:
  /// Adds a tensor; returns an error message, or empty. `bytes` must hold
  /// exactly shape x dtype-size bytes and `name` must be new, valid UTF-8
  /// and not "__metadata__".
  std::string add(std::string_view name, DType dtype,
                  const std::vector<int64_t> &shape, std::string_view bytes);
  /// Sets a "__metadata__" entry; invalid UTF-8 becomes U+FFFD.
  void setMetadata(std::string_view key, std::string_view value);

  /// The whole file as bytes.
  std::string serialize() const;
  /// Writes the file atomically (pippy::writeFileAtomically), so readers
  /// never see a partial file. Returns an error message ("PATH: ..."), or
  /// empty.
  std::string write(const std::string &path) const;

private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::string bytes;
  };
  std::vector<Entry> entries;
  std::set<std::string, std::less<>> names;
  std::map<std::string, std::string> metadataMap;
};

} // namespace pippy::safetensors

#endif // PIPPY_SUPPORT_SAFETENSORS_H
