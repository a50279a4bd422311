//===- TorchTypes.h - Torch-MLIR compatible types ---------------*- C++ -*-===//
//
// Types of Torch-MLIR's grammar: value and non-value tensors, TorchScript
// scalars and containers. `BaseTensorType` is the common view of
// `!torch.vtensor` and `!torch.tensor`.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_DIALECT_TORCH_TORCHTYPES_H
#define PIPPY_DIALECT_TORCH_TORCHTYPES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"
#include <optional>

namespace mlir {
class AsmParser;
class AsmPrinter;
namespace torch {

/// The size Torch-MLIR prints as `?`.
constexpr int64_t kUnknownSize = ShapedType::kDynamic;

/// Either tensor type of the dialect: sizes (or none when unranked), a dtype
/// (or none when unknown) and an optional sparse encoding.
class BaseTensorType : public Type {
public:
  using Type::Type;
  static bool classof(Type type);

  std::optional<ArrayRef<int64_t>> getOptionalSizes() const;
  Type getOptionalDtype() const;
  Attribute getOptionalSparsity() const;

  bool hasSizes() const { return getOptionalSizes().has_value(); }
  ArrayRef<int64_t> getSizes() const { return *getOptionalSizes(); }
  bool hasDtype() const { return static_cast<bool>(getOptionalDtype()); }
  Type getDtype() const { return getOptionalDtype(); }
  /// True when the rank and every size are known.
  bool hasStaticShape() const;
  /// The number of elements, when the shape is static.
  std::optional<int64_t> getNumElements() const;
};

/// Whether `type` may be the dtype of a torch tensor.
bool isValidTorchDtype(Type type);

/// Parses a type of this dialect written without the `!torch.` prefix, as it
/// is when nested in another torch type.
Type parseTorchDialectType(AsmParser &parser);
/// Prints a type without the `!torch.` prefix when it belongs to this dialect.
void printTorchDialectType(Type type, AsmPrinter &printer);

} // namespace torch
} // namespace mlir

#define GET_TYPEDEF_CLASSES
#include "dialects/Torch/TorchTypes.h.inc"

#endif // PIPPY_DIALECT_TORCH_TORCHTYPES_H
