//===- Partition.h - optimal contiguous partition into stages ---*- C++ -*-===//
//
// Cuts a sequence of ops into a given number of contiguous, non-empty stages
// so that the slowest stage is as fast as possible. A stage [a, b) costs the
// sum of its ops' costs plus the cost of what crosses its two boundaries
// (cut a, where it receives, and cut b, where it sends):
//
//   cost(a, b) = sum(op[a..b)) + cut[a] + cut[b]
//
// With a memory cap, a stage [a, b) must also hold at most `memoryCap` bytes
// (parameters and activations, sum(opMemory[a..b))). Cuts can be ruled out
// (a list or a scalar, which cannot cross stages, is live there).
//
// `partitionOptimal` returns a partition of minimal bottleneck: a search over
// the bottleneck value, each step an O(stages x ops) test (prefix maxima make
// every stage boundary O(1)), so the whole search is O(stages x ops x
// log(total cost)). It gallops up from a lower bound and then bisects, and a
// failed test skips the bounds it proves infeasible too: a few tests where a
// plain bisection takes a few dozen.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_ANALYSIS_PARTITION_H
#define PIPPY_ANALYSIS_PARTITION_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pippy {

struct PartitionProblem {
  /// Cost of each op, >= 0.
  std::vector<int64_t> opCost;
  /// Cost of the cut before op i, for i in 0..n (cut 0 and cut n are the
  /// model's inputs and outputs; give them 0 unless they cost something).
  std::vector<int64_t> cutCost;
  /// Optional memory cap: with `memoryCap` > 0, every stage's
  /// sum(opMemory[a..b)) must stay at or under it.
  std::vector<int64_t> opMemory;
  int64_t memoryCap = 0;
  /// Optional: with n + 1 entries, only cuts i with cutAllowed[i] != 0 may
  /// start a stage (cut 0 always does); empty allows every cut.
  std::vector<char> cutAllowed;
};

struct Partition {
  /// First op of each stage; starts[0] == 0, strictly increasing.
  std::vector<size_t> starts;
  /// The largest stage cost.
  int64_t bottleneck = 0;
};

/// Cost of stage [begin, end).
int64_t stageCost(const PartitionProblem &problem, size_t begin, size_t end);

/// A partition into exactly `stages` non-empty stages minimising the largest
/// stage cost, every stage within the memory cap if one is set and cut only
/// where allowed. Requires 1 <= stages <= number of ops. Empty `starts` when
/// no partition fits the cap and the allowed cuts.
Partition partitionOptimal(const PartitionProblem &problem, size_t stages);

/// The same by trying every partition: for tests on small problems.
Partition partitionExhaustive(const PartitionProblem &problem, size_t stages);

} // namespace pippy

#endif // PIPPY_ANALYSIS_PARTITION_H
