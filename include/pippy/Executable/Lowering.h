//===- Lowering.h - pipelines to stage executables --------------*- C++ -*-===//
//
// Lowers a graph IR or a pipeline IR to one stage executable per rank
// (Executable.fbs): each rank's stage programs, the transfers it sends and
// receives, its checked schedule, the tied groups and which parameters and
// inputs get gradients. Compiler-side: pippy-opt's
// --pippy-emit-executables and the full build's pippy-run use it.
//
// On one rank, a pipeline of several stages becomes one program with every
// stage in order (autograd then links them and a tied weight is one
// tensor, as in the unsplit model); a graph IR is a pipeline of one stage.
// On N ranks, the schedule places the stages: one per rank (gpipe, 1f1b,
// zb-h1), or several (interleaved-1f1b, looped-bfs, zb1p, zbv); a rank's
// executable holds the programs of all its stages.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_EXECUTABLE_LOWERING_H
#define PIPPY_EXECUTABLE_LOWERING_H

#include "pippy/Executable/Format.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <optional>
#include <string>
#include <vector>

namespace pippy::exe {

struct LoweringOptions {
  int numRanks = 1;
  /// The schedule kind; ignored where `scheduleText` is given or the
  /// pipeline carries a lowered schedule.
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  /// Micro-batches per step; unset: the lowered schedule's, or 1.
  std::optional<int> microbatches;
  /// Linear layers' weight gradients wait for a W action or the step
  /// (--defer-weight-grads).
  bool splitBackward = false;
  /// Action lists: the text form (`rank0: 0F0 0SEND_F0 ...`), or with
  /// `scheduleIsCsv` torch.distributed.pipelining's CSV form.
  std::string scheduleText;
  bool scheduleIsCsv = false;
  /// The IR file, named in the executables and their messages.
  std::string source;
  /// The weights file as the executables record it.
  std::string weights;
};

struct LoweredPipeline {
  std::vector<std::string> ranks; ///< one executable's bytes per rank
  uint64_t hash = 0;              ///< the pipeline hash every rank's file holds
  /// The schedule in torch.distributed.pipelining's CSV form, with sends
  /// and receives (lib/Schedule's toCsv).
  std::string scheduleCsv;
};

/// Lowers `module`'s `func.func @forward`. Errors are emitted as
/// diagnostics on the offending ops.
mlir::FailureOr<LoweredPipeline> lower(mlir::ModuleOp module,
                                       const LoweringOptions &options);

/// The one-rank executable of `module` (tests and benches): lower() with
/// the default options.
mlir::FailureOr<std::string> lowerForOneRank(mlir::ModuleOp module);

/// The weights file a module names (its `pippy.weights`, which is relative to
/// the IR's folder unless it exists as given), or `override` when not
/// empty; an error diagnostic on the module when there is none.
mlir::FailureOr<std::string> weightsOf(mlir::ModuleOp module,
                                       const std::string &source,
                                       const std::string &override);

/// How executables written to `folder` name the weights file `weights`:
/// relative to the folder where the file lies in it or beside it (so that
/// the model's folder can move as a whole), absolute otherwise; absolute
/// where `folder` is empty; empty for no weights file.
std::string storedWeightsPath(const std::string &weights,
                              const std::string &folder);

/// Writes the executables into `dir` (created if needed) as rank<R>.pipx,
/// and the schedule as schedule.csv (`pippy-run --schedule-file` reads it
/// back), each atomically; an error message, or empty on success.
std::string writeExecutables(const LoweredPipeline &pipeline,
                             const std::string &dir);

/// The version string executables record as their producer.
std::string producer();

/// `file:line:col`, `module 'h.0.attn' (file:1:2)`: a location as
/// executables and pippy-run's messages show it; empty when unknown.
std::string locationText(mlir::Location loc);

} // namespace pippy::exe

#endif // PIPPY_EXECUTABLE_LOWERING_H
