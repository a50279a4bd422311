//===- Pipelines.cpp - pass pipelines of pippy-opt ------------------------===//
//
// `--pippy-split="stages=N policy=balanced|params|uniform skips=direct|relay
// tied=replicate|transmit mem-cap=BYTES profile=FILE"`: place split points
// (unless markers exist), outline the stages, resolve tied weights, then skip
// connections.
//
//===----------------------------------------------------------------------===//

#include "pippy/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace {

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
      "has markers), then outline the stages",
      [](OpPassManager &pm, const SplitOptions &options) {
        PippyPlaceSplitPointsOptions place;
        place.stages = options.stages;
        place.policy = options.policy;
        place.memCap = options.memCap;
        place.profile = options.profile;
        pm.addNestedPass<func::FuncOp>(createPippyPlaceSplitPoints(place));
        PippyOutlineStagesOptions outline;
        outline.singleStage = options.stages == 1;
        pm.addNestedPass<func::FuncOp>(createPippyOutlineStages(outline));
        PippyResolveTiedOptions tied;
        tied.mode = options.tied;
        pm.addNestedPass<func::FuncOp>(createPippyResolveTied(tied));
        PippyResolveSkipsOptions skips;
        skips.mode = options.skips;
        pm.addNestedPass<func::FuncOp>(createPippyResolveSkips(skips));
      });
}
