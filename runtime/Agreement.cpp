//===- Agreement.cpp - every rank runs the same pipeline and options ------===//

#include "Rank.h"

#include "Device.h"

#include <ATen/ATen.h>

#include <cstdio>

namespace pippy::rt {
namespace {

/// FNV-1a, 64 bits: the same on every host, unlike std::hash.
uint64_t fnv1a(const std::string &text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text)
    hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

} // namespace

/// Every rank must run the same program, schedule and options (ranks on
/// other hosts are started by hand or by a cluster launcher, each with its
/// own command line): one that differs would wait forever on a transfer or
/// gather its peers never start. Each rank puts a hash of every setting in
/// its row; one all-reduce shows every rank all the rows, and a difference
/// is an error naming the ranks and the settings before the first step.
void RankRunner::checkRanksAgree() {
  auto onOff = [](const std::string &path) {
    return std::string(path.empty() ? "off" : "on");
  };
  auto num = [](double v) {
    char text[32];
    std::snprintf(text, sizeof(text), "%e", v);
    return std::string(text);
  };
  auto opt = [&](const std::optional<double> &v) {
    return v ? num(*v) : std::string("default");
  };
  // The pipeline hash covers every rank's executable: its stages, their
  // transfers, the schedule and the micro-batches.
  std::vector<std::pair<std::string, std::string>> settings = {
      {"the pipeline (the hash of its executables)",
       std::to_string(plan.pipelineHash)},
      {"--infer", options.infer ? "on" : "off"},
      {"--backend and --device",
       std::string(name(backendFor(options, device))) + " " +
           (device.is_cuda() ? "cuda" : "cpu")},
      {"--shared-memory", options.sharedMemory ? "on" : "off"},
      {"--dtype and --allow-tf32", std::string(name(options.precision)) +
                                       (options.allowTf32 ? " on" : " off")},
      {"--steps", std::to_string(options.steps)},
      {"--loss", name(options.loss)},
      {"--optimizer, --lr, --momentum, --weight-decay, --betas, --eps",
       std::string(name(options.optimizer)) + " " + num(options.lr) + " " +
           opt(options.momentum) + " " + opt(options.weightDecay) + " " +
           opt(options.beta1) + " " + opt(options.beta2) + " " +
           opt(options.eps)},
      {"--clip-grad-norm", opt(options.clipGradNorm)},
      {"--seed", std::to_string(options.seed)},
      {"--autograd-weight-grads", options.autogradWeightGrads ? "on" : "off"},
      {"--save-weights", onOff(options.saveWeightsPath)},
      {"--save-grads", onOff(options.saveGradsPath)},
      {"--metrics", onOff(options.metricsPath)},
      {"--trace", onOff(options.tracePath)},
      {"--profile", onOff(options.profilePath)},
      {"--output", onOff(options.outputPath)},
      {"--checkpoint-dir and --checkpoint-every",
       onOff(options.checkpointDir) + " " +
           std::to_string(options.checkpointEvery)},
      {"--resume", options.resume ? "on" : "off"},
      {"--dp, --dp-overlap, --zero and --tp",
       std::to_string(options.dp) + (options.dpOverlap ? " on " : " off ") +
           std::to_string(options.zero) + " " + std::to_string(options.tp)},
  };
  int64_t n = static_cast<int64_t>(settings.size());
  at::Tensor rows = at::zeros({rdzv.worldSize, n}, at::kLong);
  auto mine = rows[rdzv.rank];
  for (int64_t i = 0; i < n; ++i)
    // Kept below 2^62 so that the sum of one row and zeros cannot wrap.
    mine[i] = static_cast<int64_t>(fnv1a(settings[i].second) >> 2);
  worldComm->allReduceSum(rows, where() + ": comparing the ranks' settings")
      ->wait();
  auto all = rows.accessor<int64_t, 2>();
  std::string differ;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int> others;
    for (int r = 0; r < rdzv.worldSize; ++r)
      if (all[r][i] != all[0][i])
        others.push_back(r);
    if (others.empty())
      continue;
    std::string list;
    for (int r : others)
      list += (list.empty() ? "" : ", ") + std::to_string(r);
    differ += "\n  " + settings[i].first + ": rank" +
              (others.size() > 1 ? "s " : " ") + list + " differ" +
              (others.size() > 1 ? "" : "s") + " from rank 0";
  }
  if (!differ.empty())
    throw RuntimeError("the ranks were not started alike; every rank needs "
                       "the same program and options:" +
                       differ);
}

} // namespace pippy::rt
