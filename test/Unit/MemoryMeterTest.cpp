//===- MemoryMeterTest.cpp - the counting CPU allocator -------------------===//

#include "pippy/Runtime/MemoryMeter.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace {

// Once installed, a tensor's bytes count while it lives and stop counting
// when it is freed; blocks allocated the raw way (as oneDNN does) count too.
TEST(MemoryMeterTest, CountsTheBytesOfLiveTensors) {
  pippy::rt::installMemoryMeter();
  pippy::rt::installMemoryMeter(); // a second call changes nothing
  int64_t before = pippy::rt::liveCpuBytes();
  {
    at::Tensor t = at::empty({1000}, at::kFloat);
    EXPECT_EQ(pippy::rt::liveCpuBytes() - before, 4000);
    EXPECT_EQ(pippy::rt::liveBlockBytes(t.data_ptr()), 4000);
    at::Tensor u = at::empty({10}, at::kDouble);
    EXPECT_EQ(pippy::rt::liveCpuBytes() - before, 4080);
  }
  EXPECT_EQ(pippy::rt::liveCpuBytes(), before);
  c10::Allocator *cpu = c10::GetAllocator(c10::DeviceType::CPU);
  void *raw = cpu->raw_allocate(64);
  EXPECT_EQ(pippy::rt::liveCpuBytes() - before, 64);
  cpu->raw_deallocate(raw);
  EXPECT_EQ(pippy::rt::liveCpuBytes(), before);
}

} // namespace
