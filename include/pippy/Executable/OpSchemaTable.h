//===- OpSchemaTable.h - argument names of operator schemas -----*- C++ -*-===//
//
// The argument names of every operator schema of the libtorch pippy was
// built with, generated at build time (lib/Executable/OpSchemaTableGen.cpp).
// Compiler-side: the lowering names each call's operands with them.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_EXECUTABLE_OPSCHEMATABLE_H
#define PIPPY_EXECUTABLE_OPSCHEMATABLE_H

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pippy::exe {

/// The argument names of `op` (`aten::add.Tensor`, `aten::relu`), in schema
/// order; none when the build's libtorch has no such operator.
std::optional<std::vector<std::string_view>>
schemaArgumentNames(std::string_view op);

} // namespace pippy::exe

#endif // PIPPY_EXECUTABLE_OPSCHEMATABLE_H
