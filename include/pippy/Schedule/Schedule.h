//===- Schedule.h - pipeline schedules as data ------------------*- C++ -*-===//
//
// A schedule is, per rank, an ordered list of actions. Rank r runs stage r.
// Actions have a text form used in traces, errors and lowered programs:
//
//   1F2            stage 1, forward of micro-batch 2
//   0B3            stage 0, backward of micro-batch 3
//   2SEND_F1       stage 2 sends micro-batch 1's activations to its consumers
//   1RECV_F1       stage 1 receives micro-batch 1's activations
//   1SEND_B0 / 0RECV_B0   the same for gradients, in the other direction
//   0W                    weight gradients of the micro-batches backwarded so
//                         far, when B computes only input gradients (a
//                         split backward); the rest is done before STEP
//   0ALLREDUCE_TIED       sums tied-weight gradients over each tied group
//   0STEP                 the optimizer step
//
// SEND and RECV cover every peer of the stage at once (a stage with a skip
// connection sends to, or receives from, more than one stage). The checker
// proves, before any rank starts, that every send has its receive and that
// the ranks cannot deadlock, assuming sends are asynchronous and receives
// block; the simulator predicts busy time, bubble and in-flight
// micro-batches from per-stage costs.
//
// Compiler-side code: no libtorch, no exceptions.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_SCHEDULE_SCHEDULE_H
#define PIPPY_SCHEDULE_SCHEDULE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace pippy::schedule {

enum class Op {
  Forward,
  Backward,
  SendF,
  RecvF,
  SendB,
  RecvB,
  Weight,
  AllReduceTied,
  Step
};

struct Action {
  Op op;
  int stage = 0;
  int microbatch = 0; ///< unused for AllReduceTied and Step

  std::string str() const;
  bool operator==(const Action &other) const {
    return op == other.op && stage == other.stage &&
           (microbatch == other.microbatch || !hasMicrobatch());
  }
  bool hasMicrobatch() const {
    return op != Op::AllReduceTied && op != Op::Step && op != Op::Weight;
  }
};

/// Parses the text form (`1F2`, `0SEND_B3`, `0STEP`); none if malformed.
std::optional<Action> parseAction(llvm::StringRef text);

/// Which stages talk to which: the shape of a pipeline as the schedule sees
/// it. Stage s receives activations from producers[s] and sends them to
/// every stage that lists s as a producer.
struct Topology {
  int numStages = 0;
  std::vector<std::vector<int>> producers;
  std::vector<std::vector<int>> tiedGroups; ///< stages of each tied group

  /// A chain s-1 -> s, no tied groups.
  static Topology chain(int numStages);
  std::vector<int> consumers(int stage) const;
  bool isTied(int stage) const;
};

struct Schedule {
  std::string kind;
  int microbatches = 0;
  bool training = true;
  std::vector<std::vector<Action>> ranks; ///< rank r runs stage r

  /// One line per rank: `rank0: 0F0 0SEND_F0 ...`.
  std::string str() const;
};

/// The schedule kinds `generate` knows.
llvm::ArrayRef<llvm::StringRef> kinds();

/// GPipe (all forwards, then all backwards) or 1F1B (warm-up forwards, then
/// one forward and one backward alternating, then the remaining backwards).
/// Forward-only (`training` false) schedules have no B, SEND_B, RECV_B,
/// ALLREDUCE_TIED or STEP actions; every kind gives the same one.
///
/// With `splitBackward`, 1F1B's first stage (whose backward feeds no other
/// stage) computes the deferred weight gradients of the micro-batches done
/// so far (W) while it waits for the last micro-batch's gradient.
llvm::Expected<Schedule> generate(llvm::StringRef kind, const Topology &topo,
                                  int microbatches, bool training = true,
                                  bool splitBackward = false);

/// Reads the text form written by Schedule::str.
llvm::Expected<Schedule> parse(llvm::StringRef text, int microbatches,
                               bool training = true);

/// Proves that `schedule` is complete and cannot deadlock on `topo`. On
/// failure, the error holds the reason and the rank-by-step grid of the
/// simulated run with the failing step marked.
llvm::Error check(const Schedule &schedule, const Topology &topo);

/// Predicted run of a checked schedule: each action starts as soon as its
/// rank is free and its messages have arrived.
struct Simulation {
  double makespan = 0;
  std::vector<double> busy;      ///< compute time per rank
  std::vector<int> peakInflight; ///< max micro-batches forwarded but not
                                 ///< yet backwarded, per rank
  double bubbleFraction = 0;     ///< 1 - sum(busy) / (ranks x makespan)
};
Simulation simulate(const Schedule &schedule, const Topology &topo,
                    llvm::ArrayRef<double> forwardCost,
                    llvm::ArrayRef<double> backwardCost, double transferCost);

} // namespace pippy::schedule

#endif // PIPPY_SCHEDULE_SCHEDULE_H
