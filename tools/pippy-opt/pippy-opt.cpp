//===- pippy-opt.cpp - mlir-opt with pippy's dialects and passes ----------===//
//
// The driver for pippy's compiler passes: the func, arith, tensor and linalg
// dialects, Torch-MLIR's `torch` dialect (textual compatibility), the `pippy`
// dialect and every `--pippy-*` pass, with mlir-opt's standard flags.
//
//===----------------------------------------------------------------------===//

#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Dialect/Torch/TorchDialect.h"
#include "pippy/Passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include <string>
#include <vector>

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::tensor::TensorDialect, mlir::linalg::LinalgDialect,
                  mlir::sparse_tensor::SparseTensorDialect,
                  mlir::torch::TorchDialect, mlir::pippy::PippyDialect>();
  mlir::pippy::registerPippyPasses();
  mlir::pippy::registerPippyPipelines();
  // A failing pass names its problem and location; dumping the whole
  // function after it only buries the message. Users can ask for it back.
  std::vector<char *> args(argv, argv + argc);
  std::string quiet = "--mlir-print-op-on-diagnostic=false";
  bool asked = false;
  for (char *arg : args)
    asked |= llvm::StringRef(arg).starts_with("--mlir-print-op-on-diagnostic");
  if (!asked)
    args.insert(args.begin() + 1, quiet.data());
  // The parser verifies its input and the pass manager each pass's output,
  // so printing need not verify the result once more (on a 100k-op IR that
  // is a fifth of the printing time). When either verification is turned
  // off, the printer keeps its own.
  std::string assumeVerified = "--mlir-print-assume-verified";
  bool unverified = false;
  for (char *arg : args) {
    llvm::StringRef a(arg);
    unverified |= a.starts_with("--mlir-print-assume-verified") ||
                  a.starts_with("-mlir-print-assume-verified") ||
                  a.contains("verify-each=0") ||
                  a.contains("verify-each=false") ||
                  a.contains("disable-verifier-on-parsing");
  }
  if (!unverified)
    args.insert(args.begin() + 1, assumeVerified.data());
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(static_cast<int>(args.size()), args.data(),
                        "pippy compiler driver\n", registry));
}
