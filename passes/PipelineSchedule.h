//===- PipelineSchedule.h - a pipeline as lib/Schedule sees it --*- C++ -*-===//
//
// The bridge between a `pippy.pipeline` and lib/Schedule: its topology (who
// sends to whom, tied groups) and the schedule --pippy-lower-schedule
// recorded on it. --pippy-lower-schedule, --pippy-report and
// --pippy-schedule-plot use it.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_PASSES_PIPELINESCHEDULE_H
#define PIPPY_PASSES_PIPELINESCHEDULE_H

#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Schedule/Schedule.h"

#include <optional>

namespace mlir::pippy {

/// What a stage computes, holds and transfers per micro-batch, from the
/// cost model (--pippy-report's row).
struct StageRow {
  int64_t index = 0, ops = 0, params = 0, paramBytes = 0, flops = 0,
          bytesMoved = 0, activationBytes = 0, recvBytes = 0, sendBytes = 0;
  /// The cost the balancer balances.
  int64_t predicted() const {
    return flops + bytesMoved + recvBytes + sendBytes;
  }
};
StageRow measureStage(StageOp stage);

::pippy::schedule::Topology topologyOf(PipelineOp pipeline);

/// The schedule `pippy.schedule` records, if the pipeline has one; an error
/// diagnostic on the pipeline when it does not parse.
FailureOr<std::optional<::pippy::schedule::Schedule>>
recordedSchedule(PipelineOp pipeline, const ::pippy::schedule::Topology &topo);

/// Simulation costs from the cost model, per micro-batch: a stage's forward
/// is its predicted cost (what the balancer balances), its backward twice
/// that, W's share of it the forward's; activations are its ops' result
/// bytes; transfers cost nothing.
::pippy::schedule::StageCosts costModelCosts(PipelineOp pipeline);
/// The cost model's costs with those `costsFile` gives (readStageCosts)
/// in their place, when it is not empty; an error diagnostic on the
/// pipeline when the file cannot be read.
FailureOr<::pippy::schedule::StageCosts>
simulationCosts(PipelineOp pipeline, llvm::StringRef costsFile);

} // namespace mlir::pippy

#endif // PIPPY_PASSES_PIPELINESCHEDULE_H
