//===- MemoryMeter.h - bytes the CPU allocator holds ------------*- C++ -*-===//
//
// Counts the bytes of CPU tensors alive: once installed, every CPU block
// libtorch allocates passes through a counting allocator that knows each
// block's size. A rank installs it for `--metrics`, to measure what each
// forward leaves allocated until its backward (the micro-batch's
// activations); pippy-import installs it before loading an archive, to learn
// how many bytes each tensor's data record really holds.
//
// Uses libtorch, nothing of LLVM or MLIR (library PippyMemoryMeter).
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_MEMORYMETER_H
#define PIPPY_RUNTIME_MEMORYMETER_H

#include <cstdint>
#include <optional>

namespace pippy::rt {

/// Routes libtorch's CPU allocations through the counter from now on (for
/// the rest of the process; calling it again does nothing).
void installMemoryMeter();

/// Bytes of CPU blocks allocated since installMemoryMeter and not yet freed
/// (0 when it was never installed).
int64_t liveCpuBytes();

/// The size of the live block that starts at `data`, where the meter
/// allocated it; nullopt otherwise.
std::optional<int64_t> liveBlockBytes(const void *data);

} // namespace pippy::rt

#endif // PIPPY_RUNTIME_MEMORYMETER_H
