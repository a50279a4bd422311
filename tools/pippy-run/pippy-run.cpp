//===- pippy-run.cpp - train or run a model with pippy's runtime ----------===//
//
//   pippy-run model.mlir --nproc 1 --microbatches 4 --steps 3 \
//       --data data.safetensors --loss cross_entropy --optimizer sgd \
//       --lr 0.05 --metrics metrics.json [--save-weights out.safetensors]
//   pippy-run model.mlir --infer --data inputs.safetensors --output
//   out.safetensors
//
//===----------------------------------------------------------------------===//

#include "pippy/Runtime/Run.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
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

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv,
                              "pippy-run: train or run a pippy program\n");
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

  if (Error error = pippy::run(options)) {
    WithColor::error(errs(), "pippy-run") << toString(std::move(error)) << "\n";
    return 1;
  }
  return 0;
}
