//===- Run.cpp - single-process training and inference --------------------===//
//
// `pippy-run model.mlir --nproc 1 ...`: loads the graph IR and its weights,
// compiles the forward function once, then trains with micro-batches whose
// gradients accumulate to the full-batch mean gradient, or runs inference.
//
//===----------------------------------------------------------------------===//

#include "pippy/Runtime/Run.h"

#include "Common.h"
#include "pippy/Runtime/Comm.h"

#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Dialect/Torch/TorchDialect.h"
#include "pippy/Runtime/Program.h"
#include "pippy/Support/Safetensors.h"
#include "pippy/Support/TensorDTypes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <unistd.h>

using namespace mlir;
using ::pippy::Program;
using ::pippy::RunOptions;
using ::pippy::RuntimeError;
namespace st = ::pippy::safetensors;

namespace {

using namespace ::pippy::rt;

class Runner {
public:
  explicit Runner(const RunOptions &options) : options(options) {}

  void run() {
    at::set_num_threads(options.threads);
    loadProgram();
    loadWeights();
    if (options.infer)
      return infer();
    train();
  }

private:
  void loadProgram() {
    module = parseProgram(context, options.programPath);
    func::FuncOp forward = lookupForward(*module, options.programPath);
    for (BlockArgument arg : forward.getArguments())
      argSpecs.push_back(::pippy::rt::specOfArgument(arg));

    mlir::pippy::PipelineOp pipeline;
    forward.walk([&](mlir::pippy::PipelineOp op) { pipeline = op; });
    if (!pipeline) {
      if (options.nproc != 1)
        throw RuntimeError(
            options.programPath +
            ": a graph IR runs as one stage on one rank; split it into a "
            "pipeline first (pippy-opt --pippy-split) to run it with --nproc " +
            std::to_string(options.nproc));
      programs.push_back(Program::compile(forward));
      return;
    }
    compilePipeline(forward, pipeline);
  }

  /// The stages run one after another in this process: autograd links them,
  /// and a tied parameter is one tensor, so its gradients add up.
  void compilePipeline(func::FuncOp forward, mlir::pippy::PipelineOp pipeline) {
    auto ret = cast<func::ReturnOp>(forward.getBody().front().getTerminator());
    for (Value v : ret.getOperands())
      if (v.getDefiningOp() != pipeline.getOperation())
        throw RuntimeError(options.programPath +
                           ": forward must return the pipeline's results");
    auto sourceOf = [&](Value v) {
      return ::pippy::rt::sourceOf(v, forward.getOperation(),
                                   options.programPath);
    };
    for (mlir::pippy::StageOp stage : pipeline.getStages()) {
      std::string name =
          "stage " + std::to_string(stage.getIndexAttr().getInt());
      programs.push_back(Program::compile(stage.getBody().front(), name));
      std::vector<Source> inputs;
      for (Value v : stage.getInputs())
        inputs.push_back(sourceOf(v));
      stageInputs.push_back(std::move(inputs));
    }
    auto yield =
        cast<mlir::pippy::YieldOp>(pipeline.getBody().front().getTerminator());
    for (Value v : yield.getOperands())
      outputSources.push_back(sourceOf(v));
  }

  /// The forward pass of the whole model on one micro-batch.
  std::vector<c10::IValue> forward(const std::vector<c10::IValue> &args) {
    if (stageInputs.empty())
      return programs.front().run(args, params);
    std::vector<std::vector<c10::IValue>> results;
    auto fetch = [&](const Source &source) -> const c10::IValue & {
      return source.stage < 0 ? args.at(source.index)
                              : results.at(source.stage).at(source.index);
    };
    for (size_t s = 0; s < programs.size(); ++s) {
      std::vector<c10::IValue> inputs;
      for (const Source &source : stageInputs[s])
        inputs.push_back(fetch(source));
      results.push_back(programs[s].run(inputs, params));
    }
    std::vector<c10::IValue> outputs;
    for (const Source &source : outputSources)
      outputs.push_back(fetch(source));
    return outputs;
  }

  void loadWeights() {
    std::string path = resolveWeightsPath(options, *module);
    TensorFile file = readTensors(path);
    weightsMetadata = file.metadata;
    weightOrder = file.order;
    std::set<std::string> untrained = untrainedNames(file.metadata);
    std::vector<std::pair<std::string, ::pippy::TensorSpec>> specs;
    for (const Program &program : programs)
      specs.insert(specs.end(), program.parameters().begin(),
                   program.parameters().end());
    for (const auto &[name, spec] : specs)
      checkedParameter(file, path, name, spec);
    for (const auto &[name, tensor] : file.tensors) {
      bool trainable = isTrainable(tensor, name, untrained) && !options.infer;
      params[name] = trainable ? tensor.requires_grad_(true) : tensor;
      if (trainable)
        trainableNames.push_back(name);
    }
  }

  std::unique_ptr<::torch::optim::Optimizer> makeOptimizer() {
    std::vector<at::Tensor> trainable;
    for (const std::string &name : trainableNames)
      trainable.push_back(params.at(name));
    return ::pippy::rt::makeOptimizer(options, trainable);
  }

