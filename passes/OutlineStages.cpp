//===- OutlineStages.cpp - graph IR to pipeline IR ------------------------===//
//
// The ops between pippy.split_point markers become pippy.stage regions of one
// pippy.pipeline, in op order. Values used by later stages become stage
// results and operands; parameters and constants move into the stage that
// uses them, or are copied into each of several, and a parameter copied into
// several stages gets a tied group.
//
//===----------------------------------------------------------------------===//

#include "SplitSteps.h"
#include "pippy/Analysis/GraphIR.h"
#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "pippy-outline-stages"

namespace mlir::pippy {
#define GEN_PASS_DEF_PIPPYOUTLINESTAGES
#include "passes/Passes.h.inc"
} // namespace mlir::pippy

using namespace mlir;
namespace pd = mlir::pippy;

namespace {

struct StagePlan {
  SmallVector<Operation *> ops;
  llvm::SetVector<Value> inputs;  // in first-use order
  llvm::SetVector<Value> results; // in definition order
  Operation *marker = nullptr;    // the split point that ends it, if any
};

/// Calls `fn` on each value `op` reads that is defined outside it (nested
/// regions included), possibly more than once. Most ops have no regions: they
/// are read straight from their operands, with no set built.
void forEachExternalUse(Operation *op, llvm::function_ref<void(Value)> fn) {
  if (op->getNumRegions() == 0) {
    for (Value operand : op->getOperands())
      fn(operand);
    return;
  }
  op->walk([&](Operation *inner) {
    for (Value operand : inner->getOperands()) {
      Region *defRegion = operand.getParentRegion();
      if (inner == op || !op->isAncestor(defRegion->getParentOp()))
        fn(operand);
    }
  });
}

/// The stages of one function, planned then built.
class Outliner {
public:
  Outliner(func::FuncOp func, Block &body)
      : func(func), body(body), stages(1) {}

  /// Assigns each op to a stage; fails on an empty stage.
  LogicalResult assignStages();
  /// Which values each stage receives and sends; fails on a value that
  /// cannot cross stages.
  LogicalResult planCrossings(func::ReturnOp ret);
  /// Fails where a buffer updated in place (stage state) is used by ops of
  /// more than one stage.
  LogicalResult checkStageState();
  /// Builds the pipeline before `ret`, which then returns its results.
  pd::PipelineOp buildPipeline(func::ReturnOp ret);

private:
  std::optional<unsigned> producerStage(Value v) const;
  LogicalResult collectInputs(unsigned s);
  void sortResults();
  void buildStage(OpBuilder &builder, unsigned s);

  func::FuncOp func;
  Block &body;
  SmallVector<StagePlan> stages;
  llvm::DenseMap<Operation *, unsigned> stageOf;
  llvm::DenseMap<Value, Value> sent; // value -> stage result carrying it
  llvm::MapVector<StringRef, SmallVector<int64_t>> paramStages;
};

/// Fills the region of stage `s`: its ops move in, and the parameters and
/// constants they read are moved or copied in.
class StageFiller {
public:
  StageFiller(Block &body, const llvm::DenseMap<Operation *, unsigned> &stageOf,
              unsigned s, Block *block, OpBuilder &inner, IRMapping &map,
              llvm::MapVector<StringRef, SmallVector<int64_t>> &paramStages)
      : body(body), stageOf(stageOf), s(s), block(block), inner(inner),
        map(map), paramStages(paramStages) {}

  void moveIn(Operation *op);

private:
  bool onlyThisStageReads(Operation *def);
  void copy(Value v);

