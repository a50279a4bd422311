//===- MemoryMeter.h - bytes the CPU allocator holds ------------*- C++ -*-===//
//
// Counts the bytes of CPU tensors alive: once installed, every CPU block
// libtorch allocates passes through a counting allocator. A rank installs it
// for `--metrics`, to measure what each forward leaves allocated until its
// backward (the micro-batch's activations) against the simulator's
// prediction.
//
// Runtime code: it uses libtorch.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_MEMORYMETER_H
#define PIPPY_RUNTIME_MEMORYMETER_H

#include <cstdint>

namespace pippy::rt {

/// Routes libtorch's CPU allocations through the counter from now on (for
/// the rest of the process; calling it again does nothing).
void installMemoryMeter();

/// Bytes of CPU blocks allocated since installMemoryMeter and not yet freed
/// (0 when it was never installed).
int64_t liveCpuBytes();

} // namespace pippy::rt

#endif // PIPPY_RUNTIME_MEMORYMETER_H
