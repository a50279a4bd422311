//===- ProgramLowering.cpp - graph IR blocks to flat programs -------------===//

#include "ProgramLowering.h"

#include "pippy/Executable/Format.h"
#include "pippy/Executable/Lowering.h"

#include "pippy/Analysis/GraphIR.h"
#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Dialect/Torch/TorchDialect.h"
#include "pippy/Executable/OpSchemaTable.h"
#include "pippy/Support/OpNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

using namespace mlir;
namespace td = ::mlir::torch;
namespace pd = ::mlir::pippy;

namespace pippy::exe {
namespace {

/// `file:line:col`, `module 'h.0.attn'`, or both.
void printLocation(Location loc, llvm::raw_ostream &os) {
  if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    os << file.getFilename().getValue();
    if (file.getLine() != 0) // 0:0 is the whole file (a module's location)
      os << ":" << file.getLine() << ":" << file.getColumn();
    return;
  }
  if (auto name = dyn_cast<NameLoc>(loc)) {
    os << "module '" << name.getName().getValue() << "'";
    if (!isa<UnknownLoc>(name.getChildLoc())) {
      os << " (";
      printLocation(name.getChildLoc(), os);
      os << ")";
    }
    return;
  }
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    llvm::interleave(
        fused.getLocations(), os, [&](Location l) { printLocation(l, os); },
        ", ");
    return;
  }
  if (!isa<UnknownLoc>(loc))
    os << loc;
}

std::optional<DType> toDType(Type type) {
  if (type.isF32())
    return DType::f32;
  if (type.isF64())
    return DType::f64;
  if (type.isF16())
    return DType::f16;
  if (type.isBF16())
    return DType::bf16;
  if (type.isSignedInteger(64))
    return DType::si64;
  if (type.isSignedInteger(32))
    return DType::si32;
  if (type.isSignedInteger(16))
    return DType::si16;
  if (type.isSignedInteger(8))
    return DType::si8;
  if (type.isUnsignedInteger(8))
    return DType::ui8;
  if (type.isSignlessInteger(1))
    return DType::i1;
  if (auto complex = dyn_cast<ComplexType>(type)) {
    Type part = complex.getElementType();
    if (part.isF32())
      return DType::complex_f32;
    if (part.isF64())
      return DType::complex_f64;
    if (part.isF16())
      return DType::complex_f16;
  }
  return std::nullopt;
}

ValueKind kindOf(Type type) {
  if (isa<td::BaseTensorType>(type))
    return ValueKind::Tensor;
  if (isa<td::IntType>(type))
    return ValueKind::Int;
  if (isa<td::FloatType>(type))
    return ValueKind::Float;
  if (isa<td::BoolType>(type))
    return ValueKind::Bool;
  if (isa<td::NoneType>(type))
    return ValueKind::None;
  if (isa<td::StringType>(type))
    return ValueKind::Str;
  if (isa<td::DeviceType>(type))
    return ValueKind::Device;
  if (isa<td::ListType>(type))
    return ValueKind::List;
  if (isa<td::TupleType>(type))
    return ValueKind::Tuple;
  return ValueKind::Other;
}

/// The element type a list value must carry for the dispatcher to unbox it.
ListElement listElementOf(Type elementType) {
  bool optional = false;
  if (auto o = dyn_cast<td::OptionalType>(elementType)) {
    optional = true;
    elementType = o.getContainedType();
  }
  ListElement plain = ListElement::Any;
  if (isa<td::BaseTensorType>(elementType))
    plain = ListElement::Tensor;
  else if (isa<td::IntType>(elementType))
    plain = ListElement::Int;
  else if (isa<td::FloatType>(elementType))
    plain = ListElement::Float;
  else if (isa<td::BoolType>(elementType))
    plain = ListElement::Bool;
  else if (isa<td::NumberType>(elementType))
    plain = ListElement::Number;
  if (!optional)
    return plain;
  switch (plain) {
  case ListElement::Tensor:
    return ListElement::OptionalTensor;
  case ListElement::Int:
    return ListElement::OptionalInt;
  case ListElement::Float:
    return ListElement::OptionalFloat;
  case ListElement::Bool:
    return ListElement::OptionalBool;
  case ListElement::Number:
    return ListElement::OptionalNumber;
  default:
    return ListElement::OptionalAny;
  }
}

