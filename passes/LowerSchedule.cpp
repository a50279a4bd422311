//===- LowerSchedule.cpp - a pipeline's schedule, ahead of time -----------===//
//
// Generates the schedule of a pipeline (lib/Schedule), checks it, and
// records every rank's action list on the pipeline, so that the stage
// programs pippy-run loads carry the exact actions each rank runs.
//
//===----------------------------------------------------------------------===//

#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Passes/Passes.h"
#include "pippy/Schedule/Schedule.h"

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

/// The schedule's view of a pipeline: who sends to whom, and tied groups.
sched::Topology topologyOf(pd::PipelineOp pipeline) {
  std::vector<pd::StageOp> stages(pipeline.getStages().begin(),
                                  pipeline.getStages().end());
  sched::Topology topo;
  topo.numStages = static_cast<int>(stages.size());
  topo.producers.assign(stages.size(), {});
  for (auto [s, stage] : llvm::enumerate(stages))
    for (Value input : stage.getInputs())
      if (auto producer = input.getDefiningOp<pd::StageOp>()) {
        int p = static_cast<int>(producer.getIndexAttr().getInt());
        if (!llvm::is_contained(topo.producers[s], p))
          topo.producers[s].push_back(p);
      }
  for (std::vector<int> &list : topo.producers)
    llvm::sort(list);
  if (ArrayAttr tied = pipeline.getTiedAttr())
    for (Attribute a : tied) {
      auto group = cast<pd::TiedGroupAttr>(a);
      topo.tiedGroups.emplace_back(group.getStages().begin(),
                                   group.getStages().end());
    }
  return topo;
}

struct LowerSchedulePass
    : public pd::impl::PippyLowerScheduleBase<LowerSchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    getOperation().walk([&](pd::PipelineOp pipeline) {
      sched::Topology topo = topologyOf(pipeline);
      llvm::Expected<sched::Schedule> s =
          sched::generate(schedule, topo, static_cast<int>(microbatches));
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
