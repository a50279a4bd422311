//===- MixedPrecisionTest.cpp - --dtype bf16's pieces ---------------------===//
//
// The autocast scope, the transfers that carry their dtype, the received
// inputs' views and the traced convolutions (runtime/MixedPrecision.h).
// That whole runs match PyTorch's autocast is test/Zoo/mixed-precision.test.
//
//===----------------------------------------------------------------------===//

#include "MixedPrecision.h"
#include "TorchCompat.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

using namespace pippy;
using namespace pippy::rt;

namespace {

TEST(MixedPrecision, ScopeTurnsAutocastOnAndRestoresIt) {
  at::Tensor x = at::randn({3, 4}), w = at::randn({5, 4});
  EXPECT_EQ(at::linear(x, w).scalar_type(), at::kFloat);
  {
    AutocastScope scope(Precision::BF16);
    EXPECT_TRUE(compat::autocastEnabled(c10::DeviceType::CPU));
    EXPECT_EQ(at::linear(x, w).scalar_type(), at::kBFloat16);
    // Reductions of the f32 policy stay f32.
    EXPECT_EQ(at::mse_loss(at::linear(x, w), at::zeros({3, 5})).scalar_type(),
              at::kFloat);
  }
  EXPECT_FALSE(compat::autocastEnabled(c10::DeviceType::CPU));
  EXPECT_EQ(at::linear(x, w).scalar_type(), at::kFloat);
  {
    AutocastScope scope(Precision::F32);
    EXPECT_FALSE(compat::autocastEnabled(c10::DeviceType::CPU));
    EXPECT_EQ(at::linear(x, w).scalar_type(), at::kFloat);
  }
}

TEST(MixedPrecision, ScopeDropsCastWeightsAtItsEnd) {
  // A weight changed between two forwards (an optimizer step) must be cast
  // again: the cache of cast weights lives for one scope.
  at::Tensor x = at::ones({1, 2});
  at::Tensor w = at::ones({1, 2}).requires_grad_(true);
  {
    AutocastScope scope(Precision::BF16);
    EXPECT_EQ(at::linear(x, w).item<float>(), 2.0f);
  }
  {
    at::NoGradGuard noGrad;
    w.mul_(3);
  }
  AutocastScope scope(Precision::BF16);
  EXPECT_EQ(at::linear(x, w).item<float>(), 6.0f);
}

TEST(MixedPrecision, TransfersCarryTheProducersDtype) {
  TensorSpec spec{{2, 3}, at::kFloat};
  EXPECT_TRUE(carriesDtype(Precision::BF16, spec));
  EXPECT_FALSE(carriesDtype(Precision::F32, spec));
  EXPECT_FALSE(carriesDtype(Precision::BF16, TensorSpec{{2}, at::kLong}));
  EXPECT_EQ(wireBuffer(spec, at::kCPU).numel(), 7);

  at::Tensor narrow = at::randn({2, 3}).to(at::kBFloat16);
  at::Tensor wire = toWire(narrow, spec);
  EXPECT_EQ(wire.scalar_type(), at::kFloat);
  at::Tensor back = fromWire(wire, spec);
  EXPECT_EQ(back.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::equal(back, narrow));

  at::Tensor full = at::randn({2, 3});
  at::Tensor same = fromWire(toWire(full, spec), spec);
  EXPECT_EQ(same.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(same, full));
}

TEST(MixedPrecision, AWireBufferNamingNoFloatingDtypeIsRefused) {
  TensorSpec spec{{2}, at::kFloat};
  at::Tensor wire = at::zeros({3});
  wire[2] = static_cast<double>(at::kLong);
  try {
    fromWire(wire, spec);
    FAIL() << "decoded a transfer that names an integer dtype";
  } catch (const RuntimeError &e) {
    EXPECT_NE(std::string(e.what()).find("no floating dtype"),
              std::string::npos)
        << e.what();
  }
}

TEST(MixedPrecision, ReceivedInputsAreViewsUnderMixedPrecision) {
  at::Tensor leaf = at::randn({2, 2}).requires_grad_(true);
  EXPECT_TRUE(asActivation(Precision::F32, leaf).is_same(leaf));
  at::Tensor view = asActivation(Precision::BF16, leaf);
  EXPECT_FALSE(view.is_leaf());
  // Gradients still reach the leaf.
  view.sum().backward();
  ASSERT_TRUE(leaf.grad().defined());
  EXPECT_TRUE(at::equal(leaf.grad(), at::ones({2, 2})));
}

TEST(MixedPrecision, TracedConvolutionsTakeTheirModulesDtype) {
  const c10::OperatorHandle traced =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::_convolution", "");
  at::Tensor x = at::randn({1, 2, 5, 5}), w = at::randn({3, 2, 3, 3});
  auto call = [&](bool transposed, at::Tensor weight) {
    torch::jit::Stack stack = {x,
                               weight,
                               c10::IValue(),
                               std::vector<int64_t>{1, 1},
                               std::vector<int64_t>{1, 1},
                               std::vector<int64_t>{1, 1},
                               transposed,
                               std::vector<int64_t>{0, 0},
                               int64_t(1),
                               false,
                               false,
                               true,
                               true};
    callAsTracedConvolution(traced, stack);
    EXPECT_EQ(stack.size(), 1u);
    return stack.at(0).toTensor();
  };
  at::Tensor plain = call(false, w);
  EXPECT_TRUE(at::allclose(plain, at::conv2d(x, w, {}, 1, 1)));
  AutocastScope scope(Precision::BF16);
  // conv2d is in autocast's bf16 list; _convolution itself is not.
  EXPECT_EQ(call(false, w).scalar_type(),
            at::conv2d(x, w, {}, 1, 1).scalar_type());
  EXPECT_EQ(call(false, w).scalar_type(), at::kBFloat16);
  at::Tensor wt = at::randn({2, 3, 3, 3});
  EXPECT_EQ(call(true, wt).scalar_type(),
            at::conv_transpose2d(x, wt, {}, 1, 1).scalar_type());
}

} // namespace
