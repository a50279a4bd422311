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
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <torch/version.h>

namespace pippy::rt::compat {

/// Whether autocast is on for `device` in this thread, and its dtype.
inline bool autocastEnabled(c10::DeviceType device) {
#if TORCH_VERSION_MAJOR >= 2
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled()
                                         : at::autocast::is_cpu_enabled();
#endif
}

inline c10::ScalarType autocastDtype(c10::DeviceType device) {
#if TORCH_VERSION_MAJOR >= 2
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
#if TORCH_VERSION_MAJOR >= 2
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

} // namespace pippy::rt::compat

#endif // PIPPY_RUNTIME_TORCHCOMPAT_H
