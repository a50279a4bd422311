//===- Program.cpp - the stage interpreter --------------------------------===//
//
// Loads a program of a stage executable (resolving each operator once and
// binding each call's arguments to the running schema by name) and runs it.
//
//===----------------------------------------------------------------------===//

#include "pippy/Runtime/Program.h"

#include "ExtraOps.h"
#include "WeightGradients.h"

#include "pippy/Executable/Format.h"
#include "pippy/Support/TensorDTypes.h"

#include <ATen/ATen.h>
#include <torch/csrc/api/include/torch/version.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>

namespace pippy {

TensorSpec toTensorSpec(const exe::TensorSpec &spec) {
  TensorSpec result;
  result.sizes.assign(spec.sizes()->begin(), spec.sizes()->end());
  result.dtype = toScalarType(spec.dtype());
  return result;
}

std::string specText(const TensorSpec &spec) {
  std::string text = c10::toString(spec.dtype) + std::string("[");
  for (size_t i = 0; i < spec.sizes.size(); ++i)
    text += (i ? ", " : "") + std::to_string(spec.sizes[i]);
  return text + "]";
}

/// Builds a Program from its executable form.
class ProgramLoader {
public:
  ProgramLoader(const exe::Program &source, const std::string &stage,
                Program::Semantics semantics)
      : source(source), stage(stage), semantics(semantics) {}

  Program load() {
    program.numSlots = source.num_slots();
    program.constantSlots.resize(program.numSlots);
    program.isConstant.assign(program.numSlots, false);
    program.argSlots.assign(source.arguments()->begin(),
                            source.arguments()->end());
    program.resultSlots.assign(source.results()->begin(),
                               source.results()->end());
    for (const exe::Parameter *param : *source.parameters()) {
      program.paramSlots.emplace_back(param->slot(), param->name()->str());
      program.paramSpecs.emplace_back(param->name()->str(),
                                      toTensorSpec(*param->spec()));
    }
    for (const exe::ConstantSlot *c : *source.constants()) {
      program.constantSlots[c->slot()] = constant(*c->value());
      program.isConstant[c->slot()] = true;
    }
    for (const flatbuffers::String *name : *source.counted_ops())
      program.countedOpNames.push_back(name->str());
    resolved.resize(source.operators()->size());
    for (const exe::Instruction *inst : *source.code()) {
      // Evaluation leaves buffers as they are.
      if (inst->kind() == exe::InstructionKind::Assign &&
          semantics == Program::Semantics::Evaluation)
        continue;
      program.code.push_back(instruction(*inst));
    }
    return std::move(program);
  }

private:
  using Instruction = Program::Instruction;
  using Kind = Program::Kind;

  /// "stage 1: 'torch.aten.mm' at module 'h.0' (model.mlir:4:8)".
  std::string describe(const exe::Instruction &inst) const {
    std::string text = stage + ":";
    if (inst.kind() == exe::InstructionKind::Call)
      text +=
          " '" + source.operators()->Get(inst.op())->source_name()->str() + "'";
    std::string where = source.locations()->Get(inst.location())->str();
    if (where.empty())
      return text;
    return text + (inst.kind() == exe::InstructionKind::Call ? " at " : " ") +
           where;
  }

  c10::IValue constant(const exe::Constant &c) {
    switch (c.kind()) {
    case exe::ValueKind::Int:
      return c.int_value();
    case exe::ValueKind::Float:
      return c.float_value();
    case exe::ValueKind::Bool:
      return c.bool_value();
    case exe::ValueKind::Str:
      return c.str_value()->str();
    case exe::ValueKind::Device:
      try {
        return c10::Device(c.str_value()->str());
      } catch (const c10::Error &) {
        throw RuntimeError(stage + ": '" + c.str_value()->str() +
                           "' is not a device");
      }
    case exe::ValueKind::Tensor: {
      TensorSpec spec = toTensorSpec(*c.tensor());
      at::Tensor t =
          at::empty(spec.sizes, at::TensorOptions().dtype(spec.dtype));
      if (c.data()->size())
        std::memcpy(t.data_ptr(), c.data()->data(), c.data()->size());
      if (c.wrapped_number())
        t.unsafeGetTensorImpl()->set_wrapped_number(true);
      return t;
    }
    case exe::ValueKind::List: {
      c10::impl::GenericList list(elementType(c.element()));
      for (const exe::Constant *item : *c.items())
        list.push_back(constant(*item));
      return list;
    }
    default:
      return c10::IValue();
    }
  }

