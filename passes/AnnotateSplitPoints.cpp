//===- AnnotateSplitPoints.cpp - split points by module path --------------===//
//
// `layers.4:begin` puts a pippy.split_point before the first op of module
// layers.4, `layers.8:end` after its last op (PyTorch's SplitPoint.BEGINNING
// and SplitPoint.END). Parameters and constants are not counted: outlining
// copies them into every stage that uses them.
//
//===----------------------------------------------------------------------===//

#include "pippy/Analysis/GraphIR.h"
#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#define DEBUG_TYPE "pippy-annotate-split-points"

namespace mlir::pippy {
#define GEN_PASS_DEF_PIPPYANNOTATESPLITPOINTS
#include "passes/Passes.h.inc"
} // namespace mlir::pippy

using namespace mlir;

namespace {

struct AnnotateSplitPointsPass
    : public mlir::pippy::impl::PippyAnnotateSplitPointsBase<
          AnnotateSplitPointsPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    Block &body = func.getBody().front();
    for (const std::string &point : points) {
      auto [path, where] = StringRef(point).rsplit(':');
      if (path.empty() || (where != "begin" && where != "end")) {
        func.emitError("split point '")
            << point << "' must be <module path>:begin or <module path>:end";
        return signalPassFailure();
      }
      Operation *first = nullptr, *last = nullptr;
      // Separate runs of the module's ops: a module called several times
      // (weights shared across depth, as in ALBERT).
      unsigned runs = 0;
      bool inRun = false;
      for (Operation &op : body.without_terminator()) {
        if (::pippy::isReplicable(&op) || isa<mlir::pippy::SplitPointOp>(op))
          continue;
        std::optional<std::string> opPath = ::pippy::getModulePath(op.getLoc());
        if (!opPath || !::pippy::isInModule(*opPath, path)) {
          inRun = false;
          continue;
        }
        runs += !inRun;
        inRun = true;
        if (!first)
          first = &op;
        last = &op;
      }
      if (!first) {
        func.emitError("split point '")
            << point << "' matches no op: no op has module path '" << path
            << "' or a path inside it";
        return signalPassFailure();
      }
      if (runs > 1)
        func.emitWarning("split point '")
            << point << "': module '" << path << "' runs " << runs
            << " times (its ops come in " << runs
            << " separate runs, as when one module is called repeatedly); "
               "the split goes "
            << (where == "begin" ? "before its first run"
                                 : "after its last run")
            << " only";
      OpBuilder builder(func.getContext());
      if (where == "begin")
        builder.setInsertionPoint(first);
      else
        builder.setInsertionPointAfter(last);
      mlir::pippy::SplitPointOp::create(
          builder, NameLoc::get(builder.getStringAttr(point)));
    }
  }
};

} // namespace
