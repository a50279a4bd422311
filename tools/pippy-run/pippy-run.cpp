//===- pippy-run.cpp - train or run a model with pippy's runtime ----------===//
//
//   pippy-run model.mlir --nproc 1 --microbatches 4 --steps 3 \
//       --data data.safetensors --loss cross_entropy --optimizer sgd \
//       --lr 0.05 --metrics metrics.json [--save-weights out.safetensors]
//   pippy-run model.mlir --infer --data inputs.safetensors --output
//   out.safetensors
//
//===----------------------------------------------------------------------===//

#include "pippy/Runtime/Launcher.h"
#include "pippy/Runtime/Run.h"
#include "pippy/Support/Allocator.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;

static cl::opt<std::string> program(cl::Positional, cl::Required,
                                    cl::desc("<model.mlir>"));
static cl::opt<int> nproc("nproc", cl::desc("ranks per node"), cl::init(1));
static cl::opt<std::string> schedule("schedule", cl::desc("gpipe or 1f1b"),
                                     cl::init("1f1b"));
static cl::opt<int> microbatches("microbatches",
                                 cl::desc("micro-batches per step"),
                                 cl::init(1));
static cl::opt<int> steps("steps", cl::desc("training steps"), cl::init(1));
static cl::opt<std::string> data("data", cl::desc("safetensors data file"),
                                 cl::Required);
static cl::opt<std::string> loss("loss", cl::desc("cross_entropy, mse or none"),
                                 cl::init("cross_entropy"));
static cl::opt<std::string> optimizer("optimizer", cl::desc("sgd or adamw"),
                                      cl::init("sgd"));
static cl::opt<double> lr("lr", cl::desc("learning rate"), cl::init(0.01));
static cl::opt<double> momentum("momentum", cl::desc("SGD momentum"));
static cl::opt<double> weightDecay("weight-decay", cl::desc("weight decay"));
static cl::list<double> betas("betas", cl::desc("AdamW betas b1,b2"),
                              cl::CommaSeparated);
static cl::opt<double> eps("eps", cl::desc("AdamW epsilon"));
static cl::opt<double> clipGradNorm("clip-grad-norm",
                                    cl::desc("clip gradients by global norm"));
static cl::opt<std::string> weights("weights",
                                    cl::desc("weights file (default: the "
                                             "module's pippy.weights)"));
static cl::opt<std::string> metrics("metrics", cl::desc("metrics JSON file"));
static cl::opt<std::string> saveWeights("save-weights",
                                        cl::desc("write final weights"));
static cl::opt<std::string>
    saveGrads("save-grads", cl::desc("write the gradients of the first step"));
static cl::opt<bool> infer("infer", cl::desc("forward only"));
static cl::opt<std::string> output("output", cl::desc("--infer: outputs file"));
static cl::opt<int> threads("threads-per-rank",
                            cl::desc("intra-op threads per rank"), cl::init(1));
static cl::opt<int> nnodes("nnodes",
                           cl::desc("nodes (world size = nnodes x "
                                    "nproc)"),
                           cl::init(1));
static cl::opt<int> nodeRank("node-rank", cl::desc("this node's index"),
                             cl::init(0));
static cl::opt<std::string>
    masterAddr("master-addr",
               cl::desc("rank 0's host for multi-node runs (MASTER_ADDR)"));
static cl::opt<int> masterPort("master-port",
                               cl::desc("rank 0's port (MASTER_PORT)"),
                               cl::init(0));
static cl::opt<double>
    timeout("timeout", cl::desc("seconds to wait for a peer before giving up"),
            cl::init(60));
static cl::opt<std::string> trace("trace",
                                  cl::desc("write a Chrome/Perfetto trace"));
static cl::opt<std::string>
    checkpointDir("checkpoint-dir", cl::desc("directory for checkpoints"));
static cl::opt<int> checkpointEvery("checkpoint-every",
                                    cl::desc("checkpoint every K steps"),
                                    cl::init(0));
static cl::opt<bool> resume("resume",
                            cl::desc("continue from the last checkpoint"));
static cl::opt<bool> deferWeightGrads(
    "defer-weight-grads",
    cl::desc("split each backward: input gradients per micro-batch, the "
             "weight gradients of linear layers once per step as one matrix "
             "product over all micro-batches (faster; rounding differs from "
             "per-micro-batch accumulation in the last bits)"));
static cl::opt<bool> autogradWeightGrads(
    "autograd-weight-grads",
    cl::desc("accumulate every weight gradient through autograd, as PyTorch "
             "does, instead of adding linear layers' weight gradients in "
             "place (slower; for comparisons)"));
static cl::opt<std::string>
    profile("profile", cl::desc("write measured per-op times for --pippy-split "
                                "profile=FILE"));
static cl::opt<std::string> scheduleFile(
    "schedule-file",
    cl::desc("read the schedule's action lists from a file (text form: one "
             "line per rank, `rank0: 0F0 0SEND_F0 ...`)"));

int main(int argc, char **argv) {
  pippy::keepFreedMemory();
  std::vector<std::string> args(argv, argv + argc);
  InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv,
                              "pippy-run: train or run a pippy program\n");

  pippy::LaunchOptions launch;
  launch.nproc = nproc;
  launch.nnodes = nnodes;
  launch.nodeRank = nodeRank;
  launch.masterAddr = masterAddr;
  launch.masterPort = masterPort;
  launch.timeoutSeconds = timeout;
  launch.threadsPerRank = threads;
  if (pippy::shouldLaunch(launch))
    return pippy::launch(launch, args);
  pippy::RunOptions options;
  options.programPath = program;
  options.nproc = nproc;
  options.schedule = schedule;
  options.microbatches = microbatches;
  options.steps = steps;
  options.dataPath = data;
  options.loss = loss;
  options.optimizer = optimizer;
  options.lr = lr;
  if (momentum.getNumOccurrences())
    options.momentum = momentum;
  if (weightDecay.getNumOccurrences())
    options.weightDecay = weightDecay;
  if (betas.size() == 2) {
    options.beta1 = betas[0];
    options.beta2 = betas[1];
  } else if (!betas.empty()) {
    WithColor::error(errs(), "pippy-run") << "--betas takes two values\n";
    return 1;
  }
  if (eps.getNumOccurrences())
    options.eps = eps;
  if (clipGradNorm.getNumOccurrences())
    options.clipGradNorm = clipGradNorm;
  options.weightsPath = weights;
  options.metricsPath = metrics;
  options.saveWeightsPath = saveWeights;
  options.saveGradsPath = saveGrads;
  options.infer = infer;
  options.outputPath = output;
  options.threads = threads;
  options.timeoutSeconds = timeout;
  options.tracePath = trace;
  options.checkpointDir = checkpointDir;
  options.checkpointEvery = checkpointEvery;
  options.resume = resume;
  options.deferWeightGrads = deferWeightGrads;
  options.autogradWeightGrads = autogradWeightGrads;
  options.profilePath = profile;
  if (!scheduleFile.empty()) {
    auto buffer = MemoryBuffer::getFile(scheduleFile);
    if (!buffer) {
      WithColor::error(errs(), "pippy-run")
          << "cannot read " << scheduleFile << ": "
          << buffer.getError().message() << "\n";
      return 1;
    }
    options.scheduleText = (*buffer)->getBuffer().str();
  }

  if (Error error = pippy::run(options)) {
    WithColor::error(errs(), "pippy-run") << toString(std::move(error)) << "\n";
    return 1;
  }
  return 0;
}
