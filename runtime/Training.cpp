//===- Training.cpp - loss and optimizer ----------------------------------===//

#include "Training.h"

#include "pippy/Runtime/Program.h"

#include <ATen/ATen.h>

#include <set>

namespace pippy::rt {

at::Tensor computeLoss(LossKind loss, const c10::IValue &output,
                       const at::Tensor &target, Precision precision) {
  // With several outputs (a tuple or a list) the loss is taken on the
  // first, as test/models/common.py does; with --loss none the first is
  // the loss itself (HuggingFace's `(loss, logits)`).
  c10::IValue first = output;
  if (output.isTuple() && !output.toTupleRef().elements().empty())
    first = output.toTupleRef().elements()[0];
  else if (output.isList() && !output.toListRef().empty())
    first = output.toListRef()[0];
  if (loss == LossKind::None) {
    if (!first.isTensor() || first.toTensor().numel() != 1)
      throw RuntimeError("--loss none: forward must return the scalar loss, "
                         "or a tuple or list whose first element is it");
    return first.toTensor().reshape({});
  }
  if (!first.isTensor())
    throw RuntimeError(std::string("--loss ") + name(loss) +
                       ": forward must return a tensor, or a tuple or list "
                       "whose first element is one");
  at::Tensor out = first.toTensor();
  // Mixed precision takes the loss in f32, as autocast's policy does.
  if (precision != Precision::F32 &&
      (out.scalar_type() == at::kBFloat16 || out.scalar_type() == at::kHalf))
    out = out.to(at::kFloat);
  if (loss == LossKind::CrossEntropy)
    return at::cross_entropy_loss(out.flatten(0, -2), target.flatten());
  return at::mse_loss(out, target);
}

std::unique_ptr<::torch::optim::Optimizer>
makeOptimizer(const RunOptions &options, std::vector<at::Tensor> trainable) {
  if (options.optimizer == OptimizerKind::Sgd) {
    ::torch::optim::SGDOptions o(options.lr);
    o.momentum(options.momentum.value_or(0.0));
    o.weight_decay(options.weightDecay.value_or(0.0));
    return std::make_unique<::torch::optim::SGD>(trainable, o);
  }
  ::torch::optim::AdamWOptions o(options.lr);
  o.betas({options.beta1.value_or(0.9), options.beta2.value_or(0.999)});
  o.eps(options.eps.value_or(1e-8));
  o.weight_decay(options.weightDecay.value_or(0.01));
  return std::make_unique<::torch::optim::AdamW>(trainable, o);
}

void stepOnly(::torch::optim::Optimizer &optimizer,
              const std::vector<at::Tensor> &params) {
  std::set<const c10::TensorImpl *> chosen;
  for (const at::Tensor &p : params)
    chosen.insert(p.unsafeGetTensorImpl());
  std::vector<std::pair<at::Tensor, at::Tensor>> aside;
  for (::torch::optim::OptimizerParamGroup &group : optimizer.param_groups())
    for (at::Tensor &p : group.params())
      if (!chosen.count(p.unsafeGetTensorImpl()) && p.grad().defined()) {
        aside.push_back({p, p.grad()});
        p.mutable_grad() = at::Tensor();
      }
  optimizer.step();
  for (auto &[p, grad] : aside)
    p.mutable_grad() = grad;
}

void releaseGradients(
    const std::vector<std::pair<std::string, at::Tensor>> &params) {
  for (const auto &entry : params) {
    at::Tensor p = entry.second;
    ::pippy::releaseGradient(p);
  }
}

} // namespace pippy::rt
