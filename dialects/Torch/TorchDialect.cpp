//===- TorchDialect.cpp - Torch-MLIR compatible dialect -------------------===//
//
// Registers the torch types and ops, and handles every other op name of the
// form `torch.<ns>.<name>[.<overload>]` in Torch-MLIR's shared default format:
//
//   %r = torch.aten.mm %a, %b : !torch.vtensor<..>, !torch.vtensor<..> ->
//   !torch.vtensor<..>
//
// Such ops stay unregistered operations, so any ATen or prims operator, old or
// new, reads and prints without a per-op definition.
//
//===----------------------------------------------------------------------===//

#include "pippy/Dialect/Torch/TorchDialect.h"

#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::torch;

#include "dialects/Torch/TorchDialect.cpp.inc"

void TorchDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Torch/TorchOps.cpp.inc"
      >();
  registerTypes();
  allowUnknownOperations();
}

//===----------------------------------------------------------------------===//
// The shared default format
//===----------------------------------------------------------------------===//

/// Whether `name` (with the `torch.` prefix) names an op that the default
/// format covers: a namespace and an operator name, optionally an overload.
static bool isDefaultFormatName(StringRef name) {
  if (!name.consume_front("torch."))
    return false;
  // Higher-order operators (`torch.hop_flex_attention`) use the shared
  // format under a single name.
  if (name.starts_with("hop_") && !name.contains('.'))
    return name.size() > 4;
  SmallVector<StringRef, 4> parts;
  name.split(parts, '.');
  if (parts.size() < 2 ||
      llvm::any_of(parts, [](StringRef p) { return p.empty(); }))
    return false;
  // Every constant has a registered op of its own: `torch.constant.intt` is a
  // typo, not an operator.
  return parts.front() != "constant";
}

/// Parses zero or more comma-separated types.
static ParseResult parseOptionalTypeList(OpAsmParser &parser,
                                         SmallVectorImpl<Type> &types) {
  Type type;
  OptionalParseResult first = parser.parseOptionalType(type);
  if (!first.has_value())
    return success();
  if (failed(*first))
    return failure();
  types.push_back(type);
  while (succeeded(parser.parseOptionalComma())) {
    if (parser.parseType(type))
      return failure();
    types.push_back(type);
  }
  return success();
}

static ParseResult parseDefaultFormatOp(OpAsmParser &parser,
                                        OperationState &result) {
  SMLoc loc = parser.getCurrentLocation();
  SmallVector<OpAsmParser::UnresolvedOperand> operands;
  if (parser.parseOperandList(operands) ||
      parser.parseOptionalAttrDict(result.attributes) || parser.parseColon())
    return failure();
  SMLoc typesLoc = parser.getCurrentLocation();
  if (operands.empty()) {
    if (parseOptionalTypeList(parser, result.types))
      return failure();
  } else {
    SmallVector<Type> operandTypes;
    if (parser.parseTypeList(operandTypes))
      return failure();
    if (operandTypes.size() != operands.size())
      return parser.emitError(typesLoc)
             << "expected " << operands.size() << " operand types but got "
             << operandTypes.size();
    if (parser.resolveOperands(operands, operandTypes, loc, result.operands))
      return failure();
    if (succeeded(parser.parseOptionalArrow()) &&
        parser.parseTypeList(result.types))
      return failure();
  }
  if (result.types.size() != parser.getNumResults())
    return parser.emitError(typesLoc)
           << "op binds " << parser.getNumResults() << " results but lists "
           << result.types.size() << " result types";
  return success();
}

static void printDefaultFormatOp(Operation *op, OpAsmPrinter &p) {
  if (op->getNumOperands() > 0) {
    p << ' ';
    p.printOperands(op->getOperands());
  }
  p.printOptionalAttrDict(op->getAttrs());
  p << " : ";
  llvm::interleaveComma(op->getOperandTypes(), p);
  if (op->getNumOperands() > 0 && op->getNumResults() > 0)
    p << " -> ";
  llvm::interleaveComma(op->getResultTypes(), p);
}

bool mlir::torch::isDefaultFormatOp(Operation *op) {
  return !op->isRegistered() &&
         isDefaultFormatName(op->getName().getStringRef());
}

std::optional<Dialect::ParseOpHook>
TorchDialect::getParseOperationHook(StringRef opName) const {
  if (!isDefaultFormatName(opName))
    return std::nullopt;
  return ParseOpHook(parseDefaultFormatOp);
}

llvm::unique_function<void(Operation *, OpAsmPrinter &)>
TorchDialect::getOperationPrinter(Operation *op) const {
  // Ops the shared format cannot express (regions, successors, properties,
  // names outside the grammar) keep MLIR's generic form, which round-trips.
  if (!isDefaultFormatOp(op) || op->getNumRegions() != 0 ||
      op->getNumSuccessors() != 0)
    return nullptr;
  if (Attribute props = op->getPropertiesAsAttribute())
    if (auto dict = dyn_cast<DictionaryAttr>(props); !dict || !dict.empty())
      return nullptr;
  return printDefaultFormatOp;
}