FailureOr<ConstantValue> literalConstant(td::ValueTensorLiteralOp op) {
  auto value = cast<ElementsAttr>(op.getValue());
  auto shaped = cast<ShapedType>(value.getType());
  std::optional<DType> dtype = toDType(shaped.getElementType());
  if (!dtype || !shaped.hasStaticShape())
    return op.emitError("a literal of type ")
           << shaped << " cannot be lowered to an executable";
  ConstantValue c;
  c.kind = ValueKind::Tensor;
  c.dtype = *dtype;
  c.sizes.assign(shaped.getShape().begin(), shaped.getShape().end());
  size_t width = dtypeSize(*dtype);
  size_t bytes = static_cast<size_t>(shaped.getNumElements()) * width;
  c.data.resize(bytes);
  if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
    if (*dtype == DType::i1) {
      size_t i = 0;
      for (bool b : dense.getValues<bool>())
        c.data[i++] = b;
      return c;
    }
    ArrayRef<char> raw = dense.getRawData();
    if (dense.isSplat()) {
      for (size_t offset = 0; offset < bytes; offset += width)
        std::memcpy(c.data.data() + offset, raw.data(), width);
    } else {
      std::memcpy(c.data.data(), raw.data(), bytes);
    }
    return c;
  }
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    const AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob || blob->getData().size() != bytes)
      return op.emitError("dense_resource<")
             << resource.getRawHandle().getKey()
             << "> has no data of the right size";
    std::memcpy(c.data.data(), blob->getData().data(), bytes);
    return c;
  }
  return op.emitError("unsupported literal");
}

flatbuffers::Offset<Constant>
serializeConstant(flatbuffers::FlatBufferBuilder &fbb, const ConstantValue &c) {
  std::vector<flatbuffers::Offset<Constant>> items;
  for (const ConstantValue &item : c.items)
    items.push_back(serializeConstant(fbb, item));
  auto itemsVector = c.kind == ValueKind::List ? fbb.CreateVector(items) : 0;
  auto text = c.kind == ValueKind::Str || c.kind == ValueKind::Device
                  ? fbb.CreateString(c.text)
                  : 0;
  flatbuffers::Offset<TensorSpec> spec = 0;
  flatbuffers::Offset<flatbuffers::Vector<uint8_t>> data = 0;
  if (c.kind == ValueKind::Tensor) {
    spec = serializeSpec(fbb, Spec{c.dtype, c.sizes});
    data = fbb.CreateVector(c.data);
  }
  ConstantBuilder b(fbb);
  b.add_kind(c.kind);
  b.add_int_value(c.intValue);
  b.add_float_value(c.floatValue);
  b.add_bool_value(c.boolValue);
  if (!text.IsNull())
    b.add_str_value(text);
  if (!spec.IsNull()) {
    b.add_tensor(spec);
    b.add_data(data);
    b.add_wrapped_number(c.wrappedNumber);
  }
  b.add_element(c.element);
  if (!itemsVector.IsNull())
    b.add_items(itemsVector);
  return b.Finish();
}

} // namespace

std::optional<Spec> getSpec(Type type) {
  auto tensor = dyn_cast<td::ValueTensorType>(type);
  if (!tensor || !tensor.hasStaticShape() || !tensor.hasDtype())
    return std::nullopt;
  std::optional<DType> dtype = toDType(tensor.getDtype());
  if (!dtype)
    return std::nullopt;
  return Spec{*dtype, {tensor.getSizes().begin(), tensor.getSizes().end()}};
}