  Block &body;
  const llvm::DenseMap<Operation *, unsigned> &stageOf;
  unsigned s;
  Block *block;
  OpBuilder &inner;
  IRMapping &map;
  llvm::MapVector<StringRef, SmallVector<int64_t>> &paramStages;
  // Parameter ops of one name (a resource Torch-MLIR reads through several
  // literals) share one copy per stage.
  llvm::StringMap<Value> paramCopies;
};

LogicalResult Outliner::assignStages() {
  SmallVector<Operation *> markers;
  for (Operation &op : body.without_terminator()) {
    if (auto marker = dyn_cast<pd::SplitPointOp>(op)) {
      if (stages.back().ops.empty()) {
        marker.emitOpError("leaves stage ")
            << stages.size() - 1
            << " empty: no op lies between it and the previous split point "
               "or the start of the function";
        return failure();
      }
      stages.back().marker = marker;
      markers.push_back(marker);
      stages.emplace_back();
      continue;
    }
    if (::pippy::isReplicable(&op))
      continue;
    stageOf[&op] = stages.size() - 1;
    stages.back().ops.push_back(&op);
  }
  if (stages.back().ops.empty()) {
    markers.back()->emitOpError("leaves stage ")
        << stages.size() - 1
        << " empty: no op follows it before the end of the function";
    return failure();
  }
  return success();
}

std::optional<unsigned> Outliner::producerStage(Value v) const {
  Operation *def = v.getDefiningOp();
  if (!def)
    return std::nullopt;
  auto it = stageOf.find(def);
  if (it == stageOf.end())
    return std::nullopt;
  return it->second;
}

/// The values stage `s` reads from outside: its inputs, and results of the
/// stages that make them.
LogicalResult Outliner::collectInputs(unsigned s) {
  StagePlan &stage = stages[s];
  for (Operation *op : stage.ops) {
    bool crossesBadly = false;
    forEachExternalUse(op, [&](Value v) {
      if (Operation *def = v.getDefiningOp(); def && ::pippy::isReplicable(def))
        return;
      std::optional<unsigned> from = producerStage(v);
      if (crossesBadly || (from && *from == s))
        return;
      if (from && !isa<torch::BaseTensorType>(v.getType())) {
        v.getDefiningOp()->emitOpError("result of type ")
            << v.getType() << " is made in stage " << *from
            << " and used in stage " << s << "; only tensors can cross stages";
        crossesBadly = true;
        return;
      }
      if (from && ::pippy::hasDataDependentShape(v)) {
        v.getDefiningOp()->emitOpError("result ")
            << cast<OpResult>(v).getResultNumber()
            << " has a shape that depends on the data; it is made in "
               "stage "
            << *from << " and used in stage " << s
            << ", but only tensors of static shape can cross stages";
        crossesBadly = true;
        return;
      }
      stage.inputs.insert(v);
      if (from)
        stages[*from].results.insert(v);
    });
    if (crossesBadly)
      return failure();
  }
  return success();
}

LogicalResult Outliner::checkStageState() {
  for (auto param : body.getOps<pd::ParamOp>()) {
    if (!::pippy::isStageState(param))
      continue;
    Operation *updater = nullptr;
    for (Operation *user : param->getUsers()) {
      Operation *top = body.findAncestorOpInBlock(*user);
      if (!top || !stageOf.count(top))
        continue;
      for (OpOperand &use : user->getOpOperands())
        if (use.get() == param.getResult() && ::pippy::updatesInPlace(use))
          updater = top;
    }
    for (Operation *user : param->getUsers()) {
      Operation *top = body.findAncestorOpInBlock(*user);
      if (!top || !stageOf.count(top) || stageOf[top] == stageOf[updater])
        continue;
      InFlightDiagnostic diag =
          user->emitError("buffer '")
          << param.getName() << "' is updated in place while training by '"
          << updater->getName() << "' in stage " << stageOf[updater]
          << " and used here in stage " << stageOf[top]
          << ": a stage's state cannot be shared; put every op that uses "
             "it in one stage";
      diag.attachNote(updater->getLoc()) << "updated here";
      return failure();
    }
  }
  return success();
}

LogicalResult Outliner::planCrossings(func::ReturnOp ret) {
  for (unsigned s = 0, e = stages.size(); s < e; ++s)
    if (failed(collectInputs(s)))
      return failure();
  // The pipeline's results all come from the last stage, where the loss
  // is taken: one made earlier is sent there (as a skip connection) and
  // passed through.
  unsigned last = stages.size() - 1;
  for (Value v : ret.getOperands())
    if (std::optional<unsigned> from = producerStage(v)) {
      stages[*from].results.insert(v);
      if (*from != last) {
        stages[last].inputs.insert(v);
        stages[last].results.insert(v);
      }
    }
  sortResults();
  return success();
}

/// Results in definition order (all are results of ops in the body).
void Outliner::sortResults() {
  for (StagePlan &stage : stages) {
    SmallVector<Value> sorted(stage.results.begin(), stage.results.end());
    llvm::stable_sort(sorted, [&](Value a, Value b) {
      auto ra = cast<OpResult>(a), rb = cast<OpResult>(b);
      if (ra.getOwner() != rb.getOwner())
        return ra.getOwner()->isBeforeInBlock(rb.getOwner());
      return ra.getResultNumber() < rb.getResultNumber();
    });
    stage.results = llvm::SetVector<Value>(sorted.begin(), sorted.end());
  }
}

pd::PipelineOp Outliner::buildPipeline(func::ReturnOp ret) {
  OpBuilder builder(ret);
  Location loc = func.getLoc();
  auto pipeline = pd::PipelineOp::create(builder, loc, ret.getOperandTypes(),
                                         /*tied=*/nullptr);
  Block *pipelineBody = builder.createBlock(&pipeline.getBody());
  builder.setInsertionPointToEnd(pipelineBody);

  for (unsigned s = 0, e = stages.size(); s < e; ++s)
    buildStage(builder, s);

  SmallVector<Value> outputs;
  for (Value v : ret.getOperands())
    outputs.push_back(sent.count(v) ? sent[v] : v);
  pd::YieldOp::create(builder, loc, outputs);

  SmallVector<Attribute> groups;
  for (auto &[name, users] : paramStages)
    if (users.size() > 1)
      groups.push_back(pd::TiedGroupAttr::get(func.getContext(), name, users));
  if (!groups.empty())
    pipeline.setTiedAttr(builder.getArrayAttr(groups));

  for (unsigned i = 0, e = ret.getNumOperands(); i < e; ++i)
    ret.setOperand(i, pipeline.getResult(i));
  return pipeline;
}

void Outliner::buildStage(OpBuilder &builder, unsigned s) {
  StagePlan &stage = stages[s];
  SmallVector<Value> operands;
  for (Value v : stage.inputs)
    operands.push_back(sent.count(v) ? sent[v] : v);
  SmallVector<Type> resultTypes;
  for (Value v : stage.results)
    resultTypes.push_back(v.getType());
  Location stageLoc =
      stage.marker ? stage.marker->getLoc() : stage.ops.front()->getLoc();
  auto stageOp = pd::StageOp::create(builder, stageLoc, resultTypes,
                                     builder.getI64IntegerAttr(s), operands);
  OpBuilder inner(func.getContext());
  Block *block = inner.createBlock(&stageOp.getBody());
  IRMapping map;
  for (Value v : stage.inputs)
    map.map(v, block->addArgument(v.getType(), v.getLoc()));

  StageFiller filler(body, stageOf, s, block, inner, map, paramStages);
  for (Operation *op : stage.ops)
    filler.moveIn(op);
  SmallVector<Value> yielded;
  // A result passed through the stage is one of its arguments.
  for (Value v : stage.results)
    yielded.push_back(map.lookupOrDefault(v));
  pd::YieldOp::create(inner, stageLoc, yielded);
  for (auto [i, v] : llvm::enumerate(stage.results))
    sent[v] = stageOp.getResult(i);
}

/// Whether every op that reads `def` belongs to this stage: then `def`
/// moves into it instead of being copied (most parameters and
/// constants). A replicable reader (a list of constants) may go to
/// several stages, and so may what it reads.
bool StageFiller::onlyThisStageReads(Operation *def) {
  for (Operation *user : def->getUsers()) {
    if (block->findAncestorOpInBlock(*user))
      continue; // moved here already
    Operation *top = body.findAncestorOpInBlock(*user);
    auto it = top ? stageOf.find(top) : stageOf.end();
    if (it == stageOf.end() || it->second != s)
      return false;
  }
  return true;
}

/// Parameters and constants, moved or copied at first use.
void StageFiller::copy(Value v) {
  if (map.contains(v))
    return;
  Operation *def = v.getDefiningOp();
  auto param = dyn_cast<pd::ParamOp>(def);
  if (param)
    if (Value existing = paramCopies.lookup(param.getName())) {
      map.map(v, existing);
      return;
    }
  for (Value operand : def->getOperands())
    copy(operand);
  Operation *clone = def;
  if (onlyThisStageReads(def)) {
    def->moveBefore(block, block->end());
    for (OpOperand &operand : def->getOpOperands())
      if (Value mapped = map.lookupOrNull(operand.get()))
        operand.set(mapped);
    for (Value result : def->getResults())
      map.map(result, result);
  } else {
    clone = inner.clone(*def, map);
  }
  if (param) {
    paramCopies[param.getName()] = clone->getResult(0);
    SmallVector<int64_t> &users = paramStages[param.getName()];
    if (users.empty() || users.back() != (int64_t)s)
      users.push_back(s);
  }
}

/// The stage's ops move into the region (no copy: they belong to this
/// stage alone); what they read from outside is remapped to the block's
/// arguments and to the copies of parameters and constants.
void StageFiller::moveIn(Operation *op) {
  forEachExternalUse(op, [&](Value v) {
    if (Operation *def = v.getDefiningOp(); def && ::pippy::isReplicable(def))
      copy(v);
  });
  op->moveBefore(block, block->end());
  op->walk([&](Operation *nested) {
    for (OpOperand &operand : nested->getOpOperands())
      if (Value mapped = map.lookupOrNull(operand.get()))
        operand.set(mapped);
  });
}

/// Removes what was outlined; parameters and constants still used outside
/// the pipeline (returned directly) stay.
void eraseOutlined(Block &body, pd::PipelineOp pipeline) {
  SmallVector<Operation *> dead;
  for (Operation &op : body.without_terminator())
    if (&op != pipeline.getOperation())
      dead.push_back(&op);
  for (Operation *op : llvm::reverse(dead)) {
    if (!op->use_empty() && ::pippy::isReplicable(op))
      continue;
    op->dropAllUses();
    op->erase();
  }
}

} // namespace

