//===- SchedulePlot.cpp - a pipeline's schedule drawn as SVG --------------===//
//
// Draws the schedule a pipeline carries (--pippy-lower-schedule) as the
// simulator predicts it on the cost model and, given a `pippy-run --trace`
// of a run of it, as it ran, one panel above the other (lib/Schedule's
// renderSvg).
//
//===----------------------------------------------------------------------===//

#include "PipelineSchedule.h"

#include "pippy/Passes/Passes.h"
#include "pippy/Support/AtomicFile.h"

#include "mlir/IR/BuiltinOps.h"

#define DEBUG_TYPE "pippy-schedule-plot"

namespace mlir::pippy {
#define GEN_PASS_DEF_PIPPYSCHEDULEPLOT
#include "passes/Passes.h.inc"
} // namespace mlir::pippy

using namespace mlir;
namespace pd = mlir::pippy;
namespace sched = ::pippy::schedule;

namespace {

struct SchedulePlotPass
    : public pd::impl::PippySchedulePlotBase<SchedulePlotPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (file.empty()) {
      module.emitError("--pippy-schedule-plot needs file=OUT.svg");
      return signalPassFailure();
    }
    std::vector<sched::PlotPanel> panels;
    WalkResult walk = module.walk([&](pd::PipelineOp pipeline) {
      sched::Topology topo = pd::topologyOf(pipeline);
      FailureOr<std::optional<sched::Schedule>> s =
          pd::recordedSchedule(pipeline, topo);
      if (failed(s))
        return WalkResult::interrupt();
      if (!*s) {
        pipeline.emitError("the pipeline has no schedule to plot; run "
                           "--pippy-lower-schedule first");
        return WalkResult::interrupt();
      }
      sched::Simulation sim =
          sched::simulate(**s, topo, pd::costModelCosts(pipeline));
      panels.push_back(sched::simulatedPanel(
          **s, sim,
          "predicted: " + sched::kindName((*s)->kind) + ", " +
              std::to_string((*s)->microbatches) +
              " micro-batches, cost model (bubble " +
              std::to_string(sim.bubbleFraction).substr(0, 5) + ")"));
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    if (panels.empty()) {
      module.emitError("no pippy.pipeline to plot; split the model first");
      return signalPassFailure();
    }
    if (!trace.empty() && failed(addTrace(panels)))
      return signalPassFailure();
    if (std::string error =
            ::pippy::writeFileAtomically(file, sched::renderSvg(panels));
        !error.empty()) {
      module.emitError(error);
      return signalPassFailure();
    }
    markAllAnalysesPreserved();
  }

  LogicalResult addTrace(std::vector<sched::PlotPanel> &panels) {
    std::string text;
    if (std::string error = ::pippy::readFile(trace, text); !error.empty())
      return getOperation().emitError(error);
    llvm::Expected<sched::PlotPanel> panel =
        sched::tracePanel(text, "measured: " + trace.getValue());
    if (!panel)
      return getOperation().emitError(trace.getValue() + ": ")
             << llvm::toString(panel.takeError());
    panels.push_back(std::move(*panel));
    return success();
  }
};

} // namespace
