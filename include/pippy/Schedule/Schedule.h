//===- Schedule.h - pipeline schedules as data ------------------*- C++ -*-===//
//
// A schedule is, per rank, an ordered list of actions; a rank holds one or
// more stages (its placement). Actions have the text form of the stage
// executables (pippy/Executable/Format.h), which is also
// torch.distributed.pipelining's:
//
//   1F2            stage 1, forward of micro-batch 2
//   0B3            stage 0, the whole backward of micro-batch 3
//   0I3 / 0W3      the same backward split: input gradients (I), then the
//                  weight gradients (W) I left
//   2SEND_F1       stage 2 sends micro-batch 1's activations to its consumers
//   1RECV_F1       stage 1 receives micro-batch 1's activations
//   1SEND_B0 / 0RECV_B0   the same for gradients, in the other direction
//   0W                    deferred linear weight gradients of the
//                         micro-batches backwarded so far (--defer-weight-
//                         grads); the rest is done before STEP
//   0ALLREDUCE_TIED       sums the rank's tied-weight gradients over their
//                         groups (one per rank, named by its first tied stage)
//   0STEP                 stage 0's optimizer step
//
// SEND and RECV cover every peer of the stage on another rank at once (a
// stage with a skip connection sends to, or receives from, more than one
// stage). Between two stages of one rank there is no message: the consumer
// takes the producer's results when it runs (a local hand-over), so the
// producer's action must come first in the rank's list. The checker proves,
// before any rank starts, that every send has its receive and that the
// ranks cannot deadlock, assuming sends are asynchronous and receives
// block; the simulator predicts busy time, bubble, in-flight micro-batches
// and activation memory from per-stage costs.
//
// Compiler-side code: no libtorch, no exceptions.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_SCHEDULE_SCHEDULE_H
#define PIPPY_SCHEDULE_SCHEDULE_H

#include "pippy/Executable/Format.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pippy::schedule {

using Op = exe::ActionKind;
using Kind = exe::ScheduleKind;

struct Action {
  Op op;
  int stage = 0;
  int microbatch = 0; ///< unused for Weight, AllReduceTied and Step

  std::string str() const { return exe::actionText(op, stage, microbatch); }
  bool operator==(const Action &other) const {
    return op == other.op && stage == other.stage &&
           (microbatch == other.microbatch || !hasMicrobatch());
  }
  bool hasMicrobatch() const { return exe::hasMicrobatch(op); }
  /// F, B, I or W: what a compute-only schedule lists.
  bool isCompute() const;
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

/// How stages are dealt to ranks.
enum class Placement {
  OnePerRank, ///< rank r holds stage r
  Loop,       ///< stage s on rank s mod R: rank r holds r, r+R, r+2R, ...
  V,          ///< rank r holds stages r and 2R-1-r
};

/// `3 stages on 1 rank`.
std::string placementText(int numStages, int numRanks);

/// The rank of each stage; an error when `numStages` stages cannot be
/// placed on `numRanks` ranks that way.
llvm::Expected<std::vector<int>> place(Placement placement, int numStages,
                                       int numRanks);

struct Schedule {
  Kind kind = Kind::Custom;
  int microbatches = 0;
  bool training = true;
  std::vector<int> stageRank;             ///< per stage, the rank holding it
  std::vector<std::vector<Action>> ranks; ///< per rank, its actions in order

