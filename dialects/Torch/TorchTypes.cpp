//===- TorchTypes.cpp - Torch-MLIR compatible types -----------------------===//
//
// Parsing and printing of the types whose syntax is not a bare mnemonic,
// byte-for-byte as Torch-MLIR writes them.
//
//===----------------------------------------------------------------------===//

#include "pippy/Dialect/Torch/TorchDialect.h"

#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/StringSaver.h"

using namespace mlir;
using namespace mlir::torch;

#define GET_TYPEDEF_CLASSES
#include "dialects/Torch/TorchTypes.cpp.inc"

void TorchDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/Torch/TorchTypes.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Nested types without the `!torch.` prefix
//===----------------------------------------------------------------------===//

Type mlir::torch::parseTorchDialectType(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef mnemonic;
  Type type;
  OptionalParseResult result = generatedTypeParser(parser, &mnemonic, type);
  if (result.has_value())
    return succeeded(*result) ? type : Type();
  parser.emitError(loc) << "unknown type `" << mnemonic
                        << "` in dialect `torch`";
  return Type();
}

static bool printsAlikeEverywhere(Type type);

void mlir::torch::printTorchDialectType(Type type, AsmPrinter &printer) {
  // Tensor types are most of a graph's text, and most are alike.
  if (printsAlikeEverywhere(type)) {
    printer.getStream() << static_cast<const TorchDialect &>(type.getDialect())
                               .getTensorTypeText(type);
    return;
  }
  if (succeeded(generatedTypePrinter(type, printer)))
    return;
  printer.printType(type);
}

Type TorchDialect::parseType(DialectAsmParser &parser) const {
  // The parser moves past the type's text itself once this returns, so a
  // text seen before needs no second parse. Text that names an alias
  // (`#enc`, `!t`) can mean another type in another file: always parsed.
  StringRef spec = parser.getFullSymbolSpec();
  bool cacheable = !spec.contains('#') && !spec.contains('!');
  if (cacheable) {
    std::lock_guard<std::mutex> lock(parsedTypesMutex);
    auto it = parsedTypes.find(spec);
    if (it != parsedTypes.end())
      return it->second;
  }
  Type type = parseTorchDialectType(parser);
  if (type && cacheable) {
    std::lock_guard<std::mutex> lock(parsedTypesMutex);
    parsedTypes.try_emplace(spec, type);
  }
  return type;
}

void TorchDialect::printType(Type type, DialectAsmPrinter &printer) const {
  printTorchDialectType(type, printer);
}

//===----------------------------------------------------------------------===//
// Containers
//===----------------------------------------------------------------------===//

static Type parseContainedType(AsmParser &parser) {
  if (parser.parseLess())
    return Type();
  Type contained = parseTorchDialectType(parser);
  if (!contained || parser.parseGreater())
    return Type();
  return contained;
}

static void printContainedType(AsmPrinter &printer, Type contained) {
  printer << "<";
  printTorchDialectType(contained, printer);
  printer << ">";
}

Type OptionalType::parse(AsmParser &parser) {
  Type contained = parseContainedType(parser);
  return contained ? OptionalType::get(contained) : Type();
}
void OptionalType::print(AsmPrinter &printer) const {
  printContainedType(printer, getContainedType());
}

Type ListType::parse(AsmParser &parser) {
  Type contained = parseContainedType(parser);
  return contained ? ListType::get(contained) : Type();
}
void ListType::print(AsmPrinter &printer) const {
  printContainedType(printer, getContainedType());
}

static std::optional<SmallVector<Type>> parseTypeList(AsmParser &parser) {
  if (parser.parseLess())
    return std::nullopt;
  SmallVector<Type> types;
  if (succeeded(parser.parseOptionalGreater()))
    return types;
  do {
    Type type = parseTorchDialectType(parser);
    if (!type)
      return std::nullopt;
    types.push_back(type);
  } while (succeeded(parser.parseOptionalComma()));
  if (parser.parseGreater())
    return std::nullopt;
  return types;
}

static void printTypeList(AsmPrinter &printer, ArrayRef<Type> types) {
  printer << "<";
  llvm::interleaveComma(
      types, printer, [&](Type type) { printTorchDialectType(type, printer); });
  printer << ">";
}

Type torch::TupleType::parse(AsmParser &parser) {
  if (auto types = parseTypeList(parser))
    return torch::TupleType::get(parser.getContext(), *types);
  return Type();
}
void torch::TupleType::print(AsmPrinter &printer) const {
  printTypeList(printer, getContainedTypes());
}

Type UnionType::parse(AsmParser &parser) {
  if (auto types = parseTypeList(parser))
    return UnionType::get(parser.getContext(), *types);
  return Type();
}
void UnionType::print(AsmPrinter &printer) const {
  printTypeList(printer, getContainedTypes());
}