std::optional<ParamSpec> getParamSpec(pd::ParamOp param) {
  std::optional<Spec> spec = getSpec(param.getType());
  if (!spec)
    return std::nullopt;
  ParamSpec result{*spec};
  if (auto shard = param->getAttrOfType<DenseI64ArrayAttr>("pippy.shard")) {
    result.shardDim = static_cast<int>(shard[0]);
    result.shardParts = static_cast<int>(shard[1]);
    result.whole.sizes.at(result.shardDim) *= shard[1];
  }
  return result;
}

flatbuffers::Offset<TensorSpec>
serializeSpec(flatbuffers::FlatBufferBuilder &fbb, const Spec &spec) {
  return CreateTensorSpec(fbb, spec.dtype, fbb.CreateVector(spec.sizes));
}

int ProgramWriter::newSlot(Value value) {
  int slot = numSlots++;
  slotKinds.push_back(value ? kindOf(value.getType()) : ValueKind::Other);
  if (value)
    slots[value] = slot;
  return slot;
}

int ProgramWriter::addArgument(Value arg) {
  int slot = newSlot(arg);
  arguments.push_back(slot);
  return slot;
}

FailureOr<int> ProgramWriter::slotOf(Value value, Operation *user) {
  auto it = slots.find(value);
  if (it == slots.end())
    return user->emitError("uses a value defined outside its stage");
  return it->second;
}

void ProgramWriter::setConstant(Value value, ConstantValue constant) {
  constants[newSlot(value)] = std::move(constant);
}

std::string locationText(Location loc) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printLocation(loc, os);
  os.flush();
  return text;
}

unsigned ProgramWriter::locationOf(Operation *op) {
  std::string text = locationText(op->getLoc());
  auto [it, inserted] = locationIndex.try_emplace(text, locations.size());
  if (inserted)
    locations.push_back(text);
  return it->second;
}

unsigned ProgramWriter::operatorOf(StringRef sourceName,
                                   const std::string &name,
                                   const std::string &overload) {
  auto [it, inserted] =
      operatorIndex.try_emplace(sourceName.str(), operators.size());
  if (inserted)
    operators.push_back({name, overload, sourceName.str()});
  return it->second;
}

FailureOr<std::vector<int>> ProgramWriter::addBlock(Block &body,
                                                    ArrayRef<int> argSlots) {
  for (auto [arg, slot] : llvm::zip(body.getArguments(), argSlots))
    slots[arg] = slot;
  for (Operation &operation : body) {
    Operation *op = &operation;
    // A graph IR run as it is: its split points mark nothing to compute.
    if (isa<pd::SplitPointOp>(op))
      continue;
    if (isa<func::ReturnOp, pd::YieldOp>(op)) {
      std::vector<int> returned;
      for (Value v : op->getOperands()) {
        FailureOr<int> s = slotOf(v, op);
        if (failed(s))
          return failure();
        returned.push_back(*s);
      }
      return returned;
    }
    int counted = -1;
    if (!op->hasTrait<OpTrait::IsTerminator>() && !::pippy::isReplicable(op)) {
      counted = static_cast<int>(countedOps.size());
      countedOps.push_back(op->getName().getStringRef().str());
    }
    if (failed(lowerOp(op, counted)))
      return failure();
  }
  return body.getParentOp()->emitError("the block has no terminator");
}

