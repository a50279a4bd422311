//===- Options.h - pippy-run's command line ---------------------*- C++ -*-===//
//
// The options of `pippy-run`, parsed once at the tool's edge into typed
// values (enums for every choice with a fixed set of values). The
// runtime-only build and the full build parse them with this one parser, so
// both accept the same syntax and print the same messages:
//
//   pippy-run PROGRAM [--name VALUE | --name=VALUE | --flag]...
//
// PROGRAM is a folder of stage executables (or one `.pipx` file), or, in the
// full build, a graph or pipeline IR that is lowered first.
//
// No LLVM, MLIR or libtorch.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_OPTIONS_H
#define PIPPY_RUNTIME_OPTIONS_H

#include "pippy/Executable/Executable_generated.h"

#include <optional>
#include <string>
#include <vector>

namespace pippy {

enum class LossKind { CrossEntropy, Mse, None };
enum class OptimizerKind { Sgd, AdamW };
/// The executables' own enum: --schedule takes a generated kind (a custom
/// schedule comes with --schedule-file).
using ScheduleKind = exe::ScheduleKind;
enum class Backend { Gloo, Nccl };
/// Where a rank computes (Device.h): the CPU, or one GPU per rank.
enum class DeviceKind { Cpu, Cuda };
/// The precision forwards compute in: the model's own dtypes, or bfloat16
/// mixed precision as PyTorch's autocast gives it (matrix products and
/// convolutions in bf16; weights, gradients, optimizer state and the loss
/// in f32). See docs/MixedPrecision.md.
enum class Precision { F32, BF16 };

/// The command-line spelling of each choice ("cross_entropy", "adamw",
/// "1f1b", "nccl").
const char *name(LossKind kind);
const char *name(OptimizerKind kind);
const char *name(ScheduleKind kind);
const char *name(Backend backend);
const char *name(Precision precision);
const char *name(DeviceKind device);

struct RunOptions {
  std::string programPath; ///< executables, or IR in the full build

  // Baked into executables: when running them, a value given must agree.
  std::optional<int> nproc;             ///< ranks per node
  std::optional<ScheduleKind> schedule; ///< default 1f1b
  std::optional<int> microbatches;      ///< default 1
  std::optional<bool> deferWeightGrads; ///< split backward
  std::string scheduleText;             ///< --schedule-file's contents
  std::string scheduleFile;

  // The lowering only.
  std::string emitExecutablesDir;

  // The run.
  int steps = 1;
  std::string dataPath;
  LossKind loss = LossKind::CrossEntropy;
  OptimizerKind optimizer = OptimizerKind::Sgd;
  double lr = 0.01;
  std::optional<double> momentum, weightDecay, beta1, beta2, eps;
  std::optional<double> clipGradNorm;
  std::string weightsPath; ///< overrides the program's weights file
  std::string metricsPath;
  std::string saveWeightsPath;
  std::string saveGradsPath;
  bool infer = false;
  std::string outputPath;
  int threads = 1;
  uint64_t seed = 0; ///< random ops' streams derive from it (RandomKey)
  double timeoutSeconds = 60; ///< communicator timeout
  std::string tracePath;
  std::string checkpointDir;
  int checkpointEvery = 0;
  int keepCheckpoints = 0; ///< 0: keep every checkpoint
  bool resume = false;
  /// Leave linear weight gradients to autograd instead of accumulating them
  /// in place (Program::fuseWeightGradients).
  bool autogradWeightGrads = false;
  std::string profilePath;
  /// Unset: nccl on a GPU, else gloo.
  std::optional<Backend> backend;
  /// Unset: cuda where the libtorch has CUDA and a GPU is visible.
  std::optional<DeviceKind> device;
  Precision precision = Precision::F32; ///< --dtype
  bool allowTf32 = false;
  /// Messages between ranks of one host through shared memory (Gloo).
  bool sharedMemory = true;
  /// A rank about to wait for a message computes a later W of its
  /// schedule, or steps a stage whose work is done, meanwhile
  /// (pippy/Executable/WaitFill.h).
  bool fillWaits = true;
  /// With fillWaits, how many micro-batches a rank may hold in flight
  /// beyond its order's to fill a wait with a later forward whose input has
  /// come (WaitFill::pickForward); 0: none.
  int fillForwards = 0;

  // Where ranks run.
  /// Data-parallel replicas of the pipeline (Mesh.h): the world is dp x the
  /// pipeline's ranks, and each replica runs microbatches / dp of a step.
  int dp = 1;
  /// Each stage's gradient all-reduce starts when its last backward of the
  /// step is done, overlapping what the rank has left (false: at the step).
  bool dpOverlap = true;
  /// ZeRO stage (0 or 1): with 1 each replica holds and steps the optimizer
  /// state of its share of the parameters (DataParallel.h).
  int zero = 0;
  /// Tensor-parallel ranks per pipeline rank (Mesh.h): the pipeline must be
  /// sharded for it (--pippy-tensor-parallel="tp=T").
  int tp = 1;
  int nnodes = 1;
  int nodeRank = 0;
  std::string masterAddr;
  int masterPort = 0;
  std::string runId; ///< empty: TORCHELASTIC_RUN_ID, or "none"

  int microbatchCount() const { return microbatches.value_or(1); }
  int ranksPerNode() const { return nproc.value_or(1); }
  /// The file options a run writes (`--metrics`, ...), each with its flag.
  std::vector<std::pair<const char *, std::string>> outputFiles() const;
  /// Why an output may not be written, when one names file `input`
  /// (`what`: "--data of this run"), or empty: it would overwrite an input.
  std::string overwritingInput(const std::string &input,
                               const std::string &what) const;
};

/// Parses `argv` (argv[0] included). On failure, or for --help, returns
/// none and sets `message` to what to print ("pippy-run: error: ..." or the
/// help text) and `exitCode` (1, or 0 for --help).
std::optional<RunOptions> parseRunOptions(const std::vector<std::string> &argv,
                                          std::string &message, int &exitCode);

} // namespace pippy

#endif // PIPPY_RUNTIME_OPTIONS_H
