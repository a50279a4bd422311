//===- Device.h - where a rank computes -------------------------*- C++ -*-===//
//
// Internal to runtime/: `pippy-run --device cpu|cuda`. A rank on a GPU takes
// GPU LOCAL_RANK modulo the GPUs it sees (the launcher's, torchrun's or
// Slurm's CUDA_VISIBLE_DEVICES narrow that), as NCCL's engine does; its
// weights, activations, gradients and optimizer state live there, and each
// micro-batch's rows move there from pinned host memory without blocking.
// Device-generic libtorch calls only: the same source builds against a
// libtorch without CUDA (Debian's), where --device cuda is refused.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_DEVICE_H
#define PIPPY_RUNTIME_DEVICE_H

#include "pippy/Runtime/Options.h"

#include <ATen/ATen.h>

#include <optional>

namespace pippy::rt {

/// Which of `count` visible GPUs the rank with `localRank` takes.
int gpuIndex(int localRank, int count);

/// The device a rank computes on: `kind`, or when unset cuda where this
/// libtorch has CUDA and a GPU is visible, else the CPU. Throws
/// RuntimeError for cuda without either, saying which is missing.
at::Device rankDevice(std::optional<DeviceKind> kind, int localRank);

/// The engine a run uses: --backend, or NCCL on a GPU and Gloo on the CPU.
Backend backendFor(const RunOptions &options, const at::Device &device);

/// Makes `device` this thread's current device (a GPU's index for libtorch
/// and CUDA's runtime); nothing for the CPU.
void useDevice(const at::Device &device);

/// Waits until `device` has run what was queued on it (a GPU's kernels, in
/// a build with CUDA's runtime); nothing for the CPU.
void synchronize(const at::Device &device);

/// Bytes of tensors on `device` now: the CPU's counting allocator's
/// (MemoryMeter.h, when installed) or, in a CUDA libtorch, its CUDA caching
/// allocator's (PIPPY_TORCH_CUDA).
int64_t liveBytes(const at::Device &device);
/// The most bytes of tensors a GPU held since the run started; none for the
/// CPU or where this libtorch has no CUDA.
std::optional<int64_t> peakDeviceBytes(const at::Device &device);

/// `tensor` (host memory) on `device`: through pinned memory, without
/// blocking the host; the tensor itself on the CPU.
at::Tensor onDevice(const at::Tensor &tensor, const at::Device &device);

} // namespace pippy::rt

#endif // PIPPY_RUNTIME_DEVICE_H
