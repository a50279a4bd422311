//===- StageGraph.h - the pipeline as the lowering reads it ------*- C++
//-*-===//
//
// Who feeds whom in a pipeline IR (or a graph IR, one stage), which stage
// inputs and parameters a gradient from the loss reaches, and the transfer
// rows between stages. Compiler-side, private to lib/Executable.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_LIB_EXECUTABLE_STAGEGRAPH_H
#define PIPPY_LIB_EXECUTABLE_STAGEGRAPH_H

#include "ProgramLowering.h"

#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Schedule/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <set>
#include <string>
#include <vector>

namespace pippy::exe {

/// Where a stage input or pipeline result comes from: a stage's result, or
/// (stage -1) an argument of forward.
struct Source {
  int stage = -1;
  unsigned index = 0;
};

/// The pipeline as the lowering sees it. A graph IR is one stage whose body
/// is forward's.
struct StageGraph {
  mlir::func::FuncOp forward;
  std::vector<mlir::Block *> bodies;
  std::vector<mlir::Operation *> owners; ///< for diagnostics
  std::vector<std::vector<Source>> inputs;
  std::vector<Source> outputs;
  std::vector<std::pair<std::string, std::vector<int>>> tied;
  mlir::pippy::PipelineOp pipeline; ///< null for a graph IR
  int numStages() const { return static_cast<int>(bodies.size()); }
};

/// What to run on Torch-MLIR output that still holds its weights.
inline constexpr const char *kLiftHint =
    "; run pippy-opt --pippy-lift-params=weights=FILE on it first";

/// Float tensor literals of more than one element: Torch-MLIR's weights,
/// which --pippy-lift-params turns into parameters.
size_t countWeightLiterals(mlir::ModuleOp module);
/// "1 weight literal", "3 weight literals".
std::string countLiterals(size_t n);

/// The module's func.func @forward, or an error that says what to run.
mlir::FailureOr<mlir::func::FuncOp> lookupForward(mlir::ModuleOp module);
mlir::FailureOr<StageGraph> readStageGraph(mlir::func::FuncOp forward);

/// Which stage inputs and parameters a gradient from the loss reaches: from
/// the loss's result backwards, stage by stage (every edge goes forwards).
struct GradientFlow {
  std::vector<std::vector<bool>> inputGets; ///< per stage, per input
  std::set<std::string> params;             ///< in some stage
};
GradientFlow gradientFlow(StageGraph &graph);

/// One tensor sent from a stage to a later one.
struct TransferRow {
  Source from;
  int consumer;
  unsigned input, channel;
  Spec spec;
  bool gradient;
};

/// Every transfer of a pipeline, and the topology the schedule checker
/// needs (producers per stage, tied groups) filled into `topo`.
mlir::FailureOr<std::vector<TransferRow>>
transfersOf(StageGraph &graph, const GradientFlow &flow,
            ::pippy::schedule::Topology &topo);

} // namespace pippy::exe

#endif // PIPPY_LIB_EXECUTABLE_STAGEGRAPH_H
