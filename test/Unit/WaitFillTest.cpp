//===- WaitFillTest.cpp - waits filled with later work --------------------===//

#include "pippy/Executable/WaitFill.h"
#include "pippy/Schedule/Schedule.h"

#include <gtest/gtest.h>

using namespace pippy;
using exe::ActionKind;
using exe::WaitFill;

namespace {

WaitFill::Step I(int s, int m) { return {ActionKind::BackwardInput, s, m}; }
WaitFill::Step W(int s, int m) { return {ActionKind::BackwardWeight, s, m}; }
WaitFill::Step B(int s, int m) { return {ActionKind::Backward, s, m}; }
WaitFill::Step F(int s, int m) { return {ActionKind::Forward, s, m}; }
WaitFill::Step recv(int s, int m) { return {ActionKind::RecvB, s, m}; }
WaitFill::Step recvF(int s, int m) { return {ActionKind::RecvF, s, m}; }
WaitFill::Step step(int s) { return {ActionKind::Step, s, 0}; }
WaitFill::Step sendB(int s, int m) { return {ActionKind::SendB, s, m}; }

/// A checked schedule on a chain of `stages`, with each stage's forward
/// costing 1, backward 2 (I 1 and W 1) and STEP `step`.
struct Simulated {
  schedule::Schedule schedule;
  schedule::Topology topo;
  schedule::StageCosts costs;

  Simulated(const char *text, int stages, int microbatches, double step)
      : topo(schedule::Topology::chain(stages)) {
    llvm::Expected<schedule::Schedule> s =
        schedule::parse(text, stages, microbatches);
    EXPECT_TRUE(static_cast<bool>(s)) << llvm::toString(s.takeError());
    schedule = std::move(*s);
    llvm::Error invalid = schedule::check(schedule, topo);
    EXPECT_FALSE(static_cast<bool>(invalid))
        << llvm::toString(std::move(invalid));
    costs.forward.assign(stages, 1);
    costs.backward.assign(stages, 2);
    costs.weight.assign(stages, 1);
    costs.step.assign(stages, step);
  }
  schedule::Simulation run(bool fillWaits, int fillForwards = 0) {
    costs.fillWaits = fillWaits;
    costs.fillForwards = fillForwards;
    return schedule::simulate(schedule, topo, costs);
  }
};

/// Rank `r`'s compute boxes as "action@start".
std::vector<std::string> boxes(const schedule::Simulation &sim, int r) {
  std::vector<std::string> text;
  for (const schedule::SimulatedBox &box : sim.boxes[r])
    text.push_back(box.action.str() + "@" + std::to_string(int(box.start)));
  return text;
}

TEST(WaitFill, PicksTheFirstWWhoseInputGradientsAreDone) {
  WaitFill early({I(1, 0), recv(1, 1), F(1, 2), W(1, 0), I(1, 1), W(1, 1)});
  EXPECT_EQ(early.pick(1), std::optional<size_t>(3));
  early.ranEarly(3);
  EXPECT_TRUE(early.wasRunEarly(3));
  // W(1, 1)'s I is after the receive: nothing else may run yet.
  EXPECT_EQ(early.pick(1), std::nullopt);
  early.reset();
  EXPECT_FALSE(early.wasRunEarly(3));
}

TEST(WaitFill, KeepsEachStagesOrder) {
  // W(0, 1) is ready but W(0, 0) before it is not: running it first would
  // add stage 0's micro-batches in another order. Stage 2's may run.
  WaitFill early(
      {I(0, 1), I(2, 0), recv(1, 0), I(0, 0), W(0, 0), W(0, 1), W(2, 0)});
  EXPECT_EQ(early.pick(2), std::optional<size_t>(6));
  // A whole backward of the stage still to come holds its W's back too.
  WaitFill withB({I(0, 0), recv(1, 0), B(0, 1), W(0, 0)});
  EXPECT_EQ(withB.pick(1), std::nullopt);
}

TEST(WaitFill, PicksTheStepOfAStageWithNothingLeft) {
  // Stage 3's work is done (its send does not count); stage 0 still waits
  // for a gradient and has its I and W to run.
  WaitFill fill({F(0, 0), F(3, 0), I(3, 0), sendB(3, 0), W(3, 0), recv(0, 0),
                 I(0, 0), W(0, 0), step(0), step(3)});
  EXPECT_EQ(fill.pickStep(5), std::optional<size_t>(9));
  fill.ranEarly(9);
  EXPECT_EQ(fill.pickStep(5), std::nullopt);
  // Before stage 3's W has run, its STEP waits too; once W ran early, not.
  WaitFill before({F(3, 0), I(3, 0), recv(0, 0), W(3, 0), step(3)});
  EXPECT_EQ(before.pickStep(2), std::nullopt);
  before.ranEarly(3);
  EXPECT_EQ(before.pickStep(2), std::optional<size_t>(4));
}

TEST(WaitFill, TheSimulatorStepsAStageInAWait) {
  // Two ranks, four stages in a V: rank 0 holds stages 0 and 3. After 3W0
  // (5 to 6) rank 0 waits for 0's gradient until 8; stage 3's STEP fills
  // the wait (6 to 7) and the step ends at 11 instead of 12. Rank 1 holds
  // nothing it could step early: its stages finish last.
  Simulated v(
      "rank0: 0F0 0SEND_F0 3RECV_F0 3F0 3I0 3SEND_B0 3W0 0RECV_B0 0I0 0W0 "
      "0STEP 3STEP\n"
      "rank1: 1RECV_F0 1F0 2F0 2SEND_F0 2RECV_B0 2I0 2W0 1I0 1SEND_B0 1W0 "
      "1STEP 2STEP\n",
      4, 1, /*step=*/1);
  EXPECT_EQ(v.run(false).makespan, 12);
  schedule::Simulation filled = v.run(true);
  EXPECT_EQ(filled.makespan, 11);
  // (STEP draws no box.)
  EXPECT_EQ(boxes(filled, 0),
            (std::vector<std::string>{"0F0@0", "3F0@3", "3I0@4", "3W0@5",
                                      "0I0@8", "0W0@9"}));
  EXPECT_EQ(filled.busy[0], 8);
}

TEST(WaitFill, TheSimulatorFillsAWaitAsPippyRunDoes) {
  // Rank 0 waits for B1 from 4 to 6 (rank 1 computes W0, F1 and I1 first):
  // filling the wait with W0 ends the step at 8 instead of 9.
  Simulated chain(
      "rank0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0I0 0RECV_B1 0I1 0W0 0W1 "
      "0STEP\n"
      "rank1: 1RECV_F0 1F0 1I0 1SEND_B0 1W0 1RECV_F1 1F1 1I1 1SEND_B1 1W1 "
      "1STEP\n",
      2, 2, /*step=*/0);
  EXPECT_EQ(chain.run(false).makespan, 9);
  schedule::Simulation filled = chain.run(true);
  EXPECT_EQ(filled.makespan, 8);
  EXPECT_EQ(boxes(filled, 0),
            (std::vector<std::string>{"0F0@0", "0F1@1", "0I0@3", "0W0@4",
                                      "0I1@6", "0W1@7"}));
}

TEST(WaitFill, PicksAForwardWhoseInputHasCome) {
  // Rank 1 of a V waits for 2's gradient; 1F1's input may have come.
  WaitFill fill({recvF(1, 0), F(1, 0), F(2, 0), recv(2, 0), I(2, 0),
                 recvF(1, 1), F(1, 1), F(2, 1)});
  auto none = [](size_t) { return false; };
  auto all = [](size_t) { return true; };
  // 2F1 takes 1F1's output: only 1F1, with its receive, may go first.
  EXPECT_EQ(fill.pickForward(3, none), std::nullopt);
  auto pick = fill.pickForward(3, all);
  ASSERT_TRUE(pick);
  EXPECT_EQ(pick->first, 6u);
  EXPECT_EQ(pick->second, std::optional<size_t>(5));
  EXPECT_EQ(fill.forwardsAhead(3), 0);
  fill.ranEarly(5);
  fill.ranEarly(6);
  EXPECT_EQ(fill.forwardsAhead(3), 1);
  // Now 2F1 may run: its local input is there and it receives nothing.
  auto next = fill.pickForward(3, none);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->first, 7u);
  EXPECT_EQ(next->second, std::nullopt);
  // Once the order reaches an early forward, it no longer counts ahead.
  EXPECT_EQ(fill.forwardsAhead(7), 0);
}

