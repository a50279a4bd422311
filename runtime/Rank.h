//===- Rank.h - one rank of a pipeline --------------------------*- C++ -*-===//
//
// Internal to runtime/: the state of one rank running its stage executable,
// and the steps it takes. A rank holds one or more stages (StageRun); a
// transfer between two of them is a local hand-over, not a message. The
// class is defined across one file per seam:
//
//   Executor.cpp      loading, the training and inference loops, and which
//                     action runs what
//   Actions.cpp       the actions: F, B, I, W, SEND/RECV, hand-overs
//   TiedGradients.cpp summing replicated tied weights' gradients, and
//                     clipping by the global norm
//   Agreement.cpp     checking that every rank runs the same pipeline and
//                     options
//   Replicas.cpp      the data-parallel mesh: communicators, micro-batches
//                     dealt to replicas, gradients summed over them
//                     (DataParallel.h)
//   Reporting.cpp     progress lines, metrics, trace, profile, saved weights
//                     and gradients
//   Checkpoint.cpp    checkpoints and resuming
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_RANK_H
#define PIPPY_RUNTIME_RANK_H

#include "ActionClock.h"
#include "DataParallel.h"
#include "Dataset.h"
#include "Reports.h"
#include "StagePlan.h"

#include "pippy/Executable/WaitFill.h"
#include "pippy/Runtime/Comm.h"
#include "pippy/Runtime/Mesh.h"
#include "pippy/Runtime/Options.h"
#include "pippy/Runtime/Program.h"

#include <torch/optim.h>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace pippy::rt {

using Clock = std::chrono::steady_clock;

/// The state of one micro-batch between its forward and its backward.
struct MicroBatch {
  std::vector<at::Tensor> received; // per stage input (or undefined)
  /// Per stage input: the spec of a receive that carries its dtype
  /// (MixedPrecision.h), whose buffer forward decodes; else null.
  std::vector<const TensorSpec *> wireSpecs;
  std::vector<CommHandlePtr> recvF, recvB;
  std::vector<std::vector<at::Tensor>> gradBuffers; // per consumer edge
  std::vector<c10::IValue> outputs;
  std::vector<c10::IValue> captured; // deferred linears: input, output
  at::Tensor loss;
  std::vector<at::Tensor> inputGrads; // per stage input
};

/// A stage this rank runs: its part of the plan, its program, its
/// micro-batches of the step and its ops' times (--profile).
struct StageRun {
  const HeldStage *plan = nullptr;
  std::unique_ptr<Program> program;
  std::vector<MicroBatch> mbs;
  std::vector<int64_t> opNanoseconds; // per counted op
};

/// What a rank's training loop measured, per step.
struct StepHistory {
  std::vector<double> losses;
  std::vector<double> seconds;
  std::vector<double> busySeconds; ///< F, B, I, W and STEP time
  double wallSeconds = 0;
};

class RankRunner {
public:
  RankRunner(const RunOptions &options, const Rendezvous &rdzv,
             LoadedExecutable executable);
  void run();

private:
  // Executor.cpp: loading and the loops.
  void loadPrograms();
  void loadWeights();
  void connect();
  void train();
  void infer();
  void waitReceives();
  void fillWait(size_t next, int step, int64_t cursor, int &inflight,
                ::torch::optim::Optimizer &optimizer);
  bool fillForward(size_t next, int step, int64_t cursor, int &inflight,
                   ::torch::optim::Optimizer &optimizer);
  StageRun &stageRun(int stage);
  // Actions.cpp: the actions.
  void postReceives(StageRun &run, bool training);
  void forward(StageRun &run, int m, int64_t begin, bool training);
  std::string rowsText(int m, int64_t begin, int64_t rows) const;
  void sendForward(StageRun &run, int m);
  void checkSpec(int stage, const at::Tensor &t, const TensorSpec &spec, int m,
                 unsigned result);
  std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>>
  backwardRoots(StageRun &run, MicroBatch &mb);
  void backward(StageRun &run, int m);
  void backwardInput(StageRun &run, int m);
  void backwardWeight(StageRun &run, int m);
  void backwardInputs(StageRun &run, MicroBatch &mb,
                      const std::vector<at::Tensor> &roots,
                      const std::vector<at::Tensor> &grads);
  void collectInputGradients(StageRun &run, MicroBatch &mb);
  void handOverGradients(StageRun &run, int m);
  void weightGradients();
  void checkNoGradient(const HeldStage &stage, unsigned input,
                       const at::Tensor &grad);
  void sendBackward(StageRun &run, int m);
  void addHeldWeightGradients(size_t keep = 0);
  void waitSends();
  void runAction(const ScheduledAction &action, int step, int64_t cursor,
                 int &inflight, ::torch::optim::Optimizer &optimizer);
  // OptimizerStep.cpp: STEP.
  void prepareStageSteps();
  void optimizerStep(int step, int stage, ::torch::optim::Optimizer &optimizer);
  std::string describeRun() const;
  std::vector<Program::Linear> untiedTrainableLinears(StageRun &run);
  void chooseDeferredLinears();
  void fuseWeightGradients();
  std::string where() const { return "rank " + std::to_string(rdzv.rank); }

