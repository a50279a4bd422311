//===- TorchScript.cpp - import traced TorchScript modules ----------------===//
//
// Loads a saved TorchScript module with libtorch, inlines `forward`, runs it
// once on inputs of the given shapes to learn every value's shape and dtype,
// and emits the graph IR. Shape arithmetic that does not depend on tensor data
// (`aten::size`, `prim::NumToTensor`, `aten::Int`, ...) is folded into
// constants; in-place ops become their functional form.
//
// This file is the driver: it loads the module, collects its parameters,
// imports forward's arguments, body and results, and writes the weights. The
// importer's other parts are listed in TorchScriptImpl.h. It is compiled with
// exceptions and catches every libtorch error at the boundary.
//
//===----------------------------------------------------------------------===//

#include "TorchScriptImpl.h"

#include "pippy/Analysis/GraphIR.h"
#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Dialect/Torch/TorchDialect.h"
#include "pippy/Support/Safetensors.h"
#include "pippy/Support/TensorDTypes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/FileSystem.h"

#include <torch/csrc/jit/serialization/import.h>
#include <torch/library.h>

// `pippy.pipe_split()` (python/pippy): the split marker a traced model
// records, known here so that torch::jit::load reads such a module. It
// computes nothing and is side-effecting, so tracing keeps it.
TORCH_LIBRARY_FRAGMENT(pippy, m) {
  m.def(torch::schema("pippy::_pipe_split() -> ()",
                      c10::AliasAnalysisKind::CONSERVATIVE),
        [] {});
}

using namespace mlir;
namespace td = ::mlir::torch;
namespace pd = ::mlir::pippy;
namespace st = ::pippy::safetensors;

