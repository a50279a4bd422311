//===- Partition.cpp - optimal contiguous partition into stages -----------===//
//
// Feasibility of a bottleneck T with exactly k stages: a prefix ending at cut
// j can be covered by k stages iff some cut i < j is covered by k - 1 stages
// and cost(i, j) <= T, i.e. prefix(j) - prefix(i) + cut[i] + cut[j] <= T, i.e.
//   key(i) = prefix(i) - cut[i]  >=  prefix(j) + cut[j] - T.
// So the best predecessor of j is the reachable i < j with the largest key, a
// running maximum: O(ops) per stage count. Binary search over integer T gives
// the exact optimum. A test that fails also gives the smallest T above its own
// at which any of its comparisons would turn out otherwise (the least
// prefix(j) + cut[j] - key(i) over the ends j its best start i missed); no
// bound below that can succeed, so the search's lower end jumps there.
//
// A memory cap limits each stage to starts i >= first(j), where first(j) is
// the smallest i with mem(i, j) <= cap; first(j) never decreases as j grows,
// so the candidates form a sliding window and a monotonic queue keeps its
// maximum key, still O(ops) per stage count. A cut that is not allowed never
// becomes a candidate start.
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

/// What every probe of one search reads, computed once: the keys and
/// thresholds of the feasibility test (file comment), which cuts may start
/// a stage, and the buffers the probes reuse.
struct Search {
  size_t n = 0;
  std::vector<int64_t> key;   // key[i] = prefix(i) - cut[i]
  std::vector<int64_t> need;  // need[j] = prefix(j) + cut[j]
  std::vector<char> canStart; // cut i may start a stage (cut 0 always may)
  const std::vector<size_t> *firstStart = nullptr;
  bool capped = false; // a memory cap limits the starts: a sliding window
  // parent[k * (n + 1) + j]: start of the k-th stage (0-based) when stage k
  // ends at j; only read where stage k can end at j.
  std::vector<size_t> parent;
  std::vector<char> reachable, next;
  std::vector<size_t> window; // a monotonic queue, [head, tail)
};

/// One step of tryPartition without a memory cap: which prefixes `k + 1`
/// stages cover (s.next, s.parent of stage k) given those `k` stages cover
/// (s.reachable). Every earlier cut is a candidate start: the best is a
/// running maximum. Returns whether any prefix is covered.
bool extendUncapped(Search &s, size_t *parent, bool last, int64_t limit,
                    int64_t &nextLimit) {
  const size_t n = s.n;
  const std::vector<int64_t> &key = s.key, &need = s.need;
  std::vector<char> &reachable = s.reachable, &next = s.next;
  bool any = false;
  size_t best = kNone;
  int64_t bestKey = std::numeric_limits<int64_t>::min();
  for (size_t j = 1; j <= n; ++j) {
    size_t i = j - 1; // a candidate start for stages ending at j or later
    if (reachable[i] && s.canStart[i] && key[i] >= bestKey) {
      bestKey = key[i];
      best = i;
    }
    // The last stage must end at n; the others end anywhere.
    bool fits = false;
    if (best != kNone && (!last || j == n)) {
      fits = bestKey >= need[j] - limit;
      if (!fits)
        nextLimit = std::min(nextLimit, need[j] - bestKey);
    }
    next[j] = fits;
    if (fits) {
      parent[j] = best;
      any = true;
    }
  }
  return any;
}

/// extendUncapped under a memory cap: candidate starts in increasing order
/// with decreasing keys, so that the front of the window is the best start
/// still inside it.
bool extendCapped(Search &s, size_t *parent, bool last, int64_t limit,
                  int64_t &nextLimit) {
  const size_t n = s.n;
  const std::vector<int64_t> &key = s.key, &need = s.need;
  const std::vector<size_t> &firstStart = *s.firstStart;
  std::vector<char> &reachable = s.reachable, &next = s.next;
  bool any = false;
  size_t *window = s.window.data();
  size_t head = 0, tail = 0;
  for (size_t j = 1; j <= n; ++j) {
    size_t i = j - 1;
    if (reachable[i] && s.canStart[i]) {
      while (tail > head && key[window[tail - 1]] <= key[i])
        --tail;
      window[tail++] = i;
    }
    while (tail > head && window[head] < firstStart[j])
      ++head;
    bool fits = false;
    if (tail > head && (!last || j == n)) {
      fits = key[window[head]] >= need[j] - limit;
      if (!fits)
        nextLimit = std::min(nextLimit, need[j] - key[window[head]]);
    }
    next[j] = fits;
    if (fits) {
      parent[j] = window[head];
      any = true;
    }
  }
  return any;
}

