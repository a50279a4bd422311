//===- GraphIRTest.cpp - facts about the graph IR -------------------------===//
//
// argumentsReachingResults: which arguments of a block can get a gradient
// from the results that get one. foldContainerRoundTrips: tuples and lists
// read back where they were built.
//
//===----------------------------------------------------------------------===//

#include "pippy/Analysis/GraphIR.h"

#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Dialect/Torch/TorchDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

namespace {

class GradientReachTest : public ::testing::Test {
protected:
  GradientReachTest() {
    context.loadDialect<mlir::func::FuncDialect, mlir::torch::TorchDialect,
                        mlir::pippy::PippyDialect>();
  }

  llvm::SmallVector<bool> reach(const std::string &ir,
                                llvm::ArrayRef<bool> wanted) {
    module = mlir::parseSourceString<mlir::ModuleOp>(ir, &context);
    EXPECT_TRUE(module) << ir;
    auto forward = module->lookupSymbol<mlir::func::FuncOp>("forward");
    return pippy::argumentsReachingResults(forward.getBody().front(), wanted);
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

// %x feeds the first result through a linear, %y only the second.
const char *kTwoResults = R"mlir(
func.func @forward(%x: !torch.vtensor<[2,4],f32>, %y: !torch.vtensor<[2,3],f32>) -> (!torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>) {
  %w = pippy.param "fc.weight" : !torch.vtensor<[3,4],f32>
  %b = pippy.param "fc.bias" : !torch.vtensor<[3],f32>
  %0 = torch.aten.linear %x, %w, %b : !torch.vtensor<[2,4],f32>, !torch.vtensor<[3,4],f32>, !torch.vtensor<[3],f32> -> !torch.vtensor<[2,3],f32>
  %1 = torch.aten.tanh %y : !torch.vtensor<[2,3],f32> -> !torch.vtensor<[2,3],f32>
  return %0, %1 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>
}
)mlir";

TEST_F(GradientReachTest, OnlyArgumentsOfWantedResults) {
  EXPECT_EQ(reach(kTwoResults, {true, false}),
            (llvm::SmallVector<bool>{true, false}));
  EXPECT_EQ(reach(kTwoResults, {false, true}),
            (llvm::SmallVector<bool>{false, true}));
  EXPECT_EQ(reach(kTwoResults, {true, true}),
            (llvm::SmallVector<bool>{true, true}));
  EXPECT_EQ(reach(kTwoResults, {false, false}),
            (llvm::SmallVector<bool>{false, false}));
}

// Every argument has a path of values to the result; only %a's and %c's
// carry a gradient: %b is detached, %d only gives zeros_like its shape,
// %e only gives its size (an int), and %f is an integer tensor.
const char *kCuts = R"mlir(
func.func @forward(%a: !torch.vtensor<[2,3],f32>, %b: !torch.vtensor<[2,3],f32>, %c: !torch.vtensor<[2,3],f32>, %d: !torch.vtensor<[2,3],f32>, %e: !torch.vtensor<[2,3],f32>, %f: !torch.vtensor<[2,3],si64>) -> !torch.vtensor<[4,3],f32> {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %none = torch.constant.none
  %0 = torch.aten.detach %b : !torch.vtensor<[2,3],f32> -> !torch.vtensor<[2,3],f32>
  %1 = torch.aten.add.Tensor %a, %0, %int1 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.int -> !torch.vtensor<[2,3],f32>
  %2 = torch.aten.zeros_like %d, %none, %none, %none, %none, %none : !torch.vtensor<[2,3],f32>, !torch.none, !torch.none, !torch.none, !torch.none, !torch.none -> !torch.vtensor<[2,3],f32>
  %3 = torch.aten.size.int %e, %int0 : !torch.vtensor<[2,3],f32>, !torch.int -> !torch.int
  %4 = torch.aten.mul.Scalar %2, %3 : !torch.vtensor<[2,3],f32>, !torch.int -> !torch.vtensor<[2,3],f32>
  %5 = torch.aten.add.Tensor %c, %4, %int1 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.int -> !torch.vtensor<[2,3],f32>
  %6 = torch.aten.add.Tensor %5, %f, %int1 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],si64>, !torch.int -> !torch.vtensor<[2,3],f32>
  %7 = torch.prim.ListConstruct %1, %6 : (!torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>) -> !torch.list<vtensor>
  %8 = torch.aten.cat %7, %int0 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[4,3],f32>
  return %8 : !torch.vtensor<[4,3],f32>
}
)mlir";

TEST_F(GradientReachTest, DetachSizesAndIntegerTensorsCutThePath) {
  EXPECT_EQ(reach(kCuts, {true}),
            (llvm::SmallVector<bool>{true, false, true, false, false, false}));
}