namespace pippy::torchscript {

static at::ScalarType parseDtype(const std::string &dtype) {
  static const std::map<std::string, at::ScalarType> kTypes = {
      {"f32", at::kFloat},     {"f64", at::kDouble}, {"f16", at::kHalf},
      {"bf16", at::kBFloat16}, {"si64", at::kLong},  {"si32", at::kInt},
      {"si16", at::kShort},    {"si8", at::kChar},   {"ui8", at::kByte},
      {"i1", at::kBool}};
  return kTypes.at(dtype);
}

/// Folding leaves constants whose users were folded too.
static void removeDeadConstants(Block &body) {
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();
}

OwningOpRef<ModuleOp> Importer::run() {
  jit::Module module = loadModule();
  collectParameters(module);

  std::shared_ptr<jit::Graph> graph = module.get_method("forward").graph();

  size_t numArgs = graph->inputs().size() - 1;
  if (numArgs != options.inputs.size())
    fail("forward takes " + std::to_string(numArgs) +
         " arguments but --input-shapes gives " +
         std::to_string(options.inputs.size()));

  // Ops outside any submodule, and the function itself, are located at
  // the module file.
  Location unknown =
      FileLineColLoc::get(&context, options.modulePath, /*line=*/0, 0);
  OwningOpRef<ModuleOp> moduleOp = ModuleOp::create(unknown);
  builder.setInsertionPointToEnd(moduleOp->getBody());

  // Arguments: concrete example tensors drive shape inference.
  ::torch::manual_seed(0);
  values[graph->inputs()[0]] = module._ivalue();
  attrPaths[graph->inputs()[0]] = "";
  SmallVector<Type> argTypes = makeExampleInputs(*graph);

  auto func = func::FuncOp::create(builder, unknown, "forward",
                                   builder.getFunctionType(argTypes, {}));
  Block *body = func.addEntryBlock();
  builder.setInsertionPointToStart(body);
  for (size_t i = 0; i < numArgs; ++i) {
    mapped[graph->inputs()[i + 1]] = body->getArgument(i);
    track(graph->inputs()[i + 1], nullptr);
  }

  ::torch::NoGradGuard noGrad;
  for (jit::Node *node : graph->nodes())
    importNode(node, "");

  SmallVector<Value> results = emitResults(*graph, unknown);
  func::ReturnOp::create(builder, unknown, results);
  // A module's returned tuple that its caller unpacks: the tensors stay
  // live instead of the tuple, so a split point can follow the module.
  ::pippy::foldContainerRoundTrips(*body);
  removeDeadConstants(*body);
  orderParameters(*body);
  func.setType(
      builder.getFunctionType(argTypes, ValueRange(results).getTypes()));

  writeWeights();
  (*moduleOp)->setAttr("pippy.weights",
                       builder.getStringAttr(options.weightsPath));
  if (failed(verify(*moduleOp)))
    fail("the imported IR does not verify (see the diagnostics above)");
  return moduleOp;
}

/// Concrete example tensors for forward's arguments, which drive shape
/// inference; their types.
SmallVector<Type> Importer::makeExampleInputs(jit::Graph &graph) {
  size_t numArgs = graph.inputs().size() - 1;
  SmallVector<Type> argTypes;
  for (size_t i = 0; i < numArgs; ++i) {
    const ::pippy::InputShape &shape = options.inputs[i];
    at::ScalarType dtype = parseDtype(shape.dtype);
    at::Tensor example =
        at::isFloatingType(dtype)
            ? ::torch::randn(shape.sizes, ::torch::TensorOptions().dtype(dtype))
            : ::torch::full(shape.sizes, integerFill,
                            ::torch::TensorOptions().dtype(dtype));
    jit::Value *input = graph.inputs()[i + 1];
    if (!input->type()->isSubtypeOf(*c10::TensorType::get()))
      fail("forward argument " + std::to_string(i) + " ('" +
           input->debugName() + "') is a " + input->type()->str() +
           "; only tensor arguments are supported");
    values[input] = example;
    dataDependent.insert(input);

    argTypes.push_back(getTensorType(example));
  }
  return argTypes;
}

/// The values forward returns: tensors, nested tuples and lists of tensors
/// flattened into one tuple.
SmallVector<Value> Importer::emitResults(jit::Graph &graph, Location loc) {
  SmallVector<Value> results;
  for (jit::Value *output : graph.outputs()) {
    const c10::IValue &value = values.at(output);
    if (!value.isTensor() && !isNestedTensors(value))
      fail("forward returns a " + output->type()->str() +
           "; only tensors and (nested) tuples and lists of tensors are "
           "supported");
    Value result = lookup(output, nullptr);
    if (value.isList() || (value.isTuple() && !isTupleOfTensors(value)))
      result = flattenTuple(result, value, loc);
    results.push_back(result);
  }
  return results;
}

/// Parameters and buffers in named_parameters()/named_buffers() order; a
/// tensor reachable under several names is stored once, under its first.
void Importer::collectParameters(jit::Module &module) {
  // Two names alias when they hold the same tensor, or views of the same
  // data with the same shape, strides and dtype. Candidates are looked up
  // by data pointer, so that many parameters are not compared pairwise.
  std::unordered_map<const void *, SmallVector<std::string, 1>> byData;
  auto record = [&](const std::string &name, const at::Tensor &tensor) {
    auto &sameData = byData[tensor.data_ptr()];
    for (const std::string &canonical : sameData) {
      const at::Tensor &existing = parameters.at(canonical);
      if (existing.is_same(tensor) || (existing.sizes() == tensor.sizes() &&
                                       existing.strides() == tensor.strides() &&
                                       existing.dtype() == tensor.dtype())) {
        aliases[name] = canonical;
        return;
      }
    }
    sameData.push_back(name);
    parameterOrder.push_back(name);
    parameters.emplace(name, tensor);
  };
  for (const auto &p : module.named_parameters(/*recurse=*/true)) {
    record(p.name, p.value);
    if (!aliases.count(p.name) && !p.value.requires_grad())
      frozen.push_back(p.name);
  }
  for (const auto &b : module.named_buffers(/*recurse=*/true)) {
    record(b.name, b.value);
    if (!aliases.count(b.name))
      buffers.push_back(b.name);
  }
  // The example run updates buffers in place (a training-mode BatchNorm's
  // statistics): the weights file keeps their values from before it.
  for (const std::string &name : buffers)
    parameters[name] = parameters[name].clone();
}

std::string Importer::canonicalName(const std::string &name) {
  auto it = aliases.find(name);
  return it == aliases.end() ? name : it->second;
}

/// Ops are located at the module path of the forward they come from.
Location Importer::currentLocation() {
  if (currentPath.empty())
    return FileLineColLoc::get(&context, options.modulePath, 0, 0);
  return NameLoc::get(builder.getStringAttr(currentPath));
}

std::string Importer::describe(jit::Node *node) const {
  return "'" + std::string(node->kind().toQualString()) + "'" +
         (currentPath.empty() ? std::string(" in forward")
                              : " in module '" + currentPath + "'");
}

/// Parameters first, in named_parameters() then named_buffers() order.
void Importer::orderParameters(Block &body) {
  Operation *last = nullptr;
  for (const std::string &name : parameterOrder) {
    auto it = paramValues.find(name);
    if (it == paramValues.end())
      continue;
    Operation *op = it->second.getDefiningOp();
    if (last)
      op->moveAfter(last);
    else
      op->moveBefore(&body.front());
    last = op;
  }
}

void Importer::writeWeights() {
  st::Writer writer;
  for (const std::string &name : parameterOrder) {
    at::Tensor t = parameters.at(name).detach().contiguous();
    std::optional<st::DType> dtype = ::pippy::toStorageDType(t.scalar_type());
    if (!dtype)
      fail("parameter '" + name + "' has dtype " +
           std::string(c10::toString(t.scalar_type())) +
           ", which safetensors cannot store");
    std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
    std::string_view bytes(static_cast<const char *>(t.data_ptr()),
                           t.numel() * t.element_size());
    if (std::string error = writer.add(name, *dtype, sizes, bytes);
        !error.empty())
      fail(error);
  }
  auto writeList = [&](const char *key, const std::vector<std::string> &names) {
    if (names.empty())
      return;
    std::string json = "[";
    for (const std::string &name : names)
      json += (json.size() > 1 ? ", \"" : "\"") + name + "\"";
    writer.setMetadata(key, json + "]");
  };
  writeList("buffers", buffers);
  writeList("frozen", frozen); // parameters with requires_grad=False
  if (!aliases.empty()) {
    std::string json = "{";
    for (const auto &[alias, canonical] : aliases) {
      if (json.size() > 1)
        json += ", ";
      json += "\"" + alias + "\": \"" + canonical + "\"";
    }
    writer.setMetadata("aliases", json + "}");
  }
  if (std::string error = writer.write(options.weightsPath); !error.empty())
    fail("cannot write weights: " + error);
}

} // namespace pippy::torchscript

