//===- PartitionTest.cpp - optimal contiguous partitions ------------------===//

#include "pippy/Analysis/Partition.h"

#include "gtest/gtest.h"

#include <random>

using namespace pippy;

namespace {

/// `part` cuts `p` into `stages` non-empty stages, starting only where cuts
/// are allowed, each within the memory cap, and its bottleneck is its
/// costliest stage.
void expectWellFormed(const PartitionProblem &p, size_t stages,
                      const Partition &part, int trial) {
  ASSERT_EQ(part.starts.size(), stages) << "trial " << trial;
  size_t n = p.opCost.size();
  int64_t worst = 0;
  for (size_t k = 0; k < stages; ++k) {
    size_t begin = part.starts[k],
           end = k + 1 < stages ? part.starts[k + 1] : n;
    ASSERT_LT(begin, end) << "trial " << trial << ": empty stage";
    if (!p.cutAllowed.empty())
      EXPECT_TRUE(p.cutAllowed[begin]) << "trial " << trial << " cut " << begin;
    if (p.memoryCap > 0) {
      int64_t held = 0;
      for (size_t i = begin; i < end; ++i)
        held += p.opMemory[i];
      EXPECT_LE(held, p.memoryCap) << "trial " << trial;
    }
    worst = std::max(worst, stageCost(p, begin, end));
  }
  EXPECT_EQ(worst, part.bottleneck) << "trial " << trial;
}

TEST(Partition, BalancesEqualOps) {
  PartitionProblem p{{1, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0, 0}};
  Partition part = partitionOptimal(p, 3);
  EXPECT_EQ(part.starts, (std::vector<size_t>{0, 2, 4}));
  EXPECT_EQ(part.bottleneck, 2);
}

TEST(Partition, AvoidsExpensiveCuts) {
  // Cutting after op 1 costs 100 on both sides; after op 2 costs nothing.
  PartitionProblem p{{5, 5, 5, 5}, {0, 0, 100, 0, 0}};
  Partition part = partitionOptimal(p, 2);
  EXPECT_NE(part.starts[1], 2u);
  EXPECT_EQ(part.bottleneck, 15);
}

TEST(Partition, IsolatesOneHugeOp) {
  PartitionProblem p{{1, 1, 50, 1, 1, 1}, std::vector<int64_t>(7, 0)};
  Partition part = partitionOptimal(p, 3);
  EXPECT_EQ(part.bottleneck, 50);
  EXPECT_EQ(stageCost(p, part.starts[1], part.starts[2]), 50);
}

TEST(Partition, OneStageAndOneOpPerStage) {
  PartitionProblem p{{3, 4, 5}, {1, 2, 3, 4}};
  EXPECT_EQ(partitionOptimal(p, 1).bottleneck, 3 + 4 + 5 + 1 + 4);
  Partition each = partitionOptimal(p, 3);
  EXPECT_EQ(each.starts, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(each.bottleneck, std::max({1 + 3 + 2, 2 + 4 + 3, 3 + 5 + 4}));
}

// The optimum equals exhaustive search on many random small problems,
// including ones where the cheapest-looking cut is a trap.
TEST(Partition, MatchesExhaustiveSearch) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    size_t n = 1 + rng() % 11;
    size_t stages = 1 + rng() % n;
    PartitionProblem p;
    for (size_t i = 0; i < n; ++i)
      p.opCost.push_back(rng() % (trial % 3 == 0 ? 1000 : 20));
    for (size_t i = 0; i <= n; ++i)
      p.cutCost.push_back(i == 0 || i == n ? 0 : rng() % 30);
    Partition fast = partitionOptimal(p, stages);
    Partition slow = partitionExhaustive(p, stages);
    ASSERT_EQ(fast.bottleneck, slow.bottleneck)
        << "trial " << trial << " n " << n << " stages " << stages;
    expectWellFormed(p, stages, fast, trial);
  }
}

// Costs of the size real models give (FLOPs and bytes: up to 1e9 per op):
// the search gallops up from its lower bound in growing steps before it
// bisects. Its optimum still equals exhaustive search's, with and without a
// memory cap and cuts ruled out, and it finds no partition exactly when
// there is none.
TEST(Partition, LargeCostsMatchExhaustiveSearch) {
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 600; ++trial) {
    size_t n = 1 + rng() % 12;
    size_t stages = 1 + rng() % n;
    PartitionProblem p;
    for (size_t i = 0; i < n; ++i)
      p.opCost.push_back(rng() % 1000000000);
    for (size_t i = 0; i <= n; ++i) {
      p.cutCost.push_back(i == 0 || i == n ? 0 : rng() % 300000000);
      if (trial % 3 == 1)
        p.cutAllowed.push_back(i == 0 || rng() % 3 != 0);
    }
    if (trial % 3 == 2) {
      for (size_t i = 0; i < n; ++i)
        p.opMemory.push_back(rng() % 100);
      p.memoryCap = 50 + rng() % 400;
    }
    Partition fast = partitionOptimal(p, stages);
    Partition slow = partitionExhaustive(p, stages);
    ASSERT_EQ(fast.starts.empty(), slow.starts.empty()) << "trial " << trial;
    if (slow.starts.empty())
      continue;
    ASSERT_EQ(fast.bottleneck, slow.bottleneck) << "trial " << trial;
    expectWellFormed(p, stages, fast, trial);
  }
}

