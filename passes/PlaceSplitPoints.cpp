//===- PlaceSplitPoints.cpp - automatic split points ----------------------===//
//
// Builds the partition problem of a graph-IR function (per-op cost and the
// bytes live across each possible cut), solves it optimally, and marks the
// cuts with pippy.split_point.
//
//===----------------------------------------------------------------------===//

#include "pippy/Analysis/CostModel.h"
#include "pippy/Analysis/GraphIR.h"
#include "pippy/Analysis/Partition.h"
#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"

#define DEBUG_TYPE "pippy-place-split-points"

namespace mlir::pippy {
#define GEN_PASS_DEF_PIPPYPLACESPLITPOINTS
#include "passes/Passes.h.inc"
} // namespace mlir::pippy

using namespace mlir;
namespace pd = mlir::pippy;

namespace {

struct PlaceSplitPointsPass
    : public pd::impl::PippyPlaceSplitPointsBase<PlaceSplitPointsPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    Block &body = func.getBody().front();
    if (llvm::any_of(body, [](Operation &op) {
          return isa<pd::SplitPointOp, pd::PipelineOp>(op);
        }))
      return;
    if (policy != "balanced" && policy != "params" && policy != "uniform") {
      func.emitError("unknown split policy '")
          << policy << "'; expected balanced, params or uniform";
      return signalPassFailure();
    }
    if (stages == 0) {
      func.emitError("pippy-place-split-points needs stages=N with N >= 1");
      return signalPassFailure();
    }

    SmallVector<Operation *> ops;
    llvm::DenseMap<Operation *, size_t> index;
    for (Operation &op : body.without_terminator())
      if (!::pippy::isReplicable(&op)) {
        index[&op] = ops.size();
        ops.push_back(&op);
      }
    if (stages > ops.size()) {
      func.emitError("cannot cut ")
          << ops.size() << " ops into " << static_cast<unsigned>(stages)
          << " non-empty stages";
      return signalPassFailure();
    }

    ::pippy::PartitionProblem problem;
    problem.opCost.assign(ops.size(), 0);
    problem.cutCost.assign(ops.size() + 1, 0);
    llvm::StringSet<> seenParams;
    for (auto [i, op] : llvm::enumerate(ops)) {
      if (policy == "uniform") {
        problem.opCost[i] = 1;
        continue;
      }
      if (policy == "params") {
        op->walk([&](Operation *inner) {
          for (Value v : inner->getOperands())
            if (auto param = v.getDefiningOp<pd::ParamOp>())
              if (seenParams.insert(param.getName()).second)
                problem.opCost[i] += ::pippy::getTensorBytes(param.getType());
        });
        continue;
      }
      ::pippy::OpCost cost = ::pippy::estimateOpCost(op);
      problem.opCost[i] = cost.flops + cost.bytes;
    }

    if (policy == "balanced") {
      // Bytes live across each cut: a result made before it and used at or
      // after it (or returned) is sent there.
      std::vector<int64_t> delta(ops.size() + 2, 0);
      for (auto [d, op] : llvm::enumerate(ops))
        for (Value result : op->getResults()) {
          size_t last = d;
          for (Operation *user : result.getUsers()) {
            Operation *top = body.findAncestorOpInBlock(*user);
            if (!top)
              continue;
            if (top == body.getTerminator())
              last = ops.size();
            else if (auto it = index.find(top); it != index.end())
              last = std::max(last, it->second);
          }
          if (last > d) {
            int64_t bytes = ::pippy::getTensorBytes(result.getType());
            delta[d + 1] += bytes;
            delta[last + 1] -= bytes;
          }
        }
      int64_t live = 0;
      for (size_t cut = 1; cut < ops.size(); ++cut) {
        live += delta[cut];
        problem.cutCost[cut] = live;
      }
    }

    ::pippy::Partition partition = ::pippy::partitionOptimal(problem, stages);
    OpBuilder builder(&getContext());
    for (size_t k = 1; k < partition.starts.size(); ++k) {
      builder.setInsertionPoint(ops[partition.starts[k]]);
      pd::SplitPointOp::create(
          builder, NameLoc::get(builder.getStringAttr(
                       policy + " split before stage " + std::to_string(k))));
    }
  }
};

} // namespace