namespace pippy {
llvm::Expected<OwningOpRef<ModuleOp>>
importTorchScript(MLIRContext &context, const ImportOptions &options) {
  context.loadDialect<func::FuncDialect, td::TorchDialect, pd::PippyDialect>();
  // Integer inputs are zeros, which every embedding accepts; if the model
  // cannot run on zeros (a division by an input, an index `tokens - 1`),
  // ones are tried before giving up.
  try {
    bool integerInputs = llvm::any_of(options.inputs, [](const auto &shape) {
      return !at::isFloatingType(torchscript::parseDtype(shape.dtype));
    });
    try {
      return torchscript::Importer(context, options, 0).run();
    } catch (const torchscript::ImportError &zeros) {
      if (!zeros.running || !integerInputs)
        throw;
      try {
        return torchscript::Importer(context, options, 1).run();
      } catch (const torchscript::ImportError &ones) {
        if (!ones.running)
          throw;
        return llvm::createStringError(
            zeros.message +
            " (integer inputs of zeros; with ones: " + ones.message + ")");
      }
    }
  } catch (const torchscript::ImportError &e) {
    return llvm::createStringError(e.message);
  } catch (const c10::Error &e) {
    return llvm::createStringError(e.what_without_backtrace());
  } catch (const std::exception &e) {
    return llvm::createStringError(e.what());
  }
}
} // namespace pippy
