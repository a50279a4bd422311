//===- OpNames.h - torch op names to ATen operator names --------*- C++ -*-===//
//
// `torch.<ns>.<name>[.<overload>]` in the IR names the dispatcher's operator
// `<ns>::<name>` with overload `<overload>` (empty for the default overload):
// `torch.aten.add.Tensor` is `aten::add.Tensor`, `torch.prims.sum` is
// `prims::sum`.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_SUPPORT_OPNAMES_H
#define PIPPY_SUPPORT_OPNAMES_H

#include "llvm/ADT/StringRef.h"
#include <optional>
#include <string>

namespace pippy {

/// An operator as the ATen dispatcher and JIT registry name it.
struct AtenOpName {
  std::string ns;       ///< `aten`, `prim`, `prims`, `quantized`, ...
  std::string name;     ///< `add`, `add_`, `__and__`, `NumToTensor`, ...
  std::string overload; ///< `Tensor`, `Scalar`, ... or empty.

  /// `aten::add`, the dispatcher's operator name without the overload.
  std::string qualifiedName() const { return ns + "::" + name; }
  /// `aten::add.Tensor`, as schemas print it.
  std::string str() const {
    return overload.empty() ? qualifiedName()
                            : qualifiedName() + "." + overload;
  }
  bool operator==(const AtenOpName &o) const {
    return ns == o.ns && name == o.name && overload == o.overload;
  }
};

/// Maps an MLIR op name (`torch.aten.add.Tensor`) to its operator; none when
/// the name is not of the form `torch.<ns>.<name>[.<overload>]`.
std::optional<AtenOpName> parseTorchOpName(llvm::StringRef opName);

/// Maps an operator to its MLIR op name: the inverse of `parseTorchOpName`.
std::string getTorchOpName(const AtenOpName &op);

/// Parses a schema-style name (`aten::add.Tensor`, `prim::NumToTensor.Scalar`).
std::optional<AtenOpName> parseSchemaName(llvm::StringRef schemaName);

} // namespace pippy

#endif // PIPPY_SUPPORT_OPNAMES_H
