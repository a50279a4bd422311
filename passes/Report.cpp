//===- Report.cpp - stage table of a pipeline -----------------------------===//
//
// What each stage computes, holds and transfers, from the cost model, as a
// text table or JSON.
//
//===----------------------------------------------------------------------===//

#include "pippy/Analysis/CostModel.h"
#include "pippy/Analysis/GraphIR.h"
#include "pippy/Analysis/Partition.h"
#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Passes/Passes.h"

#include "PipelineSchedule.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

#include <functional>

#define DEBUG_TYPE "pippy-report"

namespace mlir::pippy {
#define GEN_PASS_DEF_PIPPYREPORT
#include "passes/Passes.h.inc"
} // namespace mlir::pippy

using namespace mlir;
namespace pd = mlir::pippy;
namespace sched = ::pippy::schedule;

namespace {

/// The smallest bottleneck any split of the pipeline's ops (in stage order)
/// into the same number of stages reaches under the balancer's objective:
/// op costs plus the bytes of the values live across each cut. Values are
/// followed through stage arguments and results to the op that made them.
int64_t optimalBottleneck(pd::PipelineOp pipeline) {
  std::vector<Operation *> ops;
  for (pd::StageOp stage : pipeline.getStages())
    for (Operation &op : stage.getBody().front().without_terminator())
      if (!isa<pd::ParamOp>(op) && !::pippy::isReplicable(&op))
        ops.push_back(&op);
  size_t numStages = llvm::range_size(pipeline.getStages());
  if (ops.empty() || numStages > ops.size())
    return 0;
  llvm::DenseMap<Operation *, size_t> position;
  for (auto [i, op] : llvm::enumerate(ops))
    position[op] = i;
  // The op result a value stands for (none for the model's inputs).
  std::function<Value(Value)> canonical = [&](Value v) -> Value {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto stage = dyn_cast<pd::StageOp>(arg.getOwner()->getParentOp());
      if (!stage)
        return Value();
      return canonical(stage.getInputs()[arg.getArgNumber()]);
    }
    if (auto stage = v.getDefiningOp<pd::StageOp>()) {
      Operation *yield = stage.getBody().front().getTerminator();
      return canonical(yield->getOperand(cast<OpResult>(v).getResultNumber()));
    }
    return v;
  };
  llvm::DenseMap<Value, size_t> lastUse;
  for (auto [i, op] : llvm::enumerate(ops))
    for (Value operand : op->getOperands())
      if (Value c = canonical(operand))
        lastUse[c] = std::max(lastUse.lookup(c), i);
  auto yield = pipeline.getBody().front().getTerminator();
  for (Value out : yield->getOperands())
    if (Value c = canonical(out))
      lastUse[c] = ops.size();
  ::pippy::PartitionProblem problem;
  problem.opCost.assign(ops.size(), 0);
  problem.cutCost.assign(ops.size() + 1, 0);
  std::vector<int64_t> delta(ops.size() + 2, 0);
  for (auto [d, op] : llvm::enumerate(ops)) {
    ::pippy::OpCost cost = ::pippy::estimateOpCost(op);
    problem.opCost[d] = cost.flops + cost.bytes;
    for (Value result : op->getResults()) {
      auto it = lastUse.find(result);
      if (it == lastUse.end() || it->second <= d)
        continue;
      int64_t bytes = ::pippy::getTensorBytes(result.getType());
      delta[d + 1] += bytes;
      delta[it->second + 1] -= bytes;
    }
  }
  int64_t live = 0;
  for (size_t cut = 1; cut < ops.size(); ++cut) {
    live += delta[cut];
    problem.cutCost[cut] = live;
  }
  return ::pippy::partitionOptimal(problem, numStages).bottleneck;
}

/// What --pippy-tensor-parallel made of one linear or embedding layer.
struct LinearRole {
  int64_t stage;
  std::string module, role;
};

