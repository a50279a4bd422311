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
#include "pippy/Support/Allocator.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  pippy::useLargeAllocatorPages();
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::tensor::TensorDialect, mlir::linalg::LinalgDialect,
                  mlir::sparse_tensor::SparseTensorDialect,
                  mlir::torch::TorchDialect, mlir::pippy::PippyDialect>();
  mlir::pippy::registerPippyPasses();
  mlir::pippy::registerPippyPipelines();
  auto [inputFile, outputFile] = mlir::registerAndParseCLIOptions(
      argc, argv, "pippy compiler driver\n", registry);
  // Defaults that differ from mlir-opt's, set on the parsed options unless
  // the command line gave them.
  auto setDefault = [](llvm::StringRef name, bool value) {
    auto *opt = static_cast<llvm::cl::opt<bool> *>(
        llvm::cl::getRegisteredOptions().lookup(name));
    if (opt && opt->getNumOccurrences() == 0)
      opt->setValue(value);
  };
  // A failing pass names its problem and location; dumping the whole
  // function after it only buries the message. Users can ask for it back.
  setDefault("mlir-print-op-on-diagnostic", false);
  // The parser verifies its input and the pass manager each pass's output,
  // so printing need not verify the result once more (on a 100k-op IR that
  // is a fifth of the printing time). When either verification is turned
  // off, the printer keeps its own.
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldVerifyPasses() && config.shouldVerifyOnParsing())
    setDefault("mlir-print-assume-verified", true);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, inputFile, outputFile, registry));
}
