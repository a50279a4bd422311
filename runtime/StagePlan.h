//===- StagePlan.h - what a rank runs, read from its executable -*- C++ -*-===//
//
// Internal to runtime/: a verified stage executable as the executor uses it:
// the stages this rank holds, each with the tensors it receives and sends
// grouped by peer stage (the message tags follow from the stage pair and
// each transfer's channel; a peer on this rank is a local hand-over) and
// where its inputs come from; the pipeline's outputs, tied groups, every
// stage's parameters (for saving weights) and the rank's action list.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_STAGEPLAN_H
#define PIPPY_RUNTIME_STAGEPLAN_H

#include "pippy/Executable/Format.h"
#include "pippy/Runtime/Program.h"

#include <map>
#include <string>
#include <vector>

namespace pippy::rt {

/// A stage executable read from a file (or made in memory), verified.
class LoadedExecutable {
public:
  /// Reads and verifies `path`; an error names it.
  static LoadedExecutable read(const std::string &path);
  /// Verifies bytes made in this process; `name` is used in errors.
  static LoadedExecutable fromBytes(std::string bytes, const std::string &name,
                                    const std::string &folder);

  const exe::Executable &get() const {
    return *exe::GetExecutable(bytes.data());
  }
  const std::string &name() const { return label; }
  /// `--weights`, or the executable's weights file (relative to its folder).
  std::string weightsPath(const std::string &override) const;

private:
  std::string bytes, label, folder;
};

/// Whether `path` names stage executables (a folder, a `.pipx` file, or a
/// file with the executables' identifier) rather than IR.
bool isExecutable(const std::string &path);
/// Rank `rank`'s executable under `path` (a folder, or the file itself).
std::string executablePath(const std::string &path, int rank);

/// The tensors one stage sends another per micro-batch: (producer result,
/// consumer input) pairs in channel order, which is the consumer's input
/// order. Both ends read the same list, so messages need no headers.
struct Edge {
  int peerStage = 0;
  int peerRank = 0;
  bool local = false; ///< the peer stage is on this rank: no message
  std::vector<std::pair<unsigned, unsigned>> entries;
  std::vector<TensorSpec> specs;
  /// Per entry: whether the consumer's input can get a gradient at all.
  /// Gradients that autograd can only leave undefined are neither computed
  /// as zeros nor sent: a parameter whose gradient is None stays untouched
  /// by weight decay and momentum, as in PyTorch.
  std::vector<bool> gradFlows;
};

struct StageInputSource {
  int stage = -1; ///< -1: the pipeline's input `index`
  unsigned index = 0;
};

struct TiedReplicas {
  std::string name;
  std::vector<int> ranks;
  bool getsGradient = true;
};

struct ScheduledAction {
  exe::ActionKind kind;
  int stage = 0;
  int microbatch = 0;
  std::string text() const { return exe::actionText(kind, stage, microbatch); }
};

/// One stage this rank holds.
struct HeldStage {
  int stage = 0;
  const exe::Program *program = nullptr; ///< in the executable's buffer
  int countedOpOffset = 0;
  std::vector<StageInputSource> stageInputs;
  std::vector<bool> inputGetsGrad;
  std::vector<Edge> recvEdges, sendEdges; ///< by peer stage, ascending
  bool holdsOutput = false;
  /// Whether the stage sends input gradients to a stage on another rank.
  bool sendsInputGradients() const;
};

struct StagePlan {
  int rank = 0, numRanks = 1, numStages = 1;
  std::vector<HeldStage> stages; ///< ascending
  uint64_t pipelineHash = 0;
  std::string source;
  std::vector<TensorSpec> inputs; ///< the pipeline's, micro-batch sized
  int outputStage = 0;
  std::vector<unsigned> outputIndices;
  std::vector<TiedReplicas> tied;
  std::vector<int> stageRanks;
  /// Every stage's parameters in first-use order (the whole tensors'
  /// specs, as the weights file holds them).
  std::vector<std::vector<std::pair<std::string, TensorSpec>>> stageParams;
  /// The tensor-parallel group the parameters are sharded for, and each
  /// sharded parameter's (dimension, slices); rank t of the group holds
  /// slice t (Executable.fbs `Shard`).
  int tensorParallel = 1;
  std::map<std::string, std::pair<int, int>> shards;
  int countedOpOffset = 0;
  std::string scheduleKind;
  int microbatches = 1;
  bool splitBackward = false;
  std::vector<ScheduledAction> actions;

  /// The slice tensor rank `t` holds of parameter `whole`: itself, or
  /// where it is sharded, slice t along its dimension.
  at::Tensor sliceOf(const std::string &name, const at::Tensor &whole,
                     int t) const;
  /// The plan of a verified executable.
  static StagePlan of(const exe::Executable &exe);
  bool holdsOutput() const { return stageRanks.at(outputStage) == rank; }
  int64_t microbatchRows() const { return inputs.at(0).sizes.at(0); }
  /// Whether some action splits a backward into I and W (set by `of`).
  bool hasInputWeightSplit = false;
  /// The message tag of micro-batch `m`'s tensor `channel` between two
  /// stages, forward (direction 0) or backward (1); the stage pair keeps
  /// apart the messages of two ranks that share several pairs.
  int tag(int m, int direction, int producer, int consumer,
          size_t channel) const;
};

} // namespace pippy::rt

#endif // PIPPY_RUNTIME_STAGEPLAN_H
