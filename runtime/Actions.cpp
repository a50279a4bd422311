//===- Actions.cpp - one rank of a pipeline: its actions ------------------===//
//
// F, B, SEND_F, RECV_F, SEND_B, RECV_B and W (see Executor.cpp), and which
// linear layers' weight gradients are deferred or added in place.
//
//===----------------------------------------------------------------------===//

#include "Rank.h"

#include "TensorFile.h"
#include "Training.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <optional>

namespace pippy::rt {
namespace {
constexpr int kMaxChannels = 1024; // tensors per stage pair, for tags
} // namespace

int RankRunner::tag(int m, int direction, size_t channel) {
  return (m * 2 + direction) * kMaxChannels + static_cast<int>(channel);
}

/// Posts every receive of the step so that data can land while the rank
/// computes.
void RankRunner::postReceives(std::vector<MicroBatch> &mbs, bool training) {
  int M = static_cast<int>(mbs.size());
  for (int m = 0; m < M; ++m) {
    MicroBatch &mb = mbs[m];
    mb.received.assign(plan.stageInputs.size(), at::Tensor());
    for (const Edge &edge : plan.recvEdges)
      for (size_t e = 0; e < edge.entries.size(); ++e) {
        const TensorSpec &spec = edge.specs[e];
        at::Tensor buffer =
            at::empty(spec.sizes, at::TensorOptions().dtype(spec.dtype));
        mb.received[edge.entries[e].second] = buffer;
        mb.recvF.push_back(comm->recv(
            buffer, edge.peerRank, tag(m, 0, e),
            where() + ": receiving " + actionText(exe::ActionKind::RecvF, m) +
                " input " + std::to_string(edge.entries[e].second) +
                " from stage " + std::to_string(edge.peerStage)));
      }
    if (!training)
      continue;
    for (const Edge &edge : plan.sendEdges) {
      std::vector<at::Tensor> buffers;
      for (size_t e = 0; e < edge.entries.size(); ++e) {
        const TensorSpec &spec = edge.specs[e];
        if (!isDifferentiable(spec.dtype) || !edge.gradFlows[e]) {
          buffers.push_back(at::Tensor());
          continue;
        }
        at::Tensor buffer =
            at::empty(spec.sizes, at::TensorOptions().dtype(spec.dtype));
        buffers.push_back(buffer);
        mb.recvB.push_back(comm->recv(
            buffer, edge.peerRank, tag(m, 1, e),
            where() + ": receiving " + actionText(exe::ActionKind::RecvB, m) +
                " gradient of result " + std::to_string(edge.entries[e].first) +
                " from stage " + std::to_string(edge.peerStage)));
      }
      mb.gradBuffers.push_back(std::move(buffers));
    }
  }
}

/// "micro-batch 1 of step 3: rows 8-15 of data.safetensors", as errors
/// name the rows a failing op read.
std::string RankRunner::rowsText(int m, int64_t begin, int64_t rows) const {
  std::string text = "micro-batch " + std::to_string(m);
  if (currentStep > 0)
    text += " of step " + std::to_string(currentStep);
  int64_t total = data ? data->rows() : 0;
  if (total == 0)
    return text;
  int64_t first = begin % total, last = (begin + rows - 1) % total;
  return text + ": rows " + std::to_string(first) + "-" + std::to_string(last) +
         " of " + options.dataPath;
}

void RankRunner::forward(MicroBatch &mb, int m, int64_t begin, bool training) {
  int64_t rows = plan.microbatchRows();
  std::vector<c10::IValue> dataArgs;
  bool needsData =
      std::any_of(plan.stageInputs.begin(), plan.stageInputs.end(),
                  [](const StageInputSource &s) { return s.stage < 0; });
  if (needsData)
    dataArgs = data->arguments(begin, rows, options.loss == LossKind::None);
  std::vector<c10::IValue> inputs;
  for (size_t i = 0; i < plan.stageInputs.size(); ++i) {
    if (plan.stageInputs[i].stage < 0) {
      inputs.push_back(dataArgs.at(plan.stageInputs[i].index));
      continue;
    }
    at::Tensor t = mb.received[i];
    if (training && isDifferentiable(t.scalar_type()))
      t.requires_grad_(true);
    inputs.emplace_back(t);
  }
  mb.captured.clear();
  RandomKey random{options.seed, currentStep, m};
  try {
    mb.outputs = program->run(
        inputs, params, training && !deferred.empty() ? &captureSlots : nullptr,
        &mb.captured, options.profilePath.empty() ? nullptr : &opNanoseconds,
        &random);
  } catch (const RuntimeError &e) {
    throw RuntimeError(std::string(e.what()) + " (" + rowsText(m, begin, rows) +
                       ")");
  }
  ++forwardsRun;
  if (training && plan.holdsOutput()) {
    at::Tensor target = options.loss == LossKind::None
                            ? at::Tensor()
                            : data->target(begin, rows);
    try {
      mb.loss = computeLoss(options.loss,
                            mb.outputs.at(plan.outputIndices.at(0)), target);
    } catch (const c10::Error &e) {
      throw RuntimeError(std::string("--loss ") + name(options.loss) + ": " +
                         e.what_without_backtrace() + " (" +
                         rowsText(m, begin, rows) + ")");
    }
    stepLoss += mb.loss.item<double>() / plan.microbatches;
  }
}

void RankRunner::sendForward(MicroBatch &mb, int m) {
  for (const Edge &edge : plan.sendEdges)
    for (size_t e = 0; e < edge.entries.size(); ++e) {
      const c10::IValue &value = mb.outputs.at(edge.entries[e].first);
      at::Tensor t = value.toTensor().detach().contiguous();
      checkSpec(t, edge.specs[e], m, edge.entries[e].first);
      pendingSends.push_back(comm->send(
          t, edge.peerRank, tag(m, 0, e),
          where() + ": sending " + actionText(exe::ActionKind::SendF, m) +
              " result " + std::to_string(edge.entries[e].first) +
              " to stage " + std::to_string(edge.peerStage)));
    }
}

void RankRunner::checkSpec(const at::Tensor &t, const TensorSpec &spec, int m,
                           unsigned result) {
  if (t.sizes() != at::IntArrayRef(spec.sizes) || t.scalar_type() != spec.dtype)
    throw RuntimeError(
        "stage " + std::to_string(plan.stage) + ", micro-batch " +
        std::to_string(m) + ": result " + std::to_string(result) + " is " +
        specText({{t.sizes().begin(), t.sizes().end()}, t.scalar_type()}) +
        " but the pipeline sends " + specText(spec));
}

void RankRunner::backward(MicroBatch &mb) {
  std::vector<at::Tensor> roots, grads;
  if (mb.loss.defined()) {
    roots.push_back(mb.loss / static_cast<double>(plan.microbatches));
    grads.push_back(at::Tensor());
  }
  // The gradient of each result is the sum over its consumers.
  std::map<unsigned, at::Tensor> resultGrads;
  for (size_t k = 0; k < plan.sendEdges.size(); ++k) {
    const Edge &edge = plan.sendEdges[k];
    for (size_t e = 0; e < edge.entries.size(); ++e) {
      const at::Tensor &g = mb.gradBuffers[k][e];
      if (!g.defined())
        continue;
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
  if (!deferred.empty()) {
    backwardInputs(mb, roots, grads);
    return;
  }
  if (!roots.empty()) {
    // The input gradients go first: the previous stage waits for them,
    // and the weight gradients follow once they are sent
    // (addHeldWeightGradients after the SEND_B).
    std::optional<WeightGradientQueue::Scope> hold;
    if (sendsInputGradients) {
      heldWeightGrads.push_back({currentMicrobatch, {}});
      hold.emplace(heldWeightGrads.back().queue);
    }
    ::torch::autograd::backward(roots, grads);
    if (sendsInputGradients && heldWeightGrads.back().queue.empty())
      heldWeightGrads.pop_back();
  }
  mb.inputGrads.assign(plan.stageInputs.size(), at::Tensor());
  for (const Edge &edge : plan.recvEdges)
    for (const auto &[result, input] : edge.entries) {
      at::Tensor in = mb.received[input];
      if (!isDifferentiable(in.scalar_type()))
        continue;
      at::Tensor g = in.grad();
      checkNoGradient(input, g);
      if (plan.inputGetsGrad[input]) // the others are not sent
        mb.inputGrads[input] = g.defined() ? g : at::zeros_like(in);
    }
  // The activations of this micro-batch are no longer needed.
  mb.outputs.clear();
  mb.loss = at::Tensor();
  mb.received.clear();
  mb.gradBuffers.clear();
}

/// Backward without the deferred linears' weight gradients: gradients
/// for the stage's inputs, the other parameters, and the deferred
/// linears' outputs, which are kept with their inputs for the W pass.
void RankRunner::backwardInputs(MicroBatch &mb,
                                const std::vector<at::Tensor> &roots,
                                const std::vector<at::Tensor> &grads) {
  std::vector<at::Tensor> wrt;
  std::vector<unsigned> inputIndex;
  for (const Edge &edge : plan.recvEdges)
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
  mb.inputGrads.assign(plan.stageInputs.size(), at::Tensor());
  for (size_t i = 0; i < firstParam; ++i) {
    checkNoGradient(inputIndex[i], result[i]);
    if (plan.inputGetsGrad[inputIndex[i]]) // the others are not sent
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
  mb.outputs.clear();
  mb.captured.clear();
  mb.loss = at::Tensor();
  mb.received.clear();
  mb.gradBuffers.clear();
}

/// The W pass: each deferred linear's weight gradient over the step's
/// micro-batches as one product, G^T X, and its bias gradient as G's
/// column sums.
void RankRunner::weightGradients() {
  if (linears.empty())
    return;
  Clock::time_point begin = Clock::now();
  for (size_t l = 0; l < linears.size(); ++l) {
    if (linearGrads[l].empty())
      continue;
    at::Tensor x = at::cat(linearInputs[l]);
    at::Tensor g = at::cat(linearGrads[l]);
    x = x.reshape({-1, x.size(-1)});
    g = g.reshape({-1, g.size(-1)});
    auto accumulate = [](at::Tensor p, const at::Tensor &grad) {
      p.mutable_grad() = p.grad().defined() ? p.grad() + grad : grad;
    };
    accumulate(params.at(linears[l].weight), at::mm(g.t(), x));
    if (!linears[l].bias.empty())
      accumulate(params.at(linears[l].bias), g.sum(0));
    linearInputs[l].clear();
    linearGrads[l].clear();
  }
  Clock::time_point end = Clock::now();
  double seconds = std::chrono::duration<double>(end - begin).count();
  if (!options.tracePath.empty()) // inside W or STEP, both busy
    events.push_back(
        {actionText(exe::ActionKind::Weight, 0), micros(begin), seconds * 1e6});
}

/// An input that the IR says gets no gradient must not get one from
/// autograd either: its producer does not wait for it.
void RankRunner::checkNoGradient(unsigned input, const at::Tensor &grad) {
  if (plan.inputGetsGrad.at(input) || !grad.defined())
    return;
  throw RuntimeError(where() + ": stage input " + std::to_string(input) +
                     " got a gradient that the pipeline's IR says it "
                     "cannot get (an internal error of pippy-run; please "
                     "report it with the pipeline)");
}

void RankRunner::sendBackward(MicroBatch &mb, int m) {
  for (const Edge &edge : plan.recvEdges)
    for (size_t e = 0; e < edge.entries.size(); ++e) {
      if (!isDifferentiable(edge.specs[e].dtype) || !edge.gradFlows[e])
        continue;
      at::Tensor g = mb.inputGrads[edge.entries[e].second].contiguous();
      pendingSends.push_back(comm->send(
          g, edge.peerRank, tag(m, 1, e),
          where() + ": sending " + actionText(exe::ActionKind::SendB, m) +
              " gradient of input " + std::to_string(edge.entries[e].second) +
              " to stage " + std::to_string(edge.peerStage)));
    }
  mb.inputGrads.clear();
}

/// The weight gradients that B actions held back until their input
/// gradients were sent, oldest micro-batch first, until at most `keep`
/// micro-batches' remain. They are part of their B: busy time, and a
/// second trace event with its name.
void RankRunner::addHeldWeightGradients(size_t keep) {
  while (heldWeightGrads.size() > keep) {
    HeldWeightGradients &held = heldWeightGrads.front();
    Clock::time_point begin = Clock::now();
    held.queue.run();
    double seconds =
        std::chrono::duration<double>(Clock::now() - begin).count();
    busySeconds += seconds;
    backwardSeconds += seconds;
    if (!options.tracePath.empty())
      events.push_back({actionText(exe::ActionKind::Backward, held.microbatch),
                        micros(begin), seconds * 1e6});
    heldWeightGrads.pop_front();
  }
}

void RankRunner::waitSends() {
  for (CommHandlePtr &h : pendingSends)
    h->wait();
  pendingSends.clear();
}

/// The linears whose weight and bias (if any) are trainable, not tied
/// (tied weights' gradients are collected per micro-batch) and not
/// deferred already.
std::vector<Program::Linear> RankRunner::untiedTrainableLinears() {
  std::set<std::string> tied;
  for (const TiedReplicas &group : plan.tied)
    tied.insert(group.name);
  auto trainable = [&](const std::string &name) {
    return name.empty() ||
           (params.count(name) && params.at(name).requires_grad() &&
            !tied.count(name) && !deferred.count(name));
  };
  std::vector<Program::Linear> result;
  for (const Program::Linear &l : program->linearsWithOwnParameters())
    if (trainable(l.weight) && trainable(l.bias))
      result.push_back(l);
  return result;
}

/// --defer-weight-grads: the linears whose weight gradients wait for the
/// W pass.
void RankRunner::chooseDeferredLinears() {
  if (!options.deferWeightGrads)
    return;
  for (const Program::Linear &l : untiedTrainableLinears()) {
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
/// (Program::fuseWeightGradients).
void RankRunner::fuseWeightGradients() {
  if (options.autogradWeightGrads)
    return;
  std::set<std::string> weights;
  for (const Program::Linear &l : untiedTrainableLinears())
    weights.insert(l.weight);
  program->fuseWeightGradients(weights);
}

} // namespace pippy::rt
