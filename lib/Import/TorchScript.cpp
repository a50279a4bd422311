//===- TorchScript.cpp - import traced TorchScript modules ----------------===//
//
// Loads a saved TorchScript module with libtorch, inlines `forward`, runs it
// once on inputs of the given shapes to learn every value's shape and dtype,
// and emits the graph IR. Shape arithmetic that does not depend on tensor data
// (`aten::size`, `prim::NumToTensor`, `aten::Int`, ...) is folded into
// constants; in-place ops become their functional form.
//
// In-place writes through views are rewritten too: the importer keeps, per
// tensor of the example run, the IR value that holds its current contents
// and, for tensors made by a view op it can invert (select, slice, narrow,
// diagonal, transpose, permute, view/reshape and friends), the op and the
// tensor it views. A write gives the written tensor its new value, then each
// tensor it views, up to the root, through the view's scatter form
// (`aten::slice_scatter`, `aten::select_scatter`, ...); other views that
// overlap the written memory are made again from their new parent when next
// read. A tensor that shares the written memory in a way the importer
// cannot replay is an error when it is read again.
//
// This is the only translation unit that sees both libtorch and MLIR. It is
// compiled with exceptions and catches every libtorch error at the boundary.
//
//===----------------------------------------------------------------------===//

#include "pippy/Import/TorchScript.h"

#include "pippy/Analysis/GraphIR.h"
#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Dialect/Torch/TorchDialect.h"
#include "pippy/Support/Safetensors.h"
#include "pippy/Support/TensorDTypes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/Support/FileSystem.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/script.h>

#include <functional>
#include <map>
#include <set>
#include <unordered_map>

using namespace mlir;
using ::pippy::ImportOptions;
namespace td = ::mlir::torch;
namespace pd = ::mlir::pippy;
namespace st = ::pippy::safetensors;
namespace jit = ::torch::jit;

namespace {

/// An import failure; turned into an llvm::Error at the boundary.
struct ImportError {
  std::string message;
  bool running = false; // running the model on the example inputs failed
};

[[noreturn]] void fail(const std::string &message) {
  throw ImportError{message};
}

at::ScalarType parseDtype(const std::string &dtype) {
  static const std::map<std::string, at::ScalarType> kTypes = {
      {"f32", at::kFloat},     {"f64", at::kDouble}, {"f16", at::kHalf},
      {"bf16", at::kBFloat16}, {"si64", at::kLong},  {"si32", at::kInt},
      {"si16", at::kShort},    {"si8", at::kChar},   {"ui8", at::kByte},
      {"i1", at::kBool}};
  return kTypes.at(dtype);
}

/// Ops whose result depends only on shapes, never on tensor contents.
bool isShapeOnly(c10::Symbol kind) {
  static const std::set<std::string> kNames = {
      "aten::size",  "aten::dim", "aten::numel", "prim::device",
      "prim::dtype", "aten::len", "prim::layout"};
  return kNames.count(kind.toQualString()) != 0;
}

class Importer {
public:
  /// Integer example inputs hold `integerFill` everywhere.
  Importer(MLIRContext &context, const ImportOptions &options,
           int64_t integerFill)
      : context(context), options(options), builder(&context),
        integerFill(integerFill) {}

