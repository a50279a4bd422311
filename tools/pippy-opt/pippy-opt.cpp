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

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::tensor::TensorDialect, mlir::linalg::LinalgDialect,
                  mlir::sparse_tensor::SparseTensorDialect,
                  mlir::torch::TorchDialect, mlir::pippy::PippyDialect>();
  mlir::pippy::registerPippyPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "pippy compiler driver\n", registry));
}
