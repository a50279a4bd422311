//===- ExtraOpsTest.cpp - pippy's operators in TorchScript's table --------===//
//
// registerMissingAtenOperators, which pippy-import calls so that a module
// PyTorch 2.x saved loads on libtorch 1.13: each missing aten:: operator is
// registered once, with its longest schema, and runs pippy's own kernel.
//
//===----------------------------------------------------------------------===//

#include "ExtraOps.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/runtime/operator.h>

namespace {

c10::Symbol symbol(const char *name) {
  return c10::Symbol::fromQualString(name);
}

TEST(ExtraOpsTest, RegistersAMissingOperatorOnceWithItsLongestSchema) {
  c10::Symbol sdpa = symbol("aten::scaled_dot_product_attention");
  if (!torch::jit::getAllOperatorsFor(sdpa).empty())
    GTEST_SKIP() << "this libtorch has scaled_dot_product_attention";
  pippy::rt::registerMissingAtenOperators();
  pippy::rt::registerMissingAtenOperators();
  auto ops = torch::jit::getAllOperatorsFor(sdpa);
  ASSERT_EQ(ops.size(), 1u);
  const auto &args = ops[0]->schema().arguments();
  ASSERT_EQ(args.size(), 8u);
  EXPECT_EQ(args.back().name(), "enable_gqa");
}

TEST(ExtraOpsTest, RegistersNoPrims) {
  c10::Symbol var = symbol("prims::var");
  size_t before = torch::jit::getAllOperatorsFor(var).size();
  pippy::rt::registerMissingAtenOperators();
  EXPECT_EQ(torch::jit::getAllOperatorsFor(var).size(), before);
}

TEST(ExtraOpsTest, TheRegisteredOperatorRunsAttention) {
  pippy::rt::registerMissingAtenOperators();
  auto ops = torch::jit::getAllOperatorsFor(
      symbol("aten::scaled_dot_product_attention"));
  ASSERT_FALSE(ops.empty());
  at::manual_seed(0);
  at::Tensor q = at::randn({1, 2, 3, 4}), k = at::randn({1, 2, 5, 4}),
             v = at::randn({1, 2, 5, 4});
  torch::jit::Stack stack{q, k, v, c10::IValue(), 0.0, false, 0.5, false};
  ops[0]->getOperation()(stack);
  ASSERT_EQ(stack.size(), 1u);
  at::Tensor expected =
      at::matmul(at::softmax(at::matmul(q, k.transpose(-2, -1)) * 0.5, -1), v);
  EXPECT_TRUE(at::allclose(stack[0].toTensor(), expected, 1e-5, 1e-6));
}

} // namespace