  OwningOpRef<ModuleOp> run() {
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
    SmallVector<Type> argTypes;
    for (size_t i = 0; i < numArgs; ++i) {
      const ::pippy::InputShape &shape = options.inputs[i];
      at::ScalarType dtype = parseDtype(shape.dtype);
      at::Tensor example =
          at::isFloatingType(dtype)
              ? ::torch::randn(shape.sizes,
                               ::torch::TensorOptions().dtype(dtype))
              : ::torch::full(shape.sizes, integerFill,
                              ::torch::TensorOptions().dtype(dtype));
      jit::Value *input = graph->inputs()[i + 1];
      if (!input->type()->isSubtypeOf(*c10::TensorType::get()))
        fail("forward argument " + std::to_string(i) + " ('" +
             input->debugName() + "') is a " + input->type()->str() +
             "; only tensor arguments are supported");
      values[input] = example;
      dataDependent.insert(input);

      argTypes.push_back(getTensorType(example));
    }

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

    SmallVector<Value> results;
    for (jit::Value *output : graph->outputs()) {
      const c10::IValue &value = values.at(output);
      if (!value.isTensor() && !isNestedTensors(value))
        fail("forward returns a " + output->type()->str() +
             "; only tensors and (nested) tuples and lists of tensors are "
             "supported");
      Value result = lookup(output, nullptr);
      if (value.isList() || (value.isTuple() && !isTupleOfTensors(value)))
        result = flattenTuple(result, value, unknown);
      results.push_back(result);
    }
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

private:
  jit::Module loadModule() {
    if (!llvm::sys::fs::exists(options.modulePath))
      fail("no such file");
    try {
      return jit::load(options.modulePath);
    } catch (const c10::Error &e) {
      fail("cannot load TorchScript module '" + options.modulePath +
           "': " + e.what_without_backtrace());
    }
  }

  /// Parameters and buffers in named_parameters()/named_buffers() order; a
  /// tensor reachable under several names is stored once, under its first.
  void collectParameters(jit::Module &module) {
    // Two names alias when they hold the same tensor, or views of the same
    // data with the same shape, strides and dtype. Candidates are looked up
    // by data pointer, so that many parameters are not compared pairwise.
    std::unordered_map<const void *, SmallVector<std::string, 1>> byData;
    auto record = [&](const std::string &name, const at::Tensor &tensor) {
      auto &sameData = byData[tensor.data_ptr()];
      for (const std::string &canonical : sameData) {
        const at::Tensor &existing = parameters.at(canonical);
        if (existing.is_same(tensor) ||
            (existing.sizes() == tensor.sizes() &&
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
  }

  std::string canonicalName(const std::string &name) {
    auto it = aliases.find(name);
    return it == aliases.end() ? name : it->second;
  }

  /// Ops are located at the module path of the forward they come from.
  Location currentLocation() {
    if (currentPath.empty())
      return FileLineColLoc::get(&context, options.modulePath, 0, 0);
    return NameLoc::get(builder.getStringAttr(currentPath));
  }

  std::string describe(jit::Node *node) const {
    return "'" + std::string(node->kind().toQualString()) + "'" +
           (currentPath.empty() ? std::string(" in forward")
                                : " in module '" + currentPath + "'");
  }

  //===--------------------------------------------------------------------===//
  // Types
  //===--------------------------------------------------------------------===//

  Type getDtype(at::ScalarType type) {
    switch (type) {
    case at::kFloat:
      return builder.getF32Type();
    case at::kDouble:
      return builder.getF64Type();
    case at::kHalf:
      return builder.getF16Type();
    case at::kBFloat16:
      return builder.getBF16Type();
    case at::kLong:
      return builder.getIntegerType(64, /*isSigned=*/true);
    case at::kInt:
      return builder.getIntegerType(32, /*isSigned=*/true);
    case at::kShort:
      return builder.getIntegerType(16, /*isSigned=*/true);
    case at::kChar:
      return builder.getIntegerType(8, /*isSigned=*/true);
    case at::kByte:
      return builder.getIntegerType(8, /*isSigned=*/false);
    case at::kBool:
      return builder.getI1Type();
    case at::kComplexFloat:
      return ComplexType::get(builder.getF32Type());
    case at::kComplexDouble:
      return ComplexType::get(builder.getF64Type());
    default:
      fail(std::string("unsupported tensor dtype ") + c10::toString(type));
    }
  }

  Type getTensorType(const at::Tensor &tensor) {
    std::vector<int64_t> sizes(tensor.sizes().begin(), tensor.sizes().end());
    return td::ValueTensorType::get(&context, ArrayRef<int64_t>(sizes),
                                    getDtype(tensor.scalar_type()),
                                    Attribute());
  }

  /// The MLIR type of a JIT type, for values nested in containers.
  Type getStaticType(const c10::TypePtr &type, jit::Node *node) {
    switch (type->kind()) {
    case c10::TypeKind::TensorType:
      return td::ValueTensorType::get(&context, std::nullopt, Type(),
                                      Attribute());
    case c10::TypeKind::IntType:
      return td::IntType::get(&context);
    case c10::TypeKind::FloatType:
      return td::FloatType::get(&context);
    case c10::TypeKind::BoolType:
      return td::BoolType::get(&context);
    case c10::TypeKind::NoneType:
      return td::NoneType::get(&context);
    case c10::TypeKind::StringType:
      return td::StringType::get(&context);
    case c10::TypeKind::DeviceObjType:
      return td::DeviceType::get(&context);
    case c10::TypeKind::NumberType:
      return td::NumberType::get(&context);
    case c10::TypeKind::ListType:
      return td::ListType::get(getStaticType(
          type->expectRef<c10::ListType>().getElementType(), node));
    case c10::TypeKind::OptionalType:
      return td::OptionalType::get(getStaticType(
          type->expectRef<c10::OptionalType>().getElementType(), node));
    default:
      fail("unsupported value of type " + type->str() + " produced by " +
           describe(node));
    }
  }

  /// The MLIR type of a value, from its concrete value where that is more
  /// precise (tensor shapes).
  Type getValueType(jit::Value *value, jit::Node *node) {
    const c10::IValue &concrete = values.at(value);
    if (concrete.isTensor())
      return getTensorType(concrete.toTensor());
    if (concrete.isNone())
      return td::NoneType::get(&context);
    if (concrete.isTuple())
      return getTupleType(concrete, node);
    return getStaticType(value->type(), node);
  }

  /// A tuple of tensors, of such tuples, or of lists of tensors.
  Type getTupleType(const c10::IValue &tuple, jit::Node *node) {
    SmallVector<Type> elements;
    for (const c10::IValue &element : tuple.toTupleRef().elements()) {
      if (element.isTuple())
        elements.push_back(getTupleType(element, node));
      else if (element.isTensor())
        elements.push_back(getTensorType(element.toTensor()));
      else if (isNestedTensors(element))
        elements.push_back(getStaticType(c10::ListType::ofTensors(), node));
      else
        fail("tuple of non-tensors produced by " + describe(node));
    }
    return td::TupleType::get(&context, elements);
  }

  /// The elements of a tuple or a list.
  static ArrayRef<c10::IValue> elementsOf(const c10::IValue &value) {
    if (value.isTuple())
      return value.toTupleRef().elements().asArrayRef();
    return value.toListRef();
  }

  /// A tuple or list whose elements are tensors or such tuples and lists.
  static bool isNestedTensors(const c10::IValue &value) {
    if (!value.isTuple() && !value.isList())
      return false;
    return llvm::all_of(elementsOf(value), [](const c10::IValue &e) {
      return e.isTensor() || isNestedTensors(e);
    });
  }

  /// Nested tuples and lists of tensors as one flat tuple of the tensors,
  /// in depth-first order: `(a, (b, c))` and `(a, [b, c])` become `(a, b,
  /// c)`. `concrete` is the traced value, which gives a list's length and
  /// its tensors' shapes.
  Value flattenTuple(Value tuple, const c10::IValue &concrete, Location loc) {
    SmallVector<Value> leaves;
    std::function<void(Value, const c10::IValue &)> collect =
        [&](Value v, const c10::IValue &value) {
          if (value.isTensor()) {
            leaves.push_back(v);
            return;
          }
          ArrayRef<c10::IValue> elements = elementsOf(value);
          Operation *def = v.getDefiningOp();
          ValueRange parts;
          if (def && (value.isTuple() ? isa<td::PrimTupleConstructOp>(def)
                                      : isa<td::PrimListConstructOp>(def))) {
            parts = def->getOperands();
          } else if (value.isTuple()) {
            parts = td::PrimTupleUnpackOp::create(
                        builder, loc,
                        cast<td::TupleType>(v.getType()).getContainedTypes(), v)
                        .getResults();
          } else {
            // A list made by an op (`unbind`, `split`): its length and
            // shapes are the traced ones, as for every other list the IR
            // unpacks.
            SmallVector<Type> types;
            for (const c10::IValue &inner : elements) {
              if (!inner.isTensor())
                fail("forward returns a list of lists made by an op; return "
                     "its tensors in a tuple instead");
              types.push_back(getTensorType(inner.toTensor()));
            }
            parts = td::PrimListUnpackOp::create(builder, loc, types, v)
                        .getResults();
          }
          for (auto [element, inner] : llvm::zip_equal(parts, elements))
            collect(element, inner);
        };
    collect(tuple, concrete);
    SmallVector<Type> types;
    for (Value leaf : leaves)
      types.push_back(leaf.getType());
    return td::PrimTupleConstructOp::create(
        builder, loc, td::TupleType::get(&context, types), leaves);
  }

  static bool isTupleOfTensors(const c10::IValue &value) {
    if (!value.isTuple())
      return false;
    for (const c10::IValue &e : value.toTupleRef().elements())
      if (!e.isTensor())
        return false;
    return true;
  }

  //===--------------------------------------------------------------------===//
  // Constants
  //===--------------------------------------------------------------------===//

  /// Emits `value` as torch constants; none if it has no constant form.
  Value emitConstant(const c10::IValue &value, Location loc) {
    if (value.isInt())
      return td::ConstantIntOp::create(
          builder, loc, td::IntType::get(&context),
          builder.getI64IntegerAttr(value.toInt()));
    if (value.isDouble())
      return td::ConstantFloatOp::create(
          builder, loc, td::FloatType::get(&context),
          builder.getF64FloatAttr(value.toDouble()));
    if (value.isBool())
      return td::ConstantBoolOp::create(builder, loc,
                                        td::BoolType::get(&context),
                                        builder.getBoolAttr(value.toBool()));
    if (value.isNone())
      return td::ConstantNoneOp::create(builder, loc,
                                        td::NoneType::get(&context));
    if (value.isString())
      return td::ConstantStrOp::create(
          builder, loc, td::StringType::get(&context),
          builder.getStringAttr(value.toStringRef()));
    if (value.isDevice())
      return td::ConstantDeviceOp::create(
          builder, loc, td::DeviceType::get(&context),
          builder.getStringAttr(value.toDevice().str()));
    if (value.isIntList() || value.isDoubleList() || value.isBoolList()) {
      SmallVector<Value> elements;
      Type elementType;
      for (const c10::IValue &element : value.toListRef()) {
        elements.push_back(emitConstant(element, loc));
        elementType = elements.back().getType();
      }
      if (!elementType)
        elementType = value.isIntList() ? Type(td::IntType::get(&context))
                      : value.isDoubleList()
                          ? Type(td::FloatType::get(&context))
                          : Type(td::BoolType::get(&context));
      return td::PrimListConstructOp::create(
          builder, loc, td::ListType::get(elementType), elements);
    }
    if (value.isTensor())
      return emitTensorLiteral(value.toTensor(), loc);
    return Value();
  }

  Value emitTensorLiteral(const at::Tensor &tensor, Location loc) {
    at::Tensor t = tensor.detach().contiguous();
    std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
    Type dtype = getDtype(t.scalar_type());
    auto shaped = RankedTensorType::get(sizes, dtype);
    DenseElementsAttr attr;
    if (t.scalar_type() == at::kBool) {
      SmallVector<bool> bits;
      auto *data = t.data_ptr<bool>();
      for (int64_t i = 0; i < t.numel(); ++i)
        bits.push_back(data[i]);
      attr = DenseElementsAttr::get(shaped, ArrayRef<bool>(bits));
    } else {
      ArrayRef<char> raw(static_cast<const char *>(t.data_ptr()),
                         t.numel() * t.element_size());
      attr = DenseElementsAttr::getFromRawBuffer(shaped, raw);
    }
    return td::ValueTensorLiteralOp::create(builder, loc, getTensorType(tensor),
                                            attr);
  }

  //===--------------------------------------------------------------------===//
  // Nodes
  //===--------------------------------------------------------------------===//

  Value lookup(jit::Value *value, jit::Node *user) {
    auto it = mapped.find(value);
    if (it != mapped.end()) {
      if (Tracked *entry = trackedOf(value); entry && entry->written)
        return resolve(*entry, user);
      return it->second;
    }
    fail("value '%" + value->debugName() + "' used by " +
         (user ? describe(user) : std::string("the output")) +
         " has no IR counterpart");
  }

  /// Runs one node on `stack` (its inputs), leaving its outputs there.
  static void runNode(jit::Node *node, jit::Stack &stack) {
    c10::Symbol kind = node->kind();
    if (kind == c10::prim::ListConstruct) {
      c10::impl::GenericList list(
          node->output()->type()->expectRef<c10::ListType>().getElementType());
      for (c10::IValue &element : stack)
        list.push_back(std::move(element));
      stack = {c10::IValue(std::move(list))};
    } else if (kind == c10::prim::TupleConstruct) {
      stack = {c10::ivalue::Tuple::create(std::move(stack))};
    } else if (kind == c10::prim::ListUnpack) {
      std::vector<c10::IValue> elements = stack.back().toListRef().vec();
      stack = std::move(elements);
    } else if (kind == c10::prim::TupleUnpack) {
      std::vector<c10::IValue> elements =
          stack.back().toTupleRef().elements().vec();
      stack = std::move(elements);
    } else {
      node->getOperation()(stack);
    }
  }

  /// Whether operand `index` of `node` is a 0-d tensor constant where an
  /// overload of the op takes a number. TorchScript runs such an op with the
  /// number (its executor rewrites `aten::mul(%x, %c)` with a constant `%c
  /// = {0.5}` to the Scalar overload), so `int_tensor * 0.5` is float32,
  /// not float64: the constant is a wrapped number, which does not take
  /// part in type promotion as a tensor would.
  bool isNumberOperand(jit::Node *node, size_t index) {
    jit::Value *input = node->inputs()[index];
    if (input->node()->kind() != c10::prim::Constant)
      return false;
    auto v = values.find(input);
    if (v == values.end() || !v->second.isTensor() ||
        v->second.toTensor().dim() != 0)
      return false;
    const c10::FunctionSchema *own = node->maybeSchema();
    if (!own)
      return false;
    for (const auto &op : jit::getAllOperatorsFor(node->kind())) {
      const c10::FunctionSchema &other = op->schema();
      if (other.arguments().size() != own->arguments().size() ||
          other.is_mutable() != own->is_mutable())
        continue;
      bool match = true;
      for (size_t a = 0; a < other.arguments().size() && match; ++a) {
        const c10::TypePtr &type = other.arguments()[a].type();
        match = a == index ? type->kind() == c10::TypeKind::NumberType
                           : *type == *own->arguments()[a].type();
      }
      if (match)
        return true;
    }
    return false;
  }

  /// The overload of `node`'s operator that takes its arguments except the
  /// out argument `outIndex`, writes into none, and returns as many values.
  const c10::FunctionSchema *functionalOverload(jit::Node *node,
                                                size_t outIndex) {
    const c10::FunctionSchema &own = node->schema();
    for (const auto &op : jit::getAllOperatorsFor(node->kind())) {
      const c10::FunctionSchema &other = op->schema();
      if (other.is_mutable() ||
          other.arguments().size() + 1 != own.arguments().size() ||
          other.returns().size() != own.returns().size())
        continue;
      bool match = true;
      for (size_t a = 0, b = 0; a < own.arguments().size() && match; ++a) {
        if (a == outIndex)
          continue;
        const c10::Argument &mine = own.arguments()[a];
        const c10::Argument &theirs = other.arguments()[b++];
        match = mine.name() == theirs.name() && *mine.type() == *theirs.type();
      }
      if (match)
        return &other;
    }
    return nullptr;
  }

  /// The 0-d constants TorchScript runs as numbers, made wrapped numbers.
  void wrapNumbers(jit::Node *node, jit::Stack &stack) {
    for (size_t i = 0; i < stack.size(); ++i)
      if (isNumberOperand(node, i)) {
        at::Tensor number = stack[i].toTensor().clone();
        number.unsafeGetTensorImpl()->set_wrapped_number(true);
        stack[i] = number;
      }
  }

  void execute(jit::Node *node) {
    jit::Stack stack;
    for (jit::Value *input : node->inputs())
      stack.push_back(values.at(input));
    wrapNumbers(node, stack);
    try {
      runNode(node, stack);
    } catch (const c10::Error &e) {
      throw ImportError{"running " + describe(node) +
                            " on inputs of the shapes in --input-shapes "
                            "failed: " +
                            e.what_without_backtrace(),
                        true};
    } catch (const std::exception &e) {
      throw ImportError{"running " + describe(node) +
                            " on inputs of the shapes in --input-shapes "
                            "failed: " +
                            e.what(),
                        true};
    }
    if (stack.size() != node->outputs().size())
      fail(describe(node) + " produced " + std::to_string(stack.size()) +
           " values; its schema has " + std::to_string(node->outputs().size()));
    for (size_t i = 0; i < stack.size(); ++i)
      values[node->outputs()[i]] = stack[i];
  }

  void importNode(jit::Node *node, const std::string &path) {
    importNodeBody(node, path);
    for (jit::Value *output : node->outputs())
      track(output, node);
    if (node->kind() != c10::prim::CallMethod)
      markDataDependentShapes(node);
  }

  void importNodeBody(jit::Node *node, const std::string &path) {
    currentPath = path;
    c10::Symbol kind = node->kind();
    Location loc = currentLocation();

    if (kind == c10::prim::CallMethod) {
      importCall(node);
      return;
    }

    if (kind == c10::prim::Constant) {
      c10::IValue value = *jit::toIValue(node->output());
      values[node->output()] = value;
      Value constant = emitConstant(value, loc);
      if (!constant)
        fail("unsupported constant of type " + node->output()->type()->str() +
             " in " + describe(node));
      mapped[node->output()] = constant;
      return;
    }

    if (kind == c10::prim::GetAttr) {
      importGetAttr(node, loc);
      return;
    }

    if (kind == c10::prim::If || kind == c10::prim::Loop ||
        kind == c10::prim::CallFunction || kind == c10::prim::PythonOp)
      fail("unsupported op " + describe(node) +
           ": control flow and calls that cannot be inlined are not "
           "supported; trace the model with torch.jit.trace");

    bool isContainerOp =
        kind == c10::prim::ListConstruct || kind == c10::prim::TupleConstruct ||
        kind == c10::prim::ListUnpack || kind == c10::prim::TupleUnpack;
    if (!isContainerOp && !node->maybeOperator())
      fail("unsupported op " + describe(node) +
           ": libtorch 1.13 has no operator with this schema");

    execute(node);
    executeShadow(node);

    // A shape-only op depends on the data when the shadow run disagrees.
    bool dependent = false;
    if (!isShapeOnly(kind))
      for (jit::Value *input : node->inputs())
        dependent |= dataDependent.count(input) != 0;
    else
      for (jit::Value *output : node->outputs())
        dependent |= shadowDiffers(output);
    if (dependent)
      for (jit::Value *output : node->outputs())
        dataDependent.insert(output);

    // Shape arithmetic with static shapes: fold to constants.
    if (!dependent && node->outputs().size() == 1 && isFoldable(node)) {
      if (Value constant = emitConstant(values.at(node->output()), loc)) {
        mapped[node->output()] = constant;
        return;
      }
    }

    if (kind == c10::prim::ListConstruct) {
      SmallVector<Value> elements;
      for (jit::Value *input : node->inputs())
        elements.push_back(lookup(input, node));
      mapped[node->output()] = td::PrimListConstructOp::create(
          builder, loc, getStaticType(node->output()->type(), node), elements);
      return;
    }
    if (kind == c10::prim::TupleConstruct) {
      SmallVector<Value> elements;
      for (jit::Value *input : node->inputs())
        elements.push_back(lookup(input, node));
      mapped[node->output()] = td::PrimTupleConstructOp::create(
          builder, loc, getValueType(node->output(), node), elements);
      return;
    }
    if (kind == c10::prim::TupleUnpack || kind == c10::prim::ListUnpack) {
      SmallVector<Type> types;
      for (jit::Value *output : node->outputs())
        types.push_back(getValueType(output, node));
      Value input = lookup(node->input(), node);
      Operation *op =
          kind == c10::prim::TupleUnpack
              ? td::PrimTupleUnpackOp::create(builder, loc, types, input)
                    .getOperation()
              : td::PrimListUnpackOp::create(builder, loc, types, input)
                    .getOperation();
      for (size_t i = 0; i < node->outputs().size(); ++i)
        mapped[node->outputs()[i]] = op->getResult(i);
      return;
    }
    importOperator(node, loc);
  }

  /// Folding leaves constants whose users were folded too.
  static void removeDeadConstants(Block &body) {
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (isOpTriviallyDead(&op))
        op.erase();
  }

  /// Parameters first, in named_parameters() then named_buffers() order.
  void orderParameters(Block &body) {
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

  /// Imports a submodule call in place, at the callee's module path.
  void importCall(jit::Node *node) {
    std::string caller = currentPath;
    jit::Value *receiver = node->inputs()[0];
    c10::IValue object = values.at(receiver);
    if (!object.isObject())
      fail("call of method '" + node->s(c10::attr::name) +
           "' on a non-module value in " + describe(node));
    std::string method = node->s(c10::attr::name);
    jit::Function &function = object.toObjectRef().type()->getMethod(method);
    jit::Graph &callee = *jit::toGraphFunction(function).graph();
    std::string calleePath = attrPaths.at(receiver);

    values[callee.inputs()[0]] = object;
    attrPaths[callee.inputs()[0]] = calleePath;
    for (size_t i = 1; i < callee.inputs().size(); ++i) {
      jit::Value *arg = node->inputs()[i];
      jit::Value *param = callee.inputs()[i];
      values[param] = values.at(arg);
      if (mapped.count(arg))
        mapped[param] = mapped[arg];
      if (attrPaths.count(arg))
        attrPaths[param] = attrPaths[arg];
      if (dataDependent.count(arg))
        dataDependent.insert(param);
      copyShadow(arg, param);
    }
    for (jit::Node *inner : callee.nodes())
      importNode(inner, calleePath);
    currentPath = caller;
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      jit::Value *result = callee.outputs()[i];
      jit::Value *output = node->outputs()[i];
      values[output] = values.at(result);
      if (mapped.count(result))
        mapped[output] = mapped[result];
      if (attrPaths.count(result))
        attrPaths[output] = attrPaths[result];
      if (dataDependent.count(result))
        dataDependent.insert(output);
      copyShadow(result, output);
    }
    // The callee's graph is shared by every instance of its class: forget
    // its values before the next call reuses them.
    auto forget = [&](jit::Value *v) {
      values.erase(v);
      mapped.erase(v);
      attrPaths.erase(v);
      dataDependent.erase(v);
      shadow.erase(v);
      opaque.erase(v);
    };
    for (jit::Value *v : callee.inputs())
      forget(v);
    for (jit::Node *inner : callee.nodes())
      for (jit::Value *v : inner->outputs())
        forget(v);
  }

  /// Whether a node with static inputs may be replaced by its value.
  bool isFoldable(jit::Node *node) {
    const c10::IValue &value = values.at(node->output());
    if (value.isInt() || value.isDouble() || value.isBool() ||
        value.isIntList() || value.isDoubleList() || value.isBoolList())
      return true;
    return value.isTensor() && value.toTensor().dim() == 0;
  }

  void importGetAttr(jit::Node *node, Location loc) {
    jit::Value *object = node->input();
    std::string name = node->s(c10::attr::name);
    const std::string &parent = attrPaths.at(object);
    std::string path = parent.empty() ? name : parent + "." + name;
    attrPaths[node->output()] = path;
    c10::IValue value = values.at(object).toObject()->getAttr(name);
    values[node->output()] = value;
    if (value.isObject())
      return; // A submodule: only its path matters.
    if (value.isTensor()) {
      dataDependent.insert(node->output());
      std::string canonical = canonicalName(path);
      if (!parameters.count(canonical))
        fail("attribute '" + path + "' read by " + describe(node) +
             " is a tensor that is neither a parameter nor a buffer");
      auto it = paramValues.find(canonical);
      if (it == paramValues.end()) {
        // Emit each parameter once, at the top of forward.
        OpBuilder::InsertionGuard guard(builder);
        builder.setInsertionPointToStart(builder.getInsertionBlock());
        if (lastParam)
          builder.setInsertionPointAfter(lastParam);
        StringRef owner = StringRef(canonical).rsplit('.').first;
        Location paramLoc =
            owner == canonical
                ? Location(
                      FileLineColLoc::get(&context, options.modulePath, 0, 0))
                : Location(NameLoc::get(builder.getStringAttr(owner)));
        auto param = pd::ParamOp::create(
            builder, paramLoc, getTensorType(parameters.at(canonical)),
            canonical);
        lastParam = param;
        it = paramValues.emplace(canonical, param.getResult()).first;
      }
      mapped[node->output()] = it->second;
      parameterTensors.emplace(canonical, value.toTensor());
      return;
    }
    Value constant = emitConstant(value, loc);
    if (!constant)
      fail("attribute '" + path + "' of unsupported kind read by " +
           describe(node));
    mapped[node->output()] = constant;
  }

  void importOperator(jit::Node *node, Location loc) {
    const c10::FunctionSchema &schema = node->schema();
    std::string ns = schema.name().substr(0, schema.name().find("::"));
    std::string name = schema.name().substr(ns.size() + 2);
    std::string overload = schema.overload_name();

    // In-place ops become their functional form; later uses of the written
    // tensor see the result.
    bool inPlace = name.size() > 1 && name.back() == '_' &&
                   !(name.size() > 4 && name.rfind("__", 0) == 0);
    jit::Value *written = nullptr;
    if (inPlace) {
      written = node->inputs()[0];
      if (attrPaths.count(written))
        failWriteTo(node, canonicalName(attrPaths[written]), "");
      checkNotParameterMemory(node, written);
      name.pop_back();
    }

    // An `out=` op writes its result into its out arguments: it becomes
    // its functional overload, and the out tensor holds the result.
    std::vector<size_t> outArgs;
    if (!inPlace) {
      const auto &args = schema.arguments();
      for (size_t i = 0; i < args.size(); ++i)
        if (args[i].alias_info() && args[i].alias_info()->isWrite())
          outArgs.push_back(i);
    }
    if (!outArgs.empty()) {
      if (outArgs.size() != 1)
        fail(describe(node) + " writes into " + std::to_string(outArgs.size()) +
             " of its arguments; pippy-import takes ops that write into one");
      written = node->inputs()[outArgs[0]];
      if (attrPaths.count(written))
        failWriteTo(node, canonicalName(attrPaths[written]), "", "out= op ");
      checkNotParameterMemory(node, written);
      const c10::FunctionSchema *functional =
          functionalOverload(node, outArgs[0]);
      if (!functional)
        fail(describe(node) + " writes its result into an existing tensor "
                              "(out=), and its operator has no functional "
                              "overload with the other arguments");
      overload = functional->overload_name();
    }

    SmallVector<Value> operands;
    for (auto [i, input] : llvm::enumerate(node->inputs())) {
      if (!outArgs.empty() && i == outArgs[0])
        continue;
      if (isNumberOperand(node, i)) {
        // A fresh literal marked for the runtime, as execute() ran it.
        Value literal =
            emitTensorLiteral(values.at(input).toTensor(), currentLocation());
        literal.getDefiningOp()->setAttr(::pippy::kWrappedNumberAttr,
                                         builder.getUnitAttr());
        operands.push_back(literal);
        continue;
      }
      operands.push_back(lookup(input, node));
    }
    SmallVector<Type> resultTypes;
    for (jit::Value *output : node->outputs())
      resultTypes.push_back(getValueType(output, node));

    std::string opName = "torch." + ns + "." + name;
    if (!overload.empty())
      opName += "." + overload;
    OperationState state(loc, opName);
    state.addOperands(operands);
    state.addTypes(resultTypes);
    Operation *op = builder.create(state);
    for (size_t i = 0; i < node->outputs().size(); ++i)
      mapped[node->outputs()[i]] = op->getResult(i);
    if (written) {
      mapped[written] = op->getResult(0);
      values[written] = values.at(node->outputs()[0]);
      recordWrite(node, written, op->getResult(0));
    }
  }

  //===--------------------------------------------------------------------===//
  // Data-dependent shapes: the shadow run
  //===--------------------------------------------------------------------===//
  //
  // Ops whose result size depends on tensor contents (nonzero,
  // masked_select, boolean indexing, unique, ...) start a second, shadow
  // run: their result gets one more row there, a number read out of a
  // tensor (`item`, `int(t)`) one more unit, and every node downstream runs
  // again on the shadow values. A size or count that differs between the
  // two runs is not folded into a constant, and a tensor whose shape
  // differs is marked `pippy.data_dependent_shape` (the indices of such
  // results), so that no stage boundary is placed across it. Models without
  // such ops run once.

  /// Ops whose result size depends on tensor contents, and the dimension
  /// that grows.
  static std::optional<int64_t> dataDependentDim(jit::Node *node,
                                                 const jit::Stack &inputs) {
    static const std::set<std::string> kRows = {
        "aten::nonzero",    "aten::masked_select",
        "aten::argwhere",   "aten::unique_consecutive",
        "aten::_unique2",   "aten::_unique",
        "aten::unique_dim", "aten::repeat_interleave"};
    std::string kind = node->kind().toQualString();
    if (kRows.count(kind))
      return 0;
    if (kind != "aten::index" || inputs.size() < 2 || !inputs[1].isList())
      return std::nullopt;
    // Only a boolean (or uint8) mask makes the size depend on the data;
    // integer index tensors give their own, static, shape. The indexed
    // dimensions become one block of the result, where the first of them
    // was when they are adjacent, else in front.
    std::vector<int64_t> indexed;
    bool mask = false;
    int64_t position = 0;
    for (const c10::IValue &index : inputs[1].toListRef()) {
      if (!index.isNone()) {
        indexed.push_back(position);
        if (index.isTensor() && (index.toTensor().scalar_type() == at::kBool ||
                                 index.toTensor().scalar_type() == at::kByte))
          mask = true;
      }
      ++position;
    }
    if (!mask)
      return std::nullopt;
    bool adjacent = indexed.back() - indexed.front() + 1 ==
                    static_cast<int64_t>(indexed.size());
    return adjacent ? indexed.front() : 0;
  }

  const c10::IValue &shadowOf(jit::Value *v) {
    auto it = shadow.find(v);
    return it != shadow.end() ? it->second : values.at(v);
  }

  static bool sameShape(const c10::IValue &a, const c10::IValue &b) {
    if (a.isTensor() && b.isTensor())
      return !a.toTensor().defined() || !b.toTensor().defined()
                 ? a.toTensor().defined() == b.toTensor().defined()
                 : a.toTensor().sizes() == b.toTensor().sizes();
    if (a.isList() && b.isList()) {
      auto la = a.toListRef(), lb = b.toListRef();
      if (la.size() != lb.size())
        return false;
      for (size_t i = 0; i < la.size(); ++i)
        if (!sameShape(la[i], lb[i]))
          return false;
      return true;
    }
    if (a.isTuple() && b.isTuple()) {
      const auto &ea = a.toTupleRef().elements();
      const auto &eb = b.toTupleRef().elements();
      if (ea.size() != eb.size())
        return false;
      for (size_t i = 0; i < ea.size(); ++i)
        if (!sameShape(ea[i], eb[i]))
          return false;
      return true;
    }
    return true;
  }

  /// Whether a shape-derived value (a size, a count, a list of sizes, a
  /// 0-d tensor made from one) differs between the two runs.
  bool shadowDiffers(jit::Value *v) {
    if (opaque.count(v))
      return true;
    auto it = shadow.find(v);
    if (it == shadow.end())
      return false;
    const c10::IValue &a = values.at(v), &b = it->second;
    if (a.isTensor() && b.isTensor())
      return a.toTensor().sizes() != b.toTensor().sizes() ||
             (a.toTensor().numel() == 1 &&
              !at::equal(a.toTensor(), b.toTensor()));
    if (a.isTensor() || b.isTensor())
      return true;
    return !(a == b);
  }

  void copyShadow(jit::Value *from, jit::Value *to) {
    if (auto it = shadow.find(from); it != shadow.end())
      shadow[to] = it->second;
    if (opaque.count(from))
      opaque.insert(to);
  }

  void executeShadow(jit::Node *node) {
    bool any = false, shapes = false, blind = false;
    for (jit::Value *input : node->inputs()) {
      blind |= opaque.count(input) != 0;
      if (auto it = shadow.find(input); it != shadow.end()) {
        any = true;
        shapes |= !sameShape(it->second, values.at(input));
      }
    }
    auto blindOutputs = [&] {
      for (jit::Value *output : node->outputs())
        opaque.insert(output);
    };
    if (blind)
      return blindOutputs();
    static const std::set<std::string> kScalarOfTensor = {
        "aten::item", "aten::Int", "aten::Float", "aten::_local_scalar_dense",
        "aten::ScalarImplicit"};
    if (node->outputs().size() == 1 && node->inputs().size() == 1 &&
        dataDependent.count(node->input()) &&
        kScalarOfTensor.count(node->kind().toQualString())) {
      const c10::IValue &v = values.at(node->output());
      if (v.isInt())
        shadow[node->output()] = v.toInt() + 1;
      else if (v.isDouble())
        shadow[node->output()] = v.toDouble() + 1;
      return;
    }
    jit::Stack stack;
    for (jit::Value *input : node->inputs())
      stack.push_back(shadowOf(input));
    wrapNumbers(node, stack);
    std::optional<int64_t> grows = dataDependentDim(node, stack);
    if (!any && !grows)
      return;
    // An in-place op must not write into a tensor the main run owns.
    std::string name = node->kind().toUnqualString();
    if (!stack.empty() && stack[0].isTensor() && name.size() > 1 &&
        name.back() == '_' && !shadow.count(node->inputs()[0]))
      stack[0] = stack[0].toTensor().clone();
    try {
      runNode(node, stack);
    } catch (const std::exception &) {
      if (shapes)
        blindOutputs(); // cannot tell which sizes follow the data
      return;
    }
    if (stack.size() != node->outputs().size())
      return;
    if (grows && stack[0].isTensor()) {
      const at::Tensor &main = values.at(node->outputs()[0]).toTensor();
      at::Tensor t = stack[0].toTensor();
      int64_t d = *grows < t.dim() ? *grows : 0;
      if (t.dim() > 0 && t.sizes() == main.sizes()) {
        std::vector<int64_t> row(t.sizes().begin(), t.sizes().end());
        row[d] = 1;
        stack[0] = at::cat({t, at::zeros(row, t.options())}, d);
      }
    }
    for (size_t i = 0; i < stack.size(); ++i)
      shadow[node->outputs()[i]] = stack[i];
  }

  /// Marks the op of each result whose shape differs between the runs.
  void markDataDependentShapes(jit::Node *node) {
    std::map<Operation *, std::vector<int64_t>> marked;
    for (jit::Value *output : node->outputs()) {
      auto m = mapped.find(output);
      if (m == mapped.end() || !isa<td::BaseTensorType>(m->second.getType()))
        continue;
      bool differs = opaque.count(output) != 0;
      if (auto it = shadow.find(output); !differs && it != shadow.end())
        differs = !sameShape(it->second, values.at(output));
      auto result = dyn_cast<OpResult>(m->second);
      if (differs && result)
        marked[result.getOwner()].push_back(result.getResultNumber());
    }
    for (auto &[op, results] : marked)
      op->setAttr("pippy.data_dependent_shape",
                  builder.getDenseI64ArrayAttr(results));
  }

  //===--------------------------------------------------------------------===//
  // Aliasing: in-place writes through views
  //===--------------------------------------------------------------------===//

  /// A tensor of the example run. The weak reference keeps its TensorImpl's
  /// address from being reused without keeping its memory alive.
  struct Tracked {
    explicit Tracked(const at::Tensor &t)
        : impl(t.getIntrusivePtr()), sizes(t.sizes().begin(), t.sizes().end()) {
    }
    c10::weak_intrusive_ptr<c10::TensorImpl> impl;
    std::vector<int64_t> sizes;
    Value current;               // the IR value with its contents
    Tracked *parent = nullptr;   // the tensor this one views, if invertible
    Operation *viewOp = nullptr; // the op that made it from `parent`
    std::vector<int64_t> dims;   // a permute's dims
    bool written = false;  // `current` overrides `mapped` for its jit values
    bool stale = false;    // remade from `parent` when next read
    std::string clobbered; // overwritten by this op through a view that
                           // cannot be replayed
  };

  Tracked *trackedOf(jit::Value *value) {
    if (tracked.empty())
      return nullptr;
    auto v = values.find(value);
    if (v == values.end() || !v->second.isTensor())
      return nullptr;
    auto t = tracked.find(v->second.toTensor().unsafeGetTensorImpl());
    return t == tracked.end() ? nullptr : t->second;
  }

  /// View ops whose writes can be replayed on the viewed tensor.
  static bool isInvertibleView(StringRef op) {
    static const std::set<std::string> kNames = {
        "torch.aten.select.int",
        "torch.aten.slice.Tensor",
        "torch.aten.narrow",
        "torch.aten.diagonal",
        "torch.aten.transpose.int",
        "torch.aten.t",
        "torch.aten.permute",
        "torch.aten.view",
        "torch.aten.reshape",
        "torch.aten._unsafe_view",
        "torch.aten.flatten.using_ints",
        "torch.aten.unflatten.int",
        "torch.aten.squeeze",
        "torch.aten.squeeze.dim",
        "torch.aten.unsqueeze",
        "torch.aten.view_as",
        "torch.aten.reshape_as"};
    return kNames.count(op.str()) != 0;
  }

  void track(jit::Value *value, jit::Node *node) {
    auto v = values.find(value);
    auto m = mapped.find(value);
    if (v == values.end() || m == mapped.end() || !v->second.isTensor())
      return;
    const at::Tensor &t = v->second.toTensor();
    if (!t.defined() || !t.has_storage() || t.is_sparse())
      return;
    auto [it, inserted] = tracked.try_emplace(t.unsafeGetTensorImpl());
    if (!inserted)
      return;
    trackedArena.push_back(std::make_unique<Tracked>(t));
    Tracked &entry = *trackedArena.back();
    it->second = &entry;
    entry.current = m->second;
    auto &users = storageUsers[t.storage().unsafeGetStorageImpl()];
    // A storage freed earlier may have left its address to this one.
    llvm::erase_if(users, [](Tracked *u) { return u->impl.expired(); });
    users.push_back(&entry);
    // A view the importer can invert records what it views.
    Operation *op = m->second.getDefiningOp();
    if (!node || !op || op->getNumOperands() == 0 ||
        !isInvertibleView(op->getName().getStringRef()))
      return;
    Tracked *parent = trackedOf(node->inputs()[0]);
    if (!parent || !values.at(node->inputs()[0])
                        .toTensor()
                        .storage()
                        .is_alias_of(t.storage()))
      return;
    if (op->getName().getStringRef() == "torch.aten.permute")
      entry.dims = values.at(node->inputs()[1]).toIntVector();
    if (op->getName().getStringRef() == "torch.aten.narrow" &&
        (!values.at(node->inputs()[2]).isInt() ||
         !values.at(node->inputs()[3]).isInt()))
      return;
    if (op->getName().getStringRef() == "torch.aten.narrow")
      entry.dims = {values.at(node->inputs()[2]).toInt(),
                    values.at(node->inputs()[3]).toInt()};
    entry.parent = parent;
    entry.viewOp = op;
  }

  /// Whether two tensors share an element.
  static bool overlaps(const at::Tensor &a, const at::Tensor &b) {
    if (!a.storage().is_alias_of(b.storage()))
      return false;
    if (a.numel() == 0 || b.numel() == 0)
      return false;
    if (a.element_size() != b.element_size())
      return true;
    int64_t n = a.storage().nbytes() / a.element_size();
    at::Tensor mask = at::zeros({n}, at::kBool);
    mask.as_strided(a.sizes(), a.strides(), a.storage_offset()).fill_(true);
    return mask.as_strided(b.sizes(), b.strides(), b.storage_offset())
        .any()
        .item<bool>();
  }

  /// An in-place write must not reach a parameter's memory through a view.
  void checkNotParameterMemory(jit::Node *node, jit::Value *written) {
    auto v = values.find(written);
    if (v == values.end() || !v->second.isTensor())
      return;
    const at::Tensor &t = v->second.toTensor();
    for (const auto &[name, p] : parameterTensors)
      if (overlaps(p, t))
        failWriteTo(node, name, " through a view of it");
  }

  /// Parameters and buffers are read-only: a stage program is a function of
  /// them, the same for every micro-batch.
  [[noreturn]] void failWriteTo(jit::Node *node, const std::string &name,
                                const std::string &how,
                                const std::string &kind = "in-place op ") {
    bool buffer = llvm::is_contained(buffers, name);
    fail(kind + describe(node) + " writes to " +
         (buffer ? "buffer '" : "parameter '") + name + "'" + how +
         (buffer ? "; buffers are read-only (a BatchNorm in training mode "
                   "updates its running statistics, spectral_norm its "
                   "power-iteration vectors: export the model in eval mode)"
                 : ""));
  }

  /// The IR value with a tracked tensor's contents, remade if stale.
  Value resolve(Tracked &entry, jit::Node *user) {
    if (!entry.clobbered.empty())
      fail("a tensor read by " +
           (user ? describe(user) : std::string("the output")) +
           " was overwritten by in-place op " + entry.clobbered +
           " through a view that pippy-import cannot replay (split, "
           "chunk, unbind, expand, as_strided, ...); write that op out of "
           "place");
    if (entry.stale) {
      Value parent = resolve(*entry.parent, user);
      Operation *copy = builder.clone(*entry.viewOp);
      copy->setOperand(0, parent);
      entry.current = copy->getResult(0);
      entry.stale = false;
    }
    return entry.current;
  }

  Value emitInt(int64_t v, Location loc) {
    return emitConstant(c10::IValue(v), loc);
  }

  /// `base` with `view`'s elements replaced by `src` (the scatter form of
  /// the view op that made `view` from `base`).
  Value emitScatter(Tracked &view, Value base, Value src, Location loc) {
    Operation *op = view.viewOp;
    StringRef name = op->getName().getStringRef();
    auto create = [&](StringRef opName, ArrayRef<Value> operands) {
      OperationState state(loc, opName);
      state.addOperands(operands);
      state.addTypes(base.getType());
      return builder.create(state)->getResult(0);
    };
    auto operand = [&](unsigned i) { return op->getOperand(i); };
    if (name == "torch.aten.select.int")
      return create("torch.aten.select_scatter",
                    {base, src, operand(1), operand(2)});
    if (name == "torch.aten.slice.Tensor")
      return create(
          "torch.aten.slice_scatter",
          {base, src, operand(1), operand(2), operand(3), operand(4)});
    if (name == "torch.aten.narrow")
      return create("torch.aten.slice_scatter",
                    {base, src, operand(1), emitInt(view.dims[0], loc),
                     emitInt(view.dims[0] + view.dims[1], loc),
                     emitInt(1, loc)});
    if (name == "torch.aten.diagonal")
      return create("torch.aten.diagonal_scatter",
                    {base, src, operand(1), operand(2), operand(3)});
    if (name == "torch.aten.transpose.int")
      return create("torch.aten.transpose.int", {src, operand(1), operand(2)});
    if (name == "torch.aten.t")
      return create("torch.aten.t", {src});
    if (name == "torch.aten.permute") {
      int64_t rank = static_cast<int64_t>(view.dims.size());
      std::vector<int64_t> inverse(rank);
      for (int64_t i = 0; i < rank; ++i)
        inverse[(view.dims[i] % rank + rank) % rank] = i;
      return create("torch.aten.permute",
                    {src, emitConstant(c10::IValue(inverse), loc)});
    }
    // The rest keep the element order: reshape back.
    return create("torch.aten.reshape",
                  {src, emitConstant(c10::IValue(view.parent->sizes), loc)});
  }

  /// After `node` wrote `result` into `written`: the written tensor, then
  /// every tensor it views up to the root, get their new values; the other
  /// tensors overlapping the written memory are remade or poisoned.
  void recordWrite(jit::Node *node, jit::Value *writtenValue, Value result) {
    Tracked *written = trackedOf(writtenValue);
    if (!written)
      return;
    Location loc = result.getLoc();
    std::set<Tracked *> fresh;
    Tracked *cur = written;
    Value value = result;
    for (;;) {
      cur->current = value;
      cur->written = true;
      cur->stale = false;
      fresh.insert(cur);
      if (!cur->parent)
        break;
      Value before = resolve(*cur->parent, node);
      value = emitScatter(*cur, before, value, loc);
      cur = cur->parent;
    }
    Tracked *root = cur;
    auto rootOf = [](Tracked *t) {
      while (t->parent)
        t = t->parent;
      return t;
    };
    const at::Tensor &t = values.at(writtenValue).toTensor();
    for (Tracked *other : storageUsers[t.storage().unsafeGetStorageImpl()]) {
      if (fresh.count(other))
        continue;
      // A tensor that is gone cannot be read again.
      c10::intrusive_ptr<c10::TensorImpl> alive = other->impl.lock();
      if (!alive || !overlaps(at::Tensor(alive), t))
        continue;
      other->written = true;
      if (rootOf(other) == root)
        other->stale = true;
      else if (other->clobbered.empty())
        other->clobbered = describe(node);
    }
  }

  void writeWeights() {
    st::Writer writer;
    for (const std::string &name : parameterOrder) {
      at::Tensor t = parameters.at(name).detach().contiguous();
      std::optional<st::DType> dtype = ::pippy::toStorageDType(t.scalar_type());
      if (!dtype)
        fail("parameter '" + name + "' has dtype " +
             std::string(c10::toString(t.scalar_type())) +
             ", which safetensors cannot store");
      std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
      ArrayRef<uint8_t> bytes(static_cast<const uint8_t *>(t.data_ptr()),
                              t.numel() * t.element_size());
      if (llvm::Error error = writer.add(name, *dtype, sizes, bytes))
        fail(llvm::toString(std::move(error)));
    }
    auto writeList = [&](const char *key,
                         const std::vector<std::string> &names) {
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
    if (llvm::Error error = writer.write(options.weightsPath))
      fail("cannot write weights: " + llvm::toString(std::move(error)));
  }

  MLIRContext &context;
  const ImportOptions &options;
  OpBuilder builder;
  int64_t integerFill;

  std::unordered_map<jit::Value *, c10::IValue> values;
  std::unordered_map<jit::Value *, Value> mapped;
  std::set<jit::Value *> dataDependent;
  std::unordered_map<jit::Value *, std::string> attrPaths;
  std::map<std::string, at::Tensor> parameters;
  std::vector<std::string> parameterOrder;
  std::vector<std::string> buffers;
  std::vector<std::string> frozen;
  std::map<std::string, std::string> aliases;
  std::map<std::string, Value> paramValues;
  Operation *lastParam = nullptr;
  std::string currentPath;
  std::unordered_map<jit::Value *, c10::IValue> shadow;
  std::set<jit::Value *> opaque; // the shadow run failed downstream of a
                                 // size difference
  std::vector<std::unique_ptr<Tracked>> trackedArena;
  std::unordered_map<c10::TensorImpl *, Tracked *> tracked;
  std::unordered_map<c10::StorageImpl *, std::vector<Tracked *>> storageUsers;
  std::map<std::string, at::Tensor> parameterTensors;
};

} // namespace

namespace pippy {
llvm::Expected<OwningOpRef<ModuleOp>>
importTorchScript(MLIRContext &context, const ImportOptions &options) {
  context.loadDialect<func::FuncDialect, td::TorchDialect, pd::PippyDialect>();
  // Integer inputs are zeros, which every embedding accepts; if the model
  // cannot run on zeros (a division by an input, an index `tokens - 1`),
  // ones are tried before giving up.
  try {
    bool integerInputs = llvm::any_of(options.inputs, [](const auto &shape) {
      return !at::isFloatingType(parseDtype(shape.dtype));
    });
    try {
      return Importer(context, options, 0).run();
    } catch (const ImportError &zeros) {
      if (!zeros.running || !integerInputs)
        throw;
      try {
        return Importer(context, options, 1).run();
      } catch (const ImportError &ones) {
        if (!ones.running)
          throw;
        return llvm::createStringError(
            zeros.message +
            " (integer inputs of zeros; with ones: " + ones.message + ")");
      }
    }
  } catch (const ImportError &e) {
    return llvm::createStringError(e.message);
  } catch (const c10::Error &e) {
    return llvm::createStringError(e.what_without_backtrace());
  } catch (const std::exception &e) {
    return llvm::createStringError(e.what());
  }
}
} // namespace pippy
