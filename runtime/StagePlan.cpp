//===- StagePlan.cpp - what a rank runs, read from its executable ---------===//

#include "StagePlan.h"

#include "TensorFile.h"

#include "pippy/Support/AtomicFile.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

namespace fs = std::filesystem;

namespace pippy::rt {

LoadedExecutable LoadedExecutable::read(const std::string &path) {
  std::string bytes;
  if (std::string error = readFile(path, bytes); !error.empty())
    throw RuntimeError(error);
  std::string folder = fs::path(path).parent_path().string();
  return fromBytes(std::move(bytes), path, folder.empty() ? "." : folder);
}

LoadedExecutable LoadedExecutable::fromBytes(std::string bytes,
                                             const std::string &name,
                                             const std::string &folder) {
  std::string error;
  if (!exe::verify(reinterpret_cast<const uint8_t *>(bytes.data()),
                   bytes.size(), error))
    throw RuntimeError(name + ": " + error);
  LoadedExecutable loaded;
  loaded.bytes = std::move(bytes);
  loaded.label = name;
  loaded.folder = folder;
  return loaded;
}

std::string LoadedExecutable::weightsPath(const std::string &override) const {
  if (!override.empty())
    return override;
  std::string path = get().weights()->str();
  if (path.empty() || fs::path(path).is_absolute())
    return path;
  return (fs::path(folder) / path).lexically_normal().string();
}

bool isExecutable(const std::string &path) {
  std::error_code ec;
  if (fs::is_directory(path, ec) ||
      fs::path(path).extension() ==
          std::string(".") + exe::ExecutableExtension())
    return true;
  std::ifstream in(path, std::ios::binary);
  char head[8] = {};
  in.read(head, sizeof(head));
  return in.gcount() == 8 &&
         flatbuffers::BufferHasIdentifier(head, exe::ExecutableIdentifier());
}

std::string executablePath(const std::string &path, int rank) {
  std::error_code ec;
  if (!fs::is_directory(path, ec))
    return path;
  return (fs::path(path) / exe::rankFileName(rank)).string();
}

namespace {

std::vector<TensorSpec>
specs(const flatbuffers::Vector<flatbuffers::Offset<exe::TensorSpec>> &list) {
  std::vector<TensorSpec> result;
  for (const exe::TensorSpec *spec : list)
    result.push_back(toTensorSpec(*spec));
  return result;
}

/// Groups stage `held.stage`'s transfers by peer stage, each in channel
/// order.
void readEdges(const exe::Executable &exe, const StagePlan &plan,
               HeldStage &held) {
  std::map<int, std::map<unsigned, const exe::Transfer *>> in, out;
  for (const exe::Transfer *t : *exe.transfers()) {
    if (t->consumer_stage() == held.stage)
      in[t->producer_stage()][t->channel()] = t;
    if (t->producer_stage() == held.stage)
      out[t->consumer_stage()][t->channel()] = t;
  }
  auto edge = [&](int peer,
                  const std::map<unsigned, const exe::Transfer *> &channels) {
    Edge e;
    e.peerStage = peer;
    e.peerRank = plan.stageRanks.at(peer);
    e.local = e.peerRank == plan.rank;
    unsigned expected = 0;
    for (const auto &[channel, t] : channels) {
      if (channel != expected++)
        throw RuntimeError("the transfers between stages " +
                           std::to_string(t->producer_stage()) + " and " +
                           std::to_string(t->consumer_stage()) +
                           " skip channel " + std::to_string(channel - 1));
      e.entries.push_back({t->producer_result(), t->consumer_input()});
      e.specs.push_back(toTensorSpec(*t->spec()));
      e.gradFlows.push_back(t->gradient());
    }
    return e;
  };
  for (const auto &[peer, channels] : in)
    held.recvEdges.push_back(edge(peer, channels));
  for (const auto &[peer, channels] : out)
    held.sendEdges.push_back(edge(peer, channels));
}

/// Stage `stage`'s inputs, edges, and the check that every input from
/// another stage arrives by exactly one transfer.
HeldStage readStage(const exe::Executable &exe, const StagePlan &plan,
                    const exe::Stage &stage) {
  HeldStage held;
  held.stage = stage.index();
  held.program = stage.program();
  held.countedOpOffset = stage.counted_op_offset();
  held.holdsOutput = held.stage == plan.outputStage;
  for (const exe::StageInput *in : *stage.inputs()) {
    held.stageInputs.push_back({in->stage(), in->index()});
    held.inputGetsGrad.push_back(in->gets_gradient());
  }
  readEdges(exe, plan, held);
  std::vector<int> arrivals(held.stageInputs.size(), 0);
  for (const Edge &edge : held.recvEdges)
    for (const auto &[result, input] : edge.entries) {
      if (input >= held.stageInputs.size() ||
          held.stageInputs[input].stage != edge.peerStage ||
          held.stageInputs[input].index != result)
        throw RuntimeError("a transfer from stage " +
                           std::to_string(edge.peerStage) +
                           " does not match the input it feeds");
      ++arrivals[input];
    }
  for (size_t i = 0; i < held.stageInputs.size(); ++i)
    if (arrivals[i] != (held.stageInputs[i].stage >= 0 ? 1 : 0))
      throw RuntimeError("stage " + std::to_string(held.stage) + " input " +
                         std::to_string(i) + " has no transfer that brings it");
  return held;
}

/// The pipeline's micro-batch-sized inputs; the first input's first size is
/// a micro-batch's rows.
void readInputs(const exe::Executable &exe, StagePlan &plan) {
  plan.inputs = specs(*exe.inputs());
  if (plan.inputs.empty() || plan.inputs[0].sizes.empty() ||
      plan.inputs[0].sizes[0] < 1)
    throw RuntimeError(
        "the program's first input " +
        (plan.inputs.empty()
             ? std::string("is missing")
             : "has no rows (" + specText(plan.inputs[0]) + ")") +
        ": a micro-batch's rows are its first size (pippy-import "
        "--input-shapes 4x...)");
}

constexpr int kMaxChannels = 1024; // tensors per stage pair, for tags

} // namespace

bool HeldStage::sendsInputGradients() const {
  for (const Edge &edge : recvEdges)
    if (!edge.local)
      for (const TensorSpec &spec : edge.specs)
        if (isDifferentiable(spec.dtype))
          return true;
  return false;
}

int StagePlan::tag(int m, int direction, int producer, int consumer,
                   size_t channel) const {
  int64_t pair = static_cast<int64_t>(producer) * numStages + consumer;
  int64_t slot =
      (static_cast<int64_t>(m) * 2 + direction) * numStages * numStages + pair;
  return static_cast<int>(slot * kMaxChannels + static_cast<int64_t>(channel));
}

StagePlan StagePlan::of(const exe::Executable &exe) {
  StagePlan plan;
  plan.rank = exe.rank();
  plan.numRanks = exe.num_ranks();
  plan.numStages = static_cast<int>(exe.stage_ranks()->size());
  plan.pipelineHash = exe.pipeline_hash();
  plan.source = exe.source()->str();
  plan.stageRanks.assign(exe.stage_ranks()->begin(), exe.stage_ranks()->end());
  readInputs(exe, plan);
  plan.outputStage = exe.outputs()->Get(0)->stage();
  for (const exe::StageResult *out : *exe.outputs()) {
    if (out->stage() != plan.outputStage)
      throw RuntimeError("the pipeline's results come from stages " +
                         std::to_string(plan.outputStage) + " and " +
                         std::to_string(out->stage()) +
                         "; they must all come from one stage");
    plan.outputIndices.push_back(out->index());
  }
  for (const exe::Stage *stage : *exe.stages())
    plan.stages.push_back(readStage(exe, plan, *stage));
  std::sort(
      plan.stages.begin(), plan.stages.end(),
      [](const HeldStage &a, const HeldStage &b) { return a.stage < b.stage; });
  // A tied group's ranks, each once (stages of one rank share the tensor).
  for (const exe::TiedGroup *g : *exe.tied()) {
    std::vector<int> ranks(g->ranks()->begin(), g->ranks()->end());
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    plan.tied.push_back({g->name()->str(), ranks, g->gets_gradient()});
  }
  plan.stageParams.resize(plan.numStages);
  plan.tensorParallel = exe.tensor_parallel();
  for (const exe::StageParameters *sp : *exe.stage_parameters())
    for (uint32_t i = 0; i < sp->names()->size(); ++i) {
      std::string name = sp->names()->Get(i)->str();
      plan.stageParams[sp->stage()].push_back(
          {name, toTensorSpec(*sp->specs()->Get(i))});
      const exe::Shard *shard = sp->shards()->Get(i);
      if (shard->parts() > 1)
        plan.shards[name] = {shard->dim(), shard->parts()};
    }
  const exe::Schedule &schedule = *exe.schedule();
  plan.scheduleKind = exe::scheduleKindText(schedule.kind());
  plan.microbatches = schedule.microbatches();
  plan.splitBackward = schedule.split_backward();
  for (const exe::Action *a : *schedule.actions()) {
    plan.actions.push_back({a->kind(), a->stage(), a->microbatch()});
    plan.hasInputWeightSplit |= a->kind() == exe::ActionKind::BackwardInput;
  }
  // Every message of a step needs its own tag.
  if (int64_t(2) * plan.microbatches * plan.numStages * plan.numStages *
          kMaxChannels >
      std::numeric_limits<int>::max())
    throw RuntimeError(std::to_string(plan.microbatches) +
                       " micro-batches of " + std::to_string(plan.numStages) +
                       " stages need more message tags than a communicator "
                       "has; use fewer micro-batches or stages");
  return plan;
}

at::Tensor StagePlan::sliceOf(const std::string &name, const at::Tensor &whole,
                              int t) const {
  auto it = shards.find(name);
  if (it == shards.end())
    return whole;
  auto [dim, parts] = it->second;
  return whole.chunk(parts, dim).at(t).clone(at::MemoryFormat::Contiguous);
}

} // namespace pippy::rt