/// With bottleneck `limit`, the start of every stage of a partition into
/// exactly `stages` stages, or empty when there is none. Among the starts
/// with the largest key the latest is taken, so that every probe of the
/// same bound returns the same partition.
///
/// When there is none, `nextLimit` is the smallest bound above `limit` at
/// which some stage could end where it could not: below it every test of
/// this probe comes out the same, so no partition exists either.
std::vector<size_t> tryPartition(Search &s, size_t stages, int64_t limit,
                                 int64_t &nextLimit) {
  nextLimit = std::numeric_limits<int64_t>::max();
  const size_t n = s.n;
  s.parent.resize(stages * (n + 1));
  s.reachable.assign(n + 1, 0);
  s.next.assign(n + 1, 0);
  s.window.resize(n + 1);
  std::vector<char> &reachable = s.reachable, &next = s.next;
  reachable[0] = 1; // zero stages cover the empty prefix
  for (size_t k = 0; k < stages; ++k) {
    size_t *parent = &s.parent[k * (n + 1)];
    bool last = k + 1 == stages;
    next[0] = 0; // a stage is never empty
    bool any = s.capped ? extendCapped(s, parent, last, limit, nextLimit)
                        : extendUncapped(s, parent, last, limit, nextLimit);
    if (!any)
      return {}; // no prefix is covered by k + 1 stages
    reachable.swap(next);
  }
  if (!reachable[n])
    return {};
  std::vector<size_t> starts(stages);
  size_t end = n;
  for (size_t k = stages; k-- > 0;) {
    starts[k] = s.parent[k * (n + 1) + end];
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

/// The keys and thresholds of the feasibility test for `problem` with op
/// cost prefix sums `prefix`, and the starts `first` allows.
Search makeSearch(const PartitionProblem &problem,
                  const std::vector<int64_t> &prefix,
                  const std::vector<size_t> &first) {
  size_t n = problem.opCost.size();
  Search search;
  search.n = n;
  search.key.resize(n + 1);
  search.need.resize(n + 1);
  search.canStart.resize(n + 1);
  for (size_t i = 0; i <= n; ++i) {
    search.key[i] = prefix[i] - problem.cutCost[i];
    search.need[i] = prefix[i] + problem.cutCost[i];
    search.canStart[i] =
        i == 0 || problem.cutAllowed.empty() || problem.cutAllowed[i];
  }
  search.firstStart = &first;
  search.capped = problem.memoryCap > 0;
  return search;
}

/// The cost of the costliest stage of the partition with `starts`.
int64_t bottleneck(const PartitionProblem &problem,
                   const std::vector<size_t> &starts, size_t stages) {
  size_t n = problem.opCost.size();
  int64_t worst = 0;
  for (size_t k = 0; k < stages; ++k)
    worst = std::max(worst, stageCost(problem, starts[k],
                                      k + 1 < stages ? starts[k + 1] : n));
  return worst;
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
  Search search = makeSearch(problem, prefix, first);
  // The optimum is usually just above the lower bound: the search gallops
  // up from it until a bound succeeds (each failure also jumps to the next
  // bound that could), then bisects between the two ends. The answer is the
  // partition found under the optimum itself, whatever the probes before.
  const int64_t most = hi; // the bound under which any partition fits
  int64_t step = std::max<int64_t>(1, lo / 1024);
  std::vector<size_t> best;
  int64_t bestLimit = -1; // the bound `best` was found under
  int64_t probe = lo, nextLimit;
  while (true) {
    std::vector<size_t> starts = tryPartition(search, stages, probe, nextLimit);
    if (!starts.empty()) {
      hi = bottleneck(problem, starts, stages);
      best = std::move(starts);
      bestLimit = probe;
    } else if (best.empty() && (probe >= most || nextLimit > most)) {
      return Partition(); // nothing fits the memory cap and the allowed cuts
    } else {
      lo = std::min(hi, std::max(probe + 1, nextLimit));
    }
    if (!best.empty() && lo >= hi)
      break;
    if (best.empty()) {
      probe = std::min(most, lo + step);
      step = step > most / 4 ? most : step * 4;
    } else {
      probe = lo + (hi - lo) / 2;
    }
  }
  if (bestLimit != hi)
    best = tryPartition(search, stages, hi, nextLimit);
  Partition result;
  result.starts = best;
  result.bottleneck = bottleneck(problem, best, stages);
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
