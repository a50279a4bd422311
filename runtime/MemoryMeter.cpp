//===- MemoryMeter.cpp - bytes the CPU allocator holds --------------------===//

#include "pippy/Runtime/MemoryMeter.h"

#include "TorchCompat.h"

#include <c10/core/Allocator.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace pippy::rt {
namespace {

std::atomic<int64_t> live{0};
std::mutex blocksMutex;
/// The size of each block alive, by address. Context and data are the same
/// pointer, as Allocator::raw_allocate requires (oneDNN allocates so).
std::unordered_map<const void *, int64_t> *blockSizes =
    new std::unordered_map<const void *, int64_t>; // outlives every tensor
c10::DeleterFnPtr innerDelete = nullptr;

void release(void *data) {
  {
    std::lock_guard<std::mutex> lock(blocksMutex);
    auto it = blockSizes->find(data);
    if (it != blockSizes->end()) {
      live -= it->second;
      blockSizes->erase(it);
    }
  }
  innerDelete(data);
}

class CountingAllocator : public pippy::rt::compat::ForwardingAllocator {
public:
  explicit CountingAllocator(c10::Allocator *inner) : inner(inner) {}
  c10::DataPtr allocateBlock(size_t n) const override {
    c10::DataPtr block = inner->allocate(n);
    void *data = block.get();
    c10::Device device = block.device();
    block.release_context(); // freed through `release` from now on
    {
      std::lock_guard<std::mutex> lock(blocksMutex);
      (*blockSizes)[data] = static_cast<int64_t>(n);
    }
    live += static_cast<int64_t>(n);
    return c10::DataPtr(data, data, &release, device);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

private:
  c10::Allocator *inner;
};

} // namespace

void installMemoryMeter() {
  // Above libtorch's own registration, and never removed: tensors allocated
  // through it may outlive any scope. libtorch's CPU allocator hands out
  // blocks whose context is their address, freed by its raw deleter.
  static bool installed = [] {
    c10::Allocator *inner = c10::GetAllocator(c10::DeviceType::CPU);
    innerDelete = inner->raw_deleter();
    if (!innerDelete)
      return false; // nothing to count through: leave libtorch's in place
    c10::SetAllocator(c10::DeviceType::CPU, new CountingAllocator(inner),
                      /*priority=*/50);
    return true;
  }();
  (void)installed;
}

int64_t liveCpuBytes() { return live.load(); }

std::optional<int64_t> liveBlockBytes(const void *data) {
  std::lock_guard<std::mutex> lock(blocksMutex);
  auto it = blockSizes->find(data);
  if (it == blockSizes->end())
    return std::nullopt;
  return it->second;
}

} // namespace pippy::rt
