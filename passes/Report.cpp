//===- Report.cpp - stage table of a pipeline -----------------------------===//
//
// What each stage computes, holds and transfers, from the cost model, as a
// text table or JSON.
//
//===----------------------------------------------------------------------===//

#include "pippy/Analysis/CostModel.h"
#include "pippy/Analysis/GraphIR.h"
#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

#define DEBUG_TYPE "pippy-report"

namespace mlir::pippy {
#define GEN_PASS_DEF_PIPPYREPORT
#include "passes/Passes.h.inc"
} // namespace mlir::pippy

using namespace mlir;
namespace pd = mlir::pippy;

namespace {

struct StageRow {
  int64_t index = 0, ops = 0, params = 0, paramBytes = 0, flops = 0,
          bytesMoved = 0, activationBytes = 0, recvBytes = 0, sendBytes = 0;
  int64_t predicted() const {
    return flops + bytesMoved + recvBytes + sendBytes;
  }
};

StageRow measure(pd::StageOp stage) {
  StageRow row;
  row.index = stage.getIndexAttr().getInt();
  llvm::StringSet<> names;
  for (Operation &op : stage.getBody().front().without_terminator()) {
    if (auto param = dyn_cast<pd::ParamOp>(op)) {
      if (names.insert(param.getName()).second) {
        ++row.params;
        row.paramBytes += ::pippy::getTensorBytes(param.getType());
      }
      continue;
    }
    if (::pippy::isReplicable(&op))
      continue;
    ++row.ops;
    ::pippy::OpCost cost = ::pippy::estimateOpCost(&op);
    row.flops += cost.flops;
    row.bytesMoved += cost.bytes;
    for (Value result : op.getResults())
      row.activationBytes += ::pippy::getTensorBytes(result.getType());
  }
  // Transfers between stages, as the balancer counts them: model inputs and
  // outputs are not.
  for (Value input : stage.getInputs())
    if (input.getDefiningOp<pd::StageOp>())
      row.recvBytes += ::pippy::getTensorBytes(input.getType());
  for (Value result : stage.getResults())
    if (llvm::any_of(result.getUsers(),
                     [](Operation *user) { return isa<pd::StageOp>(user); }))
      row.sendBytes += ::pippy::getTensorBytes(result.getType());
  return row;
}

struct ReportPass : public pd::impl::PippyReportBase<ReportPass> {
  using Base::Base;

  void runOnOperation() override {
    if (format != "text" && format != "json") {
      getOperation().emitError("unknown report format '")
          << format << "'; expected text or json";
      return signalPassFailure();
    }
    bool any = false;
    getOperation().walk([&](pd::PipelineOp pipeline) {
      any = true;
      std::vector<StageRow> rows;
      for (pd::StageOp stage : pipeline.getStages())
        rows.push_back(measure(stage));
      int64_t slowest = 0, total = 0;
      for (const StageRow &row : rows) {
        slowest = std::max(slowest, row.predicted());
        total += row.predicted();
      }
      double mean = rows.empty() ? 0 : double(total) / rows.size();
      double ratio = mean > 0 ? slowest / mean : 1.0;
      if (format == "json")
        printJson(rows, ratio);
      else
        printText(rows, ratio);
    });
    if (!any)
      getOperation().emitWarning("no pippy.pipeline to report on; split the "
                                 "model first (--pippy-split)");
    markAllAnalysesPreserved();
  }

  void printText(const std::vector<StageRow> &rows, double ratio) {
    llvm::raw_ostream &os = llvm::outs();
    os << llvm::formatv("{0,-6}{1,8}{2,8}{3,14}{4,16}{5,14}{6,18}{7,12}{8,12}"
                        "{9,16}\n",
                        "stage", "ops", "params", "param_bytes", "flops",
                        "bytes_moved", "activation_bytes", "recv_bytes",
                        "send_bytes", "predicted");
    for (const StageRow &r : rows)
      os << llvm::formatv("{0,-6}{1,8}{2,8}{3,14}{4,16}{5,14}{6,18}{7,12}"
                          "{8,12}{9,16}\n",
                          r.index, r.ops, r.params, r.paramBytes, r.flops,
                          r.bytesMoved, r.activationBytes, r.recvBytes,
                          r.sendBytes, r.predicted());
    os << llvm::formatv("balance ratio (slowest / mean): {0:f3}\n", ratio);
  }

  void printJson(const std::vector<StageRow> &rows, double ratio) {
    llvm::json::Array stages;
    for (const StageRow &r : rows)
      stages.push_back(
          llvm::json::Object{{"stage", r.index},
                             {"ops", r.ops},
                             {"params", r.params},
                             {"param_bytes", r.paramBytes},
                             {"flops", r.flops},
                             {"bytes_moved", r.bytesMoved},
                             {"activation_bytes", r.activationBytes},
                             {"recv_bytes", r.recvBytes},
                             {"send_bytes", r.sendBytes},
                             {"predicted", r.predicted()}});
    llvm::json::Object report{{"stages", std::move(stages)},
                              {"balance_ratio", ratio}};
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(report)))
                 << "\n";
  }
};

} // namespace
