//===- ProgramLoader.cpp - loading a stage executable's program -----------===//
//
// Loads a program of a stage executable: resolves each operator once
// against the running libtorch (or pippy's extra operators) and binds each
// call's arguments to its schema by name. Program.cpp runs it.
//
//===----------------------------------------------------------------------===//

#include "pippy/Runtime/Program.h"

#include "ExtraOps.h"

#include "pippy/Executable/Format.h"
#include "pippy/Support/TensorDTypes.h"

#include <ATen/ATen.h>
#include <torch/csrc/api/include/torch/version.h>

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

std::string Program::describeInstruction(const std::string &stage,
                                         const std::string &op,
                                         const std::string &where) {
  std::string text = stage + ":";
  if (!op.empty())
    text += " '" + op + "'";
  if (where.empty())
    return text;
  return text + (op.empty() ? " " : " at ") + where;
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
                Program::Semantics semantics, at::Device device)
      : source(source), stage(stage), semantics(semantics), device(device) {}

  Program load() {
    program.numSlots = source.num_slots();
    program.stageName = stage;
    program.device = device;
    for (const exe::Operator *op : *source.operators())
      program.opSourceNames.push_back(op->source_name()->str());
    for (const flatbuffers::String *where : *source.locations())
      program.locations.push_back(where->str());
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

  std::string describe(const exe::Instruction &inst) const {
    return Program::describeInstruction(
        stage,
        inst.kind() == exe::InstructionKind::Call
            ? source.operators()->Get(inst.op())->source_name()->str()
            : std::string(),
        source.locations()->Get(inst.location())->str());
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
        // A trace records the device it ran on (`torch.zeros(...,
        // device=x.device)` becomes `cpu`): the program makes its tensors
        // where the rank computes.
        c10::Device named(c.str_value()->str());
        return named.is_cpu() ? device : named;
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
      if (c.wrapped_number()) // a scalar: stays on the host, as PyTorch's
        t.unsafeGetTensorImpl()->set_wrapped_number(true);
      else
        t = t.to(device);
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
    result.location = static_cast<int>(inst.location());
    if (inst.kind() == exe::InstructionKind::Call)
      result.op = static_cast<int>(inst.op());
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
  at::Device device; ///< where the program runs: its constants live there
  Program program;
  std::vector<Resolved> resolved; ///< per operator of `source`
};

Program Program::load(const exe::Program &program, const std::string &stage,
                      Semantics semantics, at::Device device) {
  return ProgramLoader(program, stage, semantics, device).load();
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

} // namespace pippy
