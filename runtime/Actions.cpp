//===- Actions.cpp - one rank of a pipeline: forwards and messages --------===//
//
// F, SEND_F, RECV_F, SEND_B and RECV_B (see Executor.cpp), the local
// hand-over of activations between two stages of one rank, and the W's
// and STEPs that fill a receive's wait (--fill-waits). The backward actions are
// in Backward.cpp.
//
//===----------------------------------------------------------------------===//

#include "Rank.h"

#include "Device.h"
#include "MixedPrecision.h"
#include "TensorFile.h"
#include "Training.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <optional>

namespace pippy::rt {

/// Posts every receive of the step so that data can land while the rank
/// computes. Inputs from a stage of this rank are handed over instead.
void RankRunner::postReceives(StageRun &run, bool training) {
  const HeldStage &stage = *run.plan;
  int M = static_cast<int>(run.mbs.size());
  for (int m = 0; m < M; ++m) {
    MicroBatch &mb = run.mbs[m];
    mb.received.assign(stage.stageInputs.size(), at::Tensor());
    mb.wireSpecs.assign(stage.stageInputs.size(), nullptr);
    for (const Edge &edge : stage.recvEdges)
      for (size_t e = 0; e < edge.entries.size() && !edge.local; ++e) {
        const TensorSpec &spec = edge.specs[e];
        bool carried = carriesDtype(options.precision, spec);
        at::Tensor buffer =
            carried ? wireBuffer(spec, device)
                    : at::empty(
                          spec.sizes,
                          at::TensorOptions().dtype(spec.dtype).device(device));
        mb.received[edge.entries[e].second] = buffer;
        if (carried)
          mb.wireSpecs[edge.entries[e].second] = &spec;
        mb.recvF.push_back(comm->recv(
            buffer, edge.peerRank,
            plan.tag(m, 0, edge.peerStage, stage.stage, e),
            where() + ": receiving " +
                exe::actionText(exe::ActionKind::RecvF, stage.stage, m) +
                " input " + std::to_string(edge.entries[e].second) +
                " from stage " + std::to_string(edge.peerStage)));
      }
    if (!training)
      continue;
    for (const Edge &edge : stage.sendEdges) {
      std::vector<at::Tensor> buffers;
      for (size_t e = 0; e < edge.entries.size(); ++e) {
        const TensorSpec &spec = edge.specs[e];
        if (!isDifferentiable(spec.dtype) || !edge.gradFlows[e] || edge.local) {
          buffers.push_back(at::Tensor()); // none, or handed over
          continue;
        }
        at::Tensor buffer = at::empty(
            spec.sizes, at::TensorOptions().dtype(spec.dtype).device(device));
        buffers.push_back(buffer);
        mb.recvB.push_back(comm->recv(
            buffer, edge.peerRank,
            plan.tag(m, 1, stage.stage, edge.peerStage, e),
            where() + ": receiving " +
                exe::actionText(exe::ActionKind::RecvB, stage.stage, m) +
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
  std::string text = "micro-batch " + std::to_string(globalMicrobatch(m));
  if (currentStep > 0)
    text += " of step " + std::to_string(currentStep);
  int64_t total = data ? data->rows() : 0;
  if (total == 0)
    return text;
  int64_t first = begin % total, last = (begin + rows - 1) % total;
  return text + ": rows " + std::to_string(first) + "-" + std::to_string(last) +
         " of " + options.dataPath;
}

void RankRunner::forward(StageRun &run, int m, int64_t begin, bool training) {
  const HeldStage &stage = *run.plan;
  MicroBatch &mb = run.mbs[m];
  int64_t rows = plan.microbatchRows();
  std::vector<c10::IValue> dataArgs;
  bool needsData =
      std::any_of(stage.stageInputs.begin(), stage.stageInputs.end(),
                  [](const StageInputSource &s) { return s.stage < 0; });
  if (needsData)
    for (c10::IValue &arg :
         data->arguments(begin, rows, options.loss == LossKind::None))
      dataArgs.push_back(arg.isTensor() ? onDevice(arg.toTensor(), device)
                                        : arg);
  std::vector<c10::IValue> inputs;
  for (size_t i = 0; i < stage.stageInputs.size(); ++i) {
    if (stage.stageInputs[i].stage < 0) {
      inputs.push_back(dataArgs.at(stage.stageInputs[i].index));
      continue;
    }
    at::Tensor &t = mb.received[i];
    if (i < mb.wireSpecs.size() && mb.wireSpecs[i]) {
      t = fromWire(t, *mb.wireSpecs[i]);
      mb.wireSpecs[i] = nullptr;
    }
    if (training && isDifferentiable(t.scalar_type()))
      t.requires_grad_(true);
    inputs.emplace_back(asActivation(options.precision, t));
  }
  mb.captured.clear();
  RandomKey random{options.seed, currentStep, globalMicrobatch(m), device};
  try {
    AutocastScope autocast(options.precision, device.type());
    mb.outputs = run.program->run(
        inputs, params, training && !deferred.empty() ? &captureSlots : nullptr,
        &mb.captured,
        options.profilePath.empty() ? nullptr : &run.opNanoseconds, &random);
  } catch (const RuntimeError &e) {
    // Under autocast an op may fail where f32 runs (PyTorch's autocast
    // fails alike): the message says which precision ran.
    throw RuntimeError(
        std::string(e.what()) + " (" + rowsText(m, begin, rows) +
        (options.precision == Precision::F32
             ? ""
             : std::string(", under --dtype ") + name(options.precision)) +
        ")");
  }
  ++forwardsRun;
  // Consumers on this rank take the results now, as new leaves.
  for (const Edge &edge : stage.sendEdges)
    if (edge.local) {
      MicroBatch &next = stageRun(edge.peerStage).mbs[m];
      for (const auto &[result, input] : edge.entries)
        next.received.at(input) = mb.outputs.at(result).toTensor().detach();
    }
  if (training && stage.holdsOutput) {
    at::Tensor target = options.loss == LossKind::None
                            ? at::Tensor()
                            : onDevice(data->target(begin, rows), device);
    try {
      mb.loss =
          computeLoss(options.loss, mb.outputs.at(plan.outputIndices.at(0)),
                      target, options.precision);
    } catch (const c10::Error &e) {
      throw RuntimeError(std::string("--loss ") + name(options.loss) + ": " +
                         e.what_without_backtrace() + " (" +
                         rowsText(m, begin, rows) + ")");
    }
  }
}

void RankRunner::sendForward(StageRun &run, int m) {
  const HeldStage &stage = *run.plan;
  MicroBatch &mb = run.mbs[m];
  for (const Edge &edge : stage.sendEdges)
    for (size_t e = 0; e < edge.entries.size() && !edge.local; ++e) {
      const c10::IValue &value = mb.outputs.at(edge.entries[e].first);
      at::Tensor t = value.toTensor().detach().contiguous();
      checkSpec(stage.stage, t, edge.specs[e], m, edge.entries[e].first);
      if (carriesDtype(options.precision, edge.specs[e]))
        t = toWire(t, edge.specs[e]);
      pendingSends.push_back(comm->send(
          t, edge.peerRank, plan.tag(m, 0, stage.stage, edge.peerStage, e),
          where() + ": sending " +
              exe::actionText(exe::ActionKind::SendF, stage.stage, m) +
              " result " + std::to_string(edge.entries[e].first) +
              " to stage " + std::to_string(edge.peerStage)));
    }
}

void RankRunner::checkSpec(int stage, const at::Tensor &t,
                           const TensorSpec &spec, int m, unsigned result) {
  // Under mixed precision a floating result may be narrower than declared.
  bool dtypeFits =
      t.scalar_type() == spec.dtype || (carriesDtype(options.precision, spec) &&
                                        at::isFloatingType(t.scalar_type()));
  if (t.sizes() != at::IntArrayRef(spec.sizes) || !dtypeFits)
    throw RuntimeError(
        "stage " + std::to_string(stage) + ", micro-batch " +
        std::to_string(m) + ": result " + std::to_string(result) + " is " +
        specText({{t.sizes().begin(), t.sizes().end()}, t.scalar_type()}) +
        " but the pipeline sends " + specText(spec));
}

void RankRunner::sendBackward(StageRun &run, int m) {
  const HeldStage &stage = *run.plan;
  MicroBatch &mb = run.mbs[m];
  for (const Edge &edge : stage.recvEdges)
    for (size_t e = 0; e < edge.entries.size() && !edge.local; ++e) {
      if (!isDifferentiable(edge.specs[e].dtype) || !edge.gradFlows[e])
        continue;
      at::Tensor g = mb.inputGrads[edge.entries[e].second]
                         .to(edge.specs[e].dtype)
                         .contiguous();
      pendingSends.push_back(comm->send(
          g, edge.peerRank, plan.tag(m, 1, edge.peerStage, stage.stage, e),
          where() + ": sending " +
              exe::actionText(exe::ActionKind::SendB, stage.stage, m) +
              " gradient of input " + std::to_string(edge.entries[e].second) +
              " to stage " + std::to_string(edge.peerStage)));
    }
  mb.inputGrads.clear();
}

void RankRunner::waitSends() {
  for (CommHandlePtr &h : pendingSends)
    h->wait();
  pendingSends.clear();
}

namespace {

/// Whether every one of a receive's messages has come, as far as the
/// transport tells (Gloo's say so only once waited for).
bool allCompleted(const std::vector<CommHandlePtr> &handles) {
  return std::all_of(handles.begin(), handles.end(),
                     [](const CommHandlePtr &h) { return h->isCompleted(); });
}

/// Whether the transport can tell that these messages have come before
/// they are waited for.
bool allTellArrival(const std::vector<CommHandlePtr> &handles) {
  return std::all_of(handles.begin(), handles.end(),
                     [](const CommHandlePtr &h) { return h->tellsArrival(); });
}

} // namespace

/// --fill-waits: before action `next`, a receive whose message has not
/// come, the rank computes the W's that WaitFill allows, one at a
/// time, while the message is still missing, and then the STEPs of stages
/// that step alone (OptimizerStep.cpp), and then (--fill-forwards) later
/// forwards, where the transport can tell the message is missing: a forward
/// costs memory, not to be spent on a guess.
void RankRunner::fillWait(size_t next, int step, int64_t cursor, int &inflight,
                          ::torch::optim::Optimizer &optimizer) {
  using K = exe::ActionKind;
  const ScheduledAction &action = plan.actions[next];
  if (!options.fillWaits ||
      (action.kind != K::RecvF && action.kind != K::RecvB))
    return;
  MicroBatch &mb = stageRun(action.stage).mbs[action.microbatch];
  std::vector<CommHandlePtr> &handles =
      action.kind == K::RecvF ? mb.recvF : mb.recvB;
  bool forwards = options.fillForwards > 0 && allTellArrival(handles);
  while (!allCompleted(handles)) {
    std::optional<size_t> work = early.pick(next);
    if (!work && !stageAlone.empty())
      work = early.pickStep(next);
    if (work) {
      runAction(plan.actions[*work], step, cursor, inflight, optimizer);
      early.ranEarly(*work);
    } else if (!forwards ||
               !fillForward(next, step, cursor, inflight, optimizer))
      return;
  }
}

/// --fill-forwards: runs the forward WaitFill picks (with its receive),
/// unless the rank already holds its budget of early forwards.
bool RankRunner::fillForward(size_t next, int step, int64_t cursor,
                             int &inflight,
                             ::torch::optim::Optimizer &optimizer) {
  if (early.forwardsAhead(next) >= options.fillForwards)
    return false;
  auto pick = early.pickForward(next, [&](size_t i) {
    const ScheduledAction &receive = plan.actions[i];
    const std::vector<CommHandlePtr> &handles =
        stageRun(receive.stage).mbs[receive.microbatch].recvF;
    return allTellArrival(handles) && allCompleted(handles);
  });
  if (!pick)
    return false;
  for (std::optional<size_t> i : {pick->second, std::optional(pick->first)})
    if (i) {
      runAction(plan.actions[*i], step, cursor, inflight, optimizer);
      early.ranEarly(*i);
    }
  return true;
}

/// The step's receives, which its RECV actions left to the device
/// (CommHandle::waitOnDevice): waited on the host before it reads the
/// step's loss, so that a lost peer is reported within the timeout.
void RankRunner::waitReceives() {
  for (StageRun &run : stages)
    for (MicroBatch &mb : run.mbs) {
      for (CommHandlePtr &h : mb.recvF)
        h->wait();
      for (CommHandlePtr &h : mb.recvB)
        h->wait();
    }
}

} // namespace pippy::rt
