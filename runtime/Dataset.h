//===- Dataset.h - the rows of --data ---------------------------*- C++ -*-===//
//
// Internal to runtime/: the training or inference rows of `--data` (the
// inputs `input` or `input.0`, `input.1`, ... and `target`), checked against
// the pipeline's inputs before any step, and the rows `--infer` writes.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_DATASET_H
#define PIPPY_RUNTIME_DATASET_H

#include "pippy/Runtime/Options.h"
#include "pippy/Runtime/Program.h"

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace pippy::rt {

class Dataset {
public:
  /// Reads `options.dataPath`; `specs` are the pipeline's inputs at
  /// micro-batch size (with --loss none the last is the target).
  Dataset(const RunOptions &options, const std::vector<TensorSpec> &specs,
          bool needTarget);
  int64_t rows() const { return numRows; }
  /// `count` rows from `begin`, wrapping at the end of the file.
  at::Tensor slice(const at::Tensor &t, int64_t begin, int64_t count) const;
  /// The pipeline's arguments for rows [begin, begin+count): the inputs,
  /// then the target when `withTarget` (--loss none).
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
  /// A micro-batch's results as tensors (tuples flattened), as add keeps
  /// them.
  static std::vector<at::Tensor>
  flatten(const std::vector<c10::IValue> &results);
  /// The next micro-batch's tensors, in order.
  void add(std::vector<at::Tensor> tensors);
  void write(const std::string &path) const;

private:
  std::vector<std::vector<at::Tensor>> chunks;
};

} // namespace pippy::rt

#endif // PIPPY_RUNTIME_DATASET_H
