//===- ScheduleKindsTest.cpp - every kind, several stages per rank, CSV ---===//

#include "pippy/Schedule/Schedule.h"

#include "gtest/gtest.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

using namespace pippy::schedule;

namespace {

std::string errorText(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : "";
}

/// Each rank's compute actions (F, B, I, W), in order.
std::vector<std::vector<std::string>> computeOrder(const Schedule &s) {
  std::vector<std::vector<std::string>> order;
  for (const std::vector<Action> &list : s.ranks) {
    order.emplace_back();
    for (const Action &a : list)
      if (a.isCompute())
        order.back().push_back(a.str());
  }
  return order;
}

std::string readText(const std::string &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Stage 0 also feeds stage 2 directly (a skip connection), and stages 0
/// and the last share a tied weight.
Topology skipAndTied(int S) {
  Topology topo = Topology::chain(S);
  if (S > 2)
    topo.producers[2].push_back(0);
  if (S > 1)
    topo.tiedGroups.push_back({0, S - 1});
  return topo;
}

} // namespace

// test/Unit/Inputs/schedules/upstream.py writes torch.distributed.
// pipelining's orders as CSV; every kind must list the same compute actions
// in the same order on every rank.
TEST(ScheduleKinds, OrdersEqualTorchDistributedPipelinings) {
  namespace fs = std::filesystem;
  std::regex name(R"(([a-z0-9-]+)-r(\d+)-s(\d+)-m(\d+)\.csv)");
  int files = 0;
  for (const fs::directory_entry &entry :
       fs::directory_iterator(PIPPY_SCHEDULE_INPUTS)) {
    std::smatch match;
    std::string file = entry.path().filename().string();
    if (!std::regex_match(file, match, name))
      continue;
    ++files;
    llvm::Expected<Kind> kind = parseKind(match[1].str());
    ASSERT_TRUE(static_cast<bool>(kind)) << file;
    int R = std::stoi(match[2]), S = std::stoi(match[3]),
        M = std::stoi(match[4]);
    Topology topo = Topology::chain(S);
    llvm::Expected<Schedule> upstream =
        parseCsv(readText(entry.path().string()), topo, M);
    ASSERT_TRUE(static_cast<bool>(upstream))
        << file << ": " << llvm::toString(upstream.takeError());
    EXPECT_EQ(errorText(check(*upstream, topo)), "") << file;
    llvm::Expected<Schedule> ours = generate(*kind, topo, R, M);
    ASSERT_TRUE(static_cast<bool>(ours))
        << file << ": " << llvm::toString(ours.takeError());
    EXPECT_EQ(ours->stageRank, upstream->stageRank) << file;
    EXPECT_EQ(computeOrder(*ours), computeOrder(*upstream)) << file;
  }
  EXPECT_GE(files, 60);
}

TEST(ScheduleKinds, EveryKindPassesTheChecker) {
  for (Kind kind : kinds())
    for (int R = 1; R <= 4; ++R)
      for (int L = 1; L <= 3; ++L)
        for (int M = 1; M <= 9; ++M)
          for (bool training : {true, false})
            for (bool skips : {false, true}) {
              int S = R * L;
              Topology topo = skips ? skipAndTied(S) : Topology::chain(S);
              llvm::Expected<Schedule> s = generate(kind, topo, R, M, training);
              std::string what = kindName(kind) + " R=" + std::to_string(R) +
                                 " S=" + std::to_string(S) +
                                 " M=" + std::to_string(M);
              if (!s) {
                // Only placement, rounds and DualPipeV's micro-batches
                // may refuse.
                std::string msg = llvm::toString(s.takeError());
                bool placement = msg.find(": this kind ") != std::string::npos;
                bool rounds =
                    msg.find("multiple of the rounds") != std::string::npos;
                bool fewer = kind == Kind::DualPipeV && M < S;
                EXPECT_TRUE(placement || rounds || fewer)
                    << what << ": " << msg;
                continue;
              }
              EXPECT_EQ(errorText(check(*s, topo)), "") << what;
            }
}

TEST(ScheduleKinds, PlacementsAndRefusals) {
  Topology topo = Topology::chain(4);
  llvm::Expected<Schedule> v = generate(Kind::ZBV, topo, 2, 4);
  ASSERT_TRUE(static_cast<bool>(v));
  EXPECT_EQ(v->stageRank, (std::vector<int>{0, 1, 1, 0}));
  EXPECT_EQ(v->stagesOf(0), (std::vector<int>{0, 3}));
  llvm::Expected<Schedule> loop = generate(Kind::Interleaved1F1B, topo, 2, 4);
  ASSERT_TRUE(static_cast<bool>(loop));
  EXPECT_EQ(loop->stageRank, (std::vector<int>{0, 1, 0, 1}));
  // Stage 1 hands its activations to stage 2 on rank 1 of the V: no
  // message between them.
  std::string text = v->str();
  EXPECT_EQ(text.find("1SEND_F"), std::string::npos) << text;
  EXPECT_EQ(text.find("2RECV_F"), std::string::npos) << text;
  EXPECT_NE(text.find("0SEND_F0"), std::string::npos) << text;

  struct Case {
    Kind kind;
    int S, R, M;
    const char *expected;
  } cases[] = {
      {Kind::OneFOneB, 4, 2, 4,
       "1f1b: 4 stages on 2 ranks: this kind runs one stage per rank (run it "
       "on 4 ranks: --nproc 4); kinds that fit 4 stages on 2 ranks: "
       "interleaved-1f1b, looped-bfs, zb1p, zbv"},
      {Kind::GPipe, 2, 3, 4,
       "gpipe: 2 stages on 3 ranks: this kind runs one stage per rank (run "
       "it on 2 ranks: --nproc 2)"},
      {Kind::ZBV, 6, 2, 4,
       "zbv: 6 stages on 2 ranks: this kind needs exactly two stages per "
       "rank (run it on 3 ranks: --nproc 3); kinds that fit 6 stages on 2 "
       "ranks: interleaved-1f1b, looped-bfs, zb1p"},
      {Kind::Interleaved1F1B, 5, 2, 4,
       "needs the same number of stages on every rank (run it on 1 or 5 "
       "ranks)"},
      {Kind::ZBV, 3, 1, 4, "needs exactly two stages per rank; kinds that"},
      {Kind::Interleaved1F1B, 8, 4, 9,
       "interleaved-1f1b needs the micro-batches (9) to be a multiple of "
       "the rounds, max(1, M / ranks) = 2"},
      {Kind::DualPipeV, 4, 2, 3,
       "dualpipev needs at least as many micro-batches as stages (4); got 3"},
  };
  for (const Case &c : cases) {
    llvm::Expected<Schedule> s =
        generate(c.kind, Topology::chain(c.S), c.R, c.M);
    ASSERT_FALSE(static_cast<bool>(s)) << kindName(c.kind);
    std::string msg = llvm::toString(s.takeError());
    EXPECT_NE(msg.find(c.expected), std::string::npos) << msg;
  }
}

TEST(ScheduleKinds, LocalHandOversAreOrderedAndNeverSent) {
  Topology topo = Topology::chain(4);
  struct Case {
    const char *text;
    const char *expected;
    bool training = true;
  } cases[] = {
      // Rank 1 holds stages 1 and 2 of the V: 2F0 needs 1F0 first.
      {"rank0: 0F0 0SEND_F0 3RECV_F0 3F0\n"
       "rank1: 1RECV_F0 2F0 1F0 2SEND_F0\n",
       "action 2F0 comes before 1F0", false},
      // ... and no message between them.
      {"rank0: 0F0 0SEND_F0 3RECV_F0 3F0\n"
       "rank1: 1RECV_F0 1F0 1SEND_F0 2F0 2SEND_F0\n",
       "stage 1 sends no activations to another rank", false},
      // Input gradients flow back locally the same way: 1B0 needs 2B0.
      {"rank0: 0F0 0SEND_F0 3RECV_F0 3F0 3B0 3SEND_B0 0RECV_B0 0B0 0STEP "
       "3STEP\n"
       "rank1: 1RECV_F0 1F0 2F0 2SEND_F0 1B0 2RECV_B0 2B0 1SEND_B0 1STEP "
       "2STEP\n",
       "action 1B0 comes before 2B0"},
      // W needs its I; a micro-batch is not backwarded both ways.
      {"rank0: 0F0 0SEND_F0 3RECV_F0 3F0 3W0 3I0 3SEND_B0 0RECV_B0 0B0 "
       "0STEP 3STEP\n"
       "rank1: 1RECV_F0 1F0 2F0 2SEND_F0 2RECV_B0 2B0 1B0 1SEND_B0 1STEP "
       "2STEP\n",
       "action 3W0 comes before 3I0"},
      {"rank0: 0F0 0SEND_F0 3RECV_F0 3F0 3B0 3I0 3SEND_B0 0RECV_B0 0B0 "
       "0STEP 3STEP\n"
       "rank1: 1RECV_F0 1F0 2F0 2SEND_F0 2RECV_B0 2B0 1B0 1SEND_B0 1STEP "
       "2STEP\n",
       "backwarded both whole (B) and split (I)"},
      // An I without its W leaves weight gradients undone.
      {"rank0: 0F0 0SEND_F0 3RECV_F0 3F0 3I0 3SEND_B0 0RECV_B0 0B0 0STEP "
       "3STEP\n"
       "rank1: 1RECV_F0 1F0 2F0 2SEND_F0 2RECV_B0 2B0 1B0 1SEND_B0 1STEP "
       "2STEP\n",
       "action 3STEP needs 3W0, which rank0 never runs"},
      // A STEP before the rank's other actions.
      {"rank0: 0F0 0SEND_F0 3RECV_F0 3F0 3B0 3SEND_B0 3STEP 0RECV_B0 0B0 "
       "0STEP\n"
       "rank1: 1RECV_F0 1F0 2F0 2SEND_F0 2RECV_B0 2B0 1B0 1SEND_B0 1STEP "
       "2STEP\n",
       "0RECV_B0 comes after a STEP"},
  };
  for (const Case &c : cases) {
    llvm::Expected<Schedule> s = parse(c.text, 4, 1, c.training);
    ASSERT_TRUE(static_cast<bool>(s)) << llvm::toString(s.takeError());
    std::string msg = errorText(check(*s, topo));
    EXPECT_NE(msg.find(c.expected), std::string::npos)
        << "expected '" << c.expected << "' in:\n"
        << msg;
  }
}

TEST(ScheduleKinds, CsvRoundTripsBothForms) {
  Topology topo = skipAndTied(8);
  for (Kind kind : kinds()) {
    int R = placementOf(kind) == Placement::OnePerRank ? 8 : 4;
    llvm::Expected<Schedule> s = generate(kind, topo, R, 8);
    ASSERT_TRUE(static_cast<bool>(s)) << llvm::toString(s.takeError());
    for (bool comms : {true, false}) {
      std::string csv = toCsv(*s, comms);
      EXPECT_EQ(csv.find("STEP"), std::string::npos);
      llvm::Expected<Schedule> back = parseCsv(csv, topo, 8);
      ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
      EXPECT_EQ(back->str(), s->str()) << kindName(kind) << " " << comms;
    }
  }
}

TEST(ScheduleKinds, CsvReadsUpstreamsOtherActionsAndNamesBadCells) {
  Topology topo = Topology::chain(2);
  // FSDP's and data parallelism's actions are no-ops; an overlapped pair
  // runs as its two actions; empty cells are idle.
  llvm::Expected<Schedule> s =
      parseCsv("0UNSHARD,0F0,,0F1,0REDUCE_GRAD,0B0,0B1,0RESHARD\n"
               ",1F0,(1F1;1B0)OVERLAP_F_B,1B1\n",
               topo, 2);
  ASSERT_TRUE(static_cast<bool>(s)) << llvm::toString(s.takeError());
  EXPECT_EQ(computeOrder(*s),
            (std::vector<std::vector<std::string>>{
                {"0F0", "0F1", "0B0", "0B1"}, {"1F0", "1F1", "1B0", "1B1"}}));
  EXPECT_EQ(errorText(check(*s, topo)), "");
  for (auto [text, expected] :
       {std::pair{"0F0,0B0\n1F0,1X0\n",
                  "rank 1 (CSV row 2): '1X0' is not an action"},
        std::pair{"0F0,0B0\n", "no rank of the schedule file runs stage 1"},
        std::pair{"0F0,1F0\n1B0\n", "stage 1 has actions on ranks 0 and 1"},
        std::pair{"", "the schedule file has no rows"}}) {
    llvm::Expected<Schedule> bad = parseCsv(text, topo, 1);
    ASSERT_FALSE(static_cast<bool>(bad)) << text;
    EXPECT_NE(llvm::toString(bad.takeError()).find(expected), std::string::npos)
        << text;
  }
  // A file that deadlocks gets the checker's grid, not a hang.
  llvm::Expected<Schedule> dead = parseCsv("0B0,0F0\n1F0,1B0\n", topo, 1);
  ASSERT_TRUE(static_cast<bool>(dead));
  EXPECT_NE(errorText(check(*dead, topo)).find("comes before 0F0"),
            std::string::npos);
}

namespace {

/// Unit costs: F = 1, B = 2 (I = W = 1 when split).
StageCosts unitCosts(int S) {
  StageCosts costs;
  costs.forward.assign(S, 1.0);
  costs.backward.assign(S, 2.0);
  costs.weight.assign(S, 1.0);
  costs.activations.assign(S, 100.0);
  return costs;
}

Simulation run(Kind kind, int S, int R, int M) {
  Topology topo = Topology::chain(S);
  llvm::Expected<Schedule> s = generate(kind, topo, R, M);
  EXPECT_TRUE(static_cast<bool>(s)) << llvm::toString(s.takeError());
  return simulate(*s, topo, unitCosts(S));
}

} // namespace

TEST(ScheduleKinds, SimulatedBubblesAndMemory) {
  // 1F1B's bubble is (p-1)/(m+p-1); interleaving v stages per rank cuts it
  // to (p-1)/(v m+p-1) (Narayanan et al., 2021); ZB-H1 to about a third of
  // 1F1B's; ZB-V to nothing when F = I = W.
  int R = 4, M = 8;
  double onef = run(Kind::OneFOneB, R, R, M).bubbleFraction;
  EXPECT_NEAR(onef, 3.0 / 11, 1e-12);
  for (int v : {2, 3}) {
    double interleaved = run(Kind::Interleaved1F1B, v * R, R, M).bubbleFraction;
    EXPECT_LE(interleaved, 3.0 / (v * M + 3) + 1e-12) << v;
  }
  Simulation zbh1 = run(Kind::ZBH1, R, R, M);
  EXPECT_LT(zbh1.bubbleFraction, onef / 2);
  Simulation zbv = run(Kind::ZBV, 2 * R, R, M);
  EXPECT_LT(zbv.bubbleFraction, 0.1);
  EXPECT_LT(run(Kind::ZB1P, 2 * R, R, M).bubbleFraction, onef);
  // GPipe holds every micro-batch; 1F1B rank r at most R - r of them.
  Simulation gpipe = run(Kind::GPipe, R, R, M);
  Simulation oneFOneB = run(Kind::OneFOneB, R, R, M);
  for (int r = 0; r < R; ++r) {
    EXPECT_EQ(gpipe.peakInflight[r], M);
    EXPECT_EQ(oneFOneB.peakInflight[r], R - r);
    EXPECT_EQ(oneFOneB.peakActivationBytes[r], 100.0 * (R - r));
  }
  // Looped BFS forwards every micro-batch through all its stages first.
  Simulation bfs = run(Kind::LoopedBFS, 2 * R, R, M);
  EXPECT_EQ(bfs.peakInflight[0], 2 * M);
  // Every compute action has its box, in time order.
  ASSERT_EQ(zbv.boxes[0].size(), size_t(2 * 3 * M));
  for (size_t k = 1; k < zbv.boxes[0].size(); ++k)
    EXPECT_LE(zbv.boxes[0][k - 1].end, zbv.boxes[0][k].start);
}

TEST(ScheduleKinds, MeasuredCostsAndMessages) {
  StageCosts costs = unitCosts(4);
  ASSERT_FALSE(static_cast<bool>(readStageCosts(
      R"({"forward": [2, 2, 2, 2], "message": 0.5, "transfer": 0.25})", 4,
      costs)));
  EXPECT_EQ(costs.forward, (std::vector<double>{2, 2, 2, 2}));
  EXPECT_EQ(costs.backward, (std::vector<double>{2, 2, 2, 2})); // kept
  EXPECT_EQ(costs.message, 0.5);
  EXPECT_EQ(costs.transfer, 0.25);
  for (auto [json, expected] :
       {std::pair{"[1]", "must be a JSON object"},
        std::pair{R"({"weight": [1, 2]})", "'weight' must list 4 numbers"},
        std::pair{R"({"forward": [1, 2, "x", 4]})",
                  "'forward' holds something other than a time"},
        std::pair{R"({"message": -1})", "'message' must be a time"}}) {
    StageCosts c = unitCosts(4);
    std::string msg = errorText(readStageCosts(json, 4, c));
    EXPECT_NE(msg.find(expected), std::string::npos) << json << ": " << msg;
  }
  // Each send and receive delays its rank: the bubble grows, busy time
  // does not.
  Topology topo = Topology::chain(4);
  llvm::Expected<Schedule> s = generate(Kind::ZBV, topo, 2, 8);
  ASSERT_TRUE(static_cast<bool>(s));
  StageCosts free = unitCosts(4), paid = unitCosts(4);
  paid.message = 0.25;
  Simulation a = simulate(*s, topo, free), b = simulate(*s, topo, paid);
  EXPECT_EQ(a.busy, b.busy);
  EXPECT_GT(b.makespan, a.makespan);
  EXPECT_GT(b.bubbleFraction, a.bubbleFraction);
}

TEST(ScheduleKinds, HeldWeightGradientsAndSteps) {
  // 1F1B on 2 ranks, 4 micro-batches, F = 1, B = 2: the textbook timeline
  // ends at 15. As pippy-run runs it, stage 1 sends each input gradient
  // after 1 and computes the weight gradients of the micro-batch before it
  // after that send (the last one's at the end): stage 0's backwards start
  // at 3, 6, 9 and 11, and the step ends at 13.
  Topology topo = Topology::chain(2);
  llvm::Expected<Schedule> s = generate(Kind::OneFOneB, topo, 2, 4);
  ASSERT_TRUE(static_cast<bool>(s));
  StageCosts costs = unitCosts(2);
  EXPECT_EQ(simulate(*s, topo, costs).makespan, 15);
  ASSERT_FALSE(static_cast<bool>(readStageCosts(
      R"({"hold_weight_gradients": true, "step": [0.5, 0.25]})", 2, costs)));
  ASSERT_TRUE(costs.holdWeightGradients);
  Simulation held = simulate(*s, topo, costs);
  std::vector<std::string> rank0, rank1;
  for (const SimulatedBox &box : held.boxes[0])
    rank0.push_back(box.action.str() + "@" + std::to_string(int(box.start)));
  for (const SimulatedBox &box : held.boxes[1])
    if (box.end - box.start == 1 && box.action.op == Op::Backward)
      rank1.push_back(box.action.str() + "@" + std::to_string(int(box.start)));
  EXPECT_EQ(rank0,
            (std::vector<std::string>{"0F0@0", "0F1@1", "0B0@3", "0F2@5",
                                      "0B1@6", "0F3@8", "0B2@9", "0B3@11"}));
  // Each of stage 1's B is two boxes: its input gradients, then (later)
  // its weight gradients.
  EXPECT_EQ(rank1,
            (std::vector<std::string>{"1B0@2", "1B1@4", "1B0@5", "1B2@7",
                                      "1B1@8", "1B3@10", "1B2@11", "1B3@12"}));
  // Each rank's STEP adds its cost to its busy time and its clock.
  EXPECT_EQ(held.busy, (std::vector<double>{12.5, 12.25}));
  EXPECT_EQ(held.makespan, 13.5);
  // A replayed step's own costs: stage 1's last B takes 3, of which 2 are
  // its held weight gradients, computed last.
  ASSERT_FALSE(static_cast<bool>(readStageCosts(
      R"({"actions": {"1B3": 3}, "held": {"1B3": 2}})", 2, costs)));
  Simulation replayed = simulate(*s, topo, costs);
  EXPECT_EQ(replayed.busy, (std::vector<double>{12.5, 13.25}));
  EXPECT_EQ(replayed.makespan, 14.25);
  EXPECT_EQ(replayed.boxes[1].back().start, 12);
  StageCosts bad = unitCosts(2);
  EXPECT_NE(errorText(readStageCosts(R"({"actions": {"1X3": 1}})", 2, bad))
                .find("'1X3' must be an action with a time"),
            std::string::npos);
  EXPECT_NE(errorText(readStageCosts(R"({"hold_weight_gradients": 1})", 2, bad))
                .find("'hold_weight_gradients' must be true or false"),
            std::string::npos);
  // An action of a stage the pipeline lacks; a W costing more than the
  // backward that includes it (here over the costs it replaces); a time
  // whose sums would overflow.
  auto refused = [](const char *json) {
    StageCosts costs = unitCosts(2);
    return errorText(readStageCosts(json, 2, costs));
  };
  EXPECT_NE(refused(R"({"actions": {"2F0": 1}})")
                .find("'2F0' names stage 2; the pipeline has stages 0..1"),
            std::string::npos);
  EXPECT_NE(refused(R"({"weight": [1, 3]})")
                .find("stage 1's 'weight' (3) is more than its 'backward' (2)"),
            std::string::npos);
  EXPECT_NE(refused(R"({"forward": [1e300, 1]})")
                .find("'forward' holds something other than a time"),
            std::string::npos);
  for (const char *count :
       {R"({"fill_forwards": -1})", R"({"fill_forwards": 1.5})",
        R"({"fill_forwards": true})"})
    EXPECT_NE(
        refused(count).find("'fill_forwards' must be a count of micro-batches"),
        std::string::npos)
        << count;
  StageCosts forwards = unitCosts(2);
  ASSERT_FALSE(static_cast<bool>(
      readStageCosts(R"({"fill_forwards": 2})", 2, forwards)));
  EXPECT_EQ(forwards.fillForwards, 2);
}
