//===- ResolveSkips.cpp - direct or relayed skip connections --------------===//
//
// In relay mode, every stage operand that comes from a non-adjacent stage is
// routed through the stages in between: each takes it as an extra operand and
// yields it as an extra result.
//
//===----------------------------------------------------------------------===//

#include "pippy/Analysis/GraphIR.h"
#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>

#define DEBUG_TYPE "pippy-resolve-skips"

namespace mlir::pippy {
#define GEN_PASS_DEF_PIPPYRESOLVESKIPS
#include "passes/Passes.h.inc"
} // namespace mlir::pippy

using namespace mlir;
using ::pippy::getStage;
namespace pd = mlir::pippy;

namespace {

/// Rebuilds `stage` so that it yields `value` unchanged as its last result,
/// taking it as one more operand unless it already has it. Returns that
/// result's number.
unsigned addPassThrough(pd::StageOp stage, Value value) {
  OpBuilder builder(stage);
  SmallVector<Value> operands(stage.getInputs());
  // A stage that already receives the value forwards that operand.
  auto existing = llvm::find(operands, value);
  bool reuse = existing != operands.end();
  unsigned argNumber = reuse ? existing - operands.begin() : operands.size();
  if (!reuse)
    operands.push_back(value);
  SmallVector<Type> types(stage.getResultTypes());
  types.push_back(value.getType());
  auto rebuilt = pd::StageOp::create(builder, stage.getLoc(), types,
                                     stage.getIndexAttr(), operands);
  rebuilt->setDiscardableAttrs(stage->getDiscardableAttrDictionary());
  rebuilt.getBody().takeBody(stage.getBody());
  Block &body = rebuilt.getBody().front();
  BlockArgument arg = reuse ? body.getArgument(argNumber)
                            : body.addArgument(value.getType(), value.getLoc());
  Operation *yield = body.getTerminator();
  yield->insertOperands(yield->getNumOperands(), arg);
  for (unsigned i = 0; i < stage.getNumResults(); ++i)
    stage.getResult(i).replaceAllUsesWith(rebuilt.getResult(i));
  stage.erase();
  return types.size() - 1;
}

struct ResolveSkipsPass
    : public pd::impl::PippyResolveSkipsBase<ResolveSkipsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (mode != "direct" && mode != "relay") {
      getOperation().emitError("unknown skip mode '")
          << mode << "'; expected direct or relay";
      return signalPassFailure();
    }
    // Direct sends are what outlining made: nothing changes, so the verifier
    // need not walk the IR again.
    bool changed = false;
    if (mode == "relay")
      getOperation().walk(
          [&](pd::PipelineOp pipeline) { changed |= relay(pipeline); });
    if (!changed)
      markAllAnalysesPreserved();
  }

  /// Returns whether any value was relayed.
  bool relay(pd::PipelineOp pipeline) {
    bool changed = false;
    int64_t numStages = llvm::range_size(pipeline.getStages());
    // (producer stage, result, relaying stage) -> result of the relaying
    // stage that carries the value.
    std::map<std::tuple<int64_t, unsigned, int64_t>, unsigned> carried;
    for (int64_t s = 2; s < numStages; ++s) {
      for (unsigned i = 0;; ++i) {
        pd::StageOp consumer = getStage(pipeline, s);
        if (i >= consumer.getInputs().size())
          break;
        auto result = dyn_cast<OpResult>(consumer.getInputs()[i]);
        auto producer =
            result ? dyn_cast<pd::StageOp>(result.getOwner()) : nullptr;
        if (!producer || producer->getParentOp() != pipeline)
          continue;
        int64_t t = producer.getIndexAttr().getInt();
        if (t >= s - 1)
          continue;
        unsigned number = result.getResultNumber();
        unsigned current = number;
        for (int64_t k = t + 1; k < s; ++k) {
          auto key = std::make_tuple(t, number, k);
          auto it = carried.find(key);
          if (it == carried.end()) {
            Value value = getStage(pipeline, k - 1).getResult(current);
            it = carried
                     .emplace(key, addPassThrough(getStage(pipeline, k), value))
                     .first;
          }
          current = it->second;
        }
        getStage(pipeline, s)
            ->setOperand(i, getStage(pipeline, s - 1).getResult(current));
        changed = true;
      }
    }
    return changed;
  }
};

} // namespace
