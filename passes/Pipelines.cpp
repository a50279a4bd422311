//===- Pipelines.cpp - pass pipelines of pippy-opt ------------------------===//
//
// `--pippy-split="stages=N policy=balanced|params|uniform skips=direct|relay
// tied=replicate|transmit mem-cap=BYTES profile=FILE"`: place split points
// (unless markers exist) and outline the stages, as one pass, then resolve
// tied weights, then skip connections.
//
//===----------------------------------------------------------------------===//

#include "SplitSteps.h"
#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"

namespace mlir::pippy {
#define GEN_PASS_DEF_PIPPYSPLITSTAGES
#include "passes/Passes.h.inc"
} // namespace mlir::pippy

using namespace mlir;
namespace pd = mlir::pippy;

namespace {

struct SplitStagesPass
    : public pd::impl::PippySplitStagesBase<SplitStagesPass> {
  using Base::Base;

  void runOnOperation() override {
    pd::SplitPlacement placement{stages, policy, memCap, profile};
    bool placed = false, outlined = false;
    if (failed(pd::placeSplitPoints(getOperation(), placement, placed)) ||
        failed(pd::outlineStages(getOperation(), stages == 1, outlined)))
      return signalPassFailure();
    if (!placed && !outlined)
      markAllAnalysesPreserved();
  }
};

struct SplitOptions : public PassPipelineOptions<SplitOptions> {
  Option<unsigned> stages{*this, "stages",
                          llvm::cl::desc("number of pipeline stages")};
  Option<std::string> policy{*this, "policy",
                             llvm::cl::desc("balanced, params or uniform"),
                             llvm::cl::init("balanced")};
  Option<std::string> skips{*this, "skips", llvm::cl::desc("direct or relay"),
                            llvm::cl::init("direct")};
  Option<int64_t> memCap{*this, "mem-cap",
                         llvm::cl::desc("most parameter + activation bytes "
                                        "per stage (0: no cap)"),
                         llvm::cl::init(0)};
  Option<std::string> profile{
      *this, "profile",
      llvm::cl::desc("measured per-op times (pippy-run --profile)")};
  Option<std::string> tied{*this, "tied",
                           llvm::cl::desc("replicate or transmit"),
                           llvm::cl::init("replicate")};
};

} // namespace

void mlir::pippy::registerPippyPipelines() {
  PassPipelineRegistration<SplitOptions>(
      "pippy-split",
      "Split a graph IR into a pipeline: place split points (unless the IR "
      "has markers) and outline the stages, then resolve tied weights and "
      "skip connections",
      [](OpPassManager &pm, const SplitOptions &options) {
        PippySplitStagesOptions split;
        split.stages = options.stages;
        split.policy = options.policy;
        split.memCap = options.memCap;
        split.profile = options.profile;
        pm.addNestedPass<func::FuncOp>(createPippySplitStages(split));
        PippyResolveTiedOptions tied;
        tied.mode = options.tied;
        pm.addNestedPass<func::FuncOp>(createPippyResolveTied(tied));
        PippyResolveSkipsOptions skips;
        skips.mode = options.skips;
        pm.addNestedPass<func::FuncOp>(createPippyResolveSkips(skips));
      });
}
