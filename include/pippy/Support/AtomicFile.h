//===- AtomicFile.h - writing a file all at once ----------------*- C++ -*-===//
//
// Every file pippy writes (IR, weights, checkpoints, metrics, traces,
// executables) goes through `writeFileAtomically`: the bytes go to a new
// temporary file beside the destination (a unique name, so two writers
// never share it), which is then renamed over it. A reader sees the old
// file or the new one, never a part; a failure leaves the old one as it was.
//
// No LLVM or libtorch: the runtime-only build uses it too.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_SUPPORT_ATOMICFILE_H
#define PIPPY_SUPPORT_ATOMICFILE_H

#include <string>
#include <string_view>

namespace pippy {

/// Writes `bytes` to `path` atomically. Returns an error message naming
/// `path` ("cannot write PATH: No space left on device"), or empty.
std::string writeFileAtomically(const std::string &path,
                                std::string_view bytes);

/// Why a read failed: errno, and whether it failed opening the file.
struct ReadError {
  int code = 0; ///< 0: no error
  bool opening = false;
};
/// Reads the whole of `path` into `bytes` (the one file reader of pippy).
ReadError readFileBytes(const std::string &path, std::string &bytes);

/// readFileBytes with its error as a message
/// ("cannot open input file 'PATH': No such file or directory"), or empty.
std::string readFile(const std::string &path, std::string &bytes);

} // namespace pippy

#endif // PIPPY_SUPPORT_ATOMICFILE_H
