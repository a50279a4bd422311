//===- Checkpoint.cpp - checkpoints and resuming --------------------------===//
//
// `--checkpoint-dir D --checkpoint-every K` writes, every K steps,
// D/step-K/rank<R>.safetensors per rank. The format, defined here alone:
//
//   tensors   param:NAME              every weight of the rank's stage
//             momentum_buffer:NAME    SGD with momentum
//             exp_avg:NAME, exp_avg_sq:NAME   AdamW
//   metadata  step, cursor (the data row the next step starts at), rank
//             (the pipeline rank), world_size (the pipeline's ranks),
//             data_parallel (--dp), tensor_parallel (--tp), zero (--zero),
//             optimizer, adamw_step:NAME
//
// With --dp, replica 0 writes (the replicas' weights and optimizer states
// are equal), and every replica resumes from it; a step covers the same
// rows for any --dp, so a checkpoint resumes under another --dp (or
// --zero 1) too. With --zero 1 replica r > 0 also writes its share of the
// optimizer state, rank<R>.replica<r>.safetensors (no param: tensors);
// such a checkpoint resumes with the same --zero 1 --dp alone. With --tp
// each tensor rank t writes its slices as rank<R>.tp<t>[.replica<r>], and
// the checkpoint resumes with the same --tp.
// Every rank writes into D/step-K.tmp; once all have, rank 0 writes the
// folder's manifest (CheckpointManifest.h: each file's size and checksum)
// and renames the folder to D/step-K. `--resume` takes the newest folder
// whose manifest and files agree, naming each newer one it skips and why;
// `--keep-checkpoints N` removes all but the newest N after each one.
//
//===----------------------------------------------------------------------===//

#include "Rank.h"

#include "CheckpointManifest.h"
#include "TensorFile.h"
#include "TorchCompat.h"
#include "Training.h"

#include "pippy/Support/AtomicFile.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>

namespace fs = std::filesystem;

