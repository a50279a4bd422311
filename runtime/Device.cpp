//===- Device.cpp - where a rank computes ---------------------------------===//

#include "Device.h"

#include "pippy/Runtime/MemoryMeter.h"
#include "pippy/Runtime/Program.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/cuda.h>
#include <torch/version.h>

#ifdef PIPPY_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif
#ifdef PIPPY_HAVE_CUDART
#include <cuda_runtime_api.h>
#endif

namespace pippy::rt {

int gpuIndex(int localRank, int count) {
  return count > 0 ? localRank % count : 0;
}

at::Device rankDevice(std::optional<DeviceKind> kind, int localRank) {
  bool hasCuda = at::hasCUDA();
  int gpus = hasCuda ? static_cast<int>(::torch::cuda::device_count()) : 0;
  DeviceKind chosen =
      kind.value_or(gpus > 0 ? DeviceKind::Cuda : DeviceKind::Cpu);
  if (chosen == DeviceKind::Cpu)
    return at::Device(at::kCPU);
  if (!hasCuda)
    throw RuntimeError("--device cuda: this libtorch (" TORCH_VERSION
                       ") was built without CUDA; build pippy-run against a "
                       "CUDA libtorch (docs/GPU.md), or run with --device cpu");
  if (gpus == 0)
    throw RuntimeError("--device cuda: no GPU is visible to this process "
                       "(CUDA_VISIBLE_DEVICES, the driver); run with "
                       "--device cpu");
  return at::Device(at::kCUDA,
                    static_cast<c10::DeviceIndex>(gpuIndex(localRank, gpus)));
}

Backend backendFor(const RunOptions &options, const at::Device &device) {
  return options.backend.value_or(device.is_cuda() ? Backend::Nccl
                                                   : Backend::Gloo);
}

void useDevice(const at::Device &device) {
  if (device.is_cpu())
    return;
  c10::impl::getDeviceGuardImpl(device.type())->setDevice(device);
}

#ifdef PIPPY_TORCH_CUDA
/// The CUDA caching allocator's bytes of tensors on `device` (all pools).
static auto allocatedOn(const at::Device &device) {
  return c10::cuda::CUDACachingAllocator::getDeviceStats(device.index())
      .allocated_bytes[0];
}
#endif

void synchronize(const at::Device &device) {
#ifdef PIPPY_HAVE_CUDART
  if (device.is_cuda() && cudaDeviceSynchronize() != cudaSuccess)
    throw RuntimeError("the GPU failed while running an op");
#endif
}

int64_t liveBytes(const at::Device &device) {
#ifdef PIPPY_TORCH_CUDA
  if (device.is_cuda())
    return allocatedOn(device).current;
#endif
  return liveCpuBytes();
}

std::optional<int64_t> peakDeviceBytes(const at::Device &device) {
#ifdef PIPPY_TORCH_CUDA
  if (device.is_cuda())
    return allocatedOn(device).peak;
#endif
  return std::nullopt;
}

at::Tensor onDevice(const at::Tensor &tensor, const at::Device &device) {
  if (!tensor.defined() || tensor.device() == device)
    return tensor;
  at::Tensor host = tensor.is_pinned() ? tensor : tensor.pin_memory();
  // The pinned copy stays alive with the copy in flight: the caching host
  // allocator keeps it until the device stream has used it.
  return host.to(device, /*non_blocking=*/true);
}

} // namespace pippy::rt
