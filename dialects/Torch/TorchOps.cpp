//===- TorchOps.cpp - Torch-MLIR compatible registered ops ----------------===//
//
// Custom formats, result names and verifiers of the registered torch ops.
// Result names follow Torch-MLIR (`%int1`, `%float1.000000e-02`, `%none`,
// `%true`, `%str`, `%cpu`) so printed IR is byte-identical to its output.
//
//===----------------------------------------------------------------------===//

#include "pippy/Dialect/Torch/TorchDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/StringSaver.h"

using namespace mlir;
using namespace mlir::torch;

#define GET_OP_CLASSES
#include "dialects/Torch/TorchOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Subtyping, as TorchScript's type system has it
//===----------------------------------------------------------------------===//

/// Whether a value of type `type` may stand where `base` is expected.
static bool isValidSubtype(Type type, Type base) {
  if (type == base || isa<torch::AnyType>(base))
    return true;
  if (auto optional = dyn_cast<OptionalType>(base))
    return isa<torch::NoneType>(type) ||
           isValidSubtype(type, optional.getContainedType());
  if (auto unionType = dyn_cast<UnionType>(base))
    return llvm::any_of(unionType.getContainedTypes(),
                        [&](Type t) { return isValidSubtype(type, t); });
  if (isa<torch::NumberType>(base))
    return isa<torch::IntType, torch::FloatType>(type);
  auto tensor = dyn_cast<BaseTensorType>(type);
  auto baseTensor = dyn_cast<BaseTensorType>(base);
  if (tensor && baseTensor) {
    if (isa<ValueTensorType>(tensor) != isa<ValueTensorType>(baseTensor))
      return false;
    // More static information is a subtype: [2,3] may stand for [?,3].
    if (baseTensor.hasSizes()) {
      if (!tensor.hasSizes() ||
          tensor.getSizes().size() != baseTensor.getSizes().size())
        return false;
      for (auto [size, baseSize] :
           llvm::zip(tensor.getSizes(), baseTensor.getSizes()))
        if (baseSize != kUnknownSize && size != baseSize)
          return false;
    }
    return !baseTensor.hasDtype() || tensor.getDtype() == baseTensor.getDtype();
  }
  auto tuple = dyn_cast<torch::TupleType>(type);
  auto baseTuple = dyn_cast<torch::TupleType>(base);
  if (tuple && baseTuple) {
    ArrayRef<Type> elems = tuple.getContainedTypes();
    ArrayRef<Type> baseElems = baseTuple.getContainedTypes();
    return elems.size() == baseElems.size() &&
           llvm::all_of(llvm::zip(elems, baseElems), [](auto pair) {
             return isValidSubtype(std::get<0>(pair), std::get<1>(pair));
           });
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

void ConstantNoneOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getResult(), "none");
}

void ConstantStrOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getResult(), "str");
}

void ConstantDeviceOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getResult(), getValue());
}

void ConstantBoolOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getResult(), getValue() ? "true" : "false");
}

void ConstantIntOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  SmallString<32> name;
  llvm::raw_svector_ostream os(name);
  os << "int" << getValueAttr().getInt();
  setNameFn(getResult(), name);
}

ParseResult ConstantIntOp::parse(OpAsmParser &parser, OperationState &result) {
  Builder builder(result.getContext());
  result.addTypes(builder.getType<IntType>());
  // Torch-MLIR prints attributes after the value; older files put them
  // before it. Both read.
  int64_t value;
  if (parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseInteger(value) ||
      parser.parseOptionalAttrDict(result.attributes))
    return failure();
  result.addAttribute("value", builder.getI64IntegerAttr(value));
  return success();
}

// The value is a property: only discardable attributes remain to print
// (asking for all of them would first build a dictionary holding the value).
void ConstantIntOp::print(OpAsmPrinter &p) {
  p << " " << getValueAttr().getInt();
  p.printOptionalAttrDict((*this)->getDiscardableAttrDictionary().getValue());
}

