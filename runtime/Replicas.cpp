//===- Replicas.cpp - one rank of a pipeline in the mesh ------------------===//
//
// The mesh's groups (Mesh.h): with --tp T each pipeline rank is T ranks, each
// holding its slices of the sharded parameters and summing partial results
// with the others (the tensor-parallel group, which the pippy::tp_*
// operators use; ExtraOps.h); every tensor rank runs a pipeline of its own
// with the same micro-batches.
//
// With --dp D the world holds D replicas of the pipeline. A rank
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

#include "ExtraOps.h"

#include <ATen/ATen.h>

namespace pippy::rt {

void RankRunner::connectReplicas() {
  if (mesh.dp == 1 && mesh.tp == 1) {
    comm = worldComm.get();
    return;
  }
  printRank0("mesh: " + std::to_string(mesh.dp) + " data-parallel replicas x " +
             std::to_string(mesh.pp) + " pipeline ranks" +
             (mesh.tp > 1
                  ? " x " + std::to_string(mesh.tp) + " tensor-parallel ranks"
                  : "") +
             "\n" + mesh.describe());
  // Every rank creates its pipeline's group first, then its data-parallel
  // group, then its tensor-parallel group, so that no group waits on a
  // member busy creating another.
  std::string r = std::to_string(replica), p = std::to_string(rank),
              t = std::to_string(tensorRank);
  pipelineComm = worldComm->split("pipeline/" + r + "/" + t,
                                  mesh.pipelineGroup(replica, tensorRank));
  comm = pipelineComm.get();
  if (mesh.dp > 1)
    dpComm = worldComm->split("dp/" + p + "/" + t,
                              mesh.dataParallelGroup(rank, tensorRank));
  if (mesh.tp > 1) {
    tpComm = worldComm->split("tp/" + r + "/" + p,
                              mesh.tensorParallelGroup(replica, rank));
    Communicator *group = tpComm.get();
    std::string what = "summing a tensor-parallel result";
    setTensorParallelGroup(tensorRank, [group, what](at::Tensor &t) {
      group->allReduceSum(t, what)->wait();
    });
  }
}

at::Tensor RankRunner::wholeParameter(const std::string &name,
                                      const at::Tensor &value) {
  auto it = plan.shards.find(name);
  if (it == plan.shards.end())
    return value;
  // Every rank's slice, by broadcasts from each in turn.
  std::vector<at::Tensor> slices;
  for (int t = 0; t < mesh.tp; ++t) {
    at::Tensor slice = t == tensorRank ? value.detach().contiguous()
                                       : at::empty_like(value.detach());
    tpComm
        ->broadcast(slice, t,
                    where() + ": gathering the slices of '" + name + "'")
        ->wait();
    slices.push_back(slice);
  }
  return at::cat(slices, it->second.first);
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

/// --infer's outputs at replica 0, by the data's micro-batch (each replica
/// computed micro-batches replica, replica + D, ...): the others send theirs
/// and get nothing back.
std::vector<std::vector<at::Tensor>>
RankRunner::gatherOutputs(std::vector<std::vector<at::Tensor>> own, int total) {
  if (mesh.dp == 1)
    return own;
  auto tag = [](int m, size_t i) { return m * 64 + static_cast<int>(i); };
  if (replica != 0) {
    for (size_t m = 0; m < own.size(); ++m)
      for (size_t i = 0; i < own[m].size(); ++i)
        dpComm
            ->send(own[m][i].contiguous(), 0, tag(m, i),
                   where() + ": sending its outputs to replica 0")
            ->wait();
    return {};
  }
  std::vector<std::vector<at::Tensor>> all(total);
  for (int j = 0; j < total; ++j) {
    int r = j % mesh.dp, m = j / mesh.dp;
    if (r == 0) {
      all[j] = std::move(own[m]);
      continue;
    }
    for (size_t i = 0; i < all[0].size(); ++i) {
      at::Tensor t = at::empty_like(all[0][i]);
      dpComm
          ->recv(t, r, tag(m, i),
                 where() + ": receiving replica " + std::to_string(r) +
                     "'s outputs")
          ->wait();
      all[j].push_back(t);
    }
  }
  return all;
}

void RankRunner::addStepLoss(const at::Tensor &loss) {
  if (!loss.defined())
    return;
  // Summed where it was computed: no host wait per micro-batch on a GPU.
  at::Tensor part =
      loss.detach().to(at::kDouble) / static_cast<double>(stepMicrobatches());
  stepLossSum = stepLossSum.defined() ? stepLossSum + part : part;
}

void RankRunner::sumStepLoss() {
  stepLoss = stepLossSum.defined() ? stepLossSum.item<double>() : 0.0;
  stepLossSum = at::Tensor();
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
