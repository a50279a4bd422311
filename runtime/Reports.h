//===- Reports.h - the metrics and trace files of a run ---------*- C++ -*-===//
//
// Internal to runtime/: the formats of `--metrics` and `--trace`, each
// defined here alone (DESIGN.md, "Outputs"):
//
//   metrics  {"steps": [{"step": 1, "loss": 2.30, "step_time_s": 0.12,
//             "samples_per_s": 533.0, "rank_step_time_s": [...]}, ...],
//             "bubble_fraction": 0.11, "peak_inflight_microbatches": [2, 1],
//             "peak_activation_bytes": [65536, 32768],
//             "busy_s": [...], "schedule": "1f1b", "ranks": 2,
//             "mesh": {"dp": 1, "pp": 2, "ranks": [{"replica": 0,
//             "pipeline_rank": 0}, ...]}}; with --dp also, per rank,
//             "dp_allreduce_bytes_per_step", "gradient_bytes" and
//             "dp_wait_s" (DataParallel.h); "optimizer_state_bytes" per
//             rank. Lists "per rank" are by global rank.
//   trace    Chrome/Perfetto JSON: {"traceEvents": [...], "displayTimeUnit":
//            "ms"}, one process per rank, complete events ("ph": "X") named
//            in the action text form (`1F2`).
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_REPORTS_H
#define PIPPY_RUNTIME_REPORTS_H

#include "pippy/Runtime/Mesh.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pippy::rt {

struct StepMetrics {
  int step = 0;
  double loss = 0;
  double stepSeconds = 0; ///< the slowest rank's
  double samplesPerSecond = 0;
  std::vector<double> rankStepSeconds;
  std::vector<double> rankBusySeconds; ///< F, B, I, W and STEP time
};

struct RunMetrics {
  std::vector<StepMetrics> steps;
  double bubbleFraction = 0;
  std::vector<int64_t> peakInflight; ///< per rank
  /// Per rank: the most bytes the forwards of in-flight micro-batches left
  /// allocated at once (what each forward allocated and did not free before
  /// its backward), measured by the allocator of the rank's device.
  std::vector<int64_t> peakActivationBytes;
  /// Per rank on GPUs: the most bytes of tensors its GPU held at once
  /// (libtorch's CUDA caching allocator); empty on CPUs.
  std::vector<int64_t> peakDeviceBytes;
  std::vector<double> busySeconds; ///< per rank
  std::string schedule;
  std::string dtype = "f32"; ///< --dtype
  int ranks = 1;
  Mesh mesh;
  /// Per rank, with --dp: the bytes it all-reduced over its data-parallel
  /// group per step, the bytes of its gradients (the two are equal when
  /// every gradient is summed exactly once), and the seconds it waited for
  /// the sums at the optimizer steps.
  std::vector<int64_t> dpReducedBytesPerStep, gradientBytes;
  std::vector<double> dpWaitSeconds;
  /// Per rank: the bytes of optimizer state it holds at the end (a share
  /// of its stages' with --zero 1).
  std::vector<int64_t> optimizerStateBytes;
};

std::string metricsJson(const RunMetrics &metrics);

struct TraceEvent {
  std::string name;
  double start, duration; // microseconds since the common start
  int step = 0;           // the training step; 0 in --infer (not written)
};

/// One rank's events, as it sends them to rank 0; a training step's carry
/// it as `args.step`.
std::string traceEventsJson(int rank, const std::vector<TraceEvent> &events);
/// The whole trace from every rank's part (rank r's at index r), each rank
/// named with its stages (`rank 0 (stages 0, 3)`); throws RuntimeError on a
/// malformed part.
std::string mergeTrace(const std::vector<std::string> &parts,
                       const std::vector<std::vector<int>> &stagesOfRank);

/// Writes `text` to `path` atomically; throws RuntimeError on failure.
void writeTextFile(const std::string &path, const std::string &text);

} // namespace pippy::rt

#endif // PIPPY_RUNTIME_REPORTS_H
