//===- PlaceSplitPoints.cpp - automatic split points ----------------------===//
//
// Builds the partition problem of a graph-IR function (per-op cost and the
// bytes live across each possible cut), solves it optimally, and marks the
// cuts with pippy.split_point.
//
//===----------------------------------------------------------------------===//

#include "SplitSteps.h"
#include "pippy/Analysis/CostModel.h"
#include "pippy/Analysis/GraphIR.h"
#include "pippy/Analysis/Partition.h"
#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Passes/Passes.h"
#include "pippy/Support/Profile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

#define DEBUG_TYPE "pippy-place-split-points"

namespace mlir::pippy {
#define GEN_PASS_DEF_PIPPYPLACESPLITPOINTS
#include "passes/Passes.h.inc"
} // namespace mlir::pippy

using namespace mlir;
namespace pd = mlir::pippy;

namespace {

/// A measured profile: per-op nanoseconds and the cost of a byte sent.
struct Profile {
  std::vector<int64_t> opNanoseconds;
  double nsPerByte = 1.0;
};

/// Reads `path` (the format in Passes.td) and checks it against `ops`.
FailureOr<Profile> readProfile(func::FuncOp func, StringRef path,
                               ArrayRef<Operation *> ops) {
  auto fail = [&](const Twine &message) {
    func.emitError("profile ") << path << ": " << message;
    return failure();
  };
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return fail("cannot read it: " + buffer.getError().message());
  std::string error;
  std::optional<::pippy::profile::Profile> read =
      ::pippy::profile::parse((*buffer)->getBuffer(), error);
  if (!read)
    return fail(error);
  Profile profile;
  profile.nsPerByte = read->transferNsPerByte;
  if (read->ops.size() != ops.size())
    return fail("it has " + Twine(read->ops.size()) +
                " ops but the function has " + Twine(ops.size()) +
                " (parameters and constants not counted); was it measured "
                "on this model?");
  profile.opNanoseconds.assign(ops.size(), -1);
  for (const ::pippy::profile::OpTime &op : read->ops) {
    if (op.index < 0 || op.index >= (int64_t)ops.size())
      return fail("an entry lacks a valid \"index\" or \"forward_us\"");
    StringRef actual = ops[op.index]->getName().getStringRef();
    if (!op.op.empty() && op.op != actual)
      return fail("op " + Twine(op.index) + " is " + op.op +
                  " in the profile but " + actual + " in the function");
    double backward = op.backwardUs.value_or(2 * op.forwardUs);
    profile.opNanoseconds[op.index] =
        std::llround((op.forwardUs + backward) * 1000.0);
  }
  for (auto [i, ns] : llvm::enumerate(profile.opNanoseconds))
    if (ns < 0)
      return fail("no entry for op " + Twine(i));
  return profile;
}

/// Per-op memory (mem-cap): parameters at their first use, plus the op's
/// results.
void setOpMemory(::pippy::PartitionProblem &problem,
                 ArrayRef<Operation *> ops) {
  problem.opMemory.assign(ops.size(), 0);
  llvm::StringSet<> held;
  for (auto [i, op] : llvm::enumerate(ops)) {
    op->walk([&](Operation *inner) {
      for (Value v : inner->getOperands())
        if (auto param = v.getDefiningOp<pd::ParamOp>())
          if (held.insert(param.getName()).second)
            problem.opMemory[i] += ::pippy::getTensorBytes(param.getType());
    });
    for (Value result : op->getResults())
      problem.opMemory[i] += ::pippy::getTensorBytes(result.getType());
  }
}

/// Per-op cost: measured, one each (uniform), the bytes of the parameters
/// first used (params), or the cost model's estimate (balanced).
void setOpCosts(::pippy::PartitionProblem &problem, ArrayRef<Operation *> ops,
                StringRef policy, const std::optional<Profile> &measured) {
  llvm::StringSet<> seenParams;
  for (auto [i, op] : llvm::enumerate(ops)) {
    if (measured) {
      problem.opCost[i] = measured->opNanoseconds[i];
      continue;
    }
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
}

/// What is live across each cut: a result made before it and used at or
/// after it (or returned) is sent there. Balancing counts its bytes; a
/// list, a scalar or a tensor whose shape depends on the data cannot be
/// sent, so no cut may separate it from its users, nor a buffer updated in
/// place from its. Returns the number of cuts allowed.
size_t setCutCosts(::pippy::PartitionProblem &problem, Block &body,
                   ArrayRef<Operation *> ops,
                   const llvm::DenseMap<Operation *, size_t> &index,
                   StringRef policy, const std::optional<Profile> &measured) {
  std::vector<int64_t> delta(ops.size() + 2, 0);
  std::vector<int> unsendable(ops.size() + 2, 0);
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
      if (last <= d)
        continue;
      if (isa<torch::BaseTensorType>(result.getType()) &&
          !::pippy::hasDataDependentShape(result)) {
        int64_t bytes = ::pippy::getTensorBytes(result.getType());
        delta[d + 1] += bytes;
        delta[last + 1] -= bytes;
      } else {
        unsendable[d + 1] += 1;
        unsendable[last + 1] -= 1;
      }
    }
  // A buffer updated in place stays in one stage with every op using it.
  for (auto param : body.getOps<mlir::pippy::ParamOp>()) {
    if (!::pippy::isStageState(param))
      continue;
    size_t first = ops.size(), last = 0;
    for (Operation *user : param->getUsers()) {
      Operation *top = body.findAncestorOpInBlock(*user);
      auto it = top ? index.find(top) : index.end();
      if (it == index.end())
        continue;
      first = std::min(first, it->second);
      last = std::max(last, it->second);
    }
    if (first < last) {
      unsendable[first + 1] += 1;
      unsendable[last + 1] -= 1;
    }
  }
  problem.cutAllowed.assign(ops.size() + 1, 1);
  int64_t live = 0;
  int blocked = 0;
  size_t allowedCuts = 0;
  for (size_t cut = 1; cut < ops.size(); ++cut) {
    live += delta[cut];
    blocked += unsendable[cut];
    problem.cutAllowed[cut] = blocked == 0;
    allowedCuts += blocked == 0;
    if (policy == "balanced")
      problem.cutCost[cut] =
          measured ? std::llround(live * measured->nsPerByte) : live;
  }
  return allowedCuts;
}

/// The ops that stages hold, with their positions: parameters and
/// constants do not count, every stage that uses one holds a copy.
void collectOps(Block &body, SmallVectorImpl<Operation *> &ops,
                llvm::DenseMap<Operation *, size_t> &index) {
  for (Operation &op : body.without_terminator())
    if (!::pippy::isReplicable(&op)) {
      index[&op] = ops.size();
      ops.push_back(&op);
    }
}

/// The error when no split into `stages` keeps within mem-cap.
LogicalResult failMemCap(func::FuncOp func,
                         const ::pippy::PartitionProblem &problem,
                         unsigned stages, int64_t memCap) {
  int64_t largest = 0;
  for (int64_t m : problem.opMemory)
    largest = std::max(largest, m);
  func.emitError("no split into ")
      << static_cast<unsigned>(stages)
      << " stages keeps every stage within mem-cap="
      << static_cast<int64_t>(memCap)
      << " bytes (parameters + activations; the largest op alone needs "
      << largest << ")";
  return failure();
}

/// A split point before the first op of each stage but the first.
void insertSplitPoints(func::FuncOp func, ArrayRef<Operation *> ops,
                       const ::pippy::Partition &partition,
                       const std::string &policy) {
  OpBuilder builder(func.getContext());
  for (size_t k = 1; k < partition.starts.size(); ++k) {
    builder.setInsertionPoint(ops[partition.starts[k]]);
    pd::SplitPointOp::create(
        builder, NameLoc::get(builder.getStringAttr(
                     policy + " split before stage " + std::to_string(k))));
  }
}

} // namespace