LogicalResult ProgramWriter::lowerOp(Operation *op, int counted) {
  if (auto param = dyn_cast<pd::ParamOp>(op)) {
    std::string name = param.getName().str();
    if (auto it = paramSlotByName.find(name); it != paramSlotByName.end()) {
      slots[param.getResult()] = it->second;
      return success();
    }
    std::optional<ParamSpec> spec = getParamSpec(param);
    if (!spec)
      return op->emitError("parameter '")
             << name << "' needs a tensor type with static sizes and a dtype";
    int s = newSlot(param.getResult());
    paramSlotByName[name] = s;
    params.emplace_back(s, name);
    paramSpecs[name] = *spec;
    return success();
  }
  ConstantValue c;
  if (auto k = dyn_cast<td::ConstantIntOp>(op)) {
    c.kind = ValueKind::Int;
    c.intValue = k.getValueAttr().getInt();
  } else if (auto k = dyn_cast<td::ConstantFloatOp>(op)) {
    c.kind = ValueKind::Float;
    c.floatValue = k.getValue().convertToDouble();
  } else if (auto k = dyn_cast<td::ConstantBoolOp>(op)) {
    c.kind = ValueKind::Bool;
    c.boolValue = k.getValue();
  } else if (isa<td::ConstantNoneOp>(op)) {
    c.kind = ValueKind::None;
  } else if (auto k = dyn_cast<td::ConstantStrOp>(op)) {
    c.kind = ValueKind::Str;
    c.text = k.getValue().str();
  } else if (auto k = dyn_cast<td::ConstantDeviceOp>(op)) {
    c.kind = ValueKind::Device;
    c.text = k.getValue().str();
  } else if (auto k = dyn_cast<td::ValueTensorLiteralOp>(op)) {
    FailureOr<ConstantValue> literal = literalConstant(k);
    if (failed(literal))
      return failure();
    c = std::move(*literal);
    c.wrappedNumber = op->hasAttr(::pippy::kWrappedNumberAttr);
  } else if (isa<td::DerefineOp, td::TensorStaticInfoCastOp>(op)) {
    FailureOr<int> s = slotOf(op->getOperand(0), op);
    if (failed(s))
      return failure();
    slots[op->getResult(0)] = *s;
    return success();
  } else {
    Call call;
    call.counted = counted;
    call.location = locationOf(op);
    if (failed(lowerCall(op, call)))
      return failure();
    if (call.kind == InstructionKind::BuildList &&
        llvm::all_of(call.inputs, [&](int s) { return constants.count(s); })) {
      // A list of constants is a constant.
      ConstantValue list;
      list.kind = ValueKind::List;
      list.element = call.element;
      for (int s : call.inputs)
        list.items.push_back(constants.at(s));
      setConstant(op->getResult(0), std::move(list));
      return success();
    }
    for (Value result : op->getResults())
      call.outputs.push_back(newSlot(result));
    code.push_back(std::move(call));
    return success();
  }
  setConstant(op->getResult(0), std::move(c));
  return success();
}

LogicalResult ProgramWriter::lowerCall(Operation *op, Call &call) {
  std::vector<int> operands;
  for (Value operand : op->getOperands()) {
    FailureOr<int> s = slotOf(operand, op);
    if (failed(s))
      return failure();
    operands.push_back(*s);
  }
  if (auto list = dyn_cast<td::PrimListConstructOp>(op)) {
    call.kind = InstructionKind::BuildList;
    call.element = listElementOf(list.getType().getContainedType());
    call.inputs = std::move(operands);
    return success();
  }
  if (isa<td::PrimTupleConstructOp>(op)) {
    call.kind = InstructionKind::BuildTuple;
    call.inputs = std::move(operands);
    return success();
  }
  if (isa<td::PrimTupleUnpackOp, td::PrimListUnpackOp>(op)) {
    call.kind = InstructionKind::Unpack;
    call.inputs = std::move(operands);
    return success();
  }
  if (isa<pd::AssignOp>(op)) {
    call.kind = InstructionKind::Assign;
    call.inputs = std::move(operands); // the buffer, then its new value
    return success();
  }
  // The tensor-parallel collectives run as pippy's operators
  // (runtime/TensorParallel.cpp), on the group of --tp.
  if (isa<pd::TpCopyOp, pd::TpReduceOp, pd::TpEmbeddingOp>(op)) {
    StringRef sourceName = op->getName().getStringRef();
    call.kind = InstructionKind::Call;
    if (isa<pd::TpEmbeddingOp>(op)) {
      call.op = operatorOf(sourceName, "pippy::tp_embedding", "");
      call.args.emplace_back("weight", operands.at(0));
      call.args.emplace_back("indices", operands.at(1));
      return success();
    }
    call.op = operatorOf(
        sourceName,
        isa<pd::TpCopyOp>(op) ? "pippy::tp_copy" : "pippy::tp_reduce", "");
    call.args.emplace_back("self", operands.at(0));
    return success();
  }
  // Torch-MLIR writes an operator its build does not know as
  // `torch.operator "torch.aten.name"`.
  auto generic = dyn_cast<td::OperatorOp>(op);
  if (!td::isDefaultFormatOp(op) && !(generic && op->getNumRegions() == 0))
    return op->emitError("is not supported by the runtime");
  StringRef sourceName =
      generic ? generic.getName() : op->getName().getStringRef();
  std::optional<::pippy::AtenOpName> name =
      ::pippy::parseTorchOpName(sourceName);
  if (!name)
    return op->emitError("'") << sourceName << "' is not an operator name";
  call.kind = InstructionKind::Call;
  call.op = operatorOf(sourceName, name->qualifiedName(), name->overload);
  if (auto stream = op->getAttrOfType<IntegerAttr>(::pippy::kRandomStreamAttr))
    call.randomStream = static_cast<int>(stream.getInt());
  // Operands follow the schema's order; name them as the schema of the
  // libtorch pippy was built with does. More operands than it has (a newer
  // PyTorch's operator) stay positional, for the runtime to judge.
  std::optional<std::vector<std::string_view>> names =
      schemaArgumentNames(name->str());
  bool named = names && names->size() >= operands.size();
  for (size_t i = 0; i < operands.size(); ++i)
    call.args.emplace_back(named ? std::string((*names)[i]) : std::string(),
                           operands[i]);
  return success();
}

