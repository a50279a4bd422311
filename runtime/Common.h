//===- Common.h - what the trainers share -----------------------*- C++ -*-===//
//
// Internal to runtime/: tensor files, the data set, the loss, the optimizer
// and the program loader, shared by the single-process trainer (Run.cpp)
// and the pipeline executor (Executor.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_COMMON_H
#define PIPPY_RUNTIME_COMMON_H

#include "pippy/Runtime/Comm.h"
#include "pippy/Runtime/Program.h"
#include "pippy/Runtime/Run.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/JSON.h"

#include <torch/torch.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace pippy::rt {

std::string shapeString(at::IntArrayRef sizes);

struct TensorFile {
  std::map<std::string, at::Tensor> tensors;
  std::vector<std::string> order;
  std::map<std::string, std::string> metadata;
};
TensorFile readTensors(const std::string &path);
/// Writes atomically (temporary file, then rename).
void writeTensors(
    const std::string &path,
    const std::vector<std::pair<std::string, at::Tensor>> &tensors,
    const std::map<std::string, std::string> &metadata);
/// The tensor of parameter `name` in `file` (read from `path`), checked
/// against the program's static spec; an error names what differs.
at::Tensor checkedParameter(const TensorFile &file, const std::string &path,
                            const std::string &name, const TensorSpec &spec);
/// Whether tensors of this dtype carry gradients: floating-point and
/// complex ones.
inline bool isDifferentiable(at::ScalarType type) {
  return at::isFloatingType(type) || at::isComplexType(type);
}
/// Whether a weight of the file is trained: a floating-point tensor that
/// the file's metadata lists neither as a buffer nor as frozen (a parameter
/// with requires_grad=False; `untrainedNames` reads both lists).
bool isTrainable(const at::Tensor &tensor, const std::string &name,
                 const std::set<std::string> &untrained);
/// The names a weights file's metadata lists under "buffers" and "frozen".
std::set<std::string>
untrainedNames(const std::map<std::string, std::string> &metadata);
/// Names listed in a JSON array held by a metadata entry.
std::set<std::string> metadataList(const std::map<std::string, std::string> &m,
                                   const std::string &key);
void writeJson(const std::string &path, llvm::json::Value value);

/// Parses the program and registers every dialect it may use.
mlir::OwningOpRef<mlir::ModuleOp> parseProgram(mlir::MLIRContext &context,
                                               const std::string &path);
/// The program's `func.func @forward`; an error that says what to do when it
/// is missing (a Torch-MLIR module not lifted yet, for instance).
mlir::func::FuncOp lookupForward(mlir::ModuleOp module,
                                 const std::string &path);
/// --weights, or the module's pippy.weights (relative to the program file).
std::string resolveWeightsPath(const RunOptions &options,
                               mlir::ModuleOp module);
/// Where a pipeline value comes from: a stage's result, or (stage -1) an
/// argument of forward.
struct Source {
  int stage = -1;
  unsigned index = 0;
};
/// The source of `value`, a stage input or pipeline result inside
/// `forward`; an error naming `programPath` for anything else.
Source sourceOf(mlir::Value value, mlir::Operation *forward,
                const std::string &programPath);

/// The static spec of forward's argument `index`.
TensorSpec specOfArgument(mlir::BlockArgument arg);

/// The rows of --data: the inputs (`input` or `input.0`, ...) and `target`,
/// checked against forward's arguments before any step.
class Dataset {
public:
  Dataset(const RunOptions &options, const std::vector<TensorSpec> &argSpecs,
          bool needTarget);
  int64_t rows() const { return numRows; }
  /// `count` rows from `begin`, wrapping at the end of the file.
  at::Tensor slice(const at::Tensor &t, int64_t begin, int64_t count) const;
  /// forward's arguments for rows [begin, begin+count): the inputs, then the
  /// target when `withTarget` (--loss none).
  std::vector<c10::IValue> arguments(int64_t begin, int64_t count,
                                     bool withTarget) const;
  at::Tensor target(int64_t begin, int64_t count) const {
    return slice(targetRows, begin, count);
  }

private:
  void check(const std::string &name, const at::Tensor &tensor,
             const TensorSpec &spec) const;
  const RunOptions &options;
  std::vector<at::Tensor> inputs;
  at::Tensor targetRows;
  int64_t numRows = 0;
};

/// Inference outputs: each micro-batch's results (tensors, or tuples of
/// them) are flattened; `write` concatenates them by row into `output` (or
/// `output.0`, `output.1`, ...) in `path`. 0-d results are stacked, one
/// value per micro-batch (written as they are for a single micro-batch).
class OutputRows {
public:
  void add(const std::vector<c10::IValue> &results);
  void write(const std::string &path) const;

private:
  std::vector<std::vector<at::Tensor>> chunks;
};

/// The options given that only the pipeline executor implements
/// (`--defer-weight-grads`, `--checkpoint-dir`, ...), as they are spelt on
/// the command line; an unsplit program with any of them runs there.
std::vector<std::string> executorOnlyOptions(const RunOptions &options);

/// The loss of one micro-batch (the mean over its rows).
at::Tensor computeLoss(const RunOptions &options, const c10::IValue &output,
                       const at::Tensor &target);
std::unique_ptr<::torch::optim::Optimizer>
makeOptimizer(const RunOptions &options, std::vector<at::Tensor> params);

/// Drops the optimizer's parameters' gradients before a step's first
/// backward: autograd then stores the first micro-batch's gradient as it is
/// instead of adding it to zeros (the same values, bit for bit), and no
/// step writes zeros over every gradient first. Fused linears' weights keep
/// their buffers for the next step (pippy::releaseGradient).
void releaseGradients(::torch::optim::Optimizer &optimizer);
/// Checks --loss and --optimizer before anything runs.
void checkTrainingOptions(const RunOptions &options);

/// Optimizer state of `params` (momentum buffers, AdamW moments and step
/// counts) as named tensors and metadata, and back.
void saveOptimizerState(
    ::torch::optim::Optimizer &optimizer,
    const std::vector<std::pair<std::string, at::Tensor>> &params,
    std::vector<std::pair<std::string, at::Tensor>> &out,
    std::map<std::string, std::string> &metadata);
void loadOptimizerState(
    ::torch::optim::Optimizer &optimizer, const std::string &kind,
    const std::vector<std::pair<std::string, at::Tensor>> &params,
    const TensorFile &file);

} // namespace pippy::rt

namespace pippy {
/// Runs this process's rank of a pipeline (Executor.cpp). Errors are
/// printed there and end the process: a rank whose peers failed must not
/// linger in communicator teardown.
llvm::Error runRank(const RunOptions &options, const Rendezvous &rdzv);
} // namespace pippy

#endif // PIPPY_RUNTIME_COMMON_H
