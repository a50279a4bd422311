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
// A memory cap limits each stage to starts i >= first(j), where first(j) is
// the smallest i with mem(i, j) <= cap; first(j) never decreases as j grows,
// so the candidates form a sliding window and a monotonic deque keeps its
// maximum key, still O(ops) per stage count. A cut that is not allowed never
// becomes a candidate start.
//
//===----------------------------------------------------------------------===//

#include "pippy/Analysis/Partition.h"

#include <algorithm>
#include <cassert>
#include <deque>
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
/// The buffers of `tryPartition`, kept across the probes of one search.
struct Workspace {
  // parent[k * (n + 1) + j]: start of the k-th stage (0-based) when stage k
  // ends at j.
  std::vector<size_t> parent;
  std::vector<char> reachable, next;
  std::deque<size_t> window;
};

std::vector<size_t> tryPartition(const std::vector<int64_t> &prefix,
                                 const std::vector<int64_t> &cut,
                                 const std::vector<size_t> &firstStart,
                                 const std::vector<char> &allowed,
                                 size_t stages, int64_t limit, Workspace &ws) {
  size_t n = prefix.size() - 1;
  ws.parent.assign(stages * (n + 1), kNone);
  ws.reachable.assign(n + 1, 0);
  ws.next.resize(n + 1);
  std::vector<char> &reachable = ws.reachable, &next = ws.next;
  auto parent = [&](size_t k, size_t j) -> size_t & {
    return ws.parent[k * (n + 1) + j];
  };
  reachable[0] = 1; // zero stages cover the empty prefix
  for (size_t k = 0; k < stages; ++k) {
    std::fill(next.begin(), next.end(), 0);
    // Candidate starts in increasing order with decreasing keys: the front
    // is the best start still inside the window.
    std::deque<size_t> &window = ws.window;
    window.clear();
    bool any = false;
    for (size_t j = 1; j <= n; ++j) {
      size_t i = j - 1; // cut i becomes a candidate start for stages ending
                        // at j or later (stages are non-empty)
      if (reachable[i] && (i == 0 || allowed.empty() || allowed[i])) {
        int64_t key = prefix[i] - cut[i];
        while (!window.empty() &&
               prefix[window.back()] - cut[window.back()] <= key)
          window.pop_back();
        window.push_back(i);
      }
      while (!window.empty() && window.front() < firstStart[j])
        window.pop_front();
      if (!window.empty() && prefix[window.front()] - cut[window.front()] >=
                                 prefix[j] + cut[j] - limit) {
        next[j] = 1;
        parent(k, j) = window.front();
        any = true;
      }
    }
    if (!any)
      return {}; // no prefix is covered by k + 1 stages
    reachable.swap(next);
  }
  if (!reachable[n])
    return {};
  std::vector<size_t> starts(stages);
  size_t end = n;
  for (size_t k = stages; k-- > 0;) {
    starts[k] = parent(k, end);
    end = starts[k];
  }
  return starts;
}

/// firstStart[j]: the smallest start a stage ending at j may have under the
/// memory cap (0 without one; j, i.e. none, when op j-1 alone exceeds it).
std::vector<size_t> firstStarts(const PartitionProblem &problem) {
  size_t n = problem.opCost.size();
  std::vector<size_t> first(n + 1, 0);
  if (problem.memoryCap <= 0)
    return first;
  int64_t held = 0;
  size_t i = 0;
  for (size_t j = 1; j <= n; ++j) {
    held += problem.opMemory[j - 1];
    while (i < j && held > problem.memoryCap)
      held -= problem.opMemory[i++];
    first[j] = i;
  }
  return first;
}

bool costsAreNonNegative(const PartitionProblem &problem) {
  return std::all_of(problem.opCost.begin(), problem.opCost.end(),
                     [](int64_t c) { return c >= 0; }) &&
         std::all_of(problem.cutCost.begin(), problem.cutCost.end(),
                     [](int64_t c) { return c >= 0; });
}

bool fitsMemory(const PartitionProblem &problem, size_t begin, size_t end) {
  if (problem.memoryCap <= 0)
    return true;
  int64_t held = 0;
  for (size_t i = begin; i < end; ++i)
    held += problem.opMemory[i];
  return held <= problem.memoryCap;
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
  // With costs that are not negative, some stage holds at least the mean op
  // cost and the one holding the costliest op at least that op's cost.
  int64_t lo = 0;
  if (costsAreNonNegative(problem)) {
    lo = (prefix[n] + (int64_t)stages - 1) / (int64_t)stages;
    for (int64_t c : problem.opCost)
      lo = std::max(lo, c);
    lo = std::min(lo, hi);
  }
  assert((problem.memoryCap <= 0 || problem.opMemory.size() == n) &&
         "one memory size per op");
  std::vector<size_t> first = firstStarts(problem);
  assert((problem.cutAllowed.empty() || problem.cutAllowed.size() == n + 1) &&
         "one entry per cut");
  Workspace ws;
  auto bottleneck = [&](const std::vector<size_t> &starts) {
    int64_t worst = 0;
    for (size_t k = 0; k < stages; ++k)
      worst = std::max(worst, stageCost(problem, starts[k],
                                        k + 1 < stages ? starts[k + 1] : n));
    return worst;
  };
  std::vector<size_t> best = tryPartition(prefix, problem.cutCost, first,
                                          problem.cutAllowed, stages, hi, ws);
  if (best.empty())
    return Partition(); // nothing fits the memory cap and the allowed cuts
  // A partition found under a bound costs at most that bound: its own
  // bottleneck is the tighter upper end of the search.
  hi = bottleneck(best);
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    std::vector<size_t> starts = tryPartition(
        prefix, problem.cutCost, first, problem.cutAllowed, stages, mid, ws);
    if (starts.empty()) {
      lo = mid + 1;
    } else {
      hi = bottleneck(starts);
      best = std::move(starts);
    }
  }
  Partition result;
  result.starts = best;
  result.bottleneck = bottleneck(best);
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
      for (size_t k = 0; k < stages; ++k) {
        size_t end = k + 1 < stages ? starts[k + 1] : n;
        if (!fitsMemory(problem, starts[k], end))
          return;
        worst = std::max(worst, stageCost(problem, starts[k], end));
      }
      if (worst < best.bottleneck) {
        best.bottleneck = worst;
        best.starts = starts;
      }
      return;
    }
    for (size_t s = from; s + (stages - starts.size()) <= n; ++s) {
      if (!problem.cutAllowed.empty() && !problem.cutAllowed[s])
        continue;
      starts.push_back(s);
      search(s + 1);
      starts.pop_back();
    }
  };
  search(1);
  if (best.starts.empty())
    best.bottleneck = 0; // nothing fits the memory cap and the allowed cuts
  return best;
}
