//===- OpNames.cpp - torch op names to ATen operator names ----------------===//

#include "pippy/Support/OpNames.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

using namespace pippy;

static bool isIdentifier(llvm::StringRef s) {
  if (s.empty() || (!llvm::isAlpha(s.front()) && s.front() != '_'))
    return false;
  return llvm::all_of(s, [](char c) { return llvm::isAlnum(c) || c == '_'; });
}

std::optional<AtenOpName> pippy::parseTorchOpName(llvm::StringRef opName) {
  if (!opName.consume_front("torch."))
    return std::nullopt;
  llvm::SmallVector<llvm::StringRef, 3> parts;
  opName.split(parts, '.');
  if (parts.size() < 2 || parts.size() > 3 ||
      !llvm::all_of(parts, isIdentifier))
    return std::nullopt;
  AtenOpName op{parts[0].str(), parts[1].str(),
                parts.size() == 3 ? parts[2].str() : std::string()};
  return op;
}

std::string pippy::getTorchOpName(const AtenOpName &op) {
  std::string name = "torch." + op.ns + "." + op.name;
  if (!op.overload.empty())
    name += "." + op.overload;
  return name;
}

std::optional<AtenOpName> pippy::parseSchemaName(llvm::StringRef schemaName) {
  auto [ns, rest] = schemaName.split("::");
  if (rest.empty() || !isIdentifier(ns))
    return std::nullopt;
  auto [name, overload] = rest.split('.');
  bool hasDot = rest.contains('.');
  if (!isIdentifier(name) || (hasDot && !isIdentifier(overload)))
    return std::nullopt;
  return AtenOpName{ns.str(), name.str(), overload.str()};
}
