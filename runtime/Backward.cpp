//===- Backward.cpp - one rank of a pipeline: its backward actions --------===//
//
// B (the whole backward of a micro-batch), its split into I and W (the
// weight gradients of the stage's linear layers, queued by I), the local
// hand-over of input gradients to a producer on this rank, and the
// linears' weight gradients that --defer-weight-grads defers to W or STEP
// or that B holds back until its input gradients are sent.
//
//===----------------------------------------------------------------------===//

#include "Rank.h"

#include "TensorFile.h"
#include "Training.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <optional>

namespace pippy::rt {

/// What a backward of `mb` starts from: the loss (on the stage holding the
/// pipeline's outputs), and each result with the gradient its consumers
/// sent or handed over, summed over them.
std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>>
RankRunner::backwardRoots(StageRun &run, MicroBatch &mb) {
  std::vector<at::Tensor> roots, grads;
  if (mb.loss.defined()) {
    roots.push_back(mb.loss / static_cast<double>(stepMicrobatches()));
    grads.push_back(at::Tensor());
  }
  const HeldStage &stage = *run.plan;
  std::map<unsigned, at::Tensor> resultGrads;
  for (size_t k = 0; k < stage.sendEdges.size(); ++k) {
    const Edge &edge = stage.sendEdges[k];
    for (size_t e = 0; e < edge.entries.size(); ++e) {
      at::Tensor g = mb.gradBuffers[k][e];
      if (!g.defined())
        continue;
      // Under mixed precision a gradient arrives in the declared dtype:
      // back to its result's, as autograd would have summed it.
      g = g.to(mb.outputs.at(edge.entries[e].first).toTensor().scalar_type());
      at::Tensor &sum = resultGrads[edge.entries[e].first];
      sum = sum.defined() ? sum + g : g;
    }
  }
  for (auto &[index, grad] : resultGrads) {
    at::Tensor out = mb.outputs.at(index).toTensor();
    if (!out.requires_grad())
      continue;
    roots.push_back(out);
    grads.push_back(grad);
  }
  return {roots, grads};
}

/// Frees what a micro-batch held for its backward.
static void release(MicroBatch &mb) {
  mb.outputs.clear();
  mb.captured.clear();
  mb.loss = at::Tensor();
  mb.received.clear();
  mb.gradBuffers.clear();
}

void RankRunner::backward(StageRun &run, int m) {
  MicroBatch &mb = run.mbs[m];
  currentMicrobatch = m;
  auto [roots, grads] = backwardRoots(run, mb);
  if (!deferred.empty()) {
    backwardInputs(run, mb, roots, grads);
    handOverGradients(run, m);
    return;
  }
  if (!roots.empty()) {
    // The input gradients go first: the previous stage waits for them,
    // and the weight gradients follow once they are sent
    // (addHeldWeightGradients after the SEND_B).
    bool hold = run.plan->sendsInputGradients() && !plan.hasInputWeightSplit;
    std::optional<WeightGradientQueue::Scope> scope;
    if (hold) {
      heldWeightGrads.push_back({run.plan->stage, m, {}});
      scope.emplace(heldWeightGrads.back().queue);
    }
    ::torch::autograd::backward(roots, grads);
    if (hold && heldWeightGrads.back().queue.empty())
      heldWeightGrads.pop_back();
  }
  collectInputGradients(run, mb);
  release(mb); // the activations of this micro-batch are no longer needed
  handOverGradients(run, m);
}

/// The gradients autograd left on the stage's received inputs.
void RankRunner::collectInputGradients(StageRun &run, MicroBatch &mb) {
  const HeldStage &stage = *run.plan;
  mb.inputGrads.assign(stage.stageInputs.size(), at::Tensor());
  for (const Edge &edge : stage.recvEdges)
    for (const auto &[result, input] : edge.entries) {
      at::Tensor in = mb.received[input];
      if (!isDifferentiable(in.scalar_type()))
        continue;
      at::Tensor g = in.grad();
      checkNoGradient(stage, input, g);
      if (stage.inputGetsGrad[input]) // the others are not sent
        mb.inputGrads[input] = g.defined() ? g : at::zeros_like(in);
    }
}

/// I: the backward of micro-batch `m` with the weight gradients of the
/// stage's fused linears (the bulk of a transformer's) queued for its W;
/// the other parameters get theirs here. The queue keeps the gradients'
/// bits (WeightGradientQueue).
void RankRunner::backwardInput(StageRun &run, int m) {
  MicroBatch &mb = run.mbs[m];
  currentMicrobatch = m;
  auto [roots, grads] = backwardRoots(run, mb);
  if (!roots.empty()) {
    WeightGradientQueue::Scope scope(pendingWeightGrads[{run.plan->stage, m}]);
    ::torch::autograd::backward(roots, grads);
  }
  collectInputGradients(run, mb);
  release(mb);
  handOverGradients(run, m);
}

/// W: the weight gradients micro-batch `m`'s I queued.
void RankRunner::backwardWeight(StageRun &run, int m) {
  auto it = pendingWeightGrads.find({run.plan->stage, m});
  if (it == pendingWeightGrads.end())
    return;
  it->second.run();
  pendingWeightGrads.erase(it);
}

/// Gives the input gradients of `run`'s micro-batch `m` to the producers
/// on this rank, as a receive would.
void RankRunner::handOverGradients(StageRun &run, int m) {
  MicroBatch &mb = run.mbs[m];
  for (const Edge &edge : run.plan->recvEdges) {
    if (!edge.local)
      continue;
    StageRun &producer = stageRun(edge.peerStage);
    const std::vector<Edge> &out = producer.plan->sendEdges;
    size_t k = 0;
    while (out.at(k).peerStage != run.plan->stage)
      ++k;
    std::vector<at::Tensor> &buffers = producer.mbs[m].gradBuffers.at(k);
    for (size_t e = 0; e < edge.entries.size(); ++e) {
      if (!isDifferentiable(edge.specs[e].dtype) || !edge.gradFlows[e])
        continue;
      at::Tensor &g = mb.inputGrads.at(edge.entries[e].second);
      buffers.at(e) = g;
      g = at::Tensor();
    }
  }
}

/// Backward without the deferred linears' weight gradients: gradients
/// for the stage's inputs, the other parameters, and the deferred
/// linears' outputs, which are kept with their inputs for the W pass.
void RankRunner::backwardInputs(StageRun &run, MicroBatch &mb,
                                const std::vector<at::Tensor> &roots,
                                const std::vector<at::Tensor> &grads) {
  const HeldStage &stage = *run.plan;
  std::vector<at::Tensor> wrt;
  std::vector<unsigned> inputIndex;
  for (const Edge &edge : stage.recvEdges)
    for (const auto &[result, input] : edge.entries)
      if (isDifferentiable(mb.received[input].scalar_type())) {
        wrt.push_back(mb.received[input]);
        inputIndex.push_back(input);
      }
  size_t firstParam = wrt.size();
  std::vector<std::string> paramNames;
  for (const auto &[name, p] : trainable)
    if (!deferred.count(name)) {
      wrt.push_back(p);
      paramNames.push_back(name);
    }
  size_t firstLinear = wrt.size();
  std::vector<size_t> linearIndex;
  for (size_t l = 0; l < linears.size(); ++l) {
    at::Tensor out = mb.captured.at(2 * l + 1).toTensor();
    if (!out.requires_grad())
      continue;
    wrt.push_back(out);
    linearIndex.push_back(l);
  }
  std::vector<at::Tensor> result;
  if (!roots.empty() && !wrt.empty())
    result = ::torch::autograd::grad(roots, wrt, grads,
                                     /*retain_graph=*/false,
                                     /*create_graph=*/false,
                                     /*allow_unused=*/true);
  else
    result.assign(wrt.size(), at::Tensor());
  mb.inputGrads.assign(stage.stageInputs.size(), at::Tensor());
  for (size_t i = 0; i < firstParam; ++i) {
    checkNoGradient(stage, inputIndex[i], result[i]);
    if (stage.inputGetsGrad[inputIndex[i]]) // the others are not sent
      mb.inputGrads[inputIndex[i]] =
          result[i].defined() ? result[i] : at::zeros_like(wrt[i]);
  }
  for (size_t i = firstParam; i < firstLinear; ++i) {
    if (!result[i].defined())
      continue;
    const std::string &name = paramNames[i - firstParam];
    if (auto it = tiedContributions.find(name); it != tiedContributions.end())
      it->second[currentMicrobatch] = result[i];
    at::Tensor p = wrt[i];
    p.mutable_grad() = p.grad().defined() ? p.grad() + result[i] : result[i];
  }
  for (size_t i = firstLinear; i < wrt.size(); ++i) {
    if (!result[i].defined())
      continue;
    size_t l = linearIndex[i - firstLinear];
    linearInputs[l].push_back(mb.captured[2 * l].toTensor().detach());
    linearGrads[l].push_back(result[i]);
  }
  release(mb);
}

void RankRunner::weightGradients() {
  if (linears.empty())
    return;
  ActionClock::Mark begin = times.mark();
  for (size_t l = 0; l < linears.size(); ++l) {
    if (linearGrads[l].empty())
      continue;
    auto accumulate = [](at::Tensor p, at::Tensor grad) {
      grad = grad.to(p.scalar_type());
      p.mutable_grad() = p.grad().defined() ? p.grad() + grad : grad;
    };
    // One product over the step's micro-batches; under mixed precision one
    // per micro-batch, in the output gradient's dtype (autocast's), each
    // widened to the parameter's before the sum, as autograd does.
    std::vector<std::pair<at::Tensor, at::Tensor>> parts;
    if (options.precision == Precision::F32)
      parts.push_back({at::cat(linearInputs[l]), at::cat(linearGrads[l])});
    else
      for (size_t m = 0; m < linearGrads[l].size(); ++m)
        parts.push_back({linearInputs[l][m], linearGrads[l][m]});
    for (auto &[x, g] : parts) {
      x = x.reshape({-1, x.size(-1)}).to(g.scalar_type());
      g = g.reshape({-1, g.size(-1)});
      accumulate(params.at(linears[l].weight), at::mm(g.t(), x));
      if (!linears[l].bias.empty())
        accumulate(params.at(linears[l].bias), g.sum(0));
    }
    linearInputs[l].clear();
    linearGrads[l].clear();
  }
  // Inside W or STEP, whose time is busy already.
  times.close(
      begin, exe::actionText(exe::ActionKind::Weight, stages[0].plan->stage, 0),
      ActionClock::Counts::TraceOnly, currentStep);
}

/// An input that the IR says gets no gradient must not get one from
/// autograd either: its producer does not wait for it.
void RankRunner::checkNoGradient(const HeldStage &stage, unsigned input,
                                 const at::Tensor &grad) {
  if (stage.inputGetsGrad.at(input) || !grad.defined())
    return;
  throw RuntimeError(where() + ": stage input " + std::to_string(input) +
                     " got a gradient that the pipeline's IR says it "
                     "cannot get (an internal error of pippy-run; please "
                     "report it with the pipeline)");
}
/// The weight gradients that B actions held back until their input
/// gradients were sent, oldest micro-batch first, until at most `keep`
/// micro-batches' remain. They are part of their B: busy time, and a
/// second trace event with its name.
void RankRunner::addHeldWeightGradients(size_t keep) {
  while (heldWeightGrads.size() > keep) {
    HeldWeightGradients &held = heldWeightGrads.front();
    ActionClock::Mark begin = times.mark();
    held.queue.run();
    backwardSeconds +=
        std::chrono::duration<double>(Clock::now() - begin.host).count();
    times.close(
        begin,
        exe::actionText(exe::ActionKind::Backward, held.stage, held.microbatch),
        ActionClock::Counts::Both, currentStep);
    heldWeightGrads.pop_front();
  }
}

/// The linears whose weight and bias (if any) are trainable, not tied
/// (tied weights' gradients are collected per micro-batch) and not
/// deferred already.
std::vector<Program::Linear> RankRunner::untiedTrainableLinears(StageRun &run) {
  std::set<std::string> tied;
  for (const TiedReplicas &group : plan.tied)
    tied.insert(group.name);
  auto trainable = [&](const std::string &name) {
    return name.empty() ||
           (params.count(name) && params.at(name).requires_grad() &&
            !tied.count(name) && !deferred.count(name));
  };
  std::vector<Program::Linear> result;
  for (const Program::Linear &l : run.program->linearsWithOwnParameters())
    if (trainable(l.weight) && trainable(l.bias))
      result.push_back(l);
  return result;
}

/// --defer-weight-grads: the linears whose weight gradients wait for the
/// W pass (one stage per rank).
void RankRunner::chooseDeferredLinears() {
  if (!options.deferWeightGrads)
    return;
  if (stages.size() != 1 || plan.hasInputWeightSplit)
    throw RuntimeError("--defer-weight-grads runs with one stage per rank "
                       "and a whole backward (gpipe or 1f1b); the " +
                       plan.scheduleKind + " schedule splits them itself");
  for (const Program::Linear &l : untiedTrainableLinears(stages[0])) {
    linears.push_back(l);
    deferred.insert(l.weight);
    if (!l.bias.empty())
      deferred.insert(l.bias);
    captureSlots.push_back(l.inputSlot);
    captureSlots.push_back(l.outputSlot);
  }
  linearInputs.resize(linears.size());
  linearGrads.resize(linears.size());
}

/// The other linears add their weight gradients in place
/// (Program::fuseWeightGradients); where I and W split the backward, I
/// queues them for W.
void RankRunner::fuseWeightGradients() {
  // Under mixed precision autograd's own linear (autocast's casts) runs;
  // on a GPU too (the in-place sums are probed against the CPU's BLAS).
  if (options.autogradWeightGrads || options.precision != Precision::F32 ||
      !device.is_cpu())
    return;
  for (StageRun &run : stages) {
    std::set<std::string> weights;
    for (const Program::Linear &l : untiedTrainableLinears(run))
      weights.insert(l.weight);
    run.program->fuseWeightGradients(weights);
  }
}

} // namespace pippy::rt
