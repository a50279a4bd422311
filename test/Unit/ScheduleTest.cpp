//===- ScheduleTest.cpp - schedule generators, checker, simulator ---------===//

#include "pippy/Schedule/Schedule.h"

#include "gtest/gtest.h"

using namespace pippy::schedule;

namespace {

/// One stage per rank.
Schedule mustGenerate(Kind kind, const Topology &topo, int M,
                      bool training = true) {
  llvm::Expected<Schedule> s =
      generate(kind, topo, topo.numStages, M, training);
  EXPECT_TRUE(static_cast<bool>(s)) << llvm::toString(s.takeError());
  return std::move(*s);
}

std::string checkError(const Schedule &s, const Topology &topo) {
  llvm::Error err = check(s, topo);
  return err ? llvm::toString(std::move(err)) : "";
}

/// Stage 0 also feeds stage 2 directly (a skip connection), and stages 0
/// and 3 share a tied weight.
Topology skipTopology() {
  Topology topo = Topology::chain(4);
  topo.producers[2].push_back(0);
  topo.tiedGroups.push_back({0, 3});
  return topo;
}

} // namespace

TEST(Schedule, ActionTextRoundTrips) {
  for (const char *text :
       {"1F2", "0B3", "2SEND_F1", "1RECV_F10", "3SEND_B0", "0RECV_B7",
        "0ALLREDUCE_TIED", "12STEP", "0W", "2I0", "2W0", "3W12"}) {
    std::optional<Action> a = parseAction(text);
    ASSERT_TRUE(a.has_value()) << text;
    EXPECT_EQ(a->str(), text);
  }
  EXPECT_EQ(parseAction("2W0")->op, Op::BackwardWeight);
  EXPECT_EQ(parseAction("2W")->op, Op::Weight);
  for (const char *bad : {"", "F1", "1F", "1X2", "1STEP3", "1SEND_F", "a1F2",
                          "1I", "1F2x", "1ALLREDUCE_TIED0"})
    EXPECT_FALSE(parseAction(bad).has_value()) << bad;
}

TEST(Schedule, GeneratedSchedulesPassTheChecker) {
  for (Kind kind : {Kind::GPipe, Kind::OneFOneB, Kind::ZBH1})
    for (int S = 1; S <= 5; ++S)
      for (int M = 1; M <= 9; ++M)
        for (bool training : {true, false}) {
          Topology topo = Topology::chain(S);
          Schedule s = mustGenerate(kind, topo, M, training);
          EXPECT_EQ(checkError(s, topo), "")
              << kindName(kind) << " S=" << S << " M=" << M;
        }
  for (Kind kind : {Kind::GPipe, Kind::OneFOneB, Kind::ZBH1})
    for (int M = 1; M <= 9; ++M) {
      Topology topo = skipTopology();
      Schedule s = mustGenerate(kind, topo, M);
      EXPECT_EQ(checkError(s, topo), "") << kindName(kind) << " M=" << M;
    }
}

TEST(Schedule, OneFOneBShape) {
  Topology topo = Topology::chain(2);
  Schedule s = mustGenerate(Kind::OneFOneB, topo, 3);
  // Rank 0 runs one forward ahead, then alternates; the last rank
  // alternates from the start.
  EXPECT_EQ(s.str(), "rank0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0F2 "
                     "0SEND_F2 0RECV_B1 0B1 0RECV_B2 0B2 0STEP\n"
                     "rank1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 "
                     "1SEND_B1 1RECV_F2 1F2 1B2 1SEND_B2 1STEP\n");
}

