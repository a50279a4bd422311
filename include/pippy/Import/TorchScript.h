//===- TorchScript.h - import traced TorchScript modules --------*- C++ -*-===//
//
// Turns a `torch.jit.trace`d module saved as `.pt` into pippy's graph IR:
// `func.func @forward` of value-semantic `torch` ops with static shapes,
// `pippy.param` for every parameter and buffer, module paths as NameLocs.
// The parameter values are written to a safetensors file that the module's
// `pippy.weights` attribute names.
//
// This header exposes no libtorch type: the importer's translation units
// (lib/Import/TorchScript*.cpp) are the only place where the two worlds meet
// (libtorch throws, LLVM does not).
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_IMPORT_TORCHSCRIPT_H
#define PIPPY_IMPORT_TORCHSCRIPT_H

#include "pippy/Import/InputShapes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

namespace pippy {

struct ImportOptions {
  /// The saved TorchScript module.
  std::string modulePath;
  /// One shape per `forward` argument, at micro-batch size.
  std::vector<InputShape> inputs;
  /// Where the parameter values go; recorded in `pippy.weights`.
  std::string weightsPath;
};

/// Imports the module. An unsupported construct is an error naming the op,
/// its module path and the reason.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importTorchScript(mlir::MLIRContext &context, const ImportOptions &options);

} // namespace pippy

#endif // PIPPY_IMPORT_TORCHSCRIPT_H
