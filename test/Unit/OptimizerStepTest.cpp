//===- OptimizerStepTest.cpp - a stage's optimizer step alone -------------===//
//
// stepOnly (runtime/Training.h) steps some of an optimizer's parameters
// and leaves the others, values, gradients and state, as they were; steps
// taken stage by stage give the same bits as one step over all.
//
//===----------------------------------------------------------------------===//

#include "TorchCompat.h"
#include "Training.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace {

using namespace pippy;
using namespace pippy::rt;

struct Params {
  std::vector<at::Tensor> all;
  explicit Params(int n) {
    torch::manual_seed(0);
    for (int i = 0; i < n; ++i) {
      all.push_back(torch::randn({5, 3}).requires_grad_(true));
      all.back().mutable_grad() = torch::randn({5, 3});
    }
  }
};

RunOptions adamw() {
  RunOptions o;
  o.optimizer = OptimizerKind::AdamW;
  o.lr = 0.1;
  return o;
}

TEST(OptimizerStep, StepOnlyLeavesTheOtherParameters) {
  Params p(3);
  at::Tensor before1 = p.all[1].detach().clone();
  at::Tensor grad1 = p.all[1].grad();
  auto optimizer = makeOptimizer(adamw(), p.all);
  at::Tensor before0 = p.all[0].detach().clone();
  stepOnly(*optimizer, {p.all[0], p.all[2]});
  EXPECT_FALSE(at::equal(p.all[0], before0));
  EXPECT_TRUE(at::equal(p.all[1], before1));
  // Its gradient is back, the same tensor, and it has no state yet.
  EXPECT_TRUE(p.all[1].grad().is_same(grad1));
  EXPECT_EQ(optimizer->state().count(compat::optimizerStateKey(p.all[1])), 0u);
  EXPECT_EQ(optimizer->state().count(compat::optimizerStateKey(p.all[0])), 1u);
}

TEST(OptimizerStep, StageByStageIsOneStepBitForBit) {
  for (OptimizerKind kind : {OptimizerKind::Sgd, OptimizerKind::AdamW}) {
    RunOptions o = adamw();
    o.optimizer = kind;
    o.momentum = 0.9;
    Params whole(4), staged(4);
    auto a = makeOptimizer(o, whole.all);
    auto b = makeOptimizer(o, staged.all);
    for (int step = 0; step < 3; ++step) {
      a->step();
      stepOnly(*b, {staged.all[2], staged.all[3]});
      stepOnly(*b, {staged.all[0], staged.all[1]});
    }
    for (size_t i = 0; i < whole.all.size(); ++i)
      EXPECT_TRUE(at::equal(whole.all[i], staged.all[i])) << i;
    // The check can fail: the steps moved the parameters.
    EXPECT_FALSE(at::equal(whole.all[0], Params(4).all[0]));
  }
}

} // namespace
