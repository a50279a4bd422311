//===- TiedGradients.cpp - gradients summed across ranks ------------------===//
//
// A replicated tied weight's gradient is summed over the ranks of its group
// before the optimizer step (ALLREDUCE_TIED). When the per-micro-batch
// contributions are small enough to exchange (at most kExactTiedBytes),
// they are summed in the order single-process autograd uses (per
// micro-batch, later stages first, then accumulated over micro-batches), so
// the result is bit-identical to an unsplit run; otherwise the accumulated
// gradients are all-reduced, which can differ in the last bits. Clipping by
// the global norm also sums over ranks.
//
//===----------------------------------------------------------------------===//

#include "Rank.h"

#include <ATen/ATen.h>
#include <torch/nn/utils/clip_grad.h>

#include <cmath>

namespace pippy::rt {
namespace {
constexpr int64_t kExactTiedBytes = 256 << 20;
} // namespace

/// Whether some replica's use of tied weight `name` reaches the loss. When
/// none does, PyTorch leaves the gradient None, so the group sums nothing
/// and the weight keeps it None.
static bool tiedGetsGradient(const StagePlan &plan, const std::string &name) {
  for (const TiedReplicas &group : plan.tied)
    if (group.name == name)
      return group.getsGradient;
  return true;
}

void RankRunner::registerTiedHooks() {
  for (auto &[name, group] : tiedComms) {
    at::Tensor p = params.at(name);
    if (!p.requires_grad())
      continue; // a buffer or frozen parameter: nothing to sum
    int G = group ? group->size() : 1;
    int64_t bytes =
        p.numel() * p.element_size() * G * std::max(plan.microbatches, 1);
    if (bytes > kExactTiedBytes)
      continue;
    auto &slots = tiedContributions[name];
    if (!deferred.empty())
      continue; // backwardInputs records the contributions
    // Two stages of this rank using the weight add up their parts.
    p.register_hook([this, &slots](const at::Tensor &g) {
      at::Tensor &slot = slots[currentMicrobatch];
      slot = slot.defined() ? slot + g.detach() : g.detach().clone();
      return at::Tensor();
    });
  }
}

void RankRunner::allReduceTied() {
  for (auto &[name, group] : tiedComms) {
    at::Tensor p = params.at(name);
    if (!p.requires_grad() || !tiedGetsGradient(plan, name))
      continue;
    std::string what =
        where() + ": summing the gradients of tied weight '" + name + "'";
    auto it = tiedContributions.find(name);
    if (it == tiedContributions.end()) {
      if (!p.grad().defined())
        p.mutable_grad() = at::zeros_like(p);
      if (group)
        group->allReduceSum(p.grad(), what)->wait();
      continue;
    }
    int M = plan.microbatches, G = group ? group->size() : 1;
    std::vector<int64_t> shape{G, M};
    shape.insert(shape.end(), p.sizes().begin(), p.sizes().end());
    at::Tensor all = at::zeros(shape, p.options().requires_grad(false));
    for (auto &[m, g] : it->second)
      all[group ? group->rank() : 0][m].copy_(g);
    it->second.clear();
    if (group)
      group->allReduceSum(all, what)->wait();
    at::Tensor total;
    for (int m = 0; m < M; ++m) {
      at::Tensor b = all[G - 1][m];
      for (int k = G - 2; k >= 0; --k)
        b = b + all[k][m];
      total = total.defined() ? total + b : b.clone();
    }
    ::torch::NoGradGuard noGrad;
    if (!p.grad().defined())
      p.mutable_grad() = at::zeros_like(p);
    p.grad().copy_(total);
  }
}

/// Scales gradients as torch.nn.utils.clip_grad_norm_ does, with the norm
/// taken over every stage (a replicated tied weight counted once, a sharded
/// parameter's slices summed over the tensor-parallel group). On one rank
/// it is torch's own, bit for bit.
void RankRunner::clipGradients() {
  if (plan.numRanks == 1 && mesh.tp == 1) {
    std::vector<at::Tensor> tensors;
    for (const auto &[name, p] : trainable)
      tensors.push_back(p);
    ::torch::nn::utils::clip_grad_norm_(tensors, *options.clipGradNorm);
    return;
  }
  double local = 0, sharded = 0;
  std::set<std::string> notMine;
  for (const TiedReplicas &group : plan.tied)
    if (group.ranks.front() != rank)
      notMine.insert(group.name);
  for (const auto &[name, p] : trainable) {
    if (notMine.count(name) || !p.grad().defined())
      continue;
    double n = p.grad().norm(2).item<double>();
    (plan.shards.count(name) ? sharded : local) += n * n;
  }
  if (tpComm) {
    at::Tensor slices = at::full({1}, sharded, at::kDouble);
    tpComm->allReduceSum(slices, where() + ": summing sharded gradient norms")
        ->wait();
    sharded = slices.item<double>();
  }
  local += sharded;
  at::Tensor total = at::full({1}, local, at::kDouble);
  comm->allReduceSum(total, where() + ": summing gradient norms")->wait();
  double norm = std::sqrt(total.item<double>());
  double coef = std::min(*options.clipGradNorm / (norm + 1e-6), 1.0);
  for (const auto &[name, p] : trainable)
    if (p.grad().defined())
      p.grad().mul_(coef);
}

} // namespace pippy::rt
