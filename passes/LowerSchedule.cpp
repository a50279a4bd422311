//===- LowerSchedule.cpp - a pipeline's schedule, ahead of time -----------===//
//
// Generates the schedule of a pipeline (lib/Schedule), checks it, and
// records every rank's action list on the pipeline, so that the stage
// programs pippy-run loads carry the exact actions each rank runs.
//
//===----------------------------------------------------------------------===//

#include "PipelineSchedule.h"

#include "pippy/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>

#define DEBUG_TYPE "pippy-lower-schedule"

namespace mlir::pippy {
#define GEN_PASS_DEF_PIPPYLOWERSCHEDULE
#include "passes/Passes.h.inc"
} // namespace mlir::pippy

using namespace mlir;
namespace pd = mlir::pippy;
namespace sched = ::pippy::schedule;

namespace {

struct LowerSchedulePass
    : public pd::impl::PippyLowerScheduleBase<LowerSchedulePass> {
  using Base::Base;

  /// The schedule the options name; `ranks` 0 places one stage per rank
  /// (two for the V kinds).
  llvm::Expected<sched::Schedule> generate(const sched::Topology &topo) {
    llvm::Expected<sched::Kind> kind = sched::parseKind(schedule);
    if (!kind)
      return kind.takeError();
    int R = static_cast<int>(ranks);
    if (R == 0)
      R = sched::placementOf(*kind) == sched::Placement::V
              ? std::max(1, topo.numStages / 2)
              : topo.numStages;
    return sched::generate(*kind, topo, R, static_cast<int>(microbatches));
  }

  void runOnOperation() override {
    getOperation().walk([&](pd::PipelineOp pipeline) {
      sched::Topology topo = pd::topologyOf(pipeline);
      llvm::Expected<sched::Schedule> s = generate(topo);
      if (!s) {
        pipeline.emitError() << llvm::toString(s.takeError());
        return signalPassFailure();
      }
      if (llvm::Error err = sched::check(*s, topo)) {
        pipeline.emitError("the ")
            << schedule
            << " schedule is invalid: " << llvm::toString(std::move(err));
        return signalPassFailure();
      }
      Builder b(&getContext());
      SmallVector<Attribute> ranks;
      for (const std::vector<sched::Action> &list : s->ranks) {
        std::string text;
        for (const sched::Action &a : list)
          text += (text.empty() ? "" : " ") + a.str();
        ranks.push_back(b.getStringAttr(text));
      }
      pipeline->setAttr("pippy.schedule",
                        b.getDictionaryAttr(
                            {b.getNamedAttr("kind", b.getStringAttr(schedule)),
                             b.getNamedAttr("microbatches",
                                            b.getI64IntegerAttr(microbatches)),
                             b.getNamedAttr("ranks", b.getArrayAttr(ranks))}));
    });
  }
};

} // namespace