  void train() {
    checkTrainingOptions(options);
    Dataset data(options, argSpecs, /*needTarget=*/true);
    int64_t rows = data.rows();
    auto optimizer = makeOptimizer();
    if (!options.autogradWeightGrads) {
      // A weight several stages share (a tied weight) stays with autograd,
      // which sums its contributions per micro-batch before adding them to
      // its gradient; adding each in place would round differently.
      std::map<std::string, int> stages;
      for (const Program &program : programs)
        for (const auto &[name, spec] : program.parameters())
          ++stages[name];
      std::set<std::string> fused;
      for (const std::string &name : trainableNames)
        if (stages[name] == 1)
          fused.insert(name);
      for (Program &program : programs)
        program.fuseWeightGradients(fused);
    }
    int64_t mb = argSpecs[0].sizes.at(0);
    int64_t M = options.microbatches;
    int64_t cursor = 0;
    llvm::json::Array stepMetrics;
    for (int step = 1; step <= options.steps; ++step) {
      auto start = std::chrono::steady_clock::now();
      releaseGradients(*optimizer);
      double stepLoss = 0;
      for (int64_t m = 0; m < M; ++m) {
        int64_t begin = cursor + m * mb;
        std::vector<c10::IValue> results =
            forward(data.arguments(begin, mb, options.loss == "none"));
        at::Tensor loss = computeLoss(
            options, results.at(0),
            options.loss == "none" ? at::Tensor() : data.target(begin, mb));
        (loss / static_cast<double>(M)).backward();
        stepLoss += loss.item<double>() / M;
      }
      cursor = (cursor + M * mb) % rows;
      if (step == 1 && !options.saveGradsPath.empty())
        saveGrads();
      if (options.clipGradNorm) {
        std::vector<at::Tensor> trainable;
        for (const std::string &name : trainableNames)
          trainable.push_back(params.at(name));
        ::torch::nn::utils::clip_grad_norm_(trainable, *options.clipGradNorm);
      }
      optimizer->step();
      double seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
      double samples = M * mb / seconds;
      std::printf("[rank0] step %d/%d loss %.6f samples/s %.1f\n", step,
                  options.steps, stepLoss, samples);
      std::fflush(stdout);
      stepMetrics.push_back(llvm::json::Object{{"step", step},
                                               {"loss", stepLoss},
                                               {"step_time_s", seconds},
                                               {"samples_per_s", samples}});
    }
    if (!options.metricsPath.empty())
      writeMetrics(std::move(stepMetrics));
    if (!options.saveWeightsPath.empty())
      saveWeights();
  }

  /// Every parameter's gradient, zeros for frozen ones and those the model
  /// does not use (PyTorch's gradient is None for both).
  void saveGrads() {
    std::vector<std::pair<std::string, at::Tensor>> grads;
    for (const std::string &name : trainableNames) {
      at::Tensor grad = params.at(name).grad();
      grads.emplace_back(
          name, grad.defined() ? grad : at::zeros_like(params.at(name)));
    }
    for (const std::string &name : metadataList(weightsMetadata, "frozen"))
      if (params.count(name))
        grads.emplace_back(name, at::zeros_like(params.at(name)));
    writeTensors(options.saveGradsPath, grads, {});
  }

  void saveWeights() {
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    for (const std::string &name : weightOrder)
      tensors.emplace_back(name, params.at(name));
    writeTensors(options.saveWeightsPath, tensors, weightsMetadata);
  }

  void writeMetrics(llvm::json::Array steps) {
    writeJson(options.metricsPath,
              llvm::json::Object{
                  {"steps", std::move(steps)},
                  {"bubble_fraction", 0.0},
                  {"peak_inflight_microbatches", llvm::json::Array{1}}});
  }

  void infer() {
    if (options.outputPath.empty())
      throw RuntimeError("--infer needs --output FILE");
    // With --loss none the target is forward's last argument.
    bool withTarget = options.loss == "none";
    Dataset data(options, argSpecs, withTarget);
    int64_t rows = data.rows();
    int64_t mb = argSpecs[0].sizes.at(0);
    if (rows % mb != 0)
      throw RuntimeError(options.dataPath + ": " + std::to_string(rows) +
                         " rows do not divide into micro-batches of " +
                         std::to_string(mb));
    ::torch::NoGradGuard noGrad;
    OutputRows outputs;
    for (int64_t begin = 0; begin < rows; begin += mb)
      outputs.add(forward(data.arguments(begin, mb, withTarget)));
    outputs.write(options.outputPath);
    std::printf("[rank0] wrote %lld rows to %s\n", (long long)rows,
                options.outputPath.c_str());
  }

  const RunOptions &options;
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::vector<Program> programs;
  std::vector<std::vector<Source>> stageInputs;
  std::vector<Source> outputSources;
  std::vector<::pippy::TensorSpec> argSpecs;
  std::map<std::string, at::Tensor> params;
  std::vector<std::string> trainableNames;
  std::vector<std::string> weightOrder;
  std::map<std::string, std::string> weightsMetadata;
};

} // namespace

namespace pippy {
llvm::Error run(const RunOptions &options) {
  try {
    std::optional<Rendezvous> rdzv = Rendezvous::fromEnvironment();
    if (rdzv && rdzv->worldSize > 1)
      return runRank(options, *rdzv);
    if (!executorOnlyOptions(options).empty()) {
      // What only the pipeline executor does runs there, on a world of one.
      char dir[] = "/tmp/pippy-run-XXXXXX";
      if (!mkdtemp(dir))
        throw RuntimeError("cannot create a directory in /tmp");
      Rendezvous one;
      one.storePath = std::string(dir) + "/store";
      llvm::Error result = runRank(options, one);
      std::remove(one.storePath.c_str());
      rmdir(dir);
      return result;
    }
    if (!options.tracePath.empty())
      std::fprintf(stderr,
                   "pippy-run: warning: --trace is written by the pipeline "
                   "executor (pipelines on several ranks, or a one-stage "
                   "pipeline with --defer-weight-grads or --profile); this "
                   "run writes none\n");
    Runner(options).run();
    return llvm::Error::success();
  } catch (const RuntimeError &e) {
    return llvm::createStringError(e.what());
  } catch (const c10::Error &e) {
    return llvm::createStringError(e.what_without_backtrace());
  } catch (const std::exception &e) {
    return llvm::createStringError(e.what());
  }
}
} // namespace pippy