  int numRanks() const { return static_cast<int>(ranks.size()); }
  /// The stages rank `r` holds, ascending.
  std::vector<int> stagesOf(int r) const;
  /// One line per rank: `rank0: 0F0 0SEND_F0 ...`.
  std::string str() const;
};

/// The schedule kinds `generate` knows, and the placement each needs.
llvm::ArrayRef<Kind> kinds();
Placement placementOf(Kind kind);
/// `gpipe`, `1f1b`, ... (exe::scheduleKindText).
std::string kindName(Kind kind);
/// The kind spelt `name`; the error lists the kinds.
llvm::Expected<Kind> parseKind(llvm::StringRef name);

/// Generates schedule `kind` for `topo` on `numRanks` ranks (each kind's
/// generator, with its paper and timeline, is in Generators.cpp).
/// Forward-only (`training` false) schedules have no backward, gradient
/// message, ALLREDUCE_TIED or STEP actions; every kind gives the same one.
///
/// With `splitBackward`, 1F1B's first stage (whose backward feeds no other
/// stage) computes the deferred weight gradients of the micro-batches done
/// so far (W) while it waits for the last micro-batch's gradient.
llvm::Expected<Schedule> generate(Kind kind, const Topology &topo, int numRanks,
                                  int microbatches, bool training = true,
                                  bool splitBackward = false);

/// Completes compute-only action lists (F, B, I, W): receives before the
/// compute that needs them, sends right after the compute that makes them
/// (none between stages of one rank), then, when training, one
/// ALLREDUCE_TIED if the rank holds a tied stage (named by its first; it sums
/// every tied group the rank is in) and each stage's STEP.
void addCommunication(Schedule &schedule, const Topology &topo);

/// Reads the text form written by Schedule::str. Stages are placed where
/// the actions naming them are.
llvm::Expected<Schedule> parse(llvm::StringRef text, int numStages,
                               int microbatches, bool training = true);

/// Reads a schedule in torch.distributed.pipelining's CSV form (`_dump_csv`,
/// `_load_csv`): one row per rank, one action per cell, an empty cell idle.
/// A file without SEND/RECV actions is compute-only and gets them added;
/// UNSHARD, RESHARD and REDUCE_GRAD are no-ops here and dropped; the
/// optimizer's actions (ALLREDUCE_TIED, STEP) are added where missing.
llvm::Expected<Schedule> parseCsv(llvm::StringRef text, const Topology &topo,
                                  int microbatches, bool training = true);
/// Whether `path` names a CSV schedule (ends in `.csv`).
bool isCsvFile(llvm::StringRef path);
/// The CSV form: compute actions only, or with sends and receives.
/// ALLREDUCE_TIED, STEP and the deferred-weights W are pippy's own and
/// left out (parseCsv adds the first two back).
std::string toCsv(const Schedule &schedule, bool withCommunication);

/// Proves that `schedule` is complete and cannot deadlock on `topo`. On
/// failure, the error holds the reason and the rank-by-step grid of the
/// simulated run with the failing step marked.
llvm::Error check(const Schedule &schedule, const Topology &topo);

/// What one micro-batch costs on each stage, in any unit of time, and the
/// bytes its activations hold until its backward frees them.
struct StageCosts {
  std::vector<double> forward, backward; ///< backward: the whole of it
  std::vector<double> weight;      ///< W's share of backward (I is the rest)
  std::vector<double> activations; ///< bytes per micro-batch, or empty
  std::vector<double> step;        ///< each stage's STEP (optimizer), or empty
  double transfer = 0;             ///< a message's flight between ranks
  /// The rank's own time per SEND or RECV action (packing, the transport's
  /// calls): neither compute nor idle waiting, but it delays the rank.
  double message = 0;
  /// Whether a whole backward (B) runs as pippy-run runs it on a rank whose
  /// schedule has no I actions: a stage that sends input gradients to
  /// another rank computes them first (backward - weight) and holds its
  /// weight gradients (weight) back until the rank's next send of
  /// gradients, keeping at most one micro-batch's held (runtime/Backward.cpp).
  /// Off, a B is one piece, as the schedules' papers count it.
  bool holdWeightGradients = false;
  /// Whether a rank about to wait for a message computes a W of its list
  /// early, or steps a stage whose work is done, as pippy-run does by
  /// default (--fill-waits, WaitFill.h). A stage steps early on a rank that
  /// holds several and no tied weights; pippy-run also keeps every STEP in
  /// place with --dp, --tp, --zero or --clip-grad-norm.
  bool fillWaits = false;
  /// With fillWaits, how many micro-batches more than its schedule's order
  /// holds a rank may hold in flight to fill a wait with a later forward
  /// whose input has come (--fill-forwards); 0: none.
  int fillForwards = 0;
  /// Per action (`1F3`, `0STEP`), its own cost, replacing its stage's: a
  /// traced step replayed. A held B's is its whole; `held` its W share.
  std::map<std::string, double> actions, held;
};

/// Reads measured costs written as JSON, `{"forward": [per stage],
/// "backward": [...], "weight": [...], "step": [...], "message": x,
/// "transfer": y, "hold_weight_gradients": true, "fill_waits": true,
/// "actions": {"1F3": x},
/// "held": {"1B3": y}}` (any unit of time, every field optional), over `costs`:
/// the fields given replace the ones there. A list must have one entry per
/// stage.
llvm::Error readStageCosts(llvm::StringRef json, int numStages,
                           StageCosts &costs);

/// One stretch of compute on a rank: an action, or (a B's held weight
/// gradients) the rest of one.
struct SimulatedBox {
  double start = 0, end = 0;
  Action action{Op::Forward};
};

/// Predicted run of a checked schedule: each action starts as soon as its
/// rank is free and its messages have arrived.
struct Simulation {
  double makespan = 0;
  std::vector<double> busy;      ///< compute time per rank
  std::vector<int> peakInflight; ///< per rank, the most (stage, micro-batch)
                                 ///< activations held at once
  std::vector<double> peakActivationBytes; ///< per rank
  double bubbleFraction = 0; ///< 1 - sum(busy) / (ranks x makespan)
  /// Per rank, its compute in time order: each F, B, I, W and STEP, and a
  /// held B's weight gradients as a second box of that B.
  std::vector<std::vector<SimulatedBox>> boxes;
};
Simulation simulate(const Schedule &schedule, const Topology &topo,
                    const StageCosts &costs);

/// The simulated run as text, one row per rank, one column per `unit` of
/// time: the compute action running then, or `.` when the rank is idle.
std::string renderTimeline(const Schedule &schedule, const Simulation &sim,
                           double unit);

/// A timeline to draw: each compute action's box on its rank, in any unit
/// of time from 0 to `span`.
struct PlotBox {
  int rank = 0;
  double start = 0, end = 0;
  Action action{Op::Forward};
};
struct PlotPanel {
  std::string title;
  int ranks = 0;
  double span = 0;
  std::vector<PlotBox> boxes;
};
/// The simulated run's compute actions.
PlotPanel simulatedPanel(const Schedule &schedule, const Simulation &sim,
                         const std::string &title);
/// The compute actions of a `pippy-run --trace` file (Chrome trace JSON,
/// pid = rank), of its last training step, in microseconds from the first.
llvm::Expected<PlotPanel> tracePanel(llvm::StringRef trace,
                                     const std::string &title);
/// The panels as one SVG, one row per rank, one box per action coloured by
/// kind over a grey row (idle time is the grey between boxes); each box is
/// `<rect class="F|B|I|W" data-rank="R">` titled with its action.
std::string renderSvg(const std::vector<PlotPanel> &panels);

} // namespace pippy::schedule

#endif // PIPPY_SCHEDULE_SCHEDULE_H