  // TiedGradients.cpp
  void registerTiedHooks();
  void allReduceTied();
  void clipGradients();

  // Agreement.cpp
  void checkRanksAgree();

  // Replicas.cpp
  void connectReplicas();
  void prepareGradientReducer();
  std::vector<int> reduceAfterActions() const;
  void reduceStage(int stage);
  /// Adds a micro-batch's loss (if it has one) to the step's.
  void addStepLoss(const at::Tensor &loss);
  /// The step's loss on the host (and with --dp summed over the replicas).
  void sumStepLoss();
  std::vector<std::vector<at::Tensor>>
  gatherOutputs(std::vector<std::vector<at::Tensor>> own, int total);
  void shardOptimizerState();
  void shareSteppedWeights();
  /// The step's index of this replica's micro-batch `m`.
  int globalMicrobatch(int m) const { return replica + m * mesh.dp; }
  /// Micro-batches per step over all replicas.
  int stepMicrobatches() const { return plan.microbatches * mesh.dp; }
  /// Whether this rank speaks for its pipeline rank: prints, writes files
  /// (replica 0, tensor rank 0; the others hold the same numbers).
  bool reports() const { return replica == 0 && tensorRank == 0; }
  /// `name`'s whole tensor from the slices of the tensor-parallel group
  /// (every rank of the group calls it); `value` where it is not sharded.
  at::Tensor wholeParameter(const std::string &name, const at::Tensor &value);

  // Reporting.cpp
  void record(const ScheduledAction &action, const ActionClock::Mark &begin);
  void printLine(const std::string &line);
  void printRank0(const std::string &line);
  std::vector<std::string> gatherStrings(const std::string &mine, int tagBase);
  void finish(int firstStep, const StepHistory &history);
  RunMetrics gatherMetrics(const StepHistory &history);
  void addStepMetrics(RunMetrics &metrics, int firstStep,
                      const StepHistory &history);
  void writeTrace();
  void writeProfile();
  void saveWeights();
  void saveGrads();

  // Checkpoint.cpp
  void checkpoint(::torch::optim::Optimizer &optimizer, int step,
                  int64_t cursor);
  /// Removes all but the newest --keep-checkpoints checkpoints (rank 0).
  void pruneCheckpoints();
  int resume(::torch::optim::Optimizer &optimizer, int64_t &cursor);
  /// This rank's checkpoint file, as replica `ofReplica` writes it.
  std::string fileName(int ofReplica) const;

  const RunOptions &options;
  Rendezvous rdzv;
  LoadedExecutable executable;
  StagePlan plan;
  Mesh mesh;
  int replica;       ///< this rank's (Mesh.h)
  int rank;          ///< its pipeline rank: the executable's
  int tensorRank;    ///< which slices of sharded parameters it holds
  at::Device device; ///< where it computes (Device.h)