namespace pippy::rt {
namespace {

const std::string kParam = "param:";
const std::string kMomentum = "momentum_buffer:";
const std::string kExpAvg = "exp_avg:";
const std::string kExpAvgSq = "exp_avg_sq:";
const std::string kAdamWStep = "adamw_step:";
const std::string kStepFolder = "step-";

auto stateKey(const at::Tensor &p) { return compat::optimizerStateKey(p); }

/// Optimizer state of `params` (momentum buffers, AdamW moments and step
/// counts) as named tensors and metadata.
void saveOptimizerState(
    ::torch::optim::Optimizer &optimizer,
    const std::vector<std::pair<std::string, at::Tensor>> &params,
    std::vector<std::pair<std::string, at::Tensor>> &out,
    std::map<std::string, std::string> &metadata) {
  auto &state = optimizer.state();
  for (const auto &[name, p] : params) {
    auto it = state.find(stateKey(p));
    if (it == state.end())
      continue;
    if (auto *sgd =
            dynamic_cast<::torch::optim::SGDParamState *>(it->second.get())) {
      if (sgd->momentum_buffer().defined())
        out.emplace_back(kMomentum + name, sgd->momentum_buffer());
    } else if (auto *adam = dynamic_cast<::torch::optim::AdamWParamState *>(
                   it->second.get())) {
      out.emplace_back(kExpAvg + name, adam->exp_avg());
      out.emplace_back(kExpAvgSq + name, adam->exp_avg_sq());
      metadata[kAdamWStep + name] = std::to_string(adam->step());
    }
  }
}

void loadOptimizerState(
    ::torch::optim::Optimizer &optimizer, OptimizerKind kind,
    const std::vector<std::pair<std::string, at::Tensor>> &params,
    const TensorFile &file) {
  auto &state = optimizer.state();
  auto get = [&](const std::string &key) -> at::Tensor {
    auto it = file.tensors.find(key);
    return it == file.tensors.end() ? at::Tensor() : it->second;
  };
  for (const auto &[name, p] : params) {
    if (kind == OptimizerKind::Sgd) {
      at::Tensor buffer = get(kMomentum + name);
      if (!buffer.defined())
        continue;
      auto s = std::make_unique<::torch::optim::SGDParamState>();
      s->momentum_buffer(buffer.to(p.device()));
      state[stateKey(p)] = std::move(s);
    } else {
      at::Tensor avg = get(kExpAvg + name), sq = get(kExpAvgSq + name);
      auto step = file.metadata.find(kAdamWStep + name);
      if (!avg.defined() || !sq.defined() || step == file.metadata.end())
        continue;
      auto s = std::make_unique<::torch::optim::AdamWParamState>();
      s->exp_avg(avg.to(p.device()));
      s->exp_avg_sq(sq.to(p.device()));
      s->step(std::stoll(step->second));
      state[stateKey(p)] = std::move(s);
    }
  }
}

/// Pipeline rank `rank`'s file: replica 0's holds its weights and optimizer
/// state (with --zero 1, replica 0's share of it); with --zero 1 replica r's
/// share is in rank<R>.replica<r>.safetensors; with --tp, tensor rank t's
/// slices are in rank<R>.tp<t>[.replica<r>].safetensors (`tensorRank` -1:
/// no tensor parallelism).
std::string rankFileName(int rank, int tensorRank = -1, int replica = 0) {
  return "rank" + std::to_string(rank) +
         (tensorRank >= 0 ? ".tp" + std::to_string(tensorRank) : "") +
         (replica ? ".replica" + std::to_string(replica) : "") + ".safetensors";
}

} // namespace

std::string RankRunner::fileName(int ofReplica) const {
  return rankFileName(rank, mesh.tp > 1 ? tensorRank : -1, ofReplica);
}

int64_t optimizerStateBytes(
    ::torch::optim::Optimizer &optimizer,
    const std::vector<std::pair<std::string, at::Tensor>> &params) {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  std::map<std::string, std::string> metadata;
  saveOptimizerState(optimizer, params, tensors, metadata);
  int64_t bytes = 0;
  for (const auto &entry : tensors)
    bytes += entry.second.numel() *
             static_cast<int64_t>(entry.second.element_size());
  return bytes;
}

void RankRunner::checkpoint(::torch::optim::Optimizer &optimizer, int step,
                            int64_t cursor) {
  // Replicas hold the same weights and optimizer state: replica 0 writes
  // them (and its BatchNorm statistics); with --zero 1 each replica writes
  // its share of the optimizer state.
  // With --tp every tensor rank writes its slices.
  int shards = options.zero ? mesh.dp : 1;
  bool writes = replica<shards, wholeWorld = shards> 1 || mesh.tp > 1;
  if (!writes && !wholeWorld)
    return;
  std::string final =
      options.checkpointDir + "/" + kStepFolder + std::to_string(step);
  std::string tmp = final + ".tmp";
  if (writes) {
    std::error_code ec;
    fs::create_directories(tmp, ec);
    if (ec)
      throw RuntimeError("cannot create " + tmp + ": " + ec.message());
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    if (replica == 0)
      for (const auto &[name, p] : params)
        tensors.emplace_back(kParam + name, p);
    std::map<std::string, std::string> metadata{
        {"step", std::to_string(step)},
        {"cursor", std::to_string(cursor)},
        {"rank", std::to_string(rank)},
        {"world_size", std::to_string(plan.numRanks)},
        {"data_parallel", std::to_string(mesh.dp)},
        {"tensor_parallel", std::to_string(mesh.tp)},
        {"zero", std::to_string(options.zero)},
        {"optimizer", name(options.optimizer)}};
    saveOptimizerState(optimizer, optimized, tensors, metadata);
    writeTensors(tmp + "/" + fileName(replica), tensors, metadata);
  }
  (wholeWorld ? worldComm.get() : comm)
      ->barrier(where() + ": waiting for every rank's checkpoint");
  if (rdzv.rank != 0)
    return;
  std::vector<std::string> names;
  for (int r = 0; r < shards; ++r)
    for (int p = 0; p < plan.numRanks; ++p)
      for (int t = 0; t < mesh.tp; ++t)
        names.push_back(rankFileName(p, mesh.tp > 1 ? t : -1, r));
  std::string manifest =
      describeCheckpoint(tmp, step, plan.numRanks * mesh.tp, shards, names)
          .toJson();
  std::error_code ec;
  if (std::string error = writeFileAtomically(tmp + "/manifest.json", manifest);
      !error.empty())
    throw RuntimeError(error);
  fs::remove_all(final, ec);
  fs::rename(tmp, final, ec);
  if (ec)
    throw RuntimeError("cannot rename " + tmp + " to " + final + ": " +
                       ec.message());
  printLine("checkpoint at step " + std::to_string(step) + " in " + final);
  pruneCheckpoints();
}

namespace {

/// The steps of the checkpoint folders in `dir` (`step-K`), newest first.
std::vector<int> checkpointSteps(const std::string &dir) {
  std::vector<int> steps;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.compare(0, kStepFolder.size(), kStepFolder) != 0)
      continue;
    std::string digits = name.substr(kStepFolder.size());
    if (!digits.empty() && digits.size() < 9 &&
        digits.find_first_not_of("0123456789") == std::string::npos)
      steps.push_back(std::stoi(digits));
  }
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

} // namespace

