//===- Common.cpp - what the trainers share
//--------------------------------===//

#include "Common.h"

#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Dialect/Torch/TorchDialect.h"
#include "pippy/Support/Safetensors.h"
#include "pippy/Support/TensorDTypes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

using namespace mlir;
namespace st = ::pippy::safetensors;

namespace pippy::rt {

std::string shapeString(at::IntArrayRef sizes) {
  std::string text = "[";
  for (size_t i = 0; i < sizes.size(); ++i)
    text += (i ? ", " : "") + std::to_string(sizes[i]);
  return text + "]";
}

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
    std::optional<st::DType> dtype = ::pippy::toStorageDType(t.scalar_type());
    if (!dtype)
      throw RuntimeError(std::string("cannot store dtype ") +
                         c10::toString(t.scalar_type()));
    std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
    llvm::ArrayRef<uint8_t> bytes(static_cast<const uint8_t *>(t.data_ptr()),
                                  t.numel() * t.element_size());
    if (llvm::Error error = writer.add(name, *dtype, sizes, bytes))
      throw RuntimeError(llvm::toString(std::move(error)));
  }
  for (const auto &[key, value] : metadata)
    writer.setMetadata(key, value);
  if (llvm::Error error = writer.write(path))
    throw RuntimeError(llvm::toString(std::move(error)));
}

at::Tensor checkedParameter(const TensorFile &file, const std::string &path,
                            const std::string &name, const TensorSpec &spec) {
  auto it = file.tensors.find(name);
  if (it == file.tensors.end())
    throw RuntimeError(path + ": no tensor for parameter '" + name + "'");
  const at::Tensor &tensor = it->second;
  if (tensor.sizes() != at::IntArrayRef(spec.sizes) ||
      tensor.scalar_type() != spec.dtype)
    throw RuntimeError(path + ": parameter '" + name + "' is " +
                       c10::toString(tensor.scalar_type()) +
                       shapeString(tensor.sizes()) +
                       " but the program expects " + c10::toString(spec.dtype) +
                       shapeString(spec.sizes));
  return tensor;
}

bool isTrainable(const at::Tensor &tensor, const std::string &name,
                 const std::set<std::string> &untrained) {
  return isDifferentiable(tensor.scalar_type()) && !untrained.count(name);
}

std::set<std::string>
untrainedNames(const std::map<std::string, std::string> &metadata) {
  std::set<std::string> names = metadataList(metadata, "buffers");
  std::set<std::string> frozen = metadataList(metadata, "frozen");
  names.insert(frozen.begin(), frozen.end());
  return names;
}

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

void writeJson(const std::string &path, llvm::json::Value value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", value) << "\n";
  os.flush();
  std::string tmp = path + ".tmp";
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(tmp, ec);
    if (ec)
      throw RuntimeError("cannot write " + path + ": " + ec.message());
    out << text;
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path))
    throw RuntimeError("cannot write " + path + ": " + ec.message());
}

OwningOpRef<ModuleOp> parseProgram(MLIRContext &context,
                                   const std::string &path) {
  context.loadDialect<func::FuncDialect, mlir::torch::TorchDialect,
                      mlir::pippy::PippyDialect,
                      sparse_tensor::SparseTensorDialect>();
  llvm::SourceMgr sourceMgr;
  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  SourceMgrDiagnosticHandler handler(sourceMgr, &context, os);
  // Opened here so that a missing file is named as pippy-opt names it,
  // without a diagnostic location.
  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(path);
  if (!buffer)
    throw RuntimeError("cannot open input file '" + path +
                       "': " + buffer.getError().message());
  sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(&context));
  if (!module)
    throw RuntimeError(diagnostics.empty() ? "cannot read " + path
                                           : diagnostics);
  return module;
}

namespace {
/// Float tensor literals of more than one element: Torch-MLIR's weights,
/// which --pippy-lift-params turns into parameters.
size_t countWeightLiterals(ModuleOp module) {
  size_t count = 0;
  module.walk([&](mlir::torch::ValueTensorLiteralOp literal) {
    auto type =
        cast<ShapedType>(cast<ElementsAttr>(literal.getValue()).getType());
    if (isa<FloatType>(type.getElementType()) && type.getNumElements() > 1)
      ++count;
  });
  return count;
}

std::string countLiterals(size_t n) {
  return std::to_string(n) + (n == 1 ? " weight literal" : " weight literals");
}

constexpr const char *kLiftHint =
    "; run pippy-opt --pippy-lift-params=weights=FILE on it first";
} // namespace

