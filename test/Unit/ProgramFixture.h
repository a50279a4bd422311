//===- ProgramFixture.h - lowering IR to a loaded program, for tests -----===//
//
// The fixture of the stage interpreter's tests: small graph-IR functions
// lowered to one-rank stage executables and loaded.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_TEST_UNIT_PROGRAMFIXTURE_H
#define PIPPY_TEST_UNIT_PROGRAMFIXTURE_H

#include "pippy/Runtime/Program.h"

#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Dialect/Torch/TorchDialect.h"
#include "pippy/Executable/Lowering.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <torch/torch.h>

#include "gtest/gtest.h"

#include <map>
#include <set>
#include <string>

class ProgramTest : public ::testing::Test {
protected:
  ProgramTest() {
    context.loadDialect<mlir::func::FuncDialect, mlir::torch::TorchDialect,
                        mlir::pippy::PippyDialect>();
  }

  /// The program of `ir`'s one-rank executable, loaded.
  pippy::Program compile(const std::string &ir) { return load(lower(ir)); }

  static pippy::Program load(const std::string &bytes,
                             pippy::Program::Semantics semantics =
                                 pippy::Program::Semantics::Training) {
    return pippy::Program::loadFirstStage(bytes, semantics);
  }

  std::string lower(const std::string &ir) {
    module = mlir::parseSourceString<mlir::ModuleOp>(ir, &context);
    EXPECT_TRUE(module) << ir;
    mlir::FailureOr<std::string> bytes = pippy::exe::lowerForOneRank(*module);
    if (mlir::failed(bytes))
      throw pippy::RuntimeError("the lowering failed");
    return *bytes;
  }

  std::string compileError(const std::string &ir) {
    try {
      compile(ir);
    } catch (const pippy::RuntimeError &e) {
      return e.what();
    }
    return "no error";
  }

  /// expectSameTraining for `ir` compiled twice, once with `weights` fused.
  void expectFusedTrainsLikePlain(const std::string &ir,
                                  const std::set<std::string> &weights,
                                  const std::map<std::string, at::Tensor> &init,
                                  at::IntArrayRef inputSizes,
                                  at::ScalarType dtype = at::kFloat);

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

#endif // PIPPY_TEST_UNIT_PROGRAMFIXTURE_H