Type DictType::parse(AsmParser &parser) {
  if (parser.parseLess())
    return Type();
  Type key = parseTorchDialectType(parser);
  if (!key || parser.parseComma())
    return Type();
  Type value = parseTorchDialectType(parser);
  if (!value || parser.parseGreater())
    return Type();
  return DictType::get(parser.getContext(), key, value);
}
void DictType::print(AsmPrinter &printer) const {
  printer << "<";
  printTorchDialectType(getKeyType(), printer);
  printer << ", ";
  printTorchDialectType(getValueType(), printer);
  printer << ">";
}

Type NnModuleType::parse(AsmParser &parser) {
  std::string className;
  if (parser.parseLess() || parser.parseString(&className) ||
      parser.parseGreater())
    return Type();
  return NnModuleType::get(parser.getContext(), className);
}
void NnModuleType::print(AsmPrinter &printer) const {
  printer << "<\"";
  llvm::printEscapedString(getClassName(), printer.getStream());
  printer << "\">";
}

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

bool BaseTensorType::classof(Type type) {
  return isa<ValueTensorType, NonValueTensorType>(type);
}

std::optional<ArrayRef<int64_t>> BaseTensorType::getOptionalSizes() const {
  if (auto t = dyn_cast<ValueTensorType>(*this))
    return t.getOptionalSizes();
  return cast<NonValueTensorType>(*this).getOptionalSizes();
}

Type BaseTensorType::getOptionalDtype() const {
  if (auto t = dyn_cast<ValueTensorType>(*this))
    return t.getOptionalDtype();
  return cast<NonValueTensorType>(*this).getOptionalDtype();
}

Attribute BaseTensorType::getOptionalSparsity() const {
  if (auto t = dyn_cast<ValueTensorType>(*this))
    return t.getOptionalSparsity();
  return cast<NonValueTensorType>(*this).getOptionalSparsity();
}

bool BaseTensorType::hasStaticShape() const {
  return hasSizes() && llvm::none_of(getSizes(), [](int64_t size) {
           return size == kUnknownSize;
         });
}

std::optional<int64_t> BaseTensorType::getNumElements() const {
  if (!hasStaticShape())
    return std::nullopt;
  int64_t n = 1;
  for (int64_t size : getSizes())
    n *= size;
  return n;
}

bool mlir::torch::isValidTorchDtype(Type type) {
  if (auto complex = dyn_cast<ComplexType>(type))
    type = complex.getElementType();
  if (isa<mlir::FloatType>(type))
    return true;
  if (isa<QInt8Type, QUInt8Type, QInt16Type, QInt32Type, StringType>(type))
    return true;
  if (auto integer = dyn_cast<IntegerType>(type)) {
    if (integer.isSignless())
      return integer.getWidth() == 1;
    return llvm::is_contained({4u, 8u, 16u, 32u, 64u}, integer.getWidth());
  }
  return false;
}

static LogicalResult
verifyTensorType(function_ref<InFlightDiagnostic()> emitError,
                 std::optional<ArrayRef<int64_t>> sizes, Type dtype,
                 Attribute sparsity) {
  if (dtype && !isValidTorchDtype(dtype))
    return emitError() << "invalid dtype " << dtype << " for a torch tensor";
  if (sizes) {
    for (int64_t size : *sizes)
      if (size < 0 && size != kUnknownSize)
        return emitError() << "invalid size " << size << " for a torch tensor";
  }
  if (sparsity && !isa<sparse_tensor::SparseTensorEncodingAttr>(sparsity))
    return emitError() << "invalid sparsity encoding " << sparsity
                       << "; expected a #sparse_tensor.encoding";
  return success();
}

LogicalResult
ValueTensorType::verify(function_ref<InFlightDiagnostic()> emitError,
                        std::optional<ArrayRef<int64_t>> sizes, Type dtype,
                        Attribute sparsity) {
  return verifyTensorType(emitError, sizes, dtype, sparsity);
}

LogicalResult
NonValueTensorType::verify(function_ref<InFlightDiagnostic()> emitError,
                           std::optional<ArrayRef<int64_t>> sizes, Type dtype,
                           Attribute sparsity) {
  return verifyTensorType(emitError, sizes, dtype, sparsity);
}

namespace {
struct TensorTypeParts {
  std::optional<SmallVector<int64_t>> sizes;
  Type dtype;
  Attribute sparsity;
};
} // namespace