  static c10::TypePtr elementType(exe::ListElement element) {
    using E = exe::ListElement;
    switch (element) {
    case E::Tensor:
      return c10::TensorType::get();
    case E::Int:
      return c10::IntType::get();
    case E::Float:
      return c10::FloatType::get();
    case E::Bool:
      return c10::BoolType::get();
    case E::Number:
      return c10::NumberType::get();
    case E::OptionalTensor:
      return c10::OptionalType::create(c10::TensorType::get());
    case E::OptionalInt:
      return c10::OptionalType::create(c10::IntType::get());
    case E::OptionalFloat:
      return c10::OptionalType::create(c10::FloatType::get());
    case E::OptionalBool:
      return c10::OptionalType::create(c10::BoolType::get());
    case E::OptionalNumber:
      return c10::OptionalType::create(c10::NumberType::get());
    case E::OptionalAny:
      return c10::OptionalType::create(c10::AnyType::get());
    case E::Any:
      break;
    }
    return c10::AnyType::get();
  }

  int addConstant(c10::IValue value) {
    program.constantSlots.push_back(std::move(value));
    program.isConstant.push_back(true);
    return program.numSlots++;
  }

  Instruction instruction(const exe::Instruction &inst) {
    Instruction result;
    result.countedOp = inst.counted();
    result.randomStream = inst.random_stream();
    result.outputs.assign(inst.outputs()->begin(), inst.outputs()->end());
    switch (inst.kind()) {
    case exe::InstructionKind::BuildList:
      result.kind = Kind::BuildList;
      result.listElement = elementType(inst.element());
      result.inputs.assign(inst.inputs()->begin(), inst.inputs()->end());
      return result;
    case exe::InstructionKind::BuildTuple:
      result.kind = Kind::BuildTuple;
      result.inputs.assign(inst.inputs()->begin(), inst.inputs()->end());
      return result;
    case exe::InstructionKind::Unpack:
      result.kind = Kind::Unpack;
      result.inputs.assign(inst.inputs()->begin(), inst.inputs()->end());
      return result;
    case exe::InstructionKind::Assign:
      result.kind = Kind::Assign;
      result.inputs.assign(inst.inputs()->begin(), inst.inputs()->end());
      return result;
    case exe::InstructionKind::Call:
      break;
    }
    const c10::FunctionSchema &schema = resolve(inst, result);
    bind(inst, schema, result);
    return result;
  }

  /// The operator's schema; sets the instruction's kind and handle.
  const c10::FunctionSchema &resolve(const exe::Instruction &inst,
                                     Instruction &result) {
    const exe::Operator &op = *source.operators()->Get(inst.op());
    c10::OperatorName name(op.name()->str(), op.overload()->str());
    // Evaluation: a random op is its expected value (eval mode's
    // stochastic depth keeps every row, its noise is off).
    if (semantics == Program::Semantics::Evaluation)
      if (const auto *expected = rt::findExpectation(name)) {
        result.kind = Kind::Operator;
        result.operation = expected->operation;
        return expected->schema;
      }
    Resolved &r = resolved[inst.op()];
    if (!r.schema) {
      if (auto handle = c10::Dispatcher::singleton().findSchema(name)) {
        r.handle = handle;
        r.schema = &handle->schema();
      } else if (auto jitOp = ::torch::jit::findOperatorFor(name)) {
        r.operation = jitOp->getOperation();
        r.schema = &jitOp->schema();
      }
    }
    if (r.handle) {
      result.kind = Kind::Dispatch;
      result.handle = r.handle;
      return *r.schema;
    }
    if (r.schema) {
      result.kind = Kind::Operator;
      result.operation = r.operation;
      return *r.schema;
    }
    // pippy's own operators may have several lengths under one name.
    if (const auto *extra = rt::findExtraOperator(name, inst.args()->size())) {
      result.kind = Kind::Operator;
      result.operation = extra->operation;
      return extra->schema;
    }
    std::string full = op.name()->str();
    if (op.overload()->size())
      full += "." + op.overload()->str();
    throw RuntimeError(describe(inst) +
                       ": libtorch " TORCH_VERSION " has no operator " + full);
  }