LogicalResult pd::outlineStages(func::FuncOp func, bool singleStage,
                                bool &changed) {
  changed = false;
  if (func.isExternal())
    return success();
  Block &body = func.getBody().front();
  auto ret = dyn_cast<func::ReturnOp>(body.getTerminator());
  if (!ret)
    return func.emitOpError("must end in func.return to be outlined");
  bool hasMarker = llvm::any_of(
      body, [](Operation &op) { return isa<pd::SplitPointOp>(op); });
  bool hasPipeline =
      llvm::any_of(body, [](Operation &op) { return isa<pd::PipelineOp>(op); });
  if (hasPipeline || (!hasMarker && !singleStage)) {
    // Already outlined, or a graph IR without split points: it stays one
    // stage, unchanged.
    return success();
  }

  Outliner outliner(func, body);
  if (failed(outliner.assignStages()) || failed(outliner.checkStageState()) ||
      failed(outliner.planCrossings(ret)))
    return failure();
  pd::PipelineOp pipeline = outliner.buildPipeline(ret);
  eraseOutlined(body, pipeline);
  changed = true;
  return success();
}

namespace {

struct OutlineStagesPass
    : public pd::impl::PippyOutlineStagesBase<OutlineStagesPass> {
  using Base::Base;

  void runOnOperation() override {
    bool changed = false;
    if (failed(pd::outlineStages(getOperation(), singleStage, changed)))
      return signalPassFailure();
    if (!changed)
      markAllAnalysesPreserved();
  }
};

} // namespace