LogicalResult pd::placeSplitPoints(func::FuncOp func,
                                   const SplitPlacement &placement,
                                   bool &changed) {
  changed = false;
  unsigned stages = placement.stages;
  const std::string &policy = placement.policy;
  int64_t memCap = placement.memCap;
  const std::string &profile = placement.profile;
  if (func.isExternal())
    return success();
  Block &body = func.getBody().front();
  if (llvm::any_of(body, [](Operation &op) {
        return isa<pd::SplitPointOp, pd::PipelineOp>(op);
      }))
    return success(); // the split is already chosen
  if (policy != "balanced" && policy != "params" && policy != "uniform") {
    func.emitError("unknown split policy '")
        << policy << "'; expected balanced, params or uniform";
    return failure();
  }
  if (memCap < 0) {
    func.emitError("mem-cap=")
        << memCap << " is negative; it takes a stage's bytes (0: no cap)";
    return failure();
  }
  if (stages == 0) {
    func.emitError("pippy-place-split-points needs stages=N with N >= 1");
    return failure();
  }

  SmallVector<Operation *> ops;
  llvm::DenseMap<Operation *, size_t> index;
  collectOps(body, ops, index);
  if (stages > ops.size()) {
    func.emitError("cannot cut ")
        << ops.size() << " ops into " << static_cast<unsigned>(stages)
        << " non-empty stages (parameters and constants do not count: "
           "every stage that uses one holds a copy)";
    return failure();
  }

  std::optional<Profile> measured;
  if (!profile.empty()) {
    if (policy != "balanced") {
      func.emitError("profile= goes with policy=balanced, not ") << policy;
      return failure();
    }
    FailureOr<Profile> read = readProfile(func, profile, ops);
    if (failed(read))
      return failure();
    measured = std::move(*read);
  }

  ::pippy::PartitionProblem problem;
  problem.opCost.assign(ops.size(), 0);
  problem.cutCost.assign(ops.size() + 1, 0);
  if (memCap > 0) {
    problem.memoryCap = memCap;
    setOpMemory(problem, ops);
  }
  setOpCosts(problem, ops, policy, measured);
  size_t allowedCuts = setCutCosts(problem, body, ops, index, policy, measured);
  if (allowedCuts + 1 < stages) {
    func.emitError("cannot cut into ")
        << static_cast<unsigned>(stages) << " stages: only " << allowedCuts
        << " places between ops have nothing but tensors live across "
           "them (lists, scalars and tensors of data-dependent shape "
           "cannot cross stages)";
    return failure();
  }

  ::pippy::Partition partition = ::pippy::partitionOptimal(problem, stages);
  if (partition.starts.empty())
    return failMemCap(func, problem, stages, memCap);
  insertSplitPoints(func, ops, partition, policy);
  changed = true;
  return success();
}

namespace {

struct PlaceSplitPointsPass
    : public pd::impl::PippyPlaceSplitPointsBase<PlaceSplitPointsPass> {
  using Base::Base;

  void runOnOperation() override {
    pd::SplitPlacement placement{stages, policy, memCap, profile};
    bool changed = false;
    if (failed(pd::placeSplitPoints(getOperation(), placement, changed)))
      return signalPassFailure();
    if (!changed)
      markAllAnalysesPreserved();
  }
};

} // namespace
