//===- Training.h - loss and optimizer --------------------------*- C++ -*-===//
//
// Internal to runtime/: the loss of a micro-batch and the optimizer, as the
// run's options choose them (DESIGN.md, "Loss and optimizer").
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_TRAINING_H
#define PIPPY_RUNTIME_TRAINING_H

#include "pippy/Runtime/Options.h"

#include <torch/optim.h>

#include <memory>
#include <vector>

namespace pippy::rt {

/// The loss of one micro-batch (the mean over its rows). With several
/// outputs (a tuple or list) the loss is taken on the first; under mixed
/// precision in f32.
at::Tensor computeLoss(LossKind loss, const c10::IValue &output,
                       const at::Tensor &target,
                       Precision precision = Precision::F32);

std::unique_ptr<::torch::optim::Optimizer>
makeOptimizer(const RunOptions &options, std::vector<at::Tensor> params);

/// Steps `optimizer` over `params` alone: its other parameters put their
/// gradients aside meanwhile (torch's optimizers pass over a parameter
/// without one), so their values and state stay as they are.
void stepOnly(::torch::optim::Optimizer &optimizer,
              const std::vector<at::Tensor> &params);

/// Drops the trained parameters' gradients before a step's first backward
/// (every one, also those another replica steps under --zero 1): autograd
/// then stores the first micro-batch's gradient as it is instead of adding
/// it to zeros (the same values, bit for bit), and no step writes zeros
/// over every gradient first. Fused linears' weights keep their buffers for
/// the next step (pippy::releaseGradient).
void releaseGradients(
    const std::vector<std::pair<std::string, at::Tensor>> &params);

/// The bytes of the optimizer state `optimizer` holds for `params`
/// (momentum buffers, AdamW moments), as a checkpoint stores them
/// (Checkpoint.cpp).
int64_t optimizerStateBytes(
    ::torch::optim::Optimizer &optimizer,
    const std::vector<std::pair<std::string, at::Tensor>> &params);

} // namespace pippy::rt

#endif // PIPPY_RUNTIME_TRAINING_H
