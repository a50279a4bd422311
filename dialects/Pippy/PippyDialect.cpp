//===- PippyDialect.cpp - pippy dialect registration ----------------------===//

#include "pippy/Dialect/Pippy/PippyDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::pippy;

#include "dialects/Pippy/PippyDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Pippy/PippyAttrs.cpp.inc"

void PippyDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Pippy/PippyOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/Pippy/PippyAttrs.cpp.inc"
      >();
}

LogicalResult
TiedGroupAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      StringRef name, ArrayRef<int64_t> stages) {
  if (name.empty())
    return emitError() << "tied group has an empty parameter name";
  if (stages.size() < 2)
    return emitError() << "tied group \"" << name
                       << "\" lists fewer than two stages";
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i] < 0)
      return emitError() << "tied group \"" << name
                         << "\" lists a negative stage " << stages[i];
    if (i > 0 && stages[i] <= stages[i - 1])
      return emitError() << "tied group \"" << name
                         << "\" must list its stages in increasing order";
  }
  return success();
}
