//===- Replicas.cpp - one rank of a pipeline among data-parallel replicas -===//
//
// With --dp D the world holds D replicas of the pipeline (Mesh.h). A rank
// exchanges activations and gradients with its replica's ranks alone (the
// pipeline communicator), runs micro-batches replica, replica + D, ... of
// each step, and sums its stages' gradients with the same pipeline rank of
// the other replicas (the data-parallel group, DataParallel.h) before the
// optimizer step, which every replica then takes alike. Tied weights are
// summed within a replica first, as without --dp. Losses are summed over
// the replicas, so the step's loss is the mean over all its micro-batches.
// BatchNorm's running statistics stay each replica's own, as with
// PyTorch's DDP without SyncBatchNorm; replica 0 writes them out.
//
//===----------------------------------------------------------------------===//

#include "Rank.h"

#include <ATen/ATen.h>

namespace pippy::rt {

void RankRunner::connectReplicas() {
  if (mesh.dp == 1) {
    comm = worldComm.get();
    return;
  }
  printRank0("mesh: " + std::to_string(mesh.dp) + " data-parallel replicas x " +
             std::to_string(mesh.pp) + " pipeline ranks\n" + mesh.describe());
  // Every rank creates its pipeline's group first, then its data-parallel
  // group, so that no group waits on a member busy creating another.
  pipelineComm = worldComm->subgroup("pipeline/" + std::to_string(replica),
                                     mesh.pipelineGroup(replica));
  dpComm = worldComm->subgroup("dp/" + std::to_string(rank),
                               mesh.dataParallelGroup(rank));
  comm = pipelineComm.get();
}

/// Each stage's trainable parameters, summed once its last backward of the
/// step is done; tied weights (the only parameters two stages share) once
/// the tied all-reduce has completed them, at the step.
void RankRunner::prepareGradientReducer() {
  if (mesh.dp == 1)
    return;
  reducer = std::make_unique<GradientReducer>(*dpComm, where());
  std::set<std::string> tied, seen;
  for (const auto &entry : tiedComms)
    tied.insert(entry.first);
  std::vector<std::pair<std::string, at::Tensor>> late;
  for (StageRun &run : stages) {
    std::vector<std::pair<std::string, at::Tensor>> mine;
    for (const auto &[name, spec] : run.program->parameters()) {
      const at::Tensor &p = params.at(name);
      if (!p.requires_grad() || !seen.insert(name).second)
        continue;
      (tied.count(name) ? late : mine).push_back({name, p});
    }
    reducer->addStage(run.plan->stage, std::move(mine));
  }
  reducer->addLate(std::move(late));
}

/// For each action of the rank's list, the stage whose gradients are final
/// once it has run (its last backward of the step), or -1. Empty where the
/// reduction waits for the step: without --dp, with --dp-overlap=false,
/// and where deferred linear weight gradients (--defer-weight-grads) are
/// computed at the step.
std::vector<int> RankRunner::reduceAfterActions() const {
  if (!reducer || !options.dpOverlap || !deferred.empty())
    return {};
  using K = exe::ActionKind;
  std::vector<int> after(plan.actions.size(), -1);
  std::map<int, size_t> last;
  for (size_t i = 0; i < plan.actions.size(); ++i) {
    K kind = plan.actions[i].kind;
    if (kind == K::Backward || kind == K::BackwardWeight || kind == K::Weight)
      last[plan.actions[i].stage] = i;
  }
  for (const auto &[stage, i] : last)
    after[i] = stage;
  return after;
}

void RankRunner::reduceStage(int stage) {
  // The weight-gradient passes held back for the next micro-batch's sends
  // are this stage's last contributions.
  addHeldWeightGradients();
  reducer->start(stage);
}

/// With --zero 1 this replica's optimizer steps the parameters it owns;
/// otherwise every trainable one.
void RankRunner::shardOptimizerState() {
  if (!options.zero) {
    optimized = trainable;
    return;
  }
  std::vector<at::Tensor> tensors;
  for (const auto &[name, p] : trainable)
    tensors.push_back(p);
  owners = shardOwners(tensors, mesh.dp);
  for (size_t i = 0; i < trainable.size(); ++i)
    if (owners[i] == replica)
      optimized.push_back(trainable[i]);
}

void RankRunner::shareSteppedWeights() {
  if (!options.zero)
    return;
  std::vector<at::Tensor> tensors;
  for (const auto &[name, p] : trainable)
    tensors.push_back(p);
  shareStepped(*dpComm, tensors, owners, where());
}

void RankRunner::sumStepLoss() {
  if (mesh.dp == 1 || !plan.holdsOutput())
    return;
  at::Tensor loss = at::full({1}, stepLoss, at::kDouble);
  dpComm
      ->allReduceSum(loss, where() + ": summing the step's loss over the "
                                     "replicas")
      ->wait();
  stepLoss = loss.item<double>();
}

} // namespace pippy::rt