func::FuncOp lookupForward(ModuleOp module, const std::string &path) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (forward && !forward.isExternal())
    return forward;
  std::string message = path + ": no func.func @forward";
  if (size_t literals = countWeightLiterals(module))
    message += " (it holds " + countLiterals(literals) +
               ": Torch-MLIR output)" + kLiftHint +
               ", which also names its function forward";
  else if (module.lookupSymbol<func::FuncOp>("main"))
    message += " (it has a @main, as Torch-MLIR's FX importer writes)" +
               std::string(kLiftHint) + ", which names it forward";
  throw RuntimeError(message);
}

std::string resolveWeightsPath(const RunOptions &options, ModuleOp module) {
  std::string path = options.weightsPath;
  if (!path.empty())
    return path;
  auto attr = module->getAttrOfType<StringAttr>("pippy.weights");
  if (!attr) {
    if (size_t literals = countWeightLiterals(module))
      throw RuntimeError(
          options.programPath + ": the module has " + countLiterals(literals) +
          " (Torch-MLIR output) and no weights file" + kLiftHint);
    throw RuntimeError(options.programPath +
                       ": the module names no weights file "
                       "(pippy.weights); pass --weights");
  }
  path = attr.getValue().str();
  if (!llvm::sys::fs::exists(path) && !llvm::sys::path::is_absolute(path)) {
    llvm::SmallString<256> beside(
        llvm::sys::path::parent_path(options.programPath));
    llvm::sys::path::append(beside, path);
    if (llvm::sys::fs::exists(beside))
      path = std::string(beside);
  }
  return path;
}

Source sourceOf(Value value, Operation *forward,
                const std::string &programPath) {
  if (auto arg = dyn_cast<BlockArgument>(value))
    if (arg.getOwner()->getParentOp() == forward)
      return Source{-1, arg.getArgNumber()};
  auto result = dyn_cast<OpResult>(value);
  auto stage = result ? dyn_cast<mlir::pippy::StageOp>(result.getOwner())
                      : mlir::pippy::StageOp();
  if (!stage)
    throw RuntimeError(programPath +
                       ": a pipeline value comes neither from forward's "
                       "arguments nor from a stage");
  return Source{static_cast<int>(stage.getIndexAttr().getInt()),
                result.getResultNumber()};
}

TensorSpec specOfArgument(BlockArgument arg) {
  std::optional<TensorSpec> spec = getTensorSpec(arg.getType());
  if (!spec) {
    std::string type;
    llvm::raw_string_ostream os(type);
    os << arg.getType();
    throw RuntimeError(
        "forward argument " + std::to_string(arg.getArgNumber()) + " is " +
        type + ", but must be a tensor with static sizes and a dtype" +
        (type.find('?') != std::string::npos
             ? " (a ? is a dynamic size: export the model with static "
               "shapes, the micro-batch size first)"
             : ""));
  }
  return *spec;
}

/// The loss's dtype needs, checked before the first step (the loss would
/// only fail at the first backward, in ATen's words).
static void checkTargetDtype(const RunOptions &options,
                             const at::Tensor &target) {
  if (options.infer)
    return;
  at::ScalarType dtype = target.scalar_type();
  bool real = at::isFloatingType(dtype);
  if (options.loss == "mse" && !real)
    throw RuntimeError(options.dataPath +
                       ": --loss mse needs a floating-point 'target' but it "
                       "is " +
                       c10::toString(dtype) +
                       " (class indices go with --loss cross_entropy)");
  if (options.loss == "cross_entropy" &&
      (real || at::isComplexType(dtype) || dtype == at::kBool))
    throw RuntimeError(options.dataPath +
                       ": --loss cross_entropy takes class indices, an "
                       "integer 'target', but it is " +
                       c10::toString(dtype) +
                       " (floating-point targets go with --loss mse)");
}

