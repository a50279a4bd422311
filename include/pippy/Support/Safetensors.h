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
//===----------------------------------------------------------------------===//

#ifndef PIPPY_SUPPORT_SAFETENSORS_H
#define PIPPY_SUPPORT_SAFETENSORS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
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
llvm::StringRef dtypeName(DType dtype);
/// Parses a header spelling; none for an unknown dtype.
std::optional<DType> parseDType(llvm::StringRef name);
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
  /// Reads and validates `path`. Errors name the file and the problem.
  static llvm::Expected<File> open(llvm::StringRef path);
  /// Validates bytes already in memory; `name` is used in errors.
  static llvm::Expected<File> parse(std::unique_ptr<llvm::MemoryBuffer> buffer,
                                    llvm::StringRef name);

  /// Tensors in header order.
  llvm::ArrayRef<TensorInfo> tensors() const { return tensorList; }
  /// The tensor called `name`, or null.
  const TensorInfo *find(llvm::StringRef name) const;
  /// The raw little-endian bytes of `tensor` (a tensor of this file).
  llvm::ArrayRef<uint8_t> data(const TensorInfo &tensor) const;
  /// The "__metadata__" entries.
  const std::map<std::string, std::string> &metadata() const {
    return metadataMap;
  }

private:
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  uint64_t dataStart = 0;
  std::vector<TensorInfo> tensorList;
  std::map<std::string, std::string> metadataMap;
};

/// Builds a safetensors file. Tensors are laid out in the order added.
class Writer {
public:
  /// Adds a tensor; `bytes` must hold exactly shape x dtype-size bytes and
  /// `name` must be new and not "__metadata__", else an error.
  llvm::Error add(llvm::StringRef name, DType dtype,
                  llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<uint8_t> bytes);
  void setMetadata(llvm::StringRef key, llvm::StringRef value);

  /// The whole file as bytes.
  std::string serialize() const;
  /// Writes the file atomically: a temporary file beside `path`, then a
  /// rename, so readers never see a partial file.
  llvm::Error write(llvm::StringRef path) const;

private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadataMap;
};

} // namespace pippy::safetensors

#endif // PIPPY_SUPPORT_SAFETENSORS_H