/// A layer's name: its module path, or without locations its weight's.
std::string layerName(Operation *op) {
  if (std::optional<std::string> path = ::pippy::getModulePath(op->getLoc()))
    return *path;
  for (Value v : op->getOperands())
    if (auto param = v.getDefiningOp<pd::ParamOp>())
      return param.getName().str();
  return "?";
}

/// The linears of a pipeline sharded by --pippy-tensor-parallel, in stage
/// order; empty for one that is not.
std::vector<LinearRole> tensorParallelRoles(pd::PipelineOp pipeline) {
  std::vector<LinearRole> roles;
  for (pd::StageOp stage : pipeline.getStages())
    stage.walk([&](Operation *op) {
      if (auto role = op->getAttrOfType<StringAttr>("pippy.tensor_parallel"))
        roles.push_back({stage.getIndexAttr().getInt(), layerName(op),
                         role.getValue().str()});
    });
  return roles;
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
      std::vector<pd::StageRow> rows;
      for (pd::StageOp stage : pipeline.getStages())
        rows.push_back(pd::measureStage(stage));
      int64_t slowest = 0, total = 0;
      for (const pd::StageRow &row : rows) {
        slowest = std::max(slowest, row.predicted());
        total += row.predicted();
      }
      double mean = rows.empty() ? 0 : double(total) / rows.size();
      double ratio = mean > 0 ? slowest / mean : 1.0;
      int64_t optimum = optimalBottleneck(pipeline);
      sched::Topology topo = pd::topologyOf(pipeline);
      FailureOr<std::optional<sched::Schedule>> schedule =
          pd::recordedSchedule(pipeline, topo);
      if (failed(schedule))
        return signalPassFailure();
      std::optional<sched::Simulation> sim;
      if (*schedule) {
        FailureOr<sched::StageCosts> stageCosts =
            pd::simulationCosts(pipeline, costs);
        if (failed(stageCosts))
          return signalPassFailure();
        sim = sched::simulate(**schedule, topo, *stageCosts);
      }
      std::vector<LinearRole> roles = tensorParallelRoles(pipeline);
      if (format == "json") {
        printJson(rows, ratio, slowest, optimum,
                  sim ? scheduleJson(**schedule, *sim)
                      : llvm::json::Value(nullptr),
                  roles);
      } else {
        printText(rows, ratio, slowest, optimum);
        if (sim)
          printScheduleText(**schedule, *sim);
        printRolesText(roles);
      }
    });
    if (!any)
      getOperation().emitWarning("no pippy.pipeline to report on; split the "
                                 "model first (--pippy-split)");
    markAllAnalysesPreserved();
  }

  void printText(const std::vector<pd::StageRow> &rows, double ratio,
                 int64_t slowest, int64_t optimum) {
    llvm::raw_ostream &os = llvm::outs();
    os << llvm::formatv("{0,-6}{1,8}{2,8}{3,14}{4,16}{5,14}{6,18}{7,12}{8,12}"
                        "{9,16}\n",
                        "stage", "ops", "params", "param_bytes", "flops",
                        "bytes_moved", "activation_bytes", "recv_bytes",
                        "send_bytes", "predicted");
    for (const pd::StageRow &r : rows)
      os << llvm::formatv("{0,-6}{1,8}{2,8}{3,14}{4,16}{5,14}{6,18}{7,12}"
                          "{8,12}{9,16}\n",
                          r.index, r.ops, r.params, r.paramBytes, r.flops,
                          r.bytesMoved, r.activationBytes, r.recvBytes,
                          r.sendBytes, r.predicted());
    os << llvm::formatv("balance ratio (slowest / mean): {0:f3}\n", ratio);
    os << llvm::formatv("bottleneck: {0}; optimum for {1} stages: {2} "
                        "(bottleneck / optimum: {3:f3})\n",
                        slowest, rows.size(), optimum,
                        optimum > 0 ? double(slowest) / optimum : 1.0);
  }

  /// The recorded schedule's simulation on the cost model: per rank its
  /// stages, busy share, most micro-batches and activation bytes held.
  void printScheduleText(const sched::Schedule &s,
                         const sched::Simulation &sim) {
    llvm::raw_ostream &os = llvm::outs();
    std::string basis = costs.empty() ? "backward = 2 x forward, W = "
                                        "forward (a B's W held back as "
                                        "pippy-run does), messages free"
                                      : "costs from " + costs.getValue();
    os << llvm::formatv("schedule {0}, {1} micro-batches on {2} ranks, "
                        "simulated ({3}):\n",
                        sched::kindName(s.kind), s.microbatches, s.numRanks(),
                        basis);
    os << llvm::formatv("{0,-6}{1,-10}{2,8}{3,15}{4,24}\n", "rank", "stages",
                        "busy", "peak_inflight", "peak_activation_bytes");
    for (int r = 0; r < s.numRanks(); ++r)
      os << llvm::formatv("{0,-6}{1,-10}{2,8:f3}{3,15}{4,24}\n", r,
                          stagesText(s, r),
                          sim.makespan > 0 ? sim.busy[r] / sim.makespan : 0,
                          sim.peakInflight[r],
                          static_cast<int64_t>(sim.peakActivationBytes[r]));
    os << llvm::formatv("bubble: {0:f3}\n", sim.bubbleFraction);
  }

  /// "tensor parallel: 2 column-parallel, 2 row-parallel, 1
  /// vocabulary-parallel, 1 replicated", then each layer.
  static void printRolesText(const std::vector<LinearRole> &roles) {
    if (roles.empty())
      return;
    int column = 0, row = 0, vocabulary = 0;
    for (const LinearRole &r : roles) {
      column += r.role == "column";
      row += r.role == "row";
      vocabulary += r.role == "vocabulary";
    }
    llvm::raw_ostream &os = llvm::outs();
    os << llvm::formatv("tensor parallel: {0} column-parallel, {1} "
                        "row-parallel, {2} vocabulary-parallel, {3} "
                        "replicated\n",
                        column, row, vocabulary,
                        roles.size() - column - row - vocabulary);
    for (const LinearRole &r : roles)
      os << llvm::formatv("  stage {0} {1}: {2}\n", r.stage, r.module, r.role);
  }

  static std::string stagesText(const sched::Schedule &s, int r) {
    std::string text;
    for (int stage : s.stagesOf(r))
      text += (text.empty() ? "" : ",") + std::to_string(stage);
    return text;
  }

  static llvm::json::Value scheduleJson(const sched::Schedule &s,
                                        const sched::Simulation &sim) {
    llvm::json::Array ranks;
    for (int r = 0; r < s.numRanks(); ++r) {
      llvm::json::Array stages;
      for (int stage : s.stagesOf(r))
        stages.push_back(stage);
      ranks.push_back(llvm::json::Object{
          {"rank", r},
          {"stages", std::move(stages)},
          {"busy", sim.busy[r]},
          {"peak_inflight", sim.peakInflight[r]},
          {"peak_activation_bytes",
           static_cast<int64_t>(sim.peakActivationBytes[r])}});
    }
    return llvm::json::Object{{"kind", sched::kindName(s.kind)},
                              {"microbatches", s.microbatches},
                              {"ranks", std::move(ranks)},
                              {"makespan", sim.makespan},
                              {"bubble_fraction", sim.bubbleFraction}};
  }

  void printJson(const std::vector<pd::StageRow> &rows, double ratio,
                 int64_t slowest, int64_t optimum, llvm::json::Value schedule,
                 const std::vector<LinearRole> &roles) {
    llvm::json::Array stages;
    for (const pd::StageRow &r : rows)
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
                              {"balance_ratio", ratio},
                              {"bottleneck", slowest},
                              {"optimum", optimum}};
    if (schedule.kind() != llvm::json::Value::Null)
      report["schedule"] = std::move(schedule);
    if (!roles.empty()) {
      llvm::json::Array linears;
      for (const LinearRole &r : roles)
        linears.push_back(llvm::json::Object{
            {"stage", r.stage}, {"module", r.module}, {"role", r.role}});
      report["tensor_parallel"] = std::move(linears);
    }
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(report)))
                 << "\n";
  }
};

} // namespace