  static std::string kindText(exe::ValueKind kind) {
    static const char *const names[] = {"a tensor", "an int",
                                        "a float",  "a bool",
                                        "none",     "a str",
                                        "a device", "a list",
                                        "a tuple",  "a value of another type"};
    return names[static_cast<int>(kind)];
  }

  /// Whether a value of `kind` may be passed where the schema expects
  /// `expected`.
  static bool isCompatible(exe::ValueKind kind, const c10::TypePtr &expected) {
    c10::TypePtr target = expected;
    if (auto optional = target->cast<c10::OptionalType>()) {
      if (kind == exe::ValueKind::None)
        return true;
      target = optional->getElementType();
    }
    bool wantsTensor = target->kind() == c10::TypeKind::TensorType;
    if (wantsTensor != (kind == exe::ValueKind::Tensor))
      return false;
    if (target->kind() == c10::TypeKind::ListType)
      return kind == exe::ValueKind::List;
    return true;
  }

  /// Binds the call's arguments to `schema`'s, in its order: by name, or
  /// by position when unnamed; the schema's defaults fill the rest.
  void bind(const exe::Instruction &inst, const c10::FunctionSchema &schema,
            Instruction &result) {
    const auto &params = schema.arguments();
    auto schemaText = [&] {
      std::ostringstream os;
      os << schema;
      return os.str();
    };
    if (inst.args()->size() > params.size() ||
        schema.returns().size() != inst.outputs()->size())
      throw RuntimeError(
          describe(inst) + ": has " + std::to_string(inst.args()->size()) +
          " operands and " + std::to_string(inst.outputs()->size()) +
          " results but the schema is " + schemaText());
    std::vector<int> slots(params.size(), -1);
    std::vector<int> given(params.size(), -1); // which operand, for messages
    for (uint32_t i = 0; i < inst.args()->size(); ++i) {
      const exe::Argument *arg = inst.args()->Get(i);
      size_t index = i;
      if (arg->name()->size()) {
        auto it = std::find_if(params.begin(), params.end(),
                               [&](const c10::Argument &p) {
                                 return p.name() == arg->name()->str();
                               });
        if (it == params.end())
          throw RuntimeError(describe(inst) + ": operand " + std::to_string(i) +
                             " is argument '" + arg->name()->str() +
                             "', which the schema " + schemaText() +
                             " does not have");
        index = static_cast<size_t>(it - params.begin());
      }
      if (slots[index] >= 0)
        throw RuntimeError(describe(inst) + ": argument '" +
                           params[index].name() + "' is given twice");
      slots[index] = arg->slot();
      given[index] = static_cast<int>(i);
    }
    for (size_t i = 0; i < params.size(); ++i) {
      if (slots[i] < 0) {
        if (!params[i].default_value())
          throw RuntimeError(describe(inst) + ": argument '" +
                             params[i].name() + "' of " + schemaText() +
                             " is missing and has no default");
        slots[i] = addConstant(*params[i].default_value());
        continue;
      }
      exe::ValueKind kind = source.slot_kinds()->Get(slots[i]);
      if (!isCompatible(kind, params[i].type()))
        throw RuntimeError(
            describe(inst) + ": operand " + std::to_string(given[i]) + " ('" +
            params[i].name() + "') is " + kindText(kind) +
            " but the schema expects " + params[i].type()->str());
      slots[i] = adaptConstant(inst, params[i], kind, slots[i], given[i]);
    }
    result.inputs = std::move(slots);
  }

