//===- TensorDTypes.h - libtorch dtypes and safetensors dtypes --*- C++ -*-===//
//
// The one mapping between at::ScalarType and the safetensors dtypes, for the
// translation units that see libtorch (lib/Import and runtime/).
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_SUPPORT_TENSORDTYPES_H
#define PIPPY_SUPPORT_TENSORDTYPES_H

#include "pippy/Support/Safetensors.h"

#include <c10/core/ScalarType.h>

#include <optional>

namespace pippy {

/// The safetensors dtype of a libtorch dtype; none when the format has none.
inline std::optional<safetensors::DType> toStorageDType(at::ScalarType type) {
  using safetensors::DType;
  switch (type) {
  case at::kFloat:
    return DType::F32;
  case at::kDouble:
    return DType::F64;
  case at::kHalf:
    return DType::F16;
  case at::kBFloat16:
    return DType::BF16;
  case at::kLong:
    return DType::I64;
  case at::kInt:
    return DType::I32;
  case at::kShort:
    return DType::I16;
  case at::kChar:
    return DType::I8;
  case at::kByte:
    return DType::U8;
  case at::kBool:
    return DType::BOOL;
  default:
    return std::nullopt;
  }
}

/// The libtorch dtype of a safetensors dtype; none for float8 dtypes, which
/// libtorch 1.13 lacks.
inline std::optional<at::ScalarType> toScalarType(safetensors::DType dtype) {
  using safetensors::DType;
  switch (dtype) {
  case DType::F32:
    return at::kFloat;
  case DType::F64:
    return at::kDouble;
  case DType::F16:
    return at::kHalf;
  case DType::BF16:
    return at::kBFloat16;
  case DType::I64:
    return at::kLong;
  case DType::I32:
    return at::kInt;
  case DType::I16:
    return at::kShort;
  case DType::I8:
    return at::kChar;
  case DType::U8:
    return at::kByte;
  case DType::BOOL:
    return at::kBool;
  default:
    return std::nullopt;
  }
}

} // namespace pippy

#endif // PIPPY_SUPPORT_TENSORDTYPES_H
