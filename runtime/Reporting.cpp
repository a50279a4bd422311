//===- Reporting.cpp - what a rank tells the user -------------------------===//
//
// Progress lines, busy time and trace events of the actions, and the files
// a run writes at its end: metrics (gathered from every rank), the merged
// trace, the profile, the final weights (rank 0) and the first step's
// gradients.
//
//===----------------------------------------------------------------------===//

#include "Rank.h"

#include "Device.h"
#include "Reports.h"
#include "TensorFile.h"

#include "pippy/Support/Profile.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <cstring>

namespace pippy::rt {

/// An action's time: busy for compute (F, B, I, W, STEP and the deferred
/// weights' W, which traces its own event), traced for all others.
void RankRunner::record(const ScheduledAction &action,
                        const ActionClock::Mark &begin) {
  using K = exe::ActionKind;
  using Counts = ActionClock::Counts;
  Counts counts = Counts::TraceOnly;
  if (action.kind == K::Weight)
    counts = Counts::Busy;
  else if (action.kind == K::Forward || action.kind == K::Backward ||
           action.kind == K::BackwardInput ||
           action.kind == K::BackwardWeight || action.kind == K::Step)
    counts = Counts::Both;
  times.close(begin, action.text(), counts, currentStep);
}

void RankRunner::printLine(const std::string &line) {
  if (prefixOwnLines)
    std::printf("[rank%d] %s\n", rdzv.rank, line.c_str());
  else
    std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void RankRunner::printRank0(const std::string &line) {
  if (rdzv.rank == 0)
    printLine(line);
}

/// Sends a byte string to the pipeline's rank 0 (which receives one from
/// every rank of its pipeline).
std::vector<std::string> RankRunner::gatherStrings(const std::string &mine,
                                                   int tagBase) {
  std::vector<std::string> all(plan.numRanks);
  if (rank != 0) {
    at::Tensor length =
        at::full({1}, static_cast<int64_t>(mine.size()), at::kLong);
    comm->send(length, 0, tagBase, where() + ": sending its report's size")
        ->wait();
    at::Tensor bytes =
        at::empty({static_cast<int64_t>(mine.size())}, at::kByte);
    std::memcpy(bytes.data_ptr(), mine.data(), mine.size());
    comm->send(bytes, 0, tagBase + 1, where() + ": sending its report")->wait();
    return all;
  }
  all[0] = mine;
  for (int r = 1; r < plan.numRanks; ++r) {
    at::Tensor length = at::empty({1}, at::kLong);
    comm->recv(length, r, tagBase, where() + ": receiving a report's size")
        ->wait();
    at::Tensor bytes = at::empty({length.item<int64_t>()}, at::kByte);
    comm->recv(bytes, r, tagBase + 1, where() + ": receiving a report")->wait();
    all[r].assign(static_cast<const char *>(bytes.data_ptr()), bytes.numel());
  }
  return all;
}

/// Gathers busy times, in-flight peaks and data-parallel traffic from every
/// rank of the world, then replica 0 writes metrics, the trace, the profile
/// and the weights.
void RankRunner::finish(int firstStep, const StepHistory &history) {
  RunMetrics metrics = gatherMetrics(history);
  addStepMetrics(metrics, firstStep, history);
  if (reports()) {
    if (plan.holdsOutput() && !options.metricsPath.empty())
      writeTextFile(options.metricsPath, metricsJson(metrics));
    if (!options.tracePath.empty())
      writeTrace();
    if (!options.profilePath.empty())
      writeProfile();
  }
  if (replica == 0 && !options.saveWeightsPath.empty())
    saveWeights();
  worldComm->barrier(where() + ": waiting for every rank to finish");
}

/// The run's figures per rank, summed over the world, and its bubble.
RunMetrics RankRunner::gatherMetrics(const StepHistory &history) {
  constexpr int kStats = 9;
  int W = rdzv.worldSize, me = rdzv.rank;
  int64_t n = static_cast<int64_t>(history.seconds.size());
  int64_t gradientBytes = 0;
  for (const auto &[name, p] : trainable)
    if (p.grad().defined())
      gradientBytes += p.numel() * static_cast<int64_t>(p.element_size());
  at::Tensor stats = at::zeros({kStats * W}, at::kDouble);
  times.settle();
  double perRank[kStats] = {
      times.busySeconds(),
      history.wallSeconds,
      static_cast<double>(peakInflight),
      static_cast<double>(peakActivationBytes),
      reducer ? static_cast<double>(reducer->bytesReduced()) /
                    std::max<int64_t>(n, 1)
              : 0.0,
      static_cast<double>(gradientBytes),
      reducer ? reducer->waitSeconds() : 0.0,
      static_cast<double>(optimizerBytes),
      static_cast<double>(peakDeviceBytes(device).value_or(-1))};
  for (int i = 0; i < kStats; ++i)
    stats[kStats * me + i] = perRank[i];
  worldComm->allReduceSum(stats, where() + ": gathering statistics")->wait();
  auto stat = [&](int r, int i) {
    return stats[kStats * r + i].item<double>();
  };
  RunMetrics metrics;
  metrics.schedule = plan.scheduleKind;
  metrics.dtype = name(options.precision);
  metrics.ranks = W;
  metrics.mesh = mesh;
  double busy = 0, wall = 0;
  for (int r = 0; r < W; ++r) {
    busy += stat(r, 0);
    wall = std::max(wall, stat(r, 1));
    metrics.busySeconds.push_back(stat(r, 0));
    metrics.peakInflight.push_back(static_cast<int64_t>(stat(r, 2)));
    metrics.peakActivationBytes.push_back(static_cast<int64_t>(stat(r, 3)));
    metrics.dpReducedBytesPerStep.push_back(static_cast<int64_t>(stat(r, 4)));
    metrics.gradientBytes.push_back(static_cast<int64_t>(stat(r, 5)));
    metrics.dpWaitSeconds.push_back(stat(r, 6));
    metrics.optimizerStateBytes.push_back(static_cast<int64_t>(stat(r, 7)));
    if (stat(r, 8) >= 0) // a GPU's
      metrics.peakDeviceBytes.push_back(static_cast<int64_t>(stat(r, 8)));
  }
  metrics.bubbleFraction = wall > 0 ? 1 - busy / (W * wall) : 0;
  return metrics;
}

/// Each step's loss and, from every rank, its time and busy time. A step's
/// time is the slowest rank's.
void RankRunner::addStepMetrics(RunMetrics &metrics, int firstStep,
                                const StepHistory &history) {
  int W = rdzv.worldSize, me = rdzv.rank;
  int64_t n = static_cast<int64_t>(history.seconds.size());
  // Per rank and step: its time ([0]) and its busy time ([1]).
  at::Tensor all = at::zeros({2, W, std::max<int64_t>(n, 1)}, at::kDouble);
  for (int64_t i = 0; i < n; ++i) {
    all[0][me][i] = history.seconds[i];
    all[1][me][i] = history.busySeconds[i];
  }
  worldComm->allReduceSum(all, where() + ": gathering step times")->wait();
  for (int64_t i = 0; i < n; ++i) {
    StepMetrics step;
    step.step = firstStep + static_cast<int>(i);
    step.loss = history.losses[i];
    for (int r = 0; r < W; ++r) {
      double t = all[0][r][i].item<double>();
      step.stepSeconds = std::max(step.stepSeconds, t);
      step.rankStepSeconds.push_back(t);
      step.rankBusySeconds.push_back(all[1][r][i].item<double>());
    }
    step.samplesPerSecond =
        stepMicrobatches() * plan.microbatchRows() / step.stepSeconds;
    metrics.steps.push_back(std::move(step));
  }
}

/// One Chrome/Perfetto JSON for all ranks: pid = rank, events named in the
/// action text form.
void RankRunner::writeTrace() {
  std::vector<std::string> all =
      gatherStrings(traceEventsJson(rank, times.events()), 0x7fff0000);
  if (rank != 0)
    return;
  std::vector<std::vector<int>> stagesOfRank(plan.numRanks);
  for (int s = 0; s < plan.numStages; ++s)
    stagesOfRank.at(plan.stageRanks[s]).push_back(s);
  writeTextFile(options.tracePath, mergeTrace(all, stagesOfRank));
  printLine("wrote the trace to " + options.tracePath);
}

/// Mean forward time per micro-batch of every op, and the rank's backward
/// time split over its stages' ops in proportion to their forward times.
void RankRunner::writeProfile() {
  double forwardTotal = 0;
  for (const StageRun &run : stages)
    for (int64_t ns : run.opNanoseconds)
      forwardTotal += ns;
  // Every stage of the rank forwards each micro-batch once.
  double runs = std::max<double>(double(forwardsRun) / stages.size(), 1);
  profile::Profile mine;
  for (const StageRun &run : stages) {
    const std::vector<std::string> &names = run.program->countedOps();
    for (size_t i = 0; i < names.size(); ++i) {
      double ns = run.opNanoseconds[i];
      double share = forwardTotal > 0 ? ns / forwardTotal : 0;
      mine.ops.push_back({run.plan->countedOpOffset + static_cast<int64_t>(i),
                          names[i], run.plan->stage, ns / runs / 1000.0,
                          backwardSeconds * 1e6 / runs * share});
    }
  }
  std::vector<std::string> all =
      gatherStrings(profile::write(mine), 0x7ffe0000);
  if (rank != 0)
    return;
  profile::Profile merged;
  merged.microbatchesMeasured = forwardsRun;
  for (int r = 0; r < plan.numRanks; ++r) {
    std::string error;
    std::optional<profile::Profile> part = profile::parse(all[r], error);
    if (!part)
      throw RuntimeError("rank " + std::to_string(r) +
                         " sent a malformed profile: " + error);
    merged.ops.insert(merged.ops.end(), part->ops.begin(), part->ops.end());
  }
  writeTextFile(options.profilePath, profile::write(merged));
  printLine("wrote the profile to " + options.profilePath);
}

/// Rank 0 writes every weight: its own, those the other stages send (a
/// name that an earlier stage also holds comes from that stage), and the
/// file's values for anything no stage uses.
void RankRunner::saveWeights() {
  // Sharded parameters whole again (every tensor rank takes part).
  std::map<std::string, at::Tensor> wholes;
  for (const auto &[name, p] : params)
    wholes[name] = wholeParameter(name, p);
  if (tensorRank != 0)
    return;
  std::set<std::string> earlier;
  std::map<std::string, at::Tensor> received;
  for (int s = 0; s < plan.numStages; ++s) {
    std::vector<std::pair<std::string, TensorSpec>> fresh;
    for (const auto &entry : plan.stageParams[s])
      if (earlier.insert(entry.first).second)
        fresh.push_back(entry);
    int owner = plan.stageRanks[s];
    if (owner == 0)
      continue;
    for (size_t i = 0; i < fresh.size(); ++i) {
      const auto &[name, spec] = fresh[i];
      int t = 0x7ff00000 + static_cast<int>(i);
      if (rank == owner) {
        at::Tensor value = wholes.at(name).detach().contiguous();
        comm->send(value, 0, t, where() + ": sending weight '" + name + "'")
            ->wait();
      } else if (rank == 0) {
        at::Tensor value =
            at::empty(spec.sizes, at::TensorOptions().dtype(spec.dtype));
        comm->recv(value, owner, t,
                   where() + ": receiving weight '" + name + "'")
            ->wait();
        received[name] = value;
      }
    }
  }
  if (rank != 0)
    return;
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const std::string &name : weightOrder) {
    auto mine = wholes.find(name);
    auto theirs = received.find(name);
    tensors.emplace_back(name, mine != wholes.end() ? mine->second
                               : theirs != received.end()
                                   ? theirs->second
                                   : allWeights.at(name));
  }
  writeTensors(options.saveWeightsPath, tensors, weightsMetadata);
  printLine("wrote the weights to " + options.saveWeightsPath);
}

/// Every parameter's gradient: those of this stage's trained ones, zeros
/// for its frozen ones, and on rank 0 zeros for the parameters no stage
/// uses (PyTorch's gradient is None for both). Each rank of a world of
/// several writes its own stage's, to FILE.rankR.
void RankRunner::saveGrads() {
  std::vector<std::pair<std::string, at::Tensor>> grads;
  for (const auto &[name, p] : trainable) {
    at::Tensor g = p.grad();
    grads.emplace_back(
        name, wholeParameter(name, g.defined() ? g : at::zeros_like(p)));
  }
  std::set<std::string> frozen = metadataList(weightsMetadata, kFrozenKey);
  for (const auto &[name, p] : params)
    if (frozen.count(name))
      grads.emplace_back(name, wholeParameter(name, at::zeros_like(p)));
  if (tensorRank != 0)
    return;
  if (rank == 0) {
    std::set<std::string> used;
    for (int s = 0; s < plan.numStages; ++s)
      for (const auto &[name, spec] : plan.stageParams[s])
        used.insert(name);
    std::set<std::string> untrained = untrainedNames(weightsMetadata);
    for (const std::string &name : weightOrder) {
      const at::Tensor &t = allWeights.at(name);
      if (!used.count(name) &&
          (isTrainable(t, name, untrained) || frozen.count(name)))
        grads.emplace_back(name, at::zeros_like(t));
    }
  }
  writeTensors(plan.numRanks == 1
                   ? options.saveGradsPath
                   : options.saveGradsPath + ".rank" + std::to_string(rank),
               grads, {});
}

} // namespace pippy::rt
