//===- Options.cpp - pippy-run's command line -----------------------------===//
//
// One table of options: each with its spelling, the name of its value, its
// help line and how it sets RunOptions. Values are checked here, so a run
// never starts with one it cannot use.
//
//===----------------------------------------------------------------------===//

#include "pippy/Runtime/Options.h"

#include "pippy/Executable/Format.h"
#include "pippy/Support/AtomicFile.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>

namespace pippy {

const char *name(LossKind kind) {
  switch (kind) {
  case LossKind::CrossEntropy:
    return "cross_entropy";
  case LossKind::Mse:
    return "mse";
  case LossKind::None:
    return "none";
  }
  return "?";
}

const char *name(OptimizerKind kind) {
  return kind == OptimizerKind::Sgd ? "sgd" : "adamw";
}

const char *name(ScheduleKind kind) { return exe::scheduleKindText(kind); }

const char *name(Backend backend) {
  return backend == Backend::Gloo ? "gloo" : "nccl";
}

const char *name(DeviceKind device) {
  return device == DeviceKind::Cpu ? "cpu" : "cuda";
}

const char *name(Precision precision) {
  return precision == Precision::F32 ? "f32" : "bf16";
}

namespace {

/// Sets an option from its value; returns an error message or empty.
using Setter = std::function<std::string(RunOptions &, const std::string &)>;

struct Option {
  const char *name;
  const char *value; ///< null for a flag
  const char *help;
  Setter set;
};

std::string parseInt(const std::string &option, const std::string &text,
                     int min, int &out) {
  char *end = nullptr;
  errno = 0;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end || errno == ERANGE || v < min || v > 1 << 30)
    return "--" + option + " takes an integer of at least " +
           std::to_string(min) + ", not '" + text + "'";
  out = static_cast<int>(v);
  return "";
}

/// The numbers an option takes.
enum class Sign { Any, NonNegative, Positive };

std::string parseDouble(const std::string &option, const std::string &text,
                        double &out, Sign sign = Sign::Any) {
  char *end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  bool fits = sign == Sign::Any           ? true
              : sign == Sign::NonNegative ? v >= 0
                                          : v > 0;
  if (text.empty() || *end || !std::isfinite(v) || !fits)
    return "--" + option + " takes a " +
           (sign == Sign::Any           ? "finite "
            : sign == Sign::NonNegative ? "finite non-negative "
                                        : "positive ") +
           "number, not '" + text + "'";
  out = v;
  return "";
}

template <typename Enum>
std::string parseChoice(const std::string &option, const std::string &text,
                        const std::vector<Enum> &choices, Enum &out) {
  std::string expected;
  size_t i = 0;
  for (Enum choice : choices) {
    if (text == name(choice)) {
      out = choice;
      return "";
    }
    expected += std::string(i == 0                    ? ""
                            : i + 1 == choices.size() ? " or "
                                                      : ", ") +
                name(choice);
    ++i;
  }
  return "unknown --" + option + " '" + text + "'; expected " + expected;
}

Setter text(std::string RunOptions::*field) {
  return [field](RunOptions &o, const std::string &v) {
    o.*field = v;
    return std::string();
  };
}

/// A choice whose absence means "the default for the run" (executables',
/// the device's).
template <typename Enum>
Setter optionalChoice(const char *option,
                      std::optional<Enum> RunOptions::*field,
                      std::initializer_list<Enum> choices) {
  std::vector<Enum> all(choices);
  return [=](RunOptions &o, const std::string &v) {
    Enum value{};
    std::string error = parseChoice(option, v, all, value);
    if (error.empty())
      o.*field = value;
    return error;
  };
}

Setter integer(const char *option, int RunOptions::*field, int min) {
  return [=](RunOptions &o, const std::string &v) {
    return parseInt(option, v, min, o.*field);
  };
}

Setter optionalInteger(const char *option,
                       std::optional<int> RunOptions::*field, int min) {
  return [=](RunOptions &o, const std::string &v) {
    int value = 0;
    std::string error = parseInt(option, v, min, value);
    o.*field = value;
    return error;
  };
}

Setter number(const char *option, std::optional<double> RunOptions::*field,
              Sign sign) {
  return [=](RunOptions &o, const std::string &v) {
    double value = 0;
    std::string error = parseDouble(option, v, value, sign);
    o.*field = value;
    return error;
  };
}

Setter flag(bool RunOptions::*field) {
  return [field](RunOptions &o, const std::string &v) {
    o.*field = v == "true";
    return std::string();
  };
}

/// The world: ranks, nodes, parallelism, device and precision.
std::vector<Option> worldOptions() {
  return {
      {"nproc", "N", "ranks per node (default: the executables' world, or 1)",
       optionalInteger("nproc", &RunOptions::nproc, 1)},
      {"dp", "D",
       "data-parallel replicas of the pipeline: the world (nnodes x nproc) "
       "is D x the pipeline's ranks (x --tp), and replica r runs "
       "micro-batches r, r+D, r+2D, ... of each step (default 1)",
       integer("dp", &RunOptions::dp, 1)},
      {"dp-overlap", nullptr,
       "start summing a stage's gradients over the replicas as soon as its "
       "last backward of the step is done (default); =false waits for the "
       "optimizer step",
       flag(&RunOptions::dpOverlap)},
      {"tp", "T",
       "tensor-parallel ranks per pipeline rank, for a pipeline sharded by "
       "pippy-opt --pippy-tensor-parallel=\"tp=T\": the world is --dp x the "
       "pipeline's ranks x T (default 1)",
       integer("tp", &RunOptions::tp, 1)},
      {"zero", "0|1",
       "1: shard the optimizer state over the --dp replicas (ZeRO stage 1): "
       "each steps its share of the parameters and sends the new values to "
       "the others (default 0)",
       [](RunOptions &o, const std::string &v) {
         if (v != "0" && v != "1")
           return "--zero takes 0 or 1 (stage 1 shards the optimizer state; "
                  "stages 2 and 3, which shard gradients and weights, are not "
                  "built), not '" +
                  v + "'";
         o.zero = v == "1";
         return std::string();
       }},
      {"nnodes", "N", "nodes (world size = nnodes x nproc)",
       integer("nnodes", &RunOptions::nnodes, 1)},
      {"node-rank", "K", "this node's index",
       integer("node-rank", &RunOptions::nodeRank, 0)},
      {"master-addr", "HOST", "rank 0's host for multi-node runs (MASTER_ADDR)",
       text(&RunOptions::masterAddr)},
      {"master-port", "PORT", "rank 0's port (MASTER_PORT)",
       integer("master-port", &RunOptions::masterPort, 1)},
      {"run-id", "ID",
       "the job's name, the same on every node: ranks of another job that "
       "reach this job's rendezvous are refused (default: "
       "TORCHELASTIC_RUN_ID, or none)",
       text(&RunOptions::runId)},
      {"backend", "gloo|nccl",
       "the communicator engine (default: nccl with --device cuda, else "
       "gloo; gloo moves GPU tensors through host memory)",
       optionalChoice("backend", &RunOptions::backend,
                      {Backend::Gloo, Backend::Nccl})},
      {"device", "cpu|cuda",
       "where each rank computes: cuda takes GPU LOCAL_RANK modulo the GPUs "
       "it sees (CUDA_VISIBLE_DEVICES); default cuda where libtorch has CUDA "
       "and a GPU is visible, else cpu",
       optionalChoice("device", &RunOptions::device,
                      {DeviceKind::Cpu, DeviceKind::Cuda})},
      {"dtype", "f32|bf16",
       "the forwards' precision: f32 (default) runs the model in its own "
       "dtypes; bf16 is mixed precision as torch.autocast gives it (matrix "
       "products and convolutions in bfloat16; weights, gradients, optimizer "
       "state and the loss in float32)",
       [](RunOptions &o, const std::string &v) {
         return parseChoice("dtype", v, {Precision::F32, Precision::BF16},
                            o.precision);
       }},
  };
}

/// The pipeline schedule and its micro-batches.
std::vector<Option> scheduleOptions() {
  return {
      {"schedule", "KIND",
       "the pipeline schedule: gpipe, 1f1b (default) or zb-h1 with one "
       "stage per rank; interleaved-1f1b, looped-bfs or zb1p with stage s on "
       "rank s mod ranks; zbv or dualpipev with two stages per rank",
       optionalChoice("schedule", &RunOptions::schedule,
                      {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                       ScheduleKind::Interleaved1F1B, ScheduleKind::LoopedBFS,
                       ScheduleKind::ZBH1, ScheduleKind::ZB1P,
                       ScheduleKind::ZBV, ScheduleKind::DualPipeV})},
      {"schedule-file", "FILE",
       "read the schedule's action lists from a file: a `.csv` file in "
       "torch.distributed.pipelining's form (a row per rank, an action per "
       "cell), any other in the text form (`rank0: 0F0 0SEND_F0 ...`)",
       text(&RunOptions::scheduleFile)},
      {"microbatches", "M", "micro-batches per step (default 1)",
       optionalInteger("microbatches", &RunOptions::microbatches, 1)},
      {"defer-weight-grads", nullptr,
       "split each backward: input gradients per micro-batch, the weight "
       "gradients of linear layers once per step as one matrix product over "
       "all micro-batches (faster; rounding differs in the last bits)",
       [](RunOptions &o, const std::string &v) {
         o.deferWeightGrads = v == "true";
         return std::string();
       }},
      {"emit-executables", "DIR",
       "lower the program to stage executables in DIR and exit",
       text(&RunOptions::emitExecutablesDir)},
  };
}

/// Training: steps, data, loss and optimizer.
std::vector<Option> trainingOptions() {
  return {
      {"steps", "N", "training steps", integer("steps", &RunOptions::steps, 1)},
      {"data", "FILE", "safetensors data file", text(&RunOptions::dataPath)},
      {"loss", "cross_entropy|mse|none", "the loss (default cross_entropy)",
       [](RunOptions &o, const std::string &v) {
         return parseChoice(
             "loss", v, {LossKind::CrossEntropy, LossKind::Mse, LossKind::None},
             o.loss);
       }},
      {"optimizer", "sgd|adamw", "the optimizer (default sgd)",
       [](RunOptions &o, const std::string &v) {
         return parseChoice("optimizer", v,
                            {OptimizerKind::Sgd, OptimizerKind::AdamW},
                            o.optimizer);
       }},
      {"lr", "X", "learning rate (default 0.01)",
       [](RunOptions &o, const std::string &v) {
         return parseDouble("lr", v, o.lr, Sign::NonNegative);
       }},
      {"momentum", "X", "SGD momentum",
       number("momentum", &RunOptions::momentum, Sign::NonNegative)},
      {"weight-decay", "X", "weight decay",
       number("weight-decay", &RunOptions::weightDecay, Sign::NonNegative)},
      {"betas", "B1,B2", "AdamW betas",
       [](RunOptions &o, const std::string &v) {
         size_t comma = v.find(',');
         double b1 = 0, b2 = 0;
         if (comma == std::string::npos ||
             !parseDouble("betas", v.substr(0, comma), b1).empty() ||
             !parseDouble("betas", v.substr(comma + 1), b2).empty())
           return "--betas takes two values, not '" + v + "'";
         if (b1 < 0 || b1 >= 1 || b2 < 0 || b2 >= 1)
           return "--betas takes two values in [0, 1), not '" + v + "'";
         o.beta1 = b1;
         o.beta2 = b2;
         return std::string();
       }},
      {"eps", "X", "AdamW epsilon",
       number("eps", &RunOptions::eps, Sign::NonNegative)},
      {"clip-grad-norm", "X", "clip gradients by their global norm",
       number("clip-grad-norm", &RunOptions::clipGradNorm, Sign::Positive)},
  };
}

/// Files read and written, and the run's seed, threads and timeout.
std::vector<Option> fileOptions() {
  return {
      {"weights", "FILE", "weights file (default: the program's)",
       text(&RunOptions::weightsPath)},
      {"metrics", "FILE", "metrics JSON file", text(&RunOptions::metricsPath)},
      {"save-weights", "FILE", "write the final weights",
       text(&RunOptions::saveWeightsPath)},
      {"save-grads", "FILE", "write the gradients of the first step",
       text(&RunOptions::saveGradsPath)},
      {"infer", nullptr, "forward only", flag(&RunOptions::infer)},
      {"output", "FILE", "--infer: outputs file",
       text(&RunOptions::outputPath)},
      {"seed", "N",
       "seed of the random ops (dropout, ...; default 0): each call draws "
       "from (seed, step, micro-batch, the op), the same on any split",
       [](RunOptions &o, const std::string &v) {
         int seed = 0;
         std::string error = parseInt("seed", v, 0, seed);
         o.seed = static_cast<uint64_t>(seed);
         return error;
       }},
      {"threads-per-rank", "N", "intra-op threads per rank (default 1)",
       integer("threads-per-rank", &RunOptions::threads, 1)},
      {"timeout", "SECONDS",
       "seconds to wait for a peer before giving up (default 60)",
       [](RunOptions &o, const std::string &v) {
         return parseDouble("timeout", v, o.timeoutSeconds, Sign::Positive);
       }},
      {"trace", "FILE", "write a Chrome/Perfetto trace",
       text(&RunOptions::tracePath)},
      {"checkpoint-dir", "DIR", "directory for checkpoints",
       text(&RunOptions::checkpointDir)},
      {"checkpoint-every", "K", "checkpoint every K steps",
       integer("checkpoint-every", &RunOptions::checkpointEvery, 1)},
      {"keep-checkpoints", "N",
       "keep only the newest N checkpoints (default: all)",
       integer("keep-checkpoints", &RunOptions::keepCheckpoints, 1)},
      {"resume", nullptr, "continue from the newest complete checkpoint",
       flag(&RunOptions::resume)},
  };
}

/// Speed and comparison switches.
std::vector<Option> tuningOptions() {
  return {
      {"shared-memory", nullptr,
       "send activations and gradients between ranks of one host through "
       "shared memory (default; with --backend gloo on one node); =false "
       "sends them through Gloo",
       flag(&RunOptions::sharedMemory)},
      {"fill-waits", nullptr,
       "a rank about to wait for a message computes a weight gradient (W) "
       "that its schedule puts later, whose input gradients are done, or "
       "steps a stage whose work in the step is done (default; the same "
       "bits); =false keeps the schedule's order",
       flag(&RunOptions::fillWaits)},
      {"fill-forwards", "N",
       "with --fill-waits, a rank about to wait for a gradient may also run "
       "a later forward whose input has come, holding at most N "
       "micro-batches' activations more than its schedule does (default: 0, "
       "none; shared memory and NCCL only: Gloo cannot tell that a message "
       "has come)",
       integer("fill-forwards", &RunOptions::fillForwards, 0)},
      {"allow-tf32", nullptr,
       "let CUDA matrix products and convolutions round float32 to TF32 "
       "(off by default: float32 stays float32 on every device)",
       flag(&RunOptions::allowTf32)},
      {"autograd-weight-grads", nullptr,
       "accumulate every weight gradient through autograd, as PyTorch does, "
       "instead of adding linear layers' weight gradients in place (slower; "
       "for comparisons)",
       flag(&RunOptions::autogradWeightGrads)},
      {"profile", "FILE",
       "write measured per-op times for --pippy-split profile=FILE",
       text(&RunOptions::profilePath)},
  };
}

const std::vector<Option> &options() {
  static const std::vector<Option> table = [] {
    std::vector<Option> all;
    for (auto group : {worldOptions, scheduleOptions, trainingOptions,
                       fileOptions, tuningOptions}) {
      std::vector<Option> part = group();
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  }();
  return table;
}

std::string helpText() {
  std::string text =
      "usage: pippy-run PROGRAM [options]\n\n"
      "Trains or runs a pippy program: a folder of stage executables (or one\n"
      ".pipx file), or, in the full build, a graph or pipeline IR.\n\n"
      "options:\n";
  for (const Option &o : options()) {
    std::string head = std::string("  --") + o.name;
    if (o.value)
      head += std::string(" ") + o.value;
    text += head;
    text += head.size() < 30 ? std::string(30 - head.size(), ' ')
                             : "\n" + std::string(30, ' ');
    text += std::string(o.help) + "\n";
  }
  return text;
}

const Option *find(const std::string &name) {
  for (const Option &o : options())
    if (name == o.name)
      return &o;
  return nullptr;
}

/// What two options given together make wrong, or "".
std::string conflictBetween(const RunOptions &o) {
  if (o.resume && o.checkpointDir.empty())
    return "--resume needs --checkpoint-dir";
  if (o.checkpointEvery > 0 && o.checkpointDir.empty())
    return "--checkpoint-every needs --checkpoint-dir";
  if (o.keepCheckpoints > 0 && o.checkpointDir.empty())
    return "--keep-checkpoints needs --checkpoint-dir";
  if (o.infer && !o.metricsPath.empty())
    return "--metrics records training steps; --infer writes its "
           "outputs to --output alone";
  if (o.infer && !o.saveGradsPath.empty())
    return "--save-grads records training's gradients; --infer computes "
           "none";
  if (!o.infer && !o.outputPath.empty())
    return "--output goes with --infer (training writes --save-weights "
           "and --metrics)";
  if (o.microbatches && *o.microbatches % o.dp != 0)
    return "--microbatches " + std::to_string(*o.microbatches) +
           " cannot be dealt evenly to the " + std::to_string(o.dp) +
           " replicas of --dp " + std::to_string(o.dp) +
           "; give a multiple of " + std::to_string(o.dp);
  if (o.zero && o.dp == 1)
    return "--zero 1 shards the optimizer state over data-parallel "
           "replicas; give --dp 2 or more";
  if (o.fillForwards > 0 && !o.fillWaits)
    return "--fill-forwards fills waits: it goes with --fill-waits (on "
           "unless =false)";
  if (o.fillForwards > 0 && o.tp > 1)
    return "--fill-forwards does not go with --tp: the ranks of a "
           "tensor-parallel group run each forward together, and a "
           "rank alone cannot move one";
  if (o.nodeRank >= o.nnodes)
    return "--node-rank " + std::to_string(o.nodeRank) +
           " is not a node of --nnodes " + std::to_string(o.nnodes);
  return "";
}

} // namespace

std::optional<RunOptions> parseRunOptions(const std::vector<std::string> &argv,
                                          std::string &message, int &exitCode) {
  RunOptions result;
  exitCode = 1;
  auto fail = [&](const std::string &error) {
    message = "pippy-run: error: " + error + "\n";
    return std::nullopt;
  };
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string &arg = argv[i];
    if (arg == "--help" || arg == "-help" || arg == "-h") {
      message = helpText();
      exitCode = 0;
      return std::nullopt;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      if (!result.programPath.empty())
        return fail("more than one program: '" + result.programPath +
                    "' and '" + arg + "'");
      result.programPath = arg;
      continue;
    }
    std::string name = arg.substr(arg[1] == '-' ? 2 : 1);
    std::optional<std::string> value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    const Option *option = find(name);
    if (!option)
      return fail("unknown option '" + arg +
                  "'; pippy-run --help lists the options");
    if (!option->value) {
      if (value && *value != "true" && *value != "false")
        return fail("--" + name + " takes no value, or =true or =false");
      if (std::string error = option->set(result, value.value_or("true"));
          !error.empty())
        return fail(error);
      continue;
    }
    if (!value) {
      if (i + 1 == argv.size())
        return fail("--" + name + " needs a value (" + option->value + ")");
      value = argv[++i];
    }
    if (std::string error = option->set(result, *value); !error.empty())
      return fail(error);
  }
  if (result.programPath.empty())
    return fail("no program given; usage: pippy-run PROGRAM [options]");
  if (std::string conflict = conflictBetween(result); !conflict.empty())
    return fail(conflict);
  return result;
}

std::vector<std::pair<const char *, std::string>>
RunOptions::outputFiles() const {
  std::vector<std::pair<const char *, std::string>> files;
  for (auto [flag, path] :
       {std::pair{"--metrics", &metricsPath}, std::pair{"--trace", &tracePath},
        std::pair{"--save-weights", &saveWeightsPath},
        std::pair{"--save-grads", &saveGradsPath},
        std::pair{"--output", &outputPath},
        std::pair{"--profile", &profilePath}})
    if (!path->empty())
      files.push_back({flag, *path});
  return files;
}

std::string RunOptions::overwritingInput(const std::string &input,
                                         const std::string &what) const {
  if (!input.empty())
    for (const auto &[flag, path] : outputFiles())
      if (sameFile(path, input))
        return std::string(flag) + " " + input + " is " + what +
               ": writing it would destroy an input; name another file";
  return "";
}

} // namespace pippy