TorchDialect::FloatText TorchDialect::getFloatText(FloatAttr attr) const {
  APFloat value = attr.getValue();
  bool keep = &value.getSemantics() == &APFloat::IEEEdouble();
  uint64_t bits = keep ? value.bitcastToAPInt().getZExtValue() : 0;
  std::lock_guard<std::mutex> lock(printedTextsMutex);
  if (keep)
    if (auto it = floatTexts.find(bits); it != floatTexts.end())
      return it->second;
  // MLIR's own text for the value: exponent form when it reads back
  // exactly, else the shortest form that does, else hexadecimal.
  std::string text;
  llvm::raw_string_ostream os(text);
  attr.print(os, /*elideType=*/true);
  // The name: the exponent form, less the characters an SSA name cannot
  // hold (the `+` of `e+00`).
  SmallString<32> digits;
  value.toString(digits, /*FormatPrecision=*/6, /*FormatMaxPadding=*/0,
                 /*TruncateZero=*/false);
  SmallString<40> name("float");
  for (char c : digits)
    if (llvm::isAlnum(c) || c == '_' || c == '$' || c == '.' || c == '-')
      name.push_back(c);
  llvm::StringSaver saver(printedTextMemory);
  FloatText result{saver.save(text), saver.save(name.str())};
  if (keep)
    floatTexts.try_emplace(bits, result);
  return result;
}

static const TorchDialect &torchDialect(Operation *op) {
  return static_cast<const TorchDialect &>(*op->getDialect());
}

void ConstantFloatOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getResult(), torchDialect(*this).getFloatText(getValueAttr()).name);
}

// As the `$value attr-dict` format would parse and print it.
ParseResult ConstantFloatOp::parse(OpAsmParser &parser,
                                   OperationState &result) {
  FloatAttr value;
  if (parser.parseCustomAttributeWithFallback(value,
                                              parser.getBuilder().getF64Type()))
    return failure();
  if (value)
    result.getOrAddProperties<Properties>().value = value;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseOptionalAttrDict(result.attributes) ||
      failed(verifyInherentAttrs(result.name, result.attributes, [&]() {
        return parser.emitError(loc)
               << "'" << result.name.getStringRef() << "' op ";
      })))
    return failure();
  result.addTypes(parser.getBuilder().getType<FloatType>());
  return success();
}

void ConstantFloatOp::print(OpAsmPrinter &p) {
  p << ' ' << torchDialect(*this).getFloatText(getValueAttr()).value;
  p.printOptionalAttrDict((*this)->getDiscardableAttrDictionary().getValue());
}

ParseResult BindSymbolicShapeOp::parse(OpAsmParser &parser,
                                       OperationState &result) {
  OpAsmParser::UnresolvedOperand operand;
  SmallVector<OpAsmParser::UnresolvedOperand> symbols;
  AffineMapAttr map;
  Type operandType;
  if (parser.parseOperand(operand) || parser.parseComma() ||
      parser.parseOperandList(symbols, OpAsmParser::Delimiter::Square) ||
      parser.parseComma() ||
      parser.parseAttribute(map, "shape_expressions", result.attributes) ||
      parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseColonType(operandType) ||
      parser.resolveOperand(operand, operandType, result.operands) ||
      parser.resolveOperands(symbols, parser.getBuilder().getType<IntType>(),
                             result.operands))
    return failure();
  return success();
}

void BindSymbolicShapeOp::print(OpAsmPrinter &p) {
  p << " " << getOperand() << ", [";
  llvm::interleaveComma(getShapeSymbols(), p);
  p << "], affine_map<" << getShapeExpressions().getValue() << ">";
  p.printOptionalAttrDict((*this)->getAttrs(), {"shape_expressions"});
  p << " : " << getOperand().getType();
}

LogicalResult BindSymbolicShapeOp::verify() {
  AffineMap map = getShapeExpressions().getValue();
  if (map.getNumSymbols() != getShapeSymbols().size())
    return emitOpError("has ")
           << getShapeSymbols().size() << " shape symbols but its map has "
           << map.getNumSymbols() << " symbols";
  auto tensor = cast<BaseTensorType>(getOperand().getType());
  if (tensor.hasSizes() && map.getNumResults() != tensor.getSizes().size())
    return emitOpError("map has ")
           << map.getNumResults() << " results but the tensor has rank "
           << tensor.getSizes().size();
  return success();
}

