//===- Passes.h - pippy compiler passes -------------------------*- C++ -*-===//

#ifndef PIPPY_PASSES_PASSES_H
#define PIPPY_PASSES_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir::pippy {

#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Registers `--pippy-split`.
void registerPippyPipelines();

} // namespace mlir::pippy

#endif // PIPPY_PASSES_PASSES_H
