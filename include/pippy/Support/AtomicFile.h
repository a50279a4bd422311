//===- AtomicFile.h - writing a file all at once ----------------*- C++ -*-===//
//
// Every file pippy writes (IR, weights, checkpoints, metrics, traces,
// executables) goes through `writeFileAtomically`: the bytes go to a new
// temporary file beside the destination (a unique name, so two writers
// never share it), which is then renamed over it. A reader sees the old
// file or the new one, never a part; a failure leaves the old one as it was.
//
// Reading goes through `readFileBytes` (or `FileBytes`, which maps large
// files instead of copying them).
//
// No LLVM or libtorch: the runtime-only build uses it too.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_SUPPORT_ATOMICFILE_H
#define PIPPY_SUPPORT_ATOMICFILE_H

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace pippy {

/// Writes `bytes` to `path` atomically. Returns an error message naming
/// `path` ("cannot write PATH: No space left on device"), or empty. A path
/// that is a device or a pipe (`/dev/null`) is written in place: only a
/// regular file is replaced.
std::string writeFileAtomically(const std::string &path,
                                std::string_view bytes);

/// Whether writeFileAtomically could write `path` now (a new file can be
/// made beside it, and it is no folder): an error message as it would
/// give, or empty. For outputs written only at the end of a long run.
std::string checkWritable(const std::string &path);

/// Whether `a` and `b` name one file: the same file where both exist
/// (links and `./` included), else the same absolute, normalised path.
bool sameFile(const std::string &a, const std::string &b);

/// Why a read failed: errno, and whether it failed opening the file.
struct ReadError {
  int code = 0; ///< 0: no error
  bool opening = false;
};
/// Reads the whole of `path` into `bytes` (the one file reader of pippy).
ReadError readFileBytes(const std::string &path, std::string &bytes);

/// A file's bytes, mapped read-only where the file can be mapped (pages are
/// read when touched) and read into memory otherwise. Shared: copies view
/// the same bytes, which stay until the last copy goes.
class FileBytes {
public:
  /// The bytes of `path`, or none with `error` set.
  static std::optional<FileBytes> open(const std::string &path,
                                       ReadError &error);
  /// Bytes already in memory.
  explicit FileBytes(std::string bytes = std::string());
  std::string_view view() const { return bytes; }

private:
  FileBytes(std::shared_ptr<const void> owner, std::string_view bytes)
      : owner(std::move(owner)), bytes(bytes) {}
  std::shared_ptr<const void> owner;
  std::string_view bytes;
};

/// readFileBytes with its error as a message
/// ("cannot open input file 'PATH': No such file or directory"), or empty.
std::string readFile(const std::string &path, std::string &bytes);

} // namespace pippy

#endif // PIPPY_SUPPORT_ATOMICFILE_H