  /// Constants that libtorch 1.13's schema takes in another form.
  int adaptConstant(const exe::Instruction &inst, const c10::Argument &param,
                    exe::ValueKind kind, int slot, int operand) {
    c10::TypePtr want = param.type();
    if (auto optional = want->cast<c10::OptionalType>())
      want = optional->getElementType();
    const c10::IValue &value = program.constantSlots[slot];
    bool constant = program.isConstant[slot];
    // Newer PyTorch widened some int arguments to Scalar (var's and std's
    // `correction`), so Torch-MLIR can give a float where libtorch 1.13
    // takes an int: a whole-number constant is passed as that int.
    if (want->kind() == c10::TypeKind::IntType &&
        kind == exe::ValueKind::Float) {
      bool whole = constant && value.isDouble() &&
                   value.toDouble() == std::trunc(value.toDouble()) &&
                   std::abs(value.toDouble()) < 9.0e15;
      if (!whole)
        throw RuntimeError(
            describe(inst) + ": operand " + std::to_string(operand) + " ('" +
            param.name() +
            "') is a float, which libtorch " TORCH_VERSION
            " takes only as an int; pippy-run passes a constant whole number "
            "as one" +
            (constant && value.isDouble()
                 ? ", and " + std::to_string(value.toDouble()) + " is not"
                 : ", and this one is computed"));
      return addConstant(static_cast<int64_t>(value.toDouble()));
    }
    // `Embedding(sparse=True)` and `EmbeddingBag(sparse=True)` would give
    // their table a sparse gradient, which gradient sums between stages,
    // tied groups and checkpoints do not take: the table gets the dense
    // gradient of the same values instead (what SGD adds is the same).
    if (param.name() == "sparse" &&
        param.type()->kind() == c10::TypeKind::BoolType && constant &&
        value.isBool() && value.toBool())
      return addConstant(false);
    // Evaluation: running statistics instead of batch statistics, no
    // dropout (batch_norm's `training`, dropout's and lstm's `train`).
    if (semantics == Program::Semantics::Evaluation &&
        (param.name() == "training" || param.name() == "train") &&
        param.type()->kind() == c10::TypeKind::BoolType)
      return addConstant(false);
    return slot;
  }

  struct Resolved {
    const c10::FunctionSchema *schema = nullptr;
    c10::optional<c10::OperatorHandle> handle;
    c10::optional<::torch::jit::Operation> operation;
  };

