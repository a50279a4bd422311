//===- ResolveTied.cpp - replicated or transmitted tied weights -----------===//
//
// In transmit mode, the first stage of each tied group yields the weight
// and every other stage of the group receives it as an operand in place of
// its own pippy.param.
//
//===----------------------------------------------------------------------===//

#include "pippy/Analysis/GraphIR.h"
#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#define DEBUG_TYPE "pippy-resolve-tied"

namespace mlir::pippy {
#define GEN_PASS_DEF_PIPPYRESOLVETIED
#include "passes/Passes.h.inc"
} // namespace mlir::pippy

using namespace mlir;
using ::pippy::getStage;
namespace pd = mlir::pippy;

namespace {

pd::ParamOp findParam(pd::StageOp stage, StringRef name) {
  for (Operation &op : stage.getBody().front())
    if (auto param = dyn_cast<pd::ParamOp>(op))
      if (param.getName() == name)
        return param;
  return nullptr;
}

/// Rebuilds `stage` with `extraOperands` appended (each becoming a new block
/// argument) and `extraResults` (values inside its body) yielded last.
pd::StageOp rebuild(pd::StageOp stage, ValueRange extraOperands,
                    ValueRange extraResults) {
  OpBuilder builder(stage);
  SmallVector<Value> operands(stage.getInputs());
  operands.append(extraOperands.begin(), extraOperands.end());
  SmallVector<Type> types(stage.getResultTypes());
  for (Value v : extraResults)
    types.push_back(v.getType());
  auto rebuilt = pd::StageOp::create(builder, stage.getLoc(), types,
                                     stage.getIndexAttr(), operands);
  rebuilt->setDiscardableAttrs(stage->getDiscardableAttrDictionary());
  rebuilt.getBody().takeBody(stage.getBody());
  Block &body = rebuilt.getBody().front();
  for (Value v : extraOperands)
    body.addArgument(v.getType(), v.getLoc());
  Operation *yield = body.getTerminator();
  yield->insertOperands(yield->getNumOperands(), extraResults);
  for (unsigned i = 0; i < stage.getNumResults(); ++i)
    stage.getResult(i).replaceAllUsesWith(rebuilt.getResult(i));
  stage.erase();
  return rebuilt;
}

struct ResolveTiedPass
    : public pd::impl::PippyResolveTiedBase<ResolveTiedPass> {
  using Base::Base;

  void runOnOperation() override {
    if (mode != "replicate" && mode != "transmit") {
      getOperation().emitError("unknown tied-weight mode '")
          << mode << "'; expected replicate or transmit";
      return signalPassFailure();
    }
    // Replicated groups are what outlining made: nothing changes, so the
    // verifier need not walk the IR again.
    bool changed = false;
    if (mode == "transmit")
      getOperation().walk([&](pd::PipelineOp pipeline) {
        if (failed(transmit(pipeline, changed)))
          signalPassFailure();
      });
    if (!changed)
      markAllAnalysesPreserved();
  }

  LogicalResult transmit(pd::PipelineOp pipeline, bool &changed) {
    ArrayAttr tied = pipeline.getTiedAttr();
    if (!tied)
      return success();
    changed = true;
    for (Attribute a : tied) {
      auto group = cast<pd::TiedGroupAttr>(a);
      ArrayRef<int64_t> stages = group.getStages();
      pd::StageOp owner = getStage(pipeline, stages.front());
      pd::ParamOp ownerParam =
          owner ? findParam(owner, group.getName()) : nullptr;
      if (!ownerParam)
        return pipeline.emitError("tied group '")
               << group.getName() << "': stage " << stages.front()
               << " holds no pippy.param of that name";
      owner = rebuild(owner, {}, ownerParam.getResult());
      Value weight = owner.getResults().back();
      for (int64_t s : stages.drop_front()) {
        pd::StageOp user = getStage(pipeline, s);
        pd::ParamOp param = user ? findParam(user, group.getName()) : nullptr;
        if (!param)
          return pipeline.emitError("tied group '")
                 << group.getName() << "': stage " << s
                 << " holds no pippy.param of that name";
        if (param.getType() != ownerParam.getType())
          return param.emitError("tied weight '")
                 << group.getName() << "' has type " << param.getType()
                 << " here but " << ownerParam.getType() << " in stage "
                 << stages.front();
        user = rebuild(user, weight, {});
        param = findParam(user, group.getName());
        param.getResult().replaceAllUsesWith(
            user.getBody().front().getArguments().back());
        param.erase();
      }
    }
    pipeline.removeTiedAttr();
    return success();
  }
};

} // namespace
