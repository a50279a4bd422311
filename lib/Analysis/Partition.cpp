//===- Partition.cpp - optimal contiguous partition into stages -----------===//
//
// Feasibility of a bottleneck T with exactly k stages: a prefix ending at cut
// j can be covered by k stages iff some cut i < j is covered by k - 1 stages
// and cost(i, j) <= T, i.e. prefix(j) - prefix(i) + cut[i] + cut[j] <= T, i.e.
//   key(i) = prefix(i) - cut[i]  >=  prefix(j) + cut[j] - T.
// So the best predecessor of j is the reachable i < j with the largest key, a
// running maximum: O(ops) per stage count. Binary search over integer T gives
// the exact optimum.
//
//===----------------------------------------------------------------------===//

#include "pippy/Analysis/Partition.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <limits>

using namespace pippy;

int64_t pippy::stageCost(const PartitionProblem &problem, size_t begin,
                         size_t end) {
  int64_t cost = problem.cutCost[begin] + problem.cutCost[end];
  for (size_t i = begin; i < end; ++i)
    cost += problem.opCost[i];
  return cost;
}

namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();

/// With bottleneck `limit`, the start of every stage of a partition into
/// exactly `stages` stages, or empty when there is none.
std::vector<size_t> tryPartition(const std::vector<int64_t> &prefix,
                                 const std::vector<int64_t> &cut, size_t stages,
                                 int64_t limit) {
  size_t n = prefix.size() - 1;
  // parent[k][j]: start of the k-th stage (0-based) when stage k ends at j.
  std::vector<std::vector<size_t>> parent(stages,
                                          std::vector<size_t>(n + 1, kNone));
  std::vector<char> reachable(n + 1, 0), next(n + 1, 0);
  reachable[0] = 1; // zero stages cover the empty prefix
  for (size_t k = 0; k < stages; ++k) {
    std::fill(next.begin(), next.end(), 0);
    int64_t bestKey = std::numeric_limits<int64_t>::min();
    size_t bestStart = kNone;
    for (size_t j = 1; j <= n; ++j) {
      size_t i = j - 1; // cut i becomes a candidate start for stages ending
                        // at j or later (stages are non-empty)
      if (reachable[i]) {
        int64_t key = prefix[i] - cut[i];
        if (bestStart == kNone || key > bestKey) {
          bestKey = key;
          bestStart = i;
        }
      }
      if (bestStart != kNone && bestKey >= prefix[j] + cut[j] - limit) {
        next[j] = 1;
        parent[k][j] = bestStart;
      }
    }
    reachable.swap(next);
  }
  if (!reachable[n])
    return {};
  std::vector<size_t> starts(stages);
  size_t end = n;
  for (size_t k = stages; k-- > 0;) {
    starts[k] = parent[k][end];
    end = starts[k];
  }
  return starts;
}

} // namespace

Partition pippy::partitionOptimal(const PartitionProblem &problem,
                                  size_t stages) {
  size_t n = problem.opCost.size();
  assert(stages >= 1 && stages <= n && problem.cutCost.size() == n + 1);
  std::vector<int64_t> prefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + problem.opCost[i];

  int64_t hi = 0;
  for (int64_t c : problem.cutCost)
    hi = std::max(hi, c);
  hi = prefix[n] + 2 * hi; // every stage costs at most this
  int64_t lo = 0;
  std::vector<size_t> best = tryPartition(prefix, problem.cutCost, stages, hi);
  assert(!best.empty() && "a partition exists whenever stages <= ops");
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    std::vector<size_t> starts =
        tryPartition(prefix, problem.cutCost, stages, mid);
    if (starts.empty()) {
      lo = mid + 1;
    } else {
      hi = mid;
      best = std::move(starts);
    }
  }
  Partition result;
  result.starts = best;
  for (size_t k = 0; k < stages; ++k)
    result.bottleneck =
        std::max(result.bottleneck,
                 stageCost(problem, best[k], k + 1 < stages ? best[k + 1] : n));
  return result;
}

Partition pippy::partitionExhaustive(const PartitionProblem &problem,
                                     size_t stages) {
  size_t n = problem.opCost.size();
  Partition best;
  best.bottleneck = std::numeric_limits<int64_t>::max();
  std::vector<size_t> starts{0};
  std::function<void(size_t)> search = [&](size_t from) {
    if (starts.size() == stages) {
      int64_t worst = 0;
      for (size_t k = 0; k < stages; ++k)
        worst = std::max(worst, stageCost(problem, starts[k],
                                          k + 1 < stages ? starts[k + 1] : n));
      if (worst < best.bottleneck) {
        best.bottleneck = worst;
        best.starts = starts;
      }
      return;
    }
    for (size_t s = from; s + (stages - starts.size()) <= n; ++s) {
      starts.push_back(s);
      search(s + 1);
      starts.pop_back();
    }
  };
  search(1);
  return best;
}
