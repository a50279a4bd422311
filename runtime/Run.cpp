//===- Run.cpp - single-process training and inference --------------------===//
//
// `pippy-run model.mlir --nproc 1 ...`: loads the graph IR and its weights,
// compiles the forward function once, then trains with micro-batches whose
// gradients accumulate to the full-batch mean gradient, or runs inference.
//
//===----------------------------------------------------------------------===//

#include "pippy/Runtime/Run.h"

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

using namespace mlir;
using ::pippy::Program;
using ::pippy::RunOptions;
using ::pippy::RuntimeError;
namespace st = ::pippy::safetensors;

namespace {

st::DType toStorageDType(at::ScalarType type) {
  if (std::optional<st::DType> dtype = ::pippy::toStorageDType(type))
    return *dtype;
  throw RuntimeError(std::string("cannot store dtype ") + c10::toString(type));
}

std::string shapeString(at::IntArrayRef sizes) {
  std::string text = "[";
  for (size_t i = 0; i < sizes.size(); ++i)
    text += (i ? ", " : "") + std::to_string(sizes[i]);
  return text + "]";
}

struct TensorFile {
  std::map<std::string, at::Tensor> tensors;
  std::vector<std::string> order;
  std::map<std::string, std::string> metadata;
};

TensorFile readTensors(const std::string &path) {
  llvm::Expected<st::File> file = st::File::open(path);
  if (!file)
    throw RuntimeError(llvm::toString(file.takeError()));
  TensorFile result;
  result.metadata = file->metadata();
  for (const st::TensorInfo &info : file->tensors()) {
    std::optional<at::ScalarType> dtype = ::pippy::toScalarType(info.dtype);
    if (!dtype)
      throw RuntimeError(path + ": tensor '" + info.name + "' has dtype " +
                         st::dtypeName(info.dtype).str() +
                         ", which pippy-run does not support");
    at::Tensor tensor =
        at::empty(info.shape, at::TensorOptions().dtype(*dtype));
    llvm::ArrayRef<uint8_t> bytes = file->data(info);
    if (!bytes.empty())
      std::memcpy(tensor.data_ptr(), bytes.data(), bytes.size());
    result.tensors[info.name] = tensor;
    result.order.push_back(info.name);
  }
  return result;
}

void writeTensors(
    const std::string &path,
    const std::vector<std::pair<std::string, at::Tensor>> &tensors,
    const std::map<std::string, std::string> &metadata) {
  st::Writer writer;
  for (const auto &[name, value] : tensors) {
    at::Tensor t = value.detach().contiguous();
    std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
    llvm::ArrayRef<uint8_t> bytes(static_cast<const uint8_t *>(t.data_ptr()),
                                  t.numel() * t.element_size());
    if (llvm::Error error =
            writer.add(name, toStorageDType(t.scalar_type()), sizes, bytes))
      throw RuntimeError(llvm::toString(std::move(error)));
  }
  for (const auto &[key, value] : metadata)
    writer.setMetadata(key, value);
  if (llvm::Error error = writer.write(path))
    throw RuntimeError(llvm::toString(std::move(error)));
}

/// Names listed in a JSON array held by a metadata entry.
std::set<std::string> metadataList(const std::map<std::string, std::string> &m,
                                   const std::string &key) {
  std::set<std::string> names;
  auto it = m.find(key);
  if (it == m.end())
    return names;
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(it->second);
  if (!json) {
    llvm::consumeError(json.takeError());
    return names;
  }
  if (const llvm::json::Array *array = json->getAsArray())
    for (const llvm::json::Value &v : *array)
      if (auto s = v.getAsString())
        names.insert(s->str());
  return names;
}

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
    context.loadDialect<func::FuncDialect, mlir::torch::TorchDialect,
                        mlir::pippy::PippyDialect,
                        sparse_tensor::SparseTensorDialect>();
    llvm::SourceMgr sourceMgr;
    std::string diagnostics;
    llvm::raw_string_ostream os(diagnostics);
    SourceMgrDiagnosticHandler handler(sourceMgr, &context, os);
    module = parseSourceFile<ModuleOp>(options.programPath, sourceMgr,
                                       ParserConfig(&context));
    if (!module)
      throw RuntimeError(diagnostics.empty()
                             ? "cannot read " + options.programPath
                             : diagnostics);
    auto forward = module->lookupSymbol<func::FuncOp>("forward");
    if (!forward || forward.isExternal())
      throw RuntimeError(options.programPath + ": no func.func @forward");
    for (BlockArgument arg : forward.getArguments())
      argSpecs.push_back(specOfArgument(arg));

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
    if (options.nproc != 1)
      throw RuntimeError(options.programPath +
                         ": running a pipeline on several processes is not "
                         "supported yet; run it with --nproc 1");
    compilePipeline(forward, pipeline);
  }

  /// Where a stage input or a pipeline output comes from.
  struct Source {
    int stage = -1; ///< -1: an argument of forward
    unsigned index = 0;
  };

  /// The stages run one after another in this process: autograd links them,
  /// and a tied parameter is one tensor, so its gradients add up.
  void compilePipeline(func::FuncOp forward, mlir::pippy::PipelineOp pipeline) {
    auto ret = cast<func::ReturnOp>(forward.getBody().front().getTerminator());
    for (Value v : ret.getOperands())
      if (v.getDefiningOp() != pipeline.getOperation())
        throw RuntimeError(options.programPath +
                           ": forward must return the pipeline's results");
    auto sourceOf = [&](Value v) {
      if (auto arg = dyn_cast<BlockArgument>(v))
        if (arg.getOwner()->getParentOp() == forward.getOperation())
          return Source{-1, arg.getArgNumber()};
      auto result = dyn_cast<OpResult>(v);
      auto stage = result ? dyn_cast<mlir::pippy::StageOp>(result.getOwner())
                          : mlir::pippy::StageOp();
      if (!stage)
        throw RuntimeError(options.programPath +
                           ": a pipeline value comes neither from forward's "
                           "arguments nor from a stage");
      return Source{static_cast<int>(stage.getIndexAttr().getInt()),
                    result.getResultNumber()};
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

  static ::pippy::TensorSpec specOfArgument(BlockArgument arg) {
    std::optional<::pippy::TensorSpec> spec =
        ::pippy::getTensorSpec(arg.getType());
    if (!spec)
      throw RuntimeError("forward argument " +
                         std::to_string(arg.getArgNumber()) +
                         " must be a tensor with static sizes and a dtype");
    return *spec;
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

  std::string resolveWeightsPath() {
    std::string path = options.weightsPath;
    if (path.empty()) {
      auto attr = (*module)->getAttrOfType<StringAttr>("pippy.weights");
      if (!attr)
        throw RuntimeError(options.programPath +
                           ": the module names no weights file "
                           "(pippy.weights); pass --weights");
      path = attr.getValue().str();
      if (!llvm::sys::fs::exists(path) && !llvm::sys::path::is_absolute(path)) {
        llvm::SmallString<256> beside(
            llvm::sys::path::parent_path(options.programPath));
        llvm::sys::path::append(beside, path);
        if (llvm::sys::fs::exists(beside))
          path = std::string(beside);
      }
    }
    return path;
  }

  void loadWeights() {
    std::string path = resolveWeightsPath();
    TensorFile file = readTensors(path);
    weightsMetadata = file.metadata;
    weightOrder = file.order;
    std::set<std::string> buffers = metadataList(file.metadata, "buffers");
    std::vector<std::pair<std::string, ::pippy::TensorSpec>> specs;
    for (const Program &program : programs)
      specs.insert(specs.end(), program.parameters().begin(),
                   program.parameters().end());
    for (const auto &[name, spec] : specs) {
      auto it = file.tensors.find(name);
      if (it == file.tensors.end())
        throw RuntimeError(path + ": no tensor for parameter '" + name + "'");
      at::Tensor tensor = it->second;
      if (tensor.sizes() != at::IntArrayRef(spec.sizes) ||
          tensor.scalar_type() != spec.dtype)
        throw RuntimeError(path + ": parameter '" + name + "' is " +
                           c10::toString(tensor.scalar_type()) +
                           shapeString(tensor.sizes()) +
                           " but the program expects " +
                           c10::toString(spec.dtype) + shapeString(spec.sizes));
    }
    for (const auto &[name, tensor] : file.tensors) {
      bool trainable = at::isFloatingType(tensor.scalar_type()) &&
                       !buffers.count(name) && !options.infer;
      params[name] = trainable ? tensor.requires_grad_(true) : tensor;
      if (trainable)
        trainableNames.push_back(name);
    }
  }

  /// The inputs (`input` or `input.0`, ...) and `target` of the data file,
  /// checked against the program before any step.
  void loadData(bool needTarget) {
    TensorFile file = readTensors(options.dataPath);
    const auto &specs = argSpecs;
    size_t numInputs = specs.size() - (options.loss == "none" ? 1 : 0);
    for (size_t i = 0; i < numInputs; ++i) {
      std::string name = numInputs == 1 && file.tensors.count("input")
                             ? "input"
                             : "input." + std::to_string(i);
      auto it = file.tensors.find(name);
      if (it == file.tensors.end())
        throw RuntimeError(options.dataPath + ": no tensor '" + name +
                           "' for forward argument " + std::to_string(i));
      checkData(name, it->second, specs[i]);
      inputs.push_back(it->second);
    }
    if (needTarget) {
      auto it = file.tensors.find("target");
      if (it == file.tensors.end())
        throw RuntimeError(options.dataPath + ": no tensor 'target'");
      target = it->second;
      if (target.size(0) != inputs[0].size(0))
        throw RuntimeError(options.dataPath + ": 'target' has " +
                           std::to_string(target.size(0)) + " rows but '" +
                           (numInputs == 1 ? "input" : "input.0") + "' has " +
                           std::to_string(inputs[0].size(0)));
      if (options.loss == "none")
        checkData("target", target, specs.back());
    }
    rows = inputs[0].size(0);
    for (const at::Tensor &t : inputs)
      if (t.size(0) != rows)
        throw RuntimeError(options.dataPath +
                           ": inputs have different row counts");
  }

  void checkData(const std::string &name, const at::Tensor &tensor,
                 const ::pippy::TensorSpec &spec) {
    bool sameTail = tensor.dim() == (int64_t)spec.sizes.size();
    for (size_t d = 1; sameTail && d < spec.sizes.size(); ++d)
      sameTail = tensor.size(d) == spec.sizes[d];
    if (!sameTail || tensor.scalar_type() != spec.dtype)
      throw RuntimeError(
          options.dataPath + ": '" + name + "' is " +
          c10::toString(tensor.scalar_type()) + shapeString(tensor.sizes()) +
          " but the program takes micro-batches of " +
          c10::toString(spec.dtype) + shapeString(spec.sizes) +
          " (rows may differ, the other sizes and the dtype may not)");
  }

  at::Tensor rowsOf(const at::Tensor &t, int64_t begin, int64_t count) {
    at::Tensor index = at::remainder(
        at::arange(begin, begin + count, at::TensorOptions().dtype(at::kLong)),
        rows);
    return t.index_select(0, index);
  }

  at::Tensor computeLoss(const c10::IValue &output, const at::Tensor &tgt) {
    if (options.loss == "none") {
      if (!output.isTensor() || output.toTensor().numel() != 1)
        throw RuntimeError("--loss none: forward must return the scalar loss");
      return output.toTensor().reshape({});
    }
    if (!output.isTensor())
      throw RuntimeError("--loss " + options.loss +
                         ": forward must return one tensor");
    at::Tensor out = output.toTensor();
    if (options.loss == "cross_entropy")
      return at::cross_entropy_loss(out.flatten(0, -2), tgt.flatten());
    if (options.loss == "mse")
      return at::mse_loss(out, tgt);
    throw RuntimeError("unknown --loss '" + options.loss +
                       "'; expected cross_entropy, mse or none");
  }

  std::unique_ptr<::torch::optim::Optimizer> makeOptimizer() {
    std::vector<at::Tensor> trainable;
    for (const std::string &name : trainableNames)
      trainable.push_back(params.at(name));
    if (options.optimizer == "sgd") {
      ::torch::optim::SGDOptions o(options.lr);
      o.momentum(options.momentum.value_or(0.0));
      o.weight_decay(options.weightDecay.value_or(0.0));
      return std::make_unique<::torch::optim::SGD>(trainable, o);
    }
    if (options.optimizer == "adamw") {
      ::torch::optim::AdamWOptions o(options.lr);
      o.betas({options.beta1.value_or(0.9), options.beta2.value_or(0.999)});
      o.eps(options.eps.value_or(1e-8));
      o.weight_decay(options.weightDecay.value_or(0.01));
      return std::make_unique<::torch::optim::AdamW>(trainable, o);
    }
    throw RuntimeError("unknown --optimizer '" + options.optimizer +
                       "'; expected sgd or adamw");
  }

  std::vector<c10::IValue> forwardArgs(int64_t begin, int64_t count,
                                       bool withTarget) {
    std::vector<c10::IValue> args;
    for (const at::Tensor &t : inputs)
      args.emplace_back(rowsOf(t, begin, count));
    if (withTarget)
      args.emplace_back(rowsOf(target, begin, count));
    return args;
  }

  void train() {
    if (options.microbatches < 1 || options.steps < 1)
      throw RuntimeError("--microbatches and --steps must be at least 1");
    loadData(/*needTarget=*/true);
    auto optimizer = makeOptimizer();
    int64_t mb = argSpecs[0].sizes.at(0);
    int64_t M = options.microbatches;
    int64_t cursor = 0;
    llvm::json::Array stepMetrics;
    for (int step = 1; step <= options.steps; ++step) {
      auto start = std::chrono::steady_clock::now();
      optimizer->zero_grad();
      double stepLoss = 0;
      for (int64_t m = 0; m < M; ++m) {
        int64_t begin = cursor + m * mb;
        std::vector<c10::IValue> results =
            forward(forwardArgs(begin, mb, options.loss == "none"));
        at::Tensor loss = computeLoss(
            results.at(0),
            options.loss == "none" ? at::Tensor() : rowsOf(target, begin, mb));
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

  void saveGrads() {
    std::vector<std::pair<std::string, at::Tensor>> grads;
    for (const std::string &name : trainableNames) {
      at::Tensor grad = params.at(name).grad();
      grads.emplace_back(
          name, grad.defined() ? grad : at::zeros_like(params.at(name)));
    }
    writeTensors(options.saveGradsPath, grads, {});
  }

  void saveWeights() {
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    for (const std::string &name : weightOrder)
      tensors.emplace_back(name, params.at(name));
    writeTensors(options.saveWeightsPath, tensors, weightsMetadata);
  }

  void writeMetrics(llvm::json::Array steps) {
    llvm::json::Object metrics{
        {"steps", std::move(steps)},
        {"bubble_fraction", 0.0},
        {"peak_inflight_microbatches", llvm::json::Array{1}}};
    std::error_code ec;
    llvm::raw_fd_ostream os(options.metricsPath, ec);
    if (ec)
      throw RuntimeError("cannot write " + options.metricsPath + ": " +
                         ec.message());
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(metrics))) << "\n";
  }

  void infer() {
    if (options.outputPath.empty())
      throw RuntimeError("--infer needs --output FILE");
    loadData(/*needTarget=*/false);
    int64_t mb = argSpecs[0].sizes.at(0);
    if (rows % mb != 0)
      throw RuntimeError(options.dataPath + ": " + std::to_string(rows) +
                         " rows do not divide into micro-batches of " +
                         std::to_string(mb));
    ::torch::NoGradGuard noGrad;
    std::vector<std::vector<at::Tensor>> outputs;
    for (int64_t begin = 0; begin < rows; begin += mb) {
      std::vector<c10::IValue> results = forward(forwardArgs(begin, mb, false));
      std::vector<at::Tensor> flat;
      for (const c10::IValue &r : results) {
        if (r.isTensor())
          flat.push_back(r.toTensor());
        else if (r.isTuple())
          for (const c10::IValue &e : r.toTupleRef().elements())
            flat.push_back(e.toTensor());
      }
      outputs.push_back(std::move(flat));
    }
    std::vector<std::pair<std::string, at::Tensor>> merged;
    size_t n = outputs.front().size();
    for (size_t i = 0; i < n; ++i) {
      std::vector<at::Tensor> parts;
      for (auto &chunk : outputs)
        parts.push_back(chunk[i]);
      merged.emplace_back(n == 1 ? "output" : "output." + std::to_string(i),
                          at::cat(parts, 0));
    }
    writeTensors(options.outputPath, merged, {});
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
  std::vector<at::Tensor> inputs;
  at::Tensor target;
  int64_t rows = 0;
};

} // namespace

namespace pippy {
llvm::Error run(const RunOptions &options) {
  try {
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
