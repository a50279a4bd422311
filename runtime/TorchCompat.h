//===- TorchCompat.h - libtorch 1.13 and 2.x, one place ---------*- C++ -*-===//
//
// Internal to runtime/: the calls whose spelling differs between the
// libtorch this machine has (Debian's 1.13) and PyTorch 2.x wheels (GPU
// hosts). Every such difference lives here, so a compile error on a host
// with another libtorch is fixed in one file.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_TORCHCOMPAT_H
#define PIPPY_RUNTIME_TORCHCOMPAT_H

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Logging.h>
#include <torch/optim/optimizer.h>
#include <torch/version.h>

#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

/// libtorch 2.4 made autocast's calls device-generic.
#if TORCH_VERSION_MAJOR > 2 ||                                                 \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define PIPPY_TORCH_GENERIC_AUTOCAST 1
#else
#define PIPPY_TORCH_GENERIC_AUTOCAST 0
#endif

namespace pippy::rt::compat {

/// Whether autocast is on for `device` in this thread, and its dtype.
inline bool autocastEnabled(c10::DeviceType device) {
#if PIPPY_TORCH_GENERIC_AUTOCAST
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled()
                                         : at::autocast::is_cpu_enabled();
#endif
}

inline c10::ScalarType autocastDtype(c10::DeviceType device) {
#if PIPPY_TORCH_GENERIC_AUTOCAST
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CUDA
             ? at::autocast::get_autocast_gpu_dtype()
             : at::autocast::get_autocast_cpu_dtype();
#endif
}

/// Turns autocast on or off for `device` in this thread, with `dtype` as
/// its lower precision.
inline void setAutocast(c10::DeviceType device, bool enabled,
                        c10::ScalarType dtype) {
#if PIPPY_TORCH_GENERIC_AUTOCAST
  at::autocast::set_autocast_enabled(device, enabled);
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(enabled);
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_cpu_enabled(enabled);
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

/// Whether CUDA matrix products and cuDNN convolutions may round float32
/// inputs to TF32 (pippy-run --allow-tf32; off by default, so float32 means
/// float32 on every device).
inline void setAllowTf32(bool allow) {
  at::globalContext().setAllowTF32CuBLAS(allow);
  at::globalContext().setAllowTF32CuDNN(allow);
}

/// The key torch::optim::Optimizer::state() files `p`'s state under: the
/// text of its TensorImpl's address in 1.13 (c10::guts::to_string, gone in
/// 2.x), the TensorImpl* itself in 2.x. Chosen by the map's key type.
using OptimizerState = std::remove_reference_t<
    decltype(std::declval<::torch::optim::Optimizer &>().state())>;
template <class Map = OptimizerState>
typename Map::key_type optimizerStateKey(const at::Tensor &p) {
  using Key = typename Map::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream text;
    text << static_cast<const void *>(p.unsafeGetTensorImpl());
    return text.str();
  } else {
    return static_cast<Key>(p.unsafeGetTensorImpl());
  }
}

/// A c10::Allocator whose subclass allocates in `allocateBlock`: allocate()
/// is const in 1.13 and not in 2.x, which also requires copy_data.
struct ForwardingAllocator : c10::Allocator {
  virtual c10::DataPtr allocateBlock(size_t n) const = 0;
#if TORCH_VERSION_MAJOR >= 2
  c10::DataPtr allocate(size_t n) override { return allocateBlock(n); }
  void copy_data(void *dest, const void *src,
                 std::size_t count) const override {
    this->default_copy_data(dest, src, count);
  }
#else
  c10::DataPtr allocate(size_t n) const override { return allocateBlock(n); }
#endif
};

/// c10's own log threshold: glog's where libtorch logs through glog; else
/// c10's flag, global up to 2.6 at least (1.13 and 2.6 compiled) and in
/// namespace c10 in later sources, so it is named unqualified with c10's
/// names in scope.
inline void setC10LogLevel(int level) {
#ifdef C10_USE_GLOG
  FLAGS_minloglevel = level;
#else
  using namespace c10;
  FLAGS_caffe2_log_level = level;
#endif
}

} // namespace pippy::rt::compat

#endif // PIPPY_RUNTIME_TORCHCOMPAT_H