//===----------------------------------------------------------------------===//
// Tensor literals, casts and copies
//===----------------------------------------------------------------------===//

static LogicalResult verifyLiteral(Operation *op, ElementsAttr value,
                                   BaseTensorType type) {
  auto shaped = cast<ShapedType>(value.getType());
  if (type.hasSizes() && type.getSizes() != shaped.getShape())
    return op->emitOpError("value has shape [")
           << shaped.getShape() << "] but the result type is " << type;
  if (type.hasDtype() && type.getDtype() != shaped.getElementType())
    return op->emitOpError("value has element type ")
           << shaped.getElementType() << " but the result dtype is "
           << type.getDtype();
  return success();
}

LogicalResult ValueTensorLiteralOp::verify() {
  return verifyLiteral(*this, getValue(), getType());
}

LogicalResult NonValueTensorLiteralOp::verify() {
  return verifyLiteral(*this, getValue(), getType());
}

/// Whether two tensor types can describe the same tensor: known sizes and
/// dtypes agree.
static bool areCompatibleTensorTypes(BaseTensorType a, BaseTensorType b) {
  if (a.hasSizes() && b.hasSizes()) {
    ArrayRef<int64_t> as = a.getSizes(), bs = b.getSizes();
    if (as.size() != bs.size())
      return false;
    for (auto [x, y] : llvm::zip(as, bs))
      if (x != kUnknownSize && y != kUnknownSize && x != y)
        return false;
  }
  return !a.hasDtype() || !b.hasDtype() || a.getDtype() == b.getDtype();
}

LogicalResult TensorStaticInfoCastOp::verify() {
  auto from = cast<BaseTensorType>(getOperand().getType());
  auto to = cast<BaseTensorType>(getType());
  if (isa<ValueTensorType>(from) != isa<ValueTensorType>(to))
    return emitOpError("cannot change value semantics: ")
           << from << " to " << to;
  if (!areCompatibleTensorTypes(from, to))
    return emitOpError("incompatible types ") << from << " and " << to;
  return success();
}

LogicalResult CopyToNonValueTensorOp::verify() {
  if (!areCompatibleTensorTypes(getOperand().getType(), getType()))
    return emitOpError("incompatible types ")
           << getOperand().getType() << " and " << getType();
  return success();
}