  const exe::Program &source;
  std::string stage;
  Program::Semantics semantics;
  Program program;
  std::vector<Resolved> resolved; ///< per operator of `source`
};

Program Program::load(const exe::Program &program, const std::string &stage,
                      Semantics semantics) {
  return ProgramLoader(program, stage, semantics).load();
}

Program Program::loadFirstStage(const std::string &bytes, Semantics semantics) {
  std::string error;
  const exe::Executable *exe = exe::verify(
      reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size(), error);
  if (!exe)
    throw RuntimeError(error);
  const exe::Stage &stage = *exe->stages()->Get(0);
  return load(*stage.program(), "stage " + std::to_string(stage.index()),
              semantics);
}

namespace {

/// SplitMix64's finaliser: consecutive inputs give unrelated outputs.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Seeds the default CPU generator for one call of random op `stream`: a
/// counter-based draw, a function of the key and the stream alone.
void seedRandomOp(const RandomKey &key, int stream) {
  uint64_t seed = mix(
      mix(mix(mix(key.seed) ^ uint64_t(key.step)) ^ uint64_t(key.microbatch)) ^
      uint64_t(stream));
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_current_seed(seed);
}

} // namespace

std::vector<c10::IValue> Program::run(
    const std::vector<c10::IValue> &args,
    const std::map<std::string, at::Tensor> &params,
    const std::vector<int> *capture, std::vector<c10::IValue> *captured,
    std::vector<int64_t> *opNanoseconds, const RandomKey *random) const {
  static const RandomKey zeros;
  if (args.size() != argSlots.size())
    throw RuntimeError("expected " + std::to_string(argSlots.size()) +
                       " inputs but got " + std::to_string(args.size()));
  std::vector<c10::IValue> slots = constantSlots;
  for (size_t i = 0; i < args.size(); ++i)
    slots[argSlots[i]] = args[i];
  for (const auto &[s, name] : paramSlots) {
    auto it = params.find(name);
    if (it == params.end())
      throw RuntimeError("no value for parameter '" + name + "'");
    slots[s] = it->second;
  }

  ::torch::jit::Stack stack;
  stack.reserve(16);
  std::chrono::steady_clock::time_point started;
  for (const Instruction &inst : code) {
    if (opNanoseconds)
      started = std::chrono::steady_clock::now();
    stack.clear();
    for (int s : inst.inputs)
      stack.push_back(slots[s]);
    if (inst.randomStream >= 0)
      seedRandomOp(random ? *random : zeros, inst.randomStream);
    switch (inst.kind) {
    case Kind::Dispatch:
      inst.handle->callBoxed(stack);
      break;
    case Kind::FusedLinear: {
      const at::Tensor &weight = stack[1].toTensor();
      if (!at::GradMode::is_enabled() || !weight.requires_grad()) {
        inst.handle->callBoxed(stack);
        break;
      }
      at::Tensor out = rt::fusedLinear(stack[0].toTensor(), weight, stack[2]);
      stack.clear();
      stack.emplace_back(std::move(out));
      break;
    }
    case Kind::Operator:
      (*inst.operation)(stack);
      break;
    case Kind::BuildList: {
      c10::impl::GenericList list(inst.listElement);
      list.reserve(stack.size());
      for (c10::IValue &v : stack)
        list.push_back(std::move(v));
      stack.clear();
      stack.emplace_back(std::move(list));
      break;
    }
    case Kind::BuildTuple: {
      auto tuple = c10::ivalue::Tuple::create(std::move(stack));
      stack.clear();
      stack.emplace_back(std::move(tuple));
      break;
    }
    case Kind::Assign: {
      // In place, as the model's own `buffer.add_(1)` is: a backward that
      // saved the old value fails as it would in PyTorch.
      at::NoGradGuard noGrad;
      stack[0].toTensor().copy_(stack[1].toTensor());
      stack.clear();
      break;
    }
    case Kind::Unpack: {
      c10::IValue container = std::move(stack.back());
      stack.clear();
      if (container.isTuple())
        for (const c10::IValue &e : container.toTupleRef().elements())
          stack.push_back(e);
      else
        for (const c10::IValue &e : container.toListRef())
          stack.push_back(e);
      if (stack.size() != inst.outputs.size())
        throw RuntimeError("unpacked " + std::to_string(stack.size()) +
                           " values into " +
                           std::to_string(inst.outputs.size()));
      break;
    }
    }
    for (size_t i = 0; i < inst.outputs.size(); ++i)
      slots[inst.outputs[i]] = std::move(stack[i]);
    if (opNanoseconds && inst.countedOp >= 0)
      (*opNanoseconds)[inst.countedOp] +=
          std::chrono::duration_cast<std::chrono::nanoseconds>(
              std::chrono::steady_clock::now() - started)
              .count();
  }
  std::vector<c10::IValue> results;
  results.reserve(resultSlots.size());
  for (int s : resultSlots)
    results.push_back(slots[s]);
  if (capture)
    for (int s : *capture)
      captured->push_back(slots[s]);
  return results;
}

std::vector<std::pair<size_t, Program::Linear>> Program::ownLinears() const {
  std::map<int, int> uses;
  for (const Instruction &inst : code)
    for (int s : inst.inputs)
      ++uses[s];
  for (int s : resultSlots)
    ++uses[s];
  std::map<int, std::string> paramName;
  for (const auto &[s, name] : paramSlots)
    paramName[s] = name;
  std::vector<std::pair<size_t, Linear>> result;
  for (size_t i = 0; i < code.size(); ++i) {
    const Instruction &inst = code[i];
    if ((inst.kind != Kind::Dispatch && inst.kind != Kind::FusedLinear) ||
        inst.inputs.size() != 3 || inst.outputs.size() != 1)
      continue;
    const c10::OperatorName &name = inst.handle->schema().operator_name();
    if (name.name != "aten::linear" || !name.overload_name.empty())
      continue;
    int weight = inst.inputs[1], bias = inst.inputs[2];
    bool biasIsNone = isConstant[bias] && constantSlots[bias].isNone();
    if (!paramName.count(weight) || uses[weight] != 1)
      continue;
    if (!biasIsNone && (!paramName.count(bias) || uses[bias] != 1))
      continue;
    result.push_back({i,
                      {inst.inputs[0], inst.outputs[0], paramName[weight],
                       biasIsNone ? "" : paramName[bias]}});
  }
  return result;
}

std::vector<Program::Linear> Program::linearsWithOwnParameters() const {
  std::vector<Linear> result;
  for (auto &[index, linear] : ownLinears())
    result.push_back(std::move(linear));
  return result;
}

void Program::fuseWeightGradients(const std::set<std::string> &weights) {
  for (const auto &[index, linear] : ownLinears())
    code[index].kind =
        weights.count(linear.weight) ? Kind::FusedLinear : Kind::Dispatch;
}

} // namespace pippy