/// Parses `<sizes, dtype (, sparsity)?>` or nothing.
static FailureOr<TensorTypeParts> parseTensorParts(AsmParser &parser) {
  TensorTypeParts parts;
  if (failed(parser.parseOptionalLess()))
    return parts;
  if (failed(parser.parseOptionalStar())) {
    SmallVector<int64_t> sizes;
    if (parser.parseLSquare())
      return failure();
    if (failed(parser.parseOptionalRSquare())) {
      do {
        if (succeeded(parser.parseOptionalQuestion())) {
          sizes.push_back(kUnknownSize);
          continue;
        }
        int64_t size;
        SMLoc loc = parser.getCurrentLocation();
        OptionalParseResult parsed = parser.parseOptionalInteger(size);
        if (!parsed.has_value())
          return parser.emitError(loc, "expected a size or `?`");
        if (failed(*parsed))
          return failure();
        sizes.push_back(size);
      } while (succeeded(parser.parseOptionalComma()));
      if (parser.parseRSquare())
        return failure();
    }
    parts.sizes = std::move(sizes);
  }
  if (parser.parseComma())
    return failure();
  if (failed(parser.parseOptionalKeyword("unk")) &&
      parser.parseType(parts.dtype))
    return failure();
  if (succeeded(parser.parseOptionalComma()) &&
      parser.parseAttribute(parts.sparsity))
    return failure();
  if (parser.parseGreater())
    return failure();
  return parts;
}

/// `<[sizes],dtype[,sparsity]>`, or nothing for a tensor of unknown rank,
/// dtype and encoding; `printDtype` and `printSparsity` write those two.
static void writeTensorParts(raw_ostream &os,
                             std::optional<ArrayRef<int64_t>> sizes, Type dtype,
                             Attribute sparsity,
                             function_ref<void()> printDtype,
                             function_ref<void()> printSparsity) {
  if (!sizes && !dtype && !sparsity)
    return;
  os << "<";
  if (sizes) {
    os << "[";
    llvm::interleave(
        *sizes, os,
        [&](int64_t size) {
          if (size == kUnknownSize)
            os << "?";
          else
            os << size;
        },
        ",");
    os << "]";
  } else {
    os << "*";
  }
  os << ",";
  if (dtype)
    printDtype();
  else
    os << "unk";
  if (sparsity) {
    os << ",";
    printSparsity();
  }
  os << ">";
}

static void printTensorParts(AsmPrinter &printer,
                             std::optional<ArrayRef<int64_t>> sizes, Type dtype,
                             Attribute sparsity) {
  writeTensorParts(
      printer.getStream(), sizes, dtype, sparsity,
      [&] { printer.printType(dtype); },
      [&] { printer.printAttribute(sparsity); });
}

/// Whether `type` is a tensor type that `getTensorTypeText` keeps.
static bool printsAlikeEverywhere(Type type) {
  auto tensor = dyn_cast<BaseTensorType>(type);
  if (!tensor || tensor.getOptionalSparsity())
    return false;
  Type dtype = tensor.getOptionalDtype();
  return !dtype || isa<BuiltinDialect>(dtype.getDialect());
}

StringRef TorchDialect::getTensorTypeText(Type type) const {
  assert(printsAlikeEverywhere(type) && "text that depends on the module");
  std::lock_guard<std::mutex> lock(printedTextsMutex);
  StringRef &text = tensorTypeTexts[type];
  if (text.data())
    return text;
  auto tensor = cast<BaseTensorType>(type);
  std::string buffer;
  llvm::raw_string_ostream os(buffer);
  os << (isa<ValueTensorType>(type) ? ValueTensorType::getMnemonic()
                                    : NonValueTensorType::getMnemonic());
  writeTensorParts(
      os, tensor.getOptionalSizes(), tensor.getOptionalDtype(), Attribute(),
      [&] { tensor.getOptionalDtype().print(os); }, [] {});
  text = llvm::StringSaver(printedTextMemory).save(buffer);
  return text;
}

template <typename TensorType> static Type parseTensorType(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  FailureOr<TensorTypeParts> parts = parseTensorParts(parser);
  if (failed(parts))
    return Type();
  std::optional<ArrayRef<int64_t>> sizes;
  if (parts->sizes)
    sizes = ArrayRef<int64_t>(*parts->sizes);
  return TensorType::getChecked([&] { return parser.emitError(loc); },
                                parser.getContext(), sizes, parts->dtype,
                                parts->sparsity);
}

NonValueTensorType ValueTensorType::getWithoutValueSemantics() const {
  return NonValueTensorType::get(getContext(), getOptionalSizes(),
                                 getOptionalDtype(), getOptionalSparsity());
}

ValueTensorType NonValueTensorType::getWithValueSemantics() const {
  return ValueTensorType::get(getContext(), getOptionalSizes(),
                              getOptionalDtype(), getOptionalSparsity());
}

Type ValueTensorType::parse(AsmParser &parser) {
  return parseTensorType<ValueTensorType>(parser);
}
void ValueTensorType::print(AsmPrinter &printer) const {
  printTensorParts(printer, getOptionalSizes(), getOptionalDtype(),
                   getOptionalSparsity());
}

Type NonValueTensorType::parse(AsmParser &parser) {
  return parseTensorType<NonValueTensorType>(parser);
}
void NonValueTensorType::print(AsmPrinter &printer) const {
  printTensorParts(printer, getOptionalSizes(), getOptionalDtype(),
                   getOptionalSparsity());
}
