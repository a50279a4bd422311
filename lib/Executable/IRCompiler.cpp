//===- IRCompiler.cpp - pippy-run's lowering of IR ------------------------===//

#include "pippy/Executable/IRCompiler.h"

#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Dialect/Torch/TorchDialect.h"
#include "pippy/Executable/Lowering.h"
#include "pippy/Schedule/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

namespace pippy::exe {

std::optional<LoweredRanks> IRCompiler::lower(const RunOptions &options,
                                              int numRanks,
                                              const std::string &folder,
                                              std::string &error) {
  MLIRContext context;
  context.loadDialect<func::FuncDialect, mlir::torch::TorchDialect,
                      mlir::pippy::PippyDialect,
                      sparse_tensor::SparseTensorDialect>();
  llvm::SourceMgr sourceMgr;
  // One line per diagnostic, "LOCATION: message", for pippy-run's
  // "pippy-run: error: " to lead.
  context.getDiagEngine().registerHandler([&](Diagnostic &diag) {
    if (diag.getSeverity() != DiagnosticSeverity::Error &&
        diag.getSeverity() != DiagnosticSeverity::Note)
      return success();
    if (!error.empty())
      error += "\n";
    std::string where = locationText(diag.getLocation());
    error += (where.empty() ? "" : where + ": ") +
             (diag.getSeverity() == DiagnosticSeverity::Note ? "note: " : "") +
             diag.str();
    return success();
  });
  // Opened here so that a missing file is named as pippy-opt names it,
  // without a diagnostic location.
  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(options.programPath);
  if (!buffer) {
    error = "cannot open input file '" + options.programPath +
            "': " + buffer.getError().message();
    return std::nullopt;
  }
  sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(&context));
  if (!module) {
    if (error.empty())
      error = "cannot read " + options.programPath;
    return std::nullopt;
  }
  FailureOr<std::string> weights =
      weightsOf(*module, options.programPath, options.weightsPath);
  if (failed(weights))
    return std::nullopt;
  LoweringOptions lowering;
  lowering.numRanks = numRanks;
  lowering.schedule = options.schedule.value_or(ScheduleKind::OneFOneB);
  lowering.microbatches = options.microbatches;
  lowering.splitBackward = options.deferWeightGrads.value_or(false);
  lowering.scheduleText = options.scheduleText;
  lowering.scheduleIsCsv = ::pippy::schedule::isCsvFile(options.scheduleFile);
  lowering.source = options.programPath;
  lowering.weights = storedWeightsPath(*weights, folder);
  FailureOr<LoweredPipeline> lowered = exe::lower(*module, lowering);
  if (failed(lowered))
    return std::nullopt;
  return LoweredRanks{std::move(lowered->ranks),
                      std::move(lowered->scheduleCsv)};
}

} // namespace pippy::exe
