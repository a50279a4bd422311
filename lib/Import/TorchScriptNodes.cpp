//===- TorchScriptNodes.cpp - run and emit one TorchScript node -----------===//
//
// The TorchScript importer's node-by-node walk of the inlined forward graph:
// each node runs once on the example run's values (the executor's wrapped
// numbers included), then becomes IR: a constant, a parameter read, a
// container op, a submodule call imported in place at the callee's module
// path, or the `torch` op of its schema. Shape arithmetic with static
// shapes is folded into constants; in-place and `out=` ops become their
// functional form.
//
//===----------------------------------------------------------------------===//

#include "TorchScriptImpl.h"

#include "pippy/Analysis/GraphIR.h"
#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Dialect/Torch/TorchDialect.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <torch/csrc/jit/api/function_impl.h>

using namespace mlir;
namespace td = ::mlir::torch;
namespace pd = ::mlir::pippy;

namespace pippy::torchscript {

/// Ops whose result depends only on shapes, never on tensor contents.
static bool isShapeOnly(c10::Symbol kind) {
  static const std::set<std::string> kNames = {
      "aten::size",  "aten::dim", "aten::numel", "prim::device",
      "prim::dtype", "aten::len", "prim::layout"};
  return kNames.count(kind.toQualString()) != 0;
}

Value Importer::lookup(jit::Value *value, jit::Node *user) {
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
void Importer::runNode(jit::Node *node, jit::Stack &stack) {
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
bool Importer::isNumberOperand(jit::Node *node, size_t index) {
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
const c10::FunctionSchema *Importer::functionalOverload(jit::Node *node,
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

/// Renames in-place op `node` (`name` already without its underscore) to
/// its functional form: the overload of the same name, else one taking the
/// same arguments (`bernoulli_.float` is `bernoulli.p`), else the functional
/// operator PyTorch 2 added, which pippy-run provides (`normal_` is
/// `normal_functional`). False if there is none.
bool Importer::toFunctional(jit::Node *node, const std::string &ns,
                            std::string &name, std::string &overload) {
  const c10::FunctionSchema &own = node->schema();
  auto ops =
      jit::getAllOperatorsFor(c10::Symbol::fromQualString(ns + "::" + name));
  for (const auto &op : ops)
    if (op->schema().overload_name() == own.overload_name())
      return true;
  for (const auto &op : ops) {
    const c10::FunctionSchema &other = op->schema();
    if (other.is_mutable() ||
        other.arguments().size() != own.arguments().size())
      continue;
    bool match = true;
    for (size_t a = 0; a < own.arguments().size() && match; ++a)
      match = a == 0 ||
              (own.arguments()[a].name() == other.arguments()[a].name() &&
               *own.arguments()[a].type() == *other.arguments()[a].type());
    if (match) {
      overload = other.overload_name();
      return true;
    }
  }
  if (ns == "aten" && name == "normal" && overload.empty()) {
    name = "normal_functional";
    return true;
  }
  return false;
}

/// The 0-d constants TorchScript runs as numbers, made wrapped numbers.
void Importer::wrapNumbers(jit::Node *node, jit::Stack &stack) {
  for (size_t i = 0; i < stack.size(); ++i)
    if (isNumberOperand(node, i)) {
      at::Tensor number = stack[i].toTensor().clone();
      number.unsafeGetTensorImpl()->set_wrapped_number(true);
      stack[i] = number;
    }
}

void Importer::execute(jit::Node *node) {
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

void Importer::importNode(jit::Node *node, const std::string &path) {
  importNodeBody(node, path);
  for (jit::Value *output : node->outputs())
    track(output, node);
  if (node->kind() != c10::prim::CallMethod)
    markDataDependentShapes(node);
}

void Importer::importNodeBody(jit::Node *node, const std::string &path) {
  currentPath = path;
  c10::Symbol kind = node->kind();
  Location loc = currentLocation();

  if (kind == c10::prim::CallMethod) {
    importCall(node);
    return;
  }

  if (kind == c10::prim::Constant) {
    importConstant(node, loc);
    return;
  }

  if (kind == c10::prim::GetAttr) {
    importGetAttr(node, loc);
    return;
  }

  static const c10::Symbol pipeSplit =
      c10::Symbol::fromQualString("pippy::_pipe_split");
  if (kind == pipeSplit) {
    pd::SplitPointOp::create(builder, loc);
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
  bool dependent = propagateDataDependence(node);

  // Shape arithmetic with static shapes: fold to constants.
  if (!dependent && node->outputs().size() == 1 && isFoldable(node)) {
    if (Value constant = emitConstant(values.at(node->output()), loc)) {
      mapped[node->output()] = constant;
      return;
    }
  }

  if (isContainerOp) {
    importContainerOp(node, loc);
    return;
  }
  importOperator(node, loc);
}

void Importer::importConstant(jit::Node *node, Location loc) {
  c10::IValue value = *jit::toIValue(node->output());
  values[node->output()] = value;
  Value constant = emitConstant(value, loc);
  if (!constant)
    fail("unsupported constant of type " + node->output()->type()->str() +
         " in " + describe(node));
  mapped[node->output()] = constant;
}

/// Whether `node`'s outputs depend on tensor data, which marks them so. A
/// shape-only op depends on the data when the shadow run disagrees.
bool Importer::propagateDataDependence(jit::Node *node) {
  bool dependent = false;
  if (!isShapeOnly(node->kind()))
    for (jit::Value *input : node->inputs())
      dependent |= dataDependent.count(input) != 0;
  else
    for (jit::Value *output : node->outputs())
      dependent |= shadowDiffers(output);
  if (dependent)
    for (jit::Value *output : node->outputs())
      dataDependent.insert(output);
  return dependent;
}

/// `prim::ListConstruct`, `prim::TupleConstruct` and their unpacking.
void Importer::importContainerOp(jit::Node *node, Location loc) {
  c10::Symbol kind = node->kind();
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
  // prim::TupleUnpack or prim::ListUnpack.
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
}

/// Imports a submodule call in place, at the callee's module path.
void Importer::importCall(jit::Node *node) {
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
bool Importer::isFoldable(jit::Node *node) {
  const c10::IValue &value = values.at(node->output());
  if (value.isInt() || value.isDouble() || value.isBool() ||
      value.isIntList() || value.isDoubleList() || value.isBoolList())
    return true;
  return value.isTensor() && value.toTensor().dim() == 0;
}

void Importer::importGetAttr(jit::Node *node, Location loc) {
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
      auto param = pd::ParamOp::create(builder, paramLoc,
                                       getTensorType(parameters.at(canonical)),
                                       canonical);
      lastParam = param;
      it = paramValues.emplace(canonical, param.getResult()).first;
    }
    // A buffer this forward assigned already reads as its new value.
    auto assigned = assignedBuffers.find(canonical);
    mapped[node->output()] =
        assigned != assignedBuffers.end() ? assigned->second : it->second;
    parameterTensors.emplace(canonical, value.toTensor());
    return;
  }
  Value constant = emitConstant(value, loc);
  if (!constant)
    fail("attribute '" + path + "' of unsupported kind read by " +
         describe(node));
  mapped[node->output()] = constant;
}

/// What an operator node writes into, resolved: an in-place op becomes its
/// functional form and an `out=` op its functional overload (`name` and
/// `overload` change), and later uses of the written tensor see the result.
Importer::OperatorWrite Importer::resolveWrite(jit::Node *node,
                                               const std::string &ns,
                                               std::string &name,
                                               std::string &overload) {
  OperatorWrite write;
  const c10::FunctionSchema &schema = node->schema();
  bool inPlace = name.size() > 1 && name.back() == '_' &&
                 !(name.size() > 4 && name.rfind("__", 0) == 0);
  if (inPlace) {
    write.written = node->inputs()[0];
    if (attrPaths.count(write.written)) {
      write.assignedBuffer = canonicalName(attrPaths[write.written]);
      if (!llvm::is_contained(buffers, write.assignedBuffer))
        failWriteTo(node, write.assignedBuffer, "");
    } else {
      checkNotParameterMemory(node, write.written);
    }
    name.pop_back();
    if (!toFunctional(node, ns, name, overload))
      fail(describe(node) + " is in place, and its operator has no "
                            "functional form with the same arguments");
    return write;
  }
  std::vector<size_t> outArgs;
  const auto &args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].alias_info() && args[i].alias_info()->isWrite())
      outArgs.push_back(i);
  if (outArgs.empty())
    return write;
  if (outArgs.size() != 1)
    fail(describe(node) + " writes into " + std::to_string(outArgs.size()) +
         " of its arguments; pippy-import takes ops that write into one");
  write.outArg = outArgs[0];
  write.written = node->inputs()[outArgs[0]];
  if (attrPaths.count(write.written))
    failWriteTo(node, canonicalName(attrPaths[write.written]), "", "out= op ");
  checkNotParameterMemory(node, write.written);
  const c10::FunctionSchema *functional = functionalOverload(node, outArgs[0]);
  if (!functional)
    fail(describe(node) + " writes its result into an existing tensor "
                          "(out=), and its operator has no functional "
                          "overload with the other arguments");
  overload = functional->overload_name();
  return write;
}

/// The operands of an operator node's op, without its `out=` argument; a
/// number operand is a fresh literal marked for the runtime, as execute()
/// ran it.
SmallVector<Value> Importer::operatorOperands(jit::Node *node,
                                              std::optional<size_t> outArg) {
  SmallVector<Value> operands;
  for (auto [i, input] : llvm::enumerate(node->inputs())) {
    if (outArg && i == *outArg)
      continue;
    if (isNumberOperand(node, i)) {
      Value literal =
          emitTensorLiteral(values.at(input).toTensor(), currentLocation());
      literal.getDefiningOp()->setAttr(::pippy::kWrappedNumberAttr,
                                       builder.getUnitAttr());
      operands.push_back(literal);
      continue;
    }
    operands.push_back(lookup(input, node));
  }
  return operands;
}

void Importer::importOperator(jit::Node *node, Location loc) {
  const c10::FunctionSchema &schema = node->schema();
  std::string ns = schema.name().substr(0, schema.name().find("::"));
  std::string name = schema.name().substr(ns.size() + 2);
  std::string overload = schema.overload_name();
  OperatorWrite write = resolveWrite(node, ns, name, overload);
  SmallVector<Value> operands = operatorOperands(node, write.outArg);
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
  // A random op's stream: its place in the imported graph, which splitting
  // does not change.
  if (::pippy::isRandomOp(name))
    op->setAttr(::pippy::kRandomStreamAttr,
                builder.getI64IntegerAttr(nextRandomStream++));
  for (size_t i = 0; i < node->outputs().size(); ++i)
    mapped[node->outputs()[i]] = op->getResult(i);
  if (write.written) {
    mapped[write.written] = op->getResult(0);
    values[write.written] = values.at(node->outputs()[0]);
    recordWrite(node, write.written, op->getResult(0));
  }
  if (!write.assignedBuffer.empty())
    assignBuffer(node, write.assignedBuffer, op->getResult(0), loc);
}

/// `buffer.op_(...)` while training: the buffer takes the functional op's
/// result for the forwards that follow (`pippy.assign`), and this forward
/// reads that result from here on.
void Importer::assignBuffer(jit::Node *node, const std::string &buffer,
                            Value value, Location loc) {
  Value param = paramValues.at(buffer);
  if (param.getType() != value.getType())
    fail(describe(node) + " gives buffer '" + buffer +
         "' a value of another "
         "type than its own");
  pd::AssignOp::create(builder, loc, param, value);
  assignedBuffers[buffer] = value;
}

} // namespace pippy::torchscript
