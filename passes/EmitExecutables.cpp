//===- EmitExecutables.cpp - one stage executable per rank ----------------===//
//
// Lowers the module to stage executables (lib/Executable) and writes them
// to the folder the pass is given; the IR is left as it was.
//
//===----------------------------------------------------------------------===//

#include "pippy/Executable/Lowering.h"
#include "pippy/Passes/Passes.h"
#include "pippy/Schedule/Schedule.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#define DEBUG_TYPE "pippy-emit-executables"

namespace mlir::pippy {
#define GEN_PASS_DEF_PIPPYEMITEXECUTABLES
#include "passes/Passes.h.inc"
} // namespace mlir::pippy

using namespace mlir;
namespace pd = mlir::pippy;
namespace sched = ::pippy::schedule;
namespace exe = ::pippy::exe;

namespace {

struct EmitExecutablesPass
    : public pd::impl::PippyEmitExecutablesBase<EmitExecutablesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (dir.empty()) {
      module.emitError("--pippy-emit-executables needs dir=FOLDER");
      return signalPassFailure();
    }
    std::string source;
    if (auto file = dyn_cast<FileLineColLoc>(module.getLoc()))
      source = file.getFilename().str();
    FailureOr<std::string> weightsPath =
        exe::weightsOf(module, source, weights);
    if (failed(weightsPath))
      return signalPassFailure();
    llvm::Expected<sched::Kind> kind = sched::parseKind(schedule);
    if (!kind) {
      module.emitError(llvm::toString(kind.takeError()));
      return signalPassFailure();
    }
    exe::LoweringOptions options;
    options.numRanks = static_cast<int>(ranks);
    options.schedule = *kind;
    if (microbatches > 0)
      options.microbatches = static_cast<int>(microbatches);
    options.splitBackward = deferWeightGrads;
    options.source = source;
    options.weights = exe::storedWeightsPath(*weightsPath, dir.getValue());
    FailureOr<exe::LoweredPipeline> lowered = exe::lower(module, options);
    if (failed(lowered))
      return signalPassFailure();
    if (std::string error = exe::writeExecutables(*lowered, dir);
        !error.empty()) {
      module.emitError(error);
      return signalPassFailure();
    }
    markAllAnalysesPreserved();
  }
};

} // namespace
