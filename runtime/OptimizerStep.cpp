//===- OptimizerStep.cpp - one rank of a pipeline: STEP -------------------===//
//
// The optimizer step of the stages a rank holds. Where no gradient reaches
// a stage from elsewhere (no tied weights, replicas, tensor-parallel group
// or clipping by the global norm, every parameter used by one stage of
// the rank), each stage's STEP steps that stage's parameters alone, and a
// stage whose step's work is done may step while the rank waits for a
// message (--fill-waits, WaitFill.h): its update is the same, sooner.
// Otherwise the rank's first STEP steps every stage at once.
//
//===----------------------------------------------------------------------===//

#include "Rank.h"

#include "Training.h"

#include <map>

namespace pippy::rt {

/// Which stages step alone (`stageAlone`, by held stage), and what each
/// steps.
void RankRunner::prepareStageSteps() {
  stageAlone.clear();
  stageStepped.assign(stages.size(), false);
  bool tiedAction = std::any_of(
      plan.actions.begin(), plan.actions.end(), [](const ScheduledAction &a) {
        return a.kind == exe::ActionKind::AllReduceTied;
      });
  if (stages.size() < 2 || options.clipGradNorm || mesh.dp > 1 || mesh.tp > 1 ||
      options.zero || !linears.empty() || !plan.tied.empty() || tiedAction ||
      !options.saveGradsPath.empty())
    return;
  std::map<std::string, int> users; // parameter -> stages of this rank
  for (const HeldStage &held : plan.stages)
    for (const auto &[name, spec] : plan.stageParams.at(held.stage))
      ++users[name];
  std::vector<std::vector<at::Tensor>> own(stages.size());
  for (const auto &[name, p] : optimized) {
    if (users[name] != 1)
      return;
    for (size_t i = 0; i < plan.stages.size(); ++i)
      for (const auto &[used, spec] : plan.stageParams.at(plan.stages[i].stage))
        if (used == name)
          own[i].push_back(p);
  }
  stageAlone = std::move(own);
}

/// STEP of `stage`: its parameters alone (prepareStageSteps), or at the
/// rank's first STEP of the step every stage's.
void RankRunner::optimizerStep(int step, int stage,
                               ::torch::optim::Optimizer &optimizer) {
  size_t held = 0;
  while (plan.stages[held].stage != stage)
    ++held;
  if (stageStepped[held])
    return;
  waitSends();
  if (!stageAlone.empty()) {
    stageStepped[held] = true;
    stepOnly(optimizer, stageAlone[held]);
    return;
  }
  stageStepped.assign(stages.size(), true);
  weightGradients();
  if (reducer)
    reducer->finish();
  if (step == 1 && !options.saveGradsPath.empty() && replica == 0)
    saveGrads();
  if (options.clipGradNorm)
    clipGradients();
  optimizer.step();
  shareSteppedWeights();
}

} // namespace pippy::rt