TEST(Schedule, SplitBackwardFillsTheFirstStagesWait) {
  Topology topo = Topology::chain(2);
  llvm::Expected<Schedule> s = generate(Kind::OneFOneB, topo, 2, 3, true, true);
  ASSERT_TRUE(static_cast<bool>(s));
  EXPECT_EQ(s->str(), "rank0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0F2 "
                      "0SEND_F2 0RECV_B1 0B1 0W 0RECV_B2 0B2 0STEP\n"
                      "rank1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 "
                      "1SEND_B1 1RECV_F2 1F2 1B2 1SEND_B2 1STEP\n");
  EXPECT_EQ(checkError(*s, topo), "");
  llvm::Expected<Schedule> back = parse(s->str(), 2, 3);
  ASSERT_TRUE(static_cast<bool>(back));
  EXPECT_EQ(back->str(), s->str());
  // GPipe and forward-only schedules have no W.
  EXPECT_EQ(mustGenerate(Kind::GPipe, topo, 3).str().find("W "),
            std::string::npos);
  llvm::Expected<Schedule> bad = parse("rank0: 0F0 0SEND_F0 0W\nrank1: "
                                       "1RECV_F0 1F0\n",
                                       2, 1, false);
  ASSERT_TRUE(static_cast<bool>(bad));
  EXPECT_NE(checkError(*bad, topo).find("0W in a forward-only schedule"),
            std::string::npos);
}

TEST(Schedule, TextFormRoundTrips) {
  Topology topo = skipTopology();
  Schedule s = mustGenerate(Kind::OneFOneB, topo, 4);
  llvm::Expected<Schedule> back = parse(s.str(), 4, 4);
  ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->str(), s.str());
  EXPECT_EQ(checkError(*back, topo), "");
}

TEST(Schedule, PeakInflightAndBubble) {
  // Equal stage costs, backward twice the forward, free transfers: GPipe's
  // and 1F1B's bubble is (S-1)/(M+S-1); GPipe holds M micro-batches on
  // every rank, 1F1B at most S-r on rank r.
  for (int S = 2; S <= 4; ++S)
    for (int M = 1; M <= 8; ++M) {
      Topology topo = Topology::chain(S);
      StageCosts costs;
      costs.forward.assign(S, 1.0);
      costs.backward.assign(S, 2.0);
      Simulation gpipe =
          simulate(mustGenerate(Kind::GPipe, topo, M), topo, costs);
      Simulation onef =
          simulate(mustGenerate(Kind::OneFOneB, topo, M), topo, costs);
      double ideal = double(S - 1) / (M + S - 1);
      EXPECT_NEAR(gpipe.bubbleFraction, ideal, 1e-12) << S << " " << M;
      EXPECT_NEAR(onef.bubbleFraction, ideal, 1e-12) << S << " " << M;
      EXPECT_EQ(gpipe.makespan, 3.0 * (M + S - 1));
      for (int r = 0; r < S; ++r) {
        EXPECT_EQ(gpipe.peakInflight[r], M);
        EXPECT_EQ(onef.peakInflight[r], std::min(S - r, M));
      }
    }
}

