//===- IRCompiler.h - pippy-run's lowering of IR ----------------*- C++ -*-===//
//
// The Compiler the full build's pippy-run hands the runtime: parses a graph
// or pipeline IR (text or bytecode) and lowers it to stage executables with
// the run's schedule, micro-batches and world size.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_EXECUTABLE_IRCOMPILER_H
#define PIPPY_EXECUTABLE_IRCOMPILER_H

#include "pippy/Runtime/Run.h"

namespace pippy::exe {

class IRCompiler : public Compiler {
public:
  std::optional<LoweredRanks> lower(const RunOptions &options, int numRanks,
                                    const std::string &folder,
                                    std::string &error) override;
};

} // namespace pippy::exe

#endif // PIPPY_EXECUTABLE_IRCOMPILER_H