std::vector<std::string> ProgramWriter::parameterNames() const {
  std::vector<std::string> names;
  for (const auto &[slot, name] : params)
    names.push_back(name);
  return names;
}

flatbuffers::Offset<Program>
ProgramWriter::serialize(flatbuffers::FlatBufferBuilder &fbb,
                         const std::set<std::string> &withGradient,
                         bool withLocations) const {
  std::vector<flatbuffers::Offset<Parameter>> paramList;
  for (const auto &[slot, name] : params) {
    const ParamSpec &spec = paramSpecs.at(name);
    Shard shard(spec.shardDim, spec.shardParts);
    paramList.push_back(CreateParameter(
        fbb, slot, fbb.CreateString(name), serializeSpec(fbb, spec.whole),
        withGradient.count(name), spec.shardParts > 1 ? &shard : nullptr));
  }
  std::vector<flatbuffers::Offset<ConstantSlot>> constantList;
  for (const auto &[slot, value] : constants)
    constantList.push_back(
        CreateConstantSlot(fbb, slot, serializeConstant(fbb, value)));
  std::vector<flatbuffers::Offset<Operator>> operatorList;
  for (const OperatorEntry &op : operators)
    operatorList.push_back(CreateOperator(fbb, fbb.CreateString(op.name),
                                          fbb.CreateString(op.overload),
                                          fbb.CreateString(op.sourceName)));
  std::vector<flatbuffers::Offset<Instruction>> instructions;
  for (const Call &call : code) {
    std::vector<flatbuffers::Offset<Argument>> args;
    for (const auto &[name, slot] : call.args)
      args.push_back(CreateArgument(fbb, fbb.CreateString(name), slot));
    instructions.push_back(
        CreateInstruction(fbb, call.kind, call.op, fbb.CreateVector(args),
                          fbb.CreateVector(call.inputs), call.element,
                          fbb.CreateVector(call.outputs), call.location,
                          call.counted, call.randomStream));
  }
  auto kinds = fbb.CreateVector(
      reinterpret_cast<const uint8_t *>(slotKinds.data()), slotKinds.size());
  return CreateProgram(
      fbb, numSlots,
      flatbuffers::Offset<flatbuffers::Vector<ValueKind>>(kinds.o),
      fbb.CreateVector(arguments), fbb.CreateVector(results),
      fbb.CreateVector(paramList), fbb.CreateVector(constantList),
      fbb.CreateVector(operatorList), fbb.CreateVector(instructions),
      fbb.CreateVectorOfStrings(
          withLocations ? locations
                        : std::vector<std::string>(locations.size())),
      fbb.CreateVectorOfStrings(countedOps));
}

} // namespace pippy::exe