Dataset::Dataset(const RunOptions &options,
                 const std::vector<TensorSpec> &specs, bool needTarget)
    : options(options) {
  TensorFile file = readTensors(options.dataPath);
  size_t numInputs = specs.size() - (options.loss == "none" ? 1 : 0);
  if (!options.infer && options.loss == "none" && specs.empty())
    throw RuntimeError("--loss none: forward must take the target as its "
                       "last argument");
  for (size_t i = 0; i < numInputs; ++i) {
    std::string name = numInputs == 1 && file.tensors.count("input")
                           ? "input"
                           : "input." + std::to_string(i);
    auto it = file.tensors.find(name);
    if (it == file.tensors.end())
      throw RuntimeError(options.dataPath + ": no tensor '" + name +
                         "' for forward argument " + std::to_string(i));
    check(name, it->second, specs[i]);
    inputs.push_back(it->second);
  }
  if (inputs.empty())
    throw RuntimeError(options.programPath + ": forward takes no input");
  if (needTarget) {
    auto it = file.tensors.find("target");
    if (it == file.tensors.end())
      throw RuntimeError(options.dataPath + ": no tensor 'target'");
    targetRows = it->second;
    if (targetRows.size(0) != inputs[0].size(0))
      throw RuntimeError(options.dataPath + ": 'target' has " +
                         std::to_string(targetRows.size(0)) + " rows but '" +
                         (numInputs == 1 ? "input" : "input.0") + "' has " +
                         std::to_string(inputs[0].size(0)));
    if (options.loss == "none")
      check("target", targetRows, specs.back());
    checkTargetDtype(options, targetRows);
  }
  numRows = inputs[0].size(0);
  for (const at::Tensor &t : inputs)
    if (t.size(0) != numRows)
      throw RuntimeError(options.dataPath +
                         ": inputs have different row counts");
}

void Dataset::check(const std::string &name, const at::Tensor &tensor,
                    const TensorSpec &spec) const {
  bool sameTail = tensor.dim() == (int64_t)spec.sizes.size();
  for (size_t d = 1; sameTail && d < spec.sizes.size(); ++d)
    sameTail = tensor.size(d) == spec.sizes[d];
  if (!sameTail || tensor.scalar_type() != spec.dtype)
    throw RuntimeError(
        options.dataPath + ": '" + name + "' is " +
        c10::toString(tensor.scalar_type()) + shapeString(tensor.sizes()) +
        " but the program takes micro-batches of " + c10::toString(spec.dtype) +
        shapeString(spec.sizes) +
        " (rows may differ, the other sizes and the dtype may not)");
}

at::Tensor Dataset::slice(const at::Tensor &t, int64_t begin,
                          int64_t count) const {
  begin %= numRows;
  if (begin + count <= numRows)
    return t.narrow(0, begin, count).contiguous();
  at::Tensor index = at::remainder(
      at::arange(begin, begin + count, at::TensorOptions().dtype(at::kLong)),
      numRows);
  return t.index_select(0, index);
}

std::vector<c10::IValue> Dataset::arguments(int64_t begin, int64_t count,
                                            bool withTarget) const {
  std::vector<c10::IValue> args;
  for (const at::Tensor &t : inputs)
    args.emplace_back(slice(t, begin, count));
  if (withTarget)
    args.emplace_back(slice(targetRows, begin, count));
  return args;
}

void OutputRows::add(const std::vector<c10::IValue> &results) {
  std::vector<at::Tensor> flat;
  for (const c10::IValue &r : results) {
    if (r.isTensor())
      flat.push_back(r.toTensor());
    else if (r.isTuple())
      for (const c10::IValue &e : r.toTupleRef().elements())
        flat.push_back(e.toTensor());
  }
  chunks.push_back(std::move(flat));
}

void OutputRows::write(const std::string &path) const {
  std::vector<std::pair<std::string, at::Tensor>> merged;
  size_t n = chunks.empty() ? 0 : chunks.front().size();
  for (size_t i = 0; i < n; ++i) {
    std::vector<at::Tensor> parts;
    for (const auto &chunk : chunks)
      parts.push_back(chunk.at(i));
    // A 0-d result (a model that returns its loss) has no rows: one
    // micro-batch's is written as it is, several are stacked.
    at::Tensor whole =
        parts.front().dim() == 0
            ? (parts.size() == 1 ? parts.front() : at::stack(parts, 0))
            : at::cat(parts, 0);
    merged.emplace_back(n == 1 ? "output" : "output." + std::to_string(i),
                        whole);
  }
  writeTensors(path, merged, {});
}

std::vector<std::string> executorOnlyOptions(const RunOptions &options) {
  std::vector<std::string> given;
  if (options.deferWeightGrads)
    given.push_back("--defer-weight-grads");
  if (!options.checkpointDir.empty())
    given.push_back("--checkpoint-dir");
  if (options.resume)
    given.push_back("--resume");
  if (!options.scheduleText.empty())
    given.push_back("--schedule-file");
  if (!options.profilePath.empty())
    given.push_back("--profile");
  return given;
}