TEST(WaitFill, KeepsEachStagesForwardsInOrder) {
  // 0F2 takes the data alone, but 0F1 before it still waits for nothing
  // either: the first may go, never the second before it.
  WaitFill fill({F(0, 0), recv(0, 0), I(0, 0), F(0, 1), F(0, 2)});
  auto all = [](size_t) { return true; };
  EXPECT_EQ(fill.pickForward(1, all)->first, 3u);
  fill.ranEarly(3);
  EXPECT_EQ(fill.pickForward(1, all)->first, 4u);
  // A wait for an activation is not filled with a forward: not with the
  // one it waits for, nor with a later one (1F1 would delay 1F0).
  WaitFill waiting({recvF(1, 0), F(1, 0), recvF(1, 1), F(1, 1)});
  EXPECT_EQ(waiting.pickForward(0, all), std::nullopt);
  WaitFill first({recvF(1, 0), F(1, 0), F(0, 1)});
  EXPECT_EQ(first.pickForward(0, all), std::nullopt);
}

TEST(WaitFill, TheSimulatorFillsAWaitWithAForward) {
  // Rank 1 of a V waits for 2's gradient from 3 to 5 (rank 0 runs 3F0 and
  // 3I0); with one forward ahead allowed it runs 1F1 (3 to 4) meanwhile and
  // the step ends at 17 instead of 18, holding 3 micro-batches at once
  // instead of 2.
  Simulated v(
      "rank0: 0F0 0SEND_F0 0F1 0SEND_F1 3RECV_F0 3F0 3I0 3SEND_B0 3W0 "
      "3RECV_F1 3F1 3I1 3SEND_B1 3W1 0RECV_B0 0I0 0W0 0RECV_B1 0I1 0W1 "
      "0STEP 3STEP\n"
      "rank1: 1RECV_F0 1F0 2F0 2SEND_F0 2RECV_B0 2I0 2W0 1I0 "
      "1SEND_B0 1W0 1RECV_F1 1F1 2F1 2SEND_F1 2RECV_B1 2I1 2W1 1I1 1SEND_B1 "
      "1W1 1STEP 2STEP\n",
      4, 2, /*step=*/0);
  schedule::Simulation ordered = v.run(true);
  schedule::Simulation filled = v.run(true, 1);
  EXPECT_EQ(ordered.makespan, 18);
  EXPECT_EQ(filled.makespan, 17);
  EXPECT_EQ(ordered.peakInflight[1], 2);
  EXPECT_EQ(filled.peakInflight[1], 3);
  EXPECT_EQ(boxes(filled, 1)[2], "1F1@3");
  // Without --fill-waits nothing fills a wait.
  EXPECT_EQ(v.run(false, 1).makespan, 18);
}

} // namespace