TEST(Schedule, DeadlockPrintsTheGrid) {
  Topology topo = Topology::chain(2);
  // Rank 0 waits for micro-batch 0's gradient before sending its
  // activations: neither rank can move after the first tick.
  llvm::Expected<Schedule> s = parse("rank0: 0F0 0RECV_B0 0SEND_F0 0B0 0STEP\n"
                                     "rank1: 1RECV_F0 1F0 1B0 1SEND_B0 1STEP\n",
                                     2, 1);
  ASSERT_TRUE(static_cast<bool>(s));
  std::string msg = checkError(*s, topo);
  EXPECT_NE(msg.find("deadlocks"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank0 waits at 0RECV_B0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank1 waits at 1RECV_F0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("!0RECV_B0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("!1RECV_F0"), std::string::npos) << msg;
}

TEST(Schedule, BadListsAreRejected) {
  Topology topo = Topology::chain(2);
  struct Case {
    const char *text;
    const char *expected;
    int microbatches = 1;
  } cases[] = {
      // Rank 1 forgets to receive micro-batch 1.
      {"rank0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1 0STEP\n"
       "rank1: 1RECV_F0 1F0 1B0 1SEND_B0 1F1 1B1 1SEND_B1 1STEP\n",
       "action 1F1 needs 1RECV_F1, which rank1 never runs; the schedule has 2 "
       "micro-batches",
       2},
      // Backward before forward.
      {"rank0: 0RECV_B0 0B0 0F0 0SEND_F0 0STEP\n"
       "rank1: 1RECV_F0 1F0 1B0 1SEND_B0 1STEP\n",
       "action 0B0 comes before 0F0"},
      // A micro-batch outside the schedule.
      {"rank0: 0F0 0SEND_F0 0F5 0RECV_B0 0B0 0STEP\n"
       "rank1: 1RECV_F0 1F0 1B0 1SEND_B0 1STEP\n",
       "names a micro-batch outside 0..0"},
      // No optimizer step.
      {"rank0: 0F0 0SEND_F0 0RECV_B0 0B0\n"
       "rank1: 1RECV_F0 1F0 1B0 1SEND_B0 1STEP\n",
       "rank0 never runs 0STEP"},
      // The first stage has nothing to receive.
      {"rank0: 0RECV_F0 0F0 0SEND_F0 0RECV_B0 0B0 0STEP\n"
       "rank1: 1RECV_F0 1F0 1B0 1SEND_B0 1STEP\n",
       "stage 0 receives no activations from another rank"},
      // A send that is received twice is caught as a duplicate.
      {"rank0: 0F0 0SEND_F0 0SEND_F0 0RECV_B0 0B0 0STEP\n"
       "rank1: 1RECV_F0 1F0 1B0 1SEND_B0 1STEP\n",
       "appears twice"},
  };
  for (const Case &c : cases) {
    llvm::Expected<Schedule> s = parse(c.text, 2, c.microbatches);
    ASSERT_TRUE(static_cast<bool>(s)) << llvm::toString(s.takeError());
    std::string msg = checkError(*s, topo);
    EXPECT_NE(msg.find(c.expected), std::string::npos)
        << "expected '" << c.expected << "' in:\n"
        << msg;
  }
  // A stage on two ranks, a rank without a stage, a stage without a rank.
  for (auto [text, expected] :
       {std::pair{"rank0: 1F0\nrank1: 1F0\n",
                  "stage 1 has actions on rank0 and rank1"},
        std::pair{"rank0: 0F0\nrank1: 1F0\nrank2:\n", ""},
        std::pair{"rank0: 0F0\n", "no rank runs stage 1"},
        std::pair{"rank0: 0F0 2F0\n", "names stage 2; the pipeline has "
                                      "stages 0..1"}}) {
    llvm::Expected<Schedule> s = parse(text, 2, 1, false);
    if (*expected == 0) {
      ASSERT_TRUE(static_cast<bool>(s));
      EXPECT_NE(checkError(*s, topo).find("rank2 holds no stage"),
                std::string::npos);
      continue;
    }
    ASSERT_FALSE(static_cast<bool>(s)) << text;
    EXPECT_NE(llvm::toString(s.takeError()).find(expected), std::string::npos)
        << text;
  }
  // Parse errors name the word.
  llvm::Expected<Schedule> bad = parse("rank0: 0F0 0Q1\n", 2, 1);
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("'0Q1' is not an action"),
            std::string::npos);
}

TEST(Schedule, TiedAllReduceMustMeet) {
  Topology topo = Topology::chain(2);
  topo.tiedGroups.push_back({0, 1});
  Schedule s = mustGenerate(Kind::GPipe, topo, 2);
  EXPECT_EQ(checkError(s, topo), "");
  // Without rank 1's all-reduce, the checker rejects it.
  s.ranks[1].erase(s.ranks[1].end() - 2);
  EXPECT_NE(
      checkError(s, topo).find("1STEP comes before this rank's ALLREDUCE_TIED"),
      std::string::npos)
      << checkError(s, topo);
}

TEST(Schedule, UnknownKind) {
  llvm::Expected<Kind> kind = parseKind("zigzag");
  ASSERT_FALSE(static_cast<bool>(kind));
  EXPECT_EQ(llvm::toString(kind.takeError()),
            "unknown schedule 'zigzag'; expected one of gpipe, 1f1b, "
            "interleaved-1f1b, looped-bfs, zb-h1, zb1p, zbv, dualpipev");
}