at::Tensor computeLoss(const RunOptions &options, const c10::IValue &output,
                       const at::Tensor &target) {
  // With several outputs (a tuple or a list) the loss is taken on the
  // first, as test/models/common.py does; with --loss none the first is
  // the loss itself (HuggingFace's `(loss, logits)`).
  c10::IValue first = output;
  if (output.isTuple() && !output.toTupleRef().elements().empty())
    first = output.toTupleRef().elements()[0];
  else if (output.isList() && !output.toListRef().empty())
    first = output.toListRef()[0];
  if (options.loss == "none") {
    if (!first.isTensor() || first.toTensor().numel() != 1)
      throw RuntimeError("--loss none: forward must return the scalar loss, "
                         "or a tuple or list whose first element is it");
    return first.toTensor().reshape({});
  }
  if (!first.isTensor())
    throw RuntimeError("--loss " + options.loss +
                       ": forward must return a tensor, or a tuple or list "
                       "whose first element is one");
  at::Tensor out = first.toTensor();
  if (options.loss == "cross_entropy")
    return at::cross_entropy_loss(out.flatten(0, -2), target.flatten());
  if (options.loss == "mse")
    return at::mse_loss(out, target);
  throw RuntimeError("unknown --loss '" + options.loss +
                     "'; expected cross_entropy, mse or none");
}

void checkTrainingOptions(const RunOptions &options) {
  if (options.loss != "cross_entropy" && options.loss != "mse" &&
      options.loss != "none")
    throw RuntimeError("unknown --loss '" + options.loss +
                       "'; expected cross_entropy, mse or none");
  if (options.optimizer != "sgd" && options.optimizer != "adamw")
    throw RuntimeError("unknown --optimizer '" + options.optimizer +
                       "'; expected sgd or adamw");
  if (options.microbatches < 1 || options.steps < 1)
    throw RuntimeError("--microbatches and --steps must be at least 1");
}

void releaseGradients(::torch::optim::Optimizer &optimizer) {
  for (auto &group : optimizer.param_groups())
    for (at::Tensor &p : group.params())
      ::pippy::releaseGradient(p);
}

std::unique_ptr<::torch::optim::Optimizer>
makeOptimizer(const RunOptions &options, std::vector<at::Tensor> trainable) {
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

namespace {
std::string stateKey(const at::Tensor &p) {
  return c10::guts::to_string(p.unsafeGetTensorImpl());
}
} // namespace

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
        out.emplace_back("momentum_buffer:" + name, sgd->momentum_buffer());
    } else if (auto *adam = dynamic_cast<::torch::optim::AdamWParamState *>(
                   it->second.get())) {
      out.emplace_back("exp_avg:" + name, adam->exp_avg());
      out.emplace_back("exp_avg_sq:" + name, adam->exp_avg_sq());
      metadata["adamw_step:" + name] = std::to_string(adam->step());
    }
  }
}

void loadOptimizerState(
    ::torch::optim::Optimizer &optimizer, const std::string &kind,
    const std::vector<std::pair<std::string, at::Tensor>> &params,
    const TensorFile &file) {
  auto &state = optimizer.state();
  auto get = [&](const std::string &key) -> at::Tensor {
    auto it = file.tensors.find(key);
    return it == file.tensors.end() ? at::Tensor() : it->second;
  };
  for (const auto &[name, p] : params) {
    if (kind == "sgd") {
      at::Tensor buffer = get("momentum_buffer:" + name);
      if (!buffer.defined())
        continue;
      auto s = std::make_unique<::torch::optim::SGDParamState>();
      s->momentum_buffer(buffer);
      state[stateKey(p)] = std::move(s);
    } else {
      at::Tensor avg = get("exp_avg:" + name), sq = get("exp_avg_sq:" + name);
      auto step = file.metadata.find("adamw_step:" + name);
      if (!avg.defined() || !sq.defined() || step == file.metadata.end())
        continue;
      auto s = std::make_unique<::torch::optim::AdamWParamState>();
      s->exp_avg(avg);
      s->exp_avg_sq(sq);
      s->step(std::stoll(step->second));
      state[stateKey(p)] = std::move(s);
    }
  }
}

} // namespace pippy::rt
