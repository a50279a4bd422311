//===- SplitSteps.h - the steps of --pippy-split as functions ---*- C++ -*-===//
//
// Placing split points and outlining stages, each the body of its pass and
// run together by `pippy-split-stages` (what `--pippy-split` runs), so that
// the pass manager verifies the function once after both rather than once
// after each.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_PASSES_SPLITSTEPS_H
#define PIPPY_PASSES_SPLITSTEPS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>

namespace mlir::pippy {

/// The options of `pippy-place-split-points`.
struct SplitPlacement {
  unsigned stages = 0;
  std::string policy = "balanced";
  int64_t memCap = 0;
  std::string profile;
};

/// Places `stages - 1` split points in `func` unless it already has markers
/// or a pipeline. Errors are emitted on `func` and return failure. Sets
/// `changed` when it inserted markers.
LogicalResult placeSplitPoints(func::FuncOp func,
                               const SplitPlacement &placement, bool &changed);

/// Outlines the ops between `func`'s split points into one pipeline of
/// stages (one stage without markers when `singleStage`). Errors are emitted
/// on the offending op and return failure. Sets `changed` when it outlined.
LogicalResult outlineStages(func::FuncOp func, bool singleStage, bool &changed);

} // namespace mlir::pippy

#endif // PIPPY_PASSES_SPLITSTEPS_H