// With a memory cap: the same optimum as exhaustive search over the
// partitions whose every stage fits, every stage of the answer fits, and no
// answer exactly when exhaustive search finds none.
TEST(Partition, MemoryCapMatchesExhaustiveSearch) {
  std::mt19937 rng(11);
  int infeasible = 0, binding = 0;
  for (int trial = 0; trial < 600; ++trial) {
    size_t n = 1 + rng() % 11;
    size_t stages = 1 + rng() % n;
    PartitionProblem p;
    int64_t totalMemory = 0;
    for (size_t i = 0; i < n; ++i) {
      p.opCost.push_back(rng() % 50);
      p.opMemory.push_back(rng() % 100);
      totalMemory += p.opMemory.back();
    }
    for (size_t i = 0; i <= n; ++i)
      p.cutCost.push_back(i == 0 || i == n ? 0 : rng() % 30);
    p.memoryCap = 1 + rng() % (totalMemory + 1);
    Partition fast = partitionOptimal(p, stages);
    Partition slow = partitionExhaustive(p, stages);
    ASSERT_EQ(fast.starts.empty(), slow.starts.empty()) << "trial " << trial;
    if (slow.starts.empty()) {
      ++infeasible;
      continue;
    }
    ASSERT_EQ(fast.bottleneck, slow.bottleneck) << "trial " << trial;
    PartitionProblem uncapped = p;
    uncapped.memoryCap = 0;
    if (partitionOptimal(uncapped, stages).bottleneck < fast.bottleneck)
      ++binding;
    for (size_t k = 0; k < stages; ++k) {
      size_t end = k + 1 < stages ? fast.starts[k + 1] : n;
      int64_t held = 0;
      for (size_t i = fast.starts[k]; i < end; ++i)
        held += p.opMemory[i];
      EXPECT_LE(held, p.memoryCap) << "trial " << trial;
    }
  }
  // The random caps exercise all three outcomes.
  EXPECT_GT(infeasible, 20);
  EXPECT_GT(binding, 20);
}

// Cuts that are not allowed (a list or a scalar is live there): the same
// optimum as exhaustive search over the partitions that cut only where
// allowed, every start of the answer allowed, and no answer exactly when
// there are too few allowed cuts.
TEST(Partition, AllowedCutsMatchExhaustiveSearch) {
  std::mt19937 rng(13);
  int infeasible = 0, binding = 0;
  for (int trial = 0; trial < 600; ++trial) {
    size_t n = 1 + rng() % 11;
    size_t stages = 1 + rng() % n;
    PartitionProblem p;
    for (size_t i = 0; i < n; ++i)
      p.opCost.push_back(rng() % 50);
    for (size_t i = 0; i <= n; ++i) {
      p.cutCost.push_back(i == 0 || i == n ? 0 : rng() % 30);
      p.cutAllowed.push_back(i == 0 || rng() % 3 != 0);
    }
    if (trial % 4 == 0) { // with a memory cap as well
      for (size_t i = 0; i < n; ++i)
        p.opMemory.push_back(rng() % 100);
      p.memoryCap = 100 + rng() % 400;
    }
    Partition fast = partitionOptimal(p, stages);
    Partition slow = partitionExhaustive(p, stages);
    ASSERT_EQ(fast.starts.empty(), slow.starts.empty()) << "trial " << trial;
    if (slow.starts.empty()) {
      ++infeasible;
      continue;
    }
    ASSERT_EQ(fast.bottleneck, slow.bottleneck) << "trial " << trial;
    for (size_t start : fast.starts)
      EXPECT_TRUE(p.cutAllowed[start]) << "trial " << trial << " cut " << start;
    PartitionProblem free = p;
    free.cutAllowed.clear();
    if (partitionOptimal(free, stages).bottleneck < fast.bottleneck)
      ++binding;
  }
  EXPECT_GT(infeasible, 20);
  EXPECT_GT(binding, 20);
}

} // namespace
