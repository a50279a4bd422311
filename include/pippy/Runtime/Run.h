//===- Run.h - what pippy-run does ------------------------------*- C++ -*-===//
//
// pippy-run's whole behaviour behind its `main`: parse the options, lower
// an IR program to stage executables when the build can (the full build
// passes a Compiler), spawn local ranks or be one, and run this rank's
// executable. The runtime-only build passes no Compiler and runs only
// executables. No LLVM, MLIR or libtorch type appears here.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_RUN_H
#define PIPPY_RUNTIME_RUN_H

#include "pippy/Runtime/Mesh.h"
#include "pippy/Runtime/Options.h"

#include <optional>
#include <string>
#include <vector>

namespace pippy {

/// Lowers IR to stage executables (the full build's lib/Executable).
/// A program lowered for a world: each rank's executable, and the
/// schedule in torch.distributed.pipelining's CSV form.
struct LoweredRanks {
  std::vector<std::string> ranks;
  std::string scheduleCsv;
};

class Compiler {
public:
  virtual ~Compiler() = default;
  /// Lowers `options.programPath` for a world of `numRanks` ranks, or none
  /// with `error` set to the diagnostics. The weights file is recorded
  /// relative to `folder` (where the executables will be written), or as
  /// an absolute path when `folder` is empty.
  virtual std::optional<LoweredRanks> lower(const RunOptions &options,
                                            int numRanks,
                                            const std::string &folder,
                                            std::string &error) = 0;
};

/// The mesh --dp and --tp make of a world of `world` ranks; throws
/// RuntimeError when they do not divide it.
Mesh meshOf(const RunOptions &options, int world);

/// pippy-run's main: the exit code.
int runMain(int argc, char **argv, Compiler *compiler);

} // namespace pippy

#endif // PIPPY_RUNTIME_RUN_H