void RankRunner::pruneCheckpoints() {
  if (options.keepCheckpoints <= 0)
    return;
  std::vector<int> steps = checkpointSteps(options.checkpointDir);
  for (size_t i = options.keepCheckpoints; i < steps.size(); ++i) {
    std::error_code ec;
    fs::remove_all(options.checkpointDir + "/" + kStepFolder +
                       std::to_string(steps[i]),
                   ec);
  }
}

int RankRunner::resume(::torch::optim::Optimizer &optimizer, int64_t &cursor) {
  // Every rank checks the same folders the same way, so all take the same.
  int best = 0;
  for (int step : checkpointSteps(options.checkpointDir)) {
    std::string dir =
        options.checkpointDir + "/" + kStepFolder + std::to_string(step);
    std::string why = checkCheckpoint(dir, plan.numRanks * mesh.tp);
    if (why.empty()) {
      best = step;
      break;
    }
    printRank0("skipping " + dir + ": " + why);
  }
  if (best == 0) {
    printRank0("no complete checkpoint in " + options.checkpointDir +
               "; starting at step 1");
    return 1;
  }
  std::string dir =
      options.checkpointDir + "/" + kStepFolder + std::to_string(best);
  std::string path = dir + "/" + fileName(0);
  TensorFile file = readTensors(path);
  auto metaOr = [&](const std::string &key, const char *absent) {
    auto it = file.metadata.find(key);
    if (it != file.metadata.end())
      return it->second;
    if (!absent)
      throw RuntimeError(path + ": no '" + key + "' in the metadata");
    return std::string(absent);
  };
  auto meta = [&](const std::string &key) { return metaOr(key, nullptr); };
  if (metaOr("tensor_parallel", "1") != std::to_string(mesh.tp))
    throw RuntimeError(dir + " holds parameters sharded for --tp " +
                       metaOr("tensor_parallel", "1") + ", not " +
                       std::to_string(mesh.tp));
  // A sharded optimizer state resumes on its own mesh; a whole one on any.
  bool sharded = metaOr("zero", "0") == "1";
  if (sharded && (!options.zero ||
                  metaOr("data_parallel", "1") != std::to_string(mesh.dp)))
    throw RuntimeError(dir + " holds optimizer state sharded over " +
                       metaOr("data_parallel", "1") +
                       " replicas (--zero 1); resume it with --zero 1 --dp " +
                       metaOr("data_parallel", "1"));
  if (meta("world_size") != std::to_string(plan.numRanks))
    throw RuntimeError(dir + " was written by a pipeline of " +
                       meta("world_size") + " ranks, not " +
                       std::to_string(plan.numRanks));
  if (meta("optimizer") != name(options.optimizer))
    throw RuntimeError(dir + " holds " + meta("optimizer") + " state, not " +
                       name(options.optimizer));
  {
    ::torch::NoGradGuard noGrad;
    for (auto &[name, p] : params) {
      auto it = file.tensors.find(kParam + name);
      if (it == file.tensors.end() || it->second.sizes() != p.sizes())
        throw RuntimeError(path + ": no weight '" + name +
                           "' of the right shape");
      p.copy_(it->second);
    }
  }
  loadOptimizerState(optimizer, options.optimizer, optimized,
                     sharded && replica > 0
                         ? readTensors(dir + "/" + fileName(replica))
                         : file);
  cursor = std::stoll(meta("cursor"));
  printRank0("resuming from " + dir);
  return best + 1;
}

} // namespace pippy::rt
