//===- TensorFile.h - safetensors files as libtorch tensors -----*- C++ -*-===//
//
// Internal to runtime/: weights, data, gradients and checkpoints read into
// and written from at::Tensor, and what a weights file's metadata says
// (which tensors are buffers or frozen, which names are tied aliases).
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_TENSORFILE_H
#define PIPPY_RUNTIME_TENSORFILE_H

#include "pippy/Runtime/Program.h"

#include <ATen/core/Tensor.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace pippy::rt {

struct TensorFile {
  std::map<std::string, at::Tensor> tensors;
  std::vector<std::string> order;
  std::map<std::string, std::string> metadata;
};

/// Reads the tensors of a safetensors file (those named in `only`, where
/// given: the file is mapped, so the others are not even read); errors name
/// the file.
TensorFile readTensors(const std::string &path,
                       const std::set<std::string> *only = nullptr);
/// Writes atomically (a temporary file, then a rename).
void writeTensors(
    const std::string &path,
    const std::vector<std::pair<std::string, at::Tensor>> &tensors,
    const std::map<std::string, std::string> &metadata);

/// The tensor of parameter `name` in `file` (read from `path`), checked
/// against the program's spec; an error names what differs.
at::Tensor checkedParameter(const TensorFile &file, const std::string &path,
                            const std::string &name, const TensorSpec &spec);

/// Whether tensors of this dtype carry gradients: floating-point and
/// complex ones.
inline bool isDifferentiable(at::ScalarType type) {
  return at::isFloatingType(type) || at::isComplexType(type);
}

/// The weights file's metadata keys (written by pippy-import and
/// --pippy-lift-params, read here): JSON arrays of tensor names.
inline constexpr const char *kBuffersKey = "buffers";
inline constexpr const char *kFrozenKey = "frozen";

/// Names listed in a JSON array held by a metadata entry.
std::set<std::string> metadataList(const std::map<std::string, std::string> &m,
                                   const std::string &key);
/// The names a weights file lists as buffers or frozen parameters.
std::set<std::string>
untrainedNames(const std::map<std::string, std::string> &metadata);
/// Whether a weight is trained: a floating-point tensor that the file's
/// metadata lists neither as a buffer nor as frozen.
bool isTrainable(const at::Tensor &tensor, const std::string &name,
                 const std::set<std::string> &untrained);

} // namespace pippy::rt

#endif // PIPPY_RUNTIME_TENSORFILE_H
