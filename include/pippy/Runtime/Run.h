//===- Run.h - what pippy-run does ------------------------------*- C++ -*-===//
//
// The options of `pippy-run` and the entry point that carries them out. This
// header exposes no libtorch type so that the tool's `main` stays in LLVM's
// world (no RTTI, no exceptions); runtime errors come back as llvm::Error.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_RUN_H
#define PIPPY_RUNTIME_RUN_H

#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace pippy {

struct RunOptions {
  std::string programPath; ///< graph IR (or, later, pipeline IR)
  int nproc = 1;
  std::string schedule = "1f1b";
  int microbatches = 1;
  int steps = 1;
  std::string dataPath;
  std::string loss = "cross_entropy"; ///< cross_entropy | mse | none
  std::string optimizer = "sgd";      ///< sgd | adamw
  double lr = 0.01;
  std::optional<double> momentum, weightDecay, beta1, beta2, eps;
  std::optional<double> clipGradNorm;
  std::string weightsPath; ///< overrides the module's pippy.weights
  std::string metricsPath;
  std::string saveWeightsPath;
  std::string saveGradsPath;
  bool infer = false;
  std::string outputPath;
  int threads = 1;
  double timeoutSeconds = 60; ///< communicator timeout
  std::string tracePath;      ///< Chrome/Perfetto trace (pipelines)
  std::string checkpointDir;  ///< checkpoints (pipelines)
  int checkpointEvery = 0;
  bool resume = false;
  std::string scheduleText;      ///< a schedule in text form (overrides kind)
  bool deferWeightGrads = false; ///< batch linear weight gradients per step
  /// Leave linear weight gradients to autograd instead of accumulating them
  /// in place (Program::fuseWeightGradients).
  bool autogradWeightGrads = false;
  std::string profilePath; ///< measured per-op times (pipelines)
};

/// Runs training or inference as `options` say; prints progress lines.
/// When the environment names a rank of a world larger than one (set by
/// `pippy-run --nproc`, torchrun, Slurm or mpirun), this process runs that
/// rank's stage of the pipeline.
llvm::Error run(const RunOptions &options);

} // namespace pippy

#endif // PIPPY_RUNTIME_RUN_H
