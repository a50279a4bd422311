//===- TorchScriptTypes.cpp - types and constants of traced values --------===//
//
// The TorchScript importer's mapping of the example run's values to the
// graph IR: the `torch` dialect type of a tensor, a scalar or a container
// (from the concrete value where that is more precise than the JIT type),
// the flattening of nested tuples and lists that forward returns, and the
// `torch.constant.*` ops and tensor literals of values known at import time.
//
//===----------------------------------------------------------------------===//

#include "TorchScriptImpl.h"

#include "pippy/Dialect/Torch/TorchDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <functional>

using namespace mlir;
namespace td = ::mlir::torch;

namespace pippy::torchscript {

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

Type Importer::getDtype(at::ScalarType type) {
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

Type Importer::getTensorType(const at::Tensor &tensor) {
  std::vector<int64_t> sizes(tensor.sizes().begin(), tensor.sizes().end());
  return td::ValueTensorType::get(&context, ArrayRef<int64_t>(sizes),
                                  getDtype(tensor.scalar_type()), Attribute());
}

/// The MLIR type of a JIT type, for values nested in containers.
Type Importer::getStaticType(const c10::TypePtr &type, jit::Node *node) {
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
    return td::ListType::get(
        getStaticType(type->expectRef<c10::ListType>().getElementType(), node));
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
Type Importer::getValueType(jit::Value *value, jit::Node *node) {
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
Type Importer::getTupleType(const c10::IValue &tuple, jit::Node *node) {
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
ArrayRef<c10::IValue> Importer::elementsOf(const c10::IValue &value) {
  if (value.isTuple())
    return value.toTupleRef().elements().asArrayRef();
  return value.toListRef();
}

/// A tuple or list whose elements are tensors or such tuples and lists.
bool Importer::isNestedTensors(const c10::IValue &value) {
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
Value Importer::flattenTuple(Value tuple, const c10::IValue &concrete,
                             Location loc) {
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
          parts =
              td::PrimListUnpackOp::create(builder, loc, types, v).getResults();
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

bool Importer::isTupleOfTensors(const c10::IValue &value) {
  if (!value.isTuple())
    return false;
  for (const c10::IValue &e : value.toTupleRef().elements())
    if (!e.isTensor())
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

/// Emits `value` as torch constants; none if it has no constant form.
Value Importer::emitConstant(const c10::IValue &value, Location loc) {
  if (value.isInt())
    return td::ConstantIntOp::create(builder, loc, td::IntType::get(&context),
                                     builder.getI64IntegerAttr(value.toInt()));
  if (value.isDouble())
    return td::ConstantFloatOp::create(
        builder, loc, td::FloatType::get(&context),
        builder.getF64FloatAttr(value.toDouble()));
  if (value.isBool())
    return td::ConstantBoolOp::create(builder, loc, td::BoolType::get(&context),
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
      elementType = value.isIntList()      ? Type(td::IntType::get(&context))
                    : value.isDoubleList() ? Type(td::FloatType::get(&context))
                                           : Type(td::BoolType::get(&context));
    return td::PrimListConstructOp::create(
        builder, loc, td::ListType::get(elementType), elements);
  }
  if (value.isTensor())
    return emitTensorLiteral(value.toTensor(), loc);
  return Value();
}

Value Importer::emitTensorLiteral(const at::Tensor &tensor, Location loc) {
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

Value Importer::emitInt(int64_t v, Location loc) {
  return emitConstant(c10::IValue(v), loc);
}

} // namespace pippy::torchscript
