//===- Dataset.cpp - the rows of --data -----------------------------------===//

#include "Dataset.h"

#include "TensorFile.h"

#include <ATen/ATen.h>

namespace pippy::rt {

/// The loss's dtype needs, checked before the first step (the loss would
/// only fail at the first backward, in ATen's words).
static void checkTargetDtype(const RunOptions &options,
                             const at::Tensor &target) {
  if (options.infer)
    return;
  at::ScalarType dtype = target.scalar_type();
  bool real = at::isFloatingType(dtype);
  if (options.loss == LossKind::Mse && !real)
    throw RuntimeError(options.dataPath +
                       ": --loss mse needs a floating-point 'target' but it "
                       "is " +
                       c10::toString(dtype) +
                       " (class indices go with --loss cross_entropy)");
  if (options.loss == LossKind::CrossEntropy &&
      (real || at::isComplexType(dtype) || dtype == at::kBool))
    throw RuntimeError(options.dataPath +
                       ": --loss cross_entropy takes class indices, an "
                       "integer 'target', but it is " +
                       c10::toString(dtype) +
                       " (floating-point targets go with --loss mse)");
}

Dataset::Dataset(const RunOptions &options,
                 const std::vector<TensorSpec> &specs, bool needTarget)
    : options(options) {
  TensorFile file = readTensors(options.dataPath);
  size_t numInputs = specs.size() - (options.loss == LossKind::None ? 1 : 0);
  if (!options.infer && options.loss == LossKind::None && specs.empty())
    throw RuntimeError("--loss none: forward must take the target as its "
                       "last argument");
  for (size_t i = 0; i < numInputs; ++i) {
    std::string name = numInputs == 1 && file.tensors.count("input")
                           ? "input"
                           : "input." + std::to_string(i);
    auto it = file.tensors.find(name);
    if (it == file.tensors.end())
      throw RuntimeError(options.dataPath + ": no tensor '" + name +
                         "' for forward argument " + std::to_string(i));
    check(name, it->second, specs[i]);
    inputs.push_back(it->second);
  }
  if (inputs.empty())
    throw RuntimeError(options.programPath + ": forward takes no input");
  if (needTarget) {
    auto it = file.tensors.find("target");
    if (it == file.tensors.end())
      throw RuntimeError(options.dataPath + ": no tensor 'target'");
    targetRows = it->second;
    if (targetRows.size(0) != inputs[0].size(0))
      throw RuntimeError(options.dataPath + ": 'target' has " +
                         std::to_string(targetRows.size(0)) + " rows but '" +
                         (numInputs == 1 ? "input" : "input.0") + "' has " +
                         std::to_string(inputs[0].size(0)));
    if (options.loss == LossKind::None)
      check("target", targetRows, specs.back());
    checkTargetDtype(options, targetRows);
    // Class indices of any integer type: cross_entropy takes int64.
    if (options.loss == LossKind::CrossEntropy &&
        targetRows.scalar_type() != at::kLong)
      targetRows = targetRows.to(at::kLong);
  }
  numRows = inputs[0].size(0);
  if (numRows == 0)
    throw RuntimeError(options.dataPath + ": '" +
                       (numInputs == 1 ? "input" : "input.0") +
                       "' has no rows");
  for (const at::Tensor &t : inputs)
    if (t.size(0) != numRows)
      throw RuntimeError(options.dataPath +
                         ": inputs have different row counts");
}

void Dataset::check(const std::string &name, const at::Tensor &tensor,
                    const TensorSpec &spec) const {
  bool sameTail = tensor.dim() == (int64_t)spec.sizes.size();
  for (size_t d = 1; sameTail && d < spec.sizes.size(); ++d)
    sameTail = tensor.size(d) == spec.sizes[d];
  if (!sameTail || tensor.scalar_type() != spec.dtype)
    throw RuntimeError(
        options.dataPath + ": '" + name + "' is " +
        specText({{tensor.sizes().begin(), tensor.sizes().end()},
                  tensor.scalar_type()}) +
        " but the program takes micro-batches of " + specText(spec) +
        " (rows may differ, the other sizes and the dtype may not)");
}

at::Tensor Dataset::slice(const at::Tensor &t, int64_t begin,
                          int64_t count) const {
  begin %= numRows;
  if (begin + count <= numRows)
    return t.narrow(0, begin, count).contiguous();
  at::Tensor index = at::remainder(
      at::arange(begin, begin + count, at::TensorOptions().dtype(at::kLong)),
      numRows);
  return t.index_select(0, index);
}

std::vector<c10::IValue> Dataset::arguments(int64_t begin, int64_t count,
                                            bool withTarget) const {
  std::vector<c10::IValue> args;
  for (const at::Tensor &t : inputs)
    args.emplace_back(slice(t, begin, count));
  if (withTarget)
    args.emplace_back(slice(targetRows, begin, count));
  return args;
}

std::vector<at::Tensor>
OutputRows::flatten(const std::vector<c10::IValue> &results) {
  std::vector<at::Tensor> flat;
  for (const c10::IValue &r : results) {
    if (r.isTensor())
      flat.push_back(r.toTensor());
    else if (r.isTuple())
      for (const c10::IValue &e : r.toTupleRef().elements())
        flat.push_back(e.toTensor());
  }
  return flat;
}

void OutputRows::add(std::vector<at::Tensor> tensors) {
  chunks.push_back(std::move(tensors));
}

void OutputRows::write(const std::string &path) const {
  std::vector<std::pair<std::string, at::Tensor>> merged;
  size_t n = chunks.empty() ? 0 : chunks.front().size();
  for (size_t i = 0; i < n; ++i) {
    std::vector<at::Tensor> parts;
    for (const auto &chunk : chunks)
      parts.push_back(chunk.at(i));
    // A 0-d result (a model that returns its loss) has no rows: one
    // micro-batch's is written as it is, several are stacked.
    at::Tensor whole =
        parts.front().dim() == 0
            ? (parts.size() == 1 ? parts.front() : at::stack(parts, 0))
            : at::cat(parts, 0);
    merged.emplace_back(n == 1 ? "output" : "output." + std::to_string(i),
                        whole);
  }
  writeTensors(path, merged, {});
}

} // namespace pippy::rt
