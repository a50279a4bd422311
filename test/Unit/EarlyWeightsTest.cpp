//===- EarlyWeightsTest.cpp - waits filled with weight gradients ----------===//

#include "pippy/Executable/EarlyWeights.h"
#include "pippy/Schedule/Schedule.h"

#include <gtest/gtest.h>

using namespace pippy;
using exe::ActionKind;
using exe::EarlyWeights;

namespace {

EarlyWeights::Step I(int s, int m) { return {ActionKind::BackwardInput, s, m}; }
EarlyWeights::Step W(int s, int m) {
  return {ActionKind::BackwardWeight, s, m};
}
EarlyWeights::Step B(int s, int m) { return {ActionKind::Backward, s, m}; }
EarlyWeights::Step F(int s, int m) { return {ActionKind::Forward, s, m}; }
EarlyWeights::Step recv(int s, int m) { return {ActionKind::RecvB, s, m}; }

TEST(EarlyWeights, PicksTheFirstWWhoseInputGradientsAreDone) {
  EarlyWeights early({I(1, 0), recv(1, 1), F(1, 2), W(1, 0), I(1, 1), W(1, 1)});
  EXPECT_EQ(early.pick(1), std::optional<size_t>(3));
  early.ranEarly(3);
  EXPECT_TRUE(early.wasRunEarly(3));
  // W(1, 1)'s I is after the receive: nothing else may run yet.
  EXPECT_EQ(early.pick(1), std::nullopt);
  early.reset();
  EXPECT_FALSE(early.wasRunEarly(3));
}

TEST(EarlyWeights, KeepsEachStagesOrder) {
  // W(0, 1) is ready but W(0, 0) before it is not: running it first would
  // add stage 0's micro-batches in another order. Stage 2's may run.
  EarlyWeights early(
      {I(0, 1), I(2, 0), recv(1, 0), I(0, 0), W(0, 0), W(0, 1), W(2, 0)});
  EXPECT_EQ(early.pick(2), std::optional<size_t>(6));
  // A whole backward of the stage still to come holds its W's back too.
  EarlyWeights withB({I(0, 0), recv(1, 0), B(0, 1), W(0, 0)});
  EXPECT_EQ(withB.pick(1), std::nullopt);
}

TEST(EarlyWeights, TheSimulatorFillsAWaitAsPippyRunDoes) {
  // Rank 0 waits for B1 from 4 to 6 (rank 1 computes W0, F1 and I1 first):
  // filling the wait with W0 ends the step at 8 instead of 9.
  llvm::Expected<schedule::Schedule> s = schedule::parse(
      "rank0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0I0 0RECV_B1 0I1 0W0 0W1 "
      "0STEP\n"
      "rank1: 1RECV_F0 1F0 1I0 1SEND_B0 1W0 1RECV_F1 1F1 1I1 1SEND_B1 1W1 "
      "1STEP\n",
      2, 2);
  ASSERT_TRUE(static_cast<bool>(s)) << llvm::toString(s.takeError());
  schedule::Topology topo = schedule::Topology::chain(2);
  ASSERT_FALSE(static_cast<bool>(schedule::check(*s, topo)));
  schedule::StageCosts costs;
  costs.forward = {1, 1};
  costs.backward = {2, 2};
  costs.weight = {1, 1};
  EXPECT_EQ(schedule::simulate(*s, topo, costs).makespan, 9);
  costs.fillWaits = true;
  schedule::Simulation filled = schedule::simulate(*s, topo, costs);
  EXPECT_EQ(filled.makespan, 8);
  std::vector<std::string> rank0;
  for (const schedule::SimulatedBox &box : filled.boxes[0])
    rank0.push_back(box.action.str() + "@" + std::to_string(int(box.start)));
  EXPECT_EQ(rank0, (std::vector<std::string>{"0F0@0", "0F1@1", "0I0@3", "0W0@4",
                                             "0I1@6", "0W1@7"}));
}

} // namespace
