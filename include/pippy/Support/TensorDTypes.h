//===- TensorDTypes.h - the one table of dtypes -----------------*- C++ -*-===//
//
// Every dtype pippy knows, as libtorch (at::ScalarType), stage executables
// (exe::DType, spelt as the IR spells it) and safetensors (when the format
// has it) name it: one row each, for the translation units that see
// libtorch (lib/Import and runtime/).
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_SUPPORT_TENSORDTYPES_H
#define PIPPY_SUPPORT_TENSORDTYPES_H

#include "pippy/Executable/Executable_generated.h"
#include "pippy/Support/Safetensors.h"

#include <c10/core/ScalarType.h>

#include <optional>

namespace pippy {

struct DTypeRow {
  at::ScalarType scalarType;
  exe::DType dtype;
  std::optional<safetensors::DType> storage;
};

inline constexpr DTypeRow kDTypes[] = {
    {at::kFloat, exe::DType::f32, safetensors::DType::F32},
    {at::kDouble, exe::DType::f64, safetensors::DType::F64},
    {at::kHalf, exe::DType::f16, safetensors::DType::F16},
    {at::kBFloat16, exe::DType::bf16, safetensors::DType::BF16},
    {at::kLong, exe::DType::si64, safetensors::DType::I64},
    {at::kInt, exe::DType::si32, safetensors::DType::I32},
    {at::kShort, exe::DType::si16, safetensors::DType::I16},
    {at::kChar, exe::DType::si8, safetensors::DType::I8},
    {at::kByte, exe::DType::ui8, safetensors::DType::U8},
    {at::kBool, exe::DType::i1, safetensors::DType::BOOL},
    {at::kComplexFloat, exe::DType::complex_f32, std::nullopt},
    {at::kComplexDouble, exe::DType::complex_f64, std::nullopt},
    {at::kComplexHalf, exe::DType::complex_f16, std::nullopt},
};

/// The libtorch dtype of an executable's dtype (every one has one).
inline at::ScalarType toScalarType(exe::DType dtype) {
  for (const DTypeRow &row : kDTypes)
    if (row.dtype == dtype)
      return row.scalarType;
  return at::kFloat; // unreachable for a verified executable
}

/// The safetensors dtype of a libtorch dtype; none when the format has none.
inline std::optional<safetensors::DType> toStorageDType(at::ScalarType type) {
  for (const DTypeRow &row : kDTypes)
    if (row.scalarType == type)
      return row.storage;
  return std::nullopt;
}

/// The libtorch dtype of a safetensors dtype; none for float8 dtypes, which
/// libtorch 1.13 lacks.
inline std::optional<at::ScalarType> toScalarType(safetensors::DType dtype) {
  for (const DTypeRow &row : kDTypes)
    if (row.storage == dtype)
      return row.scalarType;
  return std::nullopt;
}

} // namespace pippy

#endif // PIPPY_SUPPORT_TENSORDTYPES_H