// A seed inside the block: the first element of a tuple result.
TEST_F(GradientReachTest, FromTheFirstElementOfATuple) {
  const char *ir = R"mlir(
func.func @forward(%x: !torch.vtensor<[2,3],f32>, %y: !torch.vtensor<[2,3],f32>) -> !torch.tuple<vtensor<[2,3],f32>, vtensor<[2,3],f32>> {
  %0 = torch.aten.tanh %x : !torch.vtensor<[2,3],f32> -> !torch.vtensor<[2,3],f32>
  %1 = torch.prim.TupleConstruct %0, %y : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32> -> !torch.tuple<vtensor<[2,3],f32>, vtensor<[2,3],f32>>
  return %1 : !torch.tuple<vtensor<[2,3],f32>, vtensor<[2,3],f32>>
}
)mlir";
  EXPECT_EQ(reach(ir, {true}), (llvm::SmallVector<bool>{true, true}));
  mlir::Block &body =
      module->lookupSymbol<mlir::func::FuncOp>("forward").getBody().front();
  mlir::Operation *tuple = body.getTerminator()->getOperand(0).getDefiningOp();
  EXPECT_EQ(pippy::argumentsReaching(body, {tuple->getOperand(0)}),
            (llvm::SmallVector<bool>{true, false}));
}

// A module returning a tuple that its caller unpacks and indexes, a list
// only unpacked, and a list that an op reads too (mutable: left alone).
TEST(FoldContainerRoundTripsTest, ReadsElementsWhereTheyWereBuilt) {
  mlir::MLIRContext context;
  context.loadDialect<mlir::func::FuncDialect, mlir::torch::TorchDialect,
                      mlir::pippy::PippyDialect>();
  const char *ir = R"mlir(
func.func @forward(%x: !torch.vtensor<[2,3],f32>, %y: !torch.vtensor<[2,3],f32>) -> (!torch.vtensor<[2,3],f32>, !torch.vtensor<[4,3],f32>) {
  %0 = torch.aten.tanh %x : !torch.vtensor<[2,3],f32> -> !torch.vtensor<[2,3],f32>
  %1 = torch.prim.TupleConstruct %0, %y : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32> -> !torch.tuple<vtensor<[2,3],f32>, vtensor<[2,3],f32>>
  %2:2 = torch.prim.TupleUnpack %1 : !torch.tuple<vtensor<[2,3],f32>, vtensor<[2,3],f32>> -> !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>
  %int1 = torch.constant.int 1
  %3 = torch.prim.TupleIndex %1, %int1 : !torch.tuple<vtensor<[2,3],f32>, vtensor<[2,3],f32>>, !torch.int -> !torch.vtensor<[2,3],f32>
  %4 = torch.prim.ListConstruct %2#0, %3 : (!torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>) -> !torch.list<vtensor>
  %5:2 = torch.prim.ListUnpack %4 : !torch.list<vtensor> -> !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>
  %6 = torch.aten.add.Tensor %5#0, %5#1, %int1 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.int -> !torch.vtensor<[2,3],f32>
  %7 = torch.prim.ListConstruct %6, %2#1 : (!torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>) -> !torch.list<vtensor>
  %int0 = torch.constant.int 0
  %8 = torch.aten.cat %7, %int0 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[4,3],f32>
  %9:2 = torch.prim.ListUnpack %7 : !torch.list<vtensor> -> !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>
  return %9#0, %8 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[4,3],f32>
}
)mlir";
  auto module = mlir::parseSourceString<mlir::ModuleOp>(ir, &context);
  ASSERT_TRUE(module);
  auto forward = module->lookupSymbol<mlir::func::FuncOp>("forward");
  mlir::Block &body = forward.getBody().front();
  EXPECT_EQ(pippy::foldContainerRoundTrips(body), 3u);
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*module)));
  std::string text;
  llvm::raw_string_ostream os(text);
  forward.print(os);
  // The tuple and the first list are gone; the add reads tanh and %y.
  EXPECT_EQ(text.find("TupleConstruct"), std::string::npos) << text;
  EXPECT_EQ(text.find("TupleUnpack"), std::string::npos) << text;
  EXPECT_EQ(text.find("TupleIndex"), std::string::npos) << text;
  EXPECT_NE(text.find("torch.aten.add.Tensor %0, %arg1, %int1"),
            std::string::npos)
      << text;
  // The list cat reads stays, and so does its unpacking.
  EXPECT_NE(text.find("torch.prim.ListUnpack %2"), std::string::npos) << text;
  EXPECT_EQ(text.find("torch.prim.ListUnpack %1"), std::string::npos) << text;
}

} // namespace