  bool prefixOwnLines;
  std::vector<StageRun> stages; ///< as plan.stages
  /// Per held stage, whether its STEP has run this step.
  std::vector<bool> stageStepped;
  /// Per held stage, the parameters its STEP steps where each stage steps
  /// alone (OptimizerStep.cpp); empty where the first STEP steps them all.
  std::vector<std::vector<at::Tensor>> stageAlone;
  std::map<std::string, at::Tensor> params;
  std::vector<std::pair<std::string, at::Tensor>> trainable;
  /// What this rank's optimizer steps and holds state for: `trainable`, or
  /// with --zero 1 the share this replica owns (`owners`, by `trainable`).
  std::vector<std::pair<std::string, at::Tensor>> optimized;
  std::vector<int> owners;
  std::map<std::string, at::Tensor> allWeights; // rank 0: the file's values
  std::vector<std::string> weightOrder;
  std::map<std::string, std::string> weightsMetadata;
  std::string weightsPath;
  std::unique_ptr<Dataset> data;
  /// The world, and with --dp the replica's pipeline and this rank's
  /// data-parallel group within it; `comm` is the pipeline's (the world's
  /// without --dp), whose ranks are pipeline ranks.
  std::unique_ptr<Communicator> worldComm, pipelineComm, dpComm, tpComm;
  Communicator *comm = nullptr;
  std::unique_ptr<GradientReducer> reducer; ///< with --dp
  std::vector<std::pair<std::string, std::unique_ptr<Communicator>>> tiedComms;
  std::vector<CommHandlePtr> pendingSends;
  std::map<std::string, std::map<int, at::Tensor>> tiedContributions;
  /// The weight-gradient pass of micro-batch m waits until micro-batch
  /// m + kHeldMicrobatches has sent its input gradients (the last ones run
  /// before the optimizer step). Every input gradient after the first then
  /// reaches the previous stage one pass sooner, and the postponed pass
  /// fills the end of the step, where this stage would otherwise wait for
  /// the previous stage's last B, optimizer step and next F. Holding more
  /// than one would leave this stage idle early in the step instead
  /// (bench/pipeline/hold_sim.py: 141.7 ms per step holding none, 135.1 ms
  /// holding one, 138.6 ms holding two, with bench/pipeline's measured
  /// times). It keeps one more micro-batch's linear inputs and output
  /// gradients alive. Each weight still adds its gradients in micro-batch
  /// order, so they keep their bits.
  static constexpr size_t kHeldMicrobatches = 1;
  struct HeldWeightGradients {
    int stage;
    int microbatch;
    WeightGradientQueue queue;
  };
  std::deque<HeldWeightGradients> heldWeightGrads;
  /// The weight gradients each I queued for its W, by (stage, micro-batch).
  std::map<std::pair<int, int>, WeightGradientQueue> pendingWeightGrads;
  std::vector<Program::Linear> linears; // deferred weight gradients
                                        // (one stage per rank)
  std::set<std::string> deferred;
  std::vector<int> captureSlots;
  std::vector<std::vector<at::Tensor>> linearInputs, linearGrads;
  int currentMicrobatch = 0;
  int currentStep = 0; ///< the training step running (random ops' key)
  int64_t forwardsRun = 0;
  double backwardSeconds = 0;
  double stepLoss = 0;
  at::Tensor stepLossSum; ///< the step's micro-batch losses so far (device)
  int peakInflight = 0;
  /// What each in-flight (stage, micro-batch)'s forward left allocated,
  /// their sum now, and the sum's peak (MemoryMeter.h; for --metrics).
  std::map<std::pair<int, int>, int64_t> forwardBytes;
  int64_t activationBytes = 0, peakActivationBytes = 0;
  /// The optimizer state this rank holds after its last step (--metrics).
  int64_t optimizerBytes = 0;
  /// The W's run before their turn (--fill-waits), this step.
  exe::WaitFill early;
  /// The actions' times: busy time and the trace (ActionClock.h).
  ActionClock times;
};

} // namespace pippy::rt

#endif // PIPPY_RUNTIME_RANK_H
