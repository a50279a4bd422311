//===- TensorFile.cpp - safetensors files as libtorch tensors -------------===//

#include "TensorFile.h"

#include "pippy/Support/Safetensors.h"
#include "pippy/Support/TensorDTypes.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstring>

namespace st = ::pippy::safetensors;

namespace pippy::rt {

TensorFile readTensors(const std::string &path,
                       const std::set<std::string> *only) {
  std::string error;
  std::optional<st::File> file = st::File::open(path, error);
  if (!file)
    throw RuntimeError(error);
  TensorFile result;
  result.metadata = file->metadata();
  for (const st::TensorInfo &info : file->tensors()) {
    if (only && !only->count(info.name))
      continue;
    std::optional<at::ScalarType> dtype = toScalarType(info.dtype);
    if (!dtype)
      throw RuntimeError(path + ": tensor '" + info.name + "' has dtype " +
                         std::string(st::dtypeName(info.dtype)) +
                         ", which pippy-run does not support");
    at::Tensor tensor =
        at::empty(info.shape, at::TensorOptions().dtype(*dtype));
    std::string_view bytes = file->data(info);
    if (!bytes.empty())
      std::memcpy(tensor.data_ptr(), bytes.data(), bytes.size());
    result.tensors[info.name] = tensor;
    result.order.push_back(info.name);
  }
  return result;
}

void writeTensors(
    const std::string &path,
    const std::vector<std::pair<std::string, at::Tensor>> &tensors,
    const std::map<std::string, std::string> &metadata) {
  st::Writer writer;
  for (const auto &[name, value] : tensors) {
    // Files are written from host memory (a GPU's tensors are copied).
    at::Tensor t = value.detach().to(at::kCPU).contiguous();
    std::optional<st::DType> dtype = toStorageDType(t.scalar_type());
    if (!dtype)
      throw RuntimeError(std::string("cannot store dtype ") +
                         c10::toString(t.scalar_type()));
    std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
    std::string_view bytes(static_cast<const char *>(t.data_ptr()),
                           t.numel() * t.element_size());
    if (std::string error = writer.add(name, *dtype, sizes, bytes);
        !error.empty())
      throw RuntimeError(error);
  }
  for (const auto &[key, value] : metadata)
    writer.setMetadata(key, value);
  if (std::string error = writer.write(path); !error.empty())
    throw RuntimeError(error);
}

at::Tensor checkedParameter(const TensorFile &file, const std::string &path,
                            const std::string &name, const TensorSpec &spec) {
  auto it = file.tensors.find(name);
  if (it == file.tensors.end())
    throw RuntimeError(path + ": no tensor for parameter '" + name + "'");
  const at::Tensor &tensor = it->second;
  TensorSpec actual{{tensor.sizes().begin(), tensor.sizes().end()},
                    tensor.scalar_type()};
  if (actual.sizes != spec.sizes || actual.dtype != spec.dtype)
    throw RuntimeError(path + ": parameter '" + name + "' is " +
                       specText(actual) + " but the program expects " +
                       specText(spec));
  return tensor;
}

std::set<std::string> metadataList(const std::map<std::string, std::string> &m,
                                   const std::string &key) {
  std::set<std::string> names;
  auto it = m.find(key);
  if (it == m.end())
    return names;
  nlohmann::json json = nlohmann::json::parse(it->second, nullptr,
                                              /*allow_exceptions=*/false);
  if (!json.is_array())
    return names;
  for (const nlohmann::json &v : json)
    if (v.is_string())
      names.insert(v.get<std::string>());
  return names;
}

std::set<std::string>
untrainedNames(const std::map<std::string, std::string> &metadata) {
  std::set<std::string> names = metadataList(metadata, kBuffersKey);
  std::set<std::string> frozen = metadataList(metadata, kFrozenKey);
  names.insert(frozen.begin(), frozen.end());
  return names;
}

bool isTrainable(const at::Tensor &tensor, const std::string &name,
                 const std::set<std::string> &untrained) {
  return isDifferentiable(tensor.scalar_type()) && !untrained.count(name);
}

} // namespace pippy::rt
