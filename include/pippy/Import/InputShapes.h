//===- InputShapes.h - the --input-shapes argument --------------*- C++ -*-===//
//
// `--input-shapes 4x32xf32,2x16xsi64`: one MLIR-style shaped type per
// `forward` argument, dtypes spelled as in Torch-MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_IMPORT_INPUTSHAPES_H
#define PIPPY_IMPORT_INPUTSHAPES_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pippy {

/// One tensor argument: static sizes and a dtype spelled as in Torch-MLIR
/// (`f32`, `f64`, `f16`, `bf16`, `si64`, `si32`, `si16`, `si8`, `ui8`, `i1`).
struct InputShape {
  std::vector<int64_t> sizes;
  std::string dtype;
};

/// Parses a comma-separated list; errors name the offending argument (by
/// position, from 0) and say what was expected.
llvm::Expected<std::vector<InputShape>> parseInputShapes(llvm::StringRef text);

} // namespace pippy

#endif // PIPPY_IMPORT_INPUTSHAPES_H
