//===- AsmText.h - arranging printed IR for fast reading --------*- C++ -*-===//
//
// MLIR's printer writes location aliases (`#loc3 = loc("layers.0.attn")`)
// after the top-level operation. Its parser then makes a placeholder location
// for every use it meets before the definition and rewrites all of them once
// the file ends. Defined before the operation, each use resolves on the spot:
// on a 102k-op model IR, parsing and printing took about a fifth less time
// (bench/RESULTS.md, session 10).
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_SUPPORT_ASMTEXT_H
#define PIPPY_SUPPORT_ASMTEXT_H

#include "llvm/ADT/StringRef.h"
#include <string>

namespace pippy {

/// Returns `text` with the block of location alias definitions that ends it
/// (`#name = loc(...)` lines, one per line as MLIR prints them) moved to just
/// after the alias definitions that open it. The relative order of the moved
/// lines is kept, so an alias still follows the aliases it names. Text that
/// does not end with such a block (no locations printed, a resource section,
/// several top-level operations after each other) is returned unchanged.
std::string hoistLocationAliases(llvm::StringRef text);

} // namespace pippy

#endif // PIPPY_SUPPORT_ASMTEXT_H