LogicalResult CopyToValueTensorOp::verify() {
  if (!areCompatibleTensorTypes(getOperand().getType(), getType()))
    return emitOpError("incompatible types ")
           << getOperand().getType() << " and " << getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Lists, tuples and dicts
//===----------------------------------------------------------------------===//

LogicalResult PrimListConstructOp::verify() {
  Type elementType = getType().getContainedType();
  for (auto [i, element] : llvm::enumerate(getElements()))
    if (!isValidSubtype(element.getType(), elementType))
      return emitOpError("element #") << i << " has type " << element.getType()
                                      << " but the list holds " << elementType;
  return success();
}

LogicalResult PrimTupleConstructOp::verify() {
  ArrayRef<Type> types = getType().getContainedTypes();
  if (types.size() != getElements().size())
    return emitOpError("has ")
           << getElements().size() << " elements but the tuple type has "
           << types.size();
  for (auto [i, element] : llvm::enumerate(getElements()))
    if (!isValidSubtype(element.getType(), types[i]))
      return emitOpError("element #") << i << " has type " << element.getType()
                                      << " but the tuple expects " << types[i];
  return success();
}

LogicalResult PrimDictConstructOp::verify() {
  DictType type = getType();
  for (Value key : getKeys())
    if (!isValidSubtype(key.getType(), type.getKeyType()))
      return emitOpError("key of type ")
             << key.getType() << " does not match " << type.getKeyType();
  for (Value value : getValues())
    if (!isValidSubtype(value.getType(), type.getValueType()))
      return emitOpError("value of type ")
             << value.getType() << " does not match " << type.getValueType();
  return success();
}

//===----------------------------------------------------------------------===//
// Control flow
//===----------------------------------------------------------------------===//

ParseResult PrimIfOp::parse(OpAsmParser &parser, OperationState &result) {
  Region *thenRegion = result.addRegion();
  Region *elseRegion = result.addRegion();
  OpAsmParser::UnresolvedOperand condition;
  Type boolType = parser.getBuilder().getType<BoolType>();
  if (parser.parseOperand(condition) ||
      parser.resolveOperand(condition, boolType, result.operands) ||
      parser.parseArrowTypeList(result.types) ||
      parser.parseRegion(*thenRegion) || parser.parseKeyword("else") ||
      parser.parseRegion(*elseRegion) ||
      parser.parseOptionalAttrDict(result.attributes))
    return failure();
  return success();
}

void PrimIfOp::print(OpAsmPrinter &p) {
  p << " " << getCondition() << " -> (" << getResultTypes() << ") ";
  p.printRegion(getThenRegion(), /*printEntryBlockArgs=*/false);
  p << " else ";
  p.printRegion(getElseRegion(), /*printEntryBlockArgs=*/false);
  p.printOptionalAttrDict((*this)->getAttrs());
}

LogicalResult PrimIfOp::verify() {
  for (Region *region : {&getThenRegion(), &getElseRegion()}) {
    if (region->front().getNumArguments() != 0)
      return emitOpError("branches take no arguments");
    auto yield = dyn_cast<PrimIfYieldOp>(region->front().getTerminator());
    if (!yield)
      return emitOpError("each branch must end in torch.prim.If.yield");
    if (yield.getResults().getTypes() != getResultTypes())
      return yield.emitOpError("yields types (")
                 .append(yield.getResults().getTypes())
             << ") but the torch.prim.If results are (" << getResultTypes()
             << ")";
  }
  return success();
}

LogicalResult PrimLoopOp::verify() {
  Block &body = getRegion().front();
  if (body.getNumArguments() != getIterArgsInit().size() + 1)
    return emitOpError("body has ")
           << body.getNumArguments() << " arguments; expected "
           << getIterArgsInit().size() + 1
           << " (the iteration number and each loop-carried value)";
  if (!isa<IntType>(body.getArgument(0).getType()))
    return emitOpError("the first body argument must be !torch.int");
  if (getResults().size() != getIterArgsInit().size())
    return emitOpError("has ")
           << getResults().size() << " results but " << getIterArgsInit().size()
           << " loop-carried values";
  auto condition = dyn_cast<PrimLoopConditionOp>(body.getTerminator());
  if (!condition)
    return emitOpError("body must end in torch.prim.Loop.condition");
  if (condition.getIterArgs().size() != getResults().size())
    return condition.emitOpError("passes ")
           << condition.getIterArgs().size() << " values but the loop carries "
           << getResults().size();
  return success();
}

//===----------------------------------------------------------------------===//
// Global slots
//===----------------------------------------------------------------------===//

ParseResult InitializeGlobalSlotsOp::parse(OpAsmParser &parser,
                                           OperationState &result) {
  if (parser.parseOptionalAttrDict(result.attributes) || parser.parseLSquare())
    return failure();
  SmallVector<Attribute> slots;
  while (failed(parser.parseOptionalRSquare())) {
    FlatSymbolRefAttr slot;
    OpAsmParser::UnresolvedOperand value;
    Type type;
    if (parser.parseAttribute(slot) || parser.parseLParen() ||
        parser.parseOperand(value) || parser.parseColonType(type) ||
        parser.parseRParen() ||
        parser.resolveOperand(value, type, result.operands))
      return failure();
    slots.push_back(slot);
  }
  result.addAttribute("slotSymNames",
                      ArrayAttr::get(parser.getContext(), slots));
  return success();
}

void InitializeGlobalSlotsOp::print(OpAsmPrinter &p) {
  p.printOptionalAttrDict((*this)->getAttrs(), {"slotSymNames"});
  p << " [";
  p.printNewline();
  for (auto [slot, value] : llvm::zip(getSlotSymNames(), getInitialValues())) {
    p << "  " << slot << "(" << value << " : " << value.getType() << ")";
    p.printNewline();
  }
  p << "]";
}

LogicalResult InitializeGlobalSlotsOp::verify() {
  if (getInitialValues().size() != getSlotSymNames().size())
    return emitOpError("has ") << getInitialValues().size() << " values for "
                               << getSlotSymNames().size() << " slots";
  return success();
}
