//===- PipelineSchedule.cpp - a pipeline as lib/Schedule sees it ----------===//

#include "PipelineSchedule.h"

#include "pippy/Analysis/CostModel.h"
#include "pippy/Analysis/GraphIR.h"
#include "pippy/Support/AtomicFile.h"

#include "llvm/ADT/StringSet.h"

namespace sched = ::pippy::schedule;

namespace mlir::pippy {

StageRow measureStage(StageOp stage) {
  StageRow row;
  row.index = stage.getIndexAttr().getInt();
  llvm::StringSet<> names;
  for (Operation &op : stage.getBody().front().without_terminator()) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      if (names.insert(param.getName()).second) {
        ++row.params;
        row.paramBytes += ::pippy::getTensorBytes(param.getType());
      }
      continue;
    }
    if (::pippy::isReplicable(&op))
      continue;
    ++row.ops;
    ::pippy::OpCost cost = ::pippy::estimateOpCost(&op);
    row.flops += cost.flops;
    row.bytesMoved += cost.bytes;
    for (Value result : op.getResults())
      row.activationBytes += ::pippy::getTensorBytes(result.getType());
  }
  // Transfers between stages, as the balancer counts them: model inputs and
  // outputs are not.
  for (Value input : stage.getInputs())
    if (input.getDefiningOp<StageOp>())
      row.recvBytes += ::pippy::getTensorBytes(input.getType());
  for (Value result : stage.getResults())
    if (llvm::any_of(result.getUsers(),
                     [](Operation *user) { return isa<StageOp>(user); }))
      row.sendBytes += ::pippy::getTensorBytes(result.getType());
  return row;
}

/// The schedule's view of a pipeline: who sends to whom, and tied groups.
sched::Topology topologyOf(PipelineOp pipeline) {
  std::vector<StageOp> stages(pipeline.getStages().begin(),
                              pipeline.getStages().end());
  sched::Topology topo;
  topo.numStages = static_cast<int>(stages.size());
  topo.producers.assign(stages.size(), {});
  for (auto [s, stage] : llvm::enumerate(stages))
    for (Value input : stage.getInputs())
      if (auto producer = input.getDefiningOp<StageOp>()) {
        int p = static_cast<int>(producer.getIndexAttr().getInt());
        if (!llvm::is_contained(topo.producers[s], p))
          topo.producers[s].push_back(p);
      }
  for (std::vector<int> &list : topo.producers)
    llvm::sort(list);
  if (ArrayAttr tied = pipeline.getTiedAttr())
    for (Attribute a : tied) {
      auto group = cast<TiedGroupAttr>(a);
      topo.tiedGroups.emplace_back(group.getStages().begin(),
                                   group.getStages().end());
    }
  return topo;
}

FailureOr<std::optional<sched::Schedule>>
recordedSchedule(PipelineOp pipeline, const sched::Topology &topo) {
  auto dict = pipeline->getAttrOfType<DictionaryAttr>("pippy.schedule");
  if (!dict)
    return std::optional<sched::Schedule>();
  auto m = dict.getAs<IntegerAttr>("microbatches");
  auto ranks = dict.getAs<ArrayAttr>("ranks");
  if (!m || !ranks)
    return pipeline.emitError("pippy.schedule needs microbatches and ranks");
  std::string text;
  for (auto [r, list] : llvm::enumerate(ranks))
    text += "rank" + std::to_string(r) + ": " +
            cast<StringAttr>(list).getValue().str() + "\n";
  llvm::Expected<sched::Schedule> s =
      sched::parse(text, topo.numStages, static_cast<int>(m.getInt()));
  if (!s)
    return pipeline.emitError(llvm::toString(s.takeError()));
  if (auto kind = dict.getAs<StringAttr>("kind"))
    if (llvm::Expected<sched::Kind> k = sched::parseKind(kind.getValue()))
      s->kind = *k;
    else
      llvm::consumeError(k.takeError());
  return std::optional<sched::Schedule>(std::move(*s));
}

sched::StageCosts costModelCosts(PipelineOp pipeline) {
  sched::StageCosts costs;
  costs.holdWeightGradients = true; // what pippy-run does
  costs.fillWaits = true;
  for (StageOp stage : pipeline.getStages()) {
    StageRow row = measureStage(stage);
    double forward = static_cast<double>(row.predicted());
    costs.forward.push_back(forward);
    costs.backward.push_back(2 * forward);
    costs.weight.push_back(forward);
    costs.activations.push_back(static_cast<double>(row.activationBytes));
  }
  return costs;
}

FailureOr<sched::StageCosts> simulationCosts(PipelineOp pipeline,
                                             llvm::StringRef costsFile) {
  sched::StageCosts costs = costModelCosts(pipeline);
  if (costsFile.empty())
    return costs;
  std::string text;
  if (std::string error = ::pippy::readFile(costsFile.str(), text);
      !error.empty())
    return pipeline.emitError(error);
  int S = static_cast<int>(costs.forward.size());
  if (llvm::Error err = sched::readStageCosts(text, S, costs))
    return pipeline.emitError(costsFile + ": ")
           << llvm::toString(std::move(err));
  return costs;
}

} // namespace mlir::pippy
