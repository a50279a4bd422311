//===- DeviceTest.cpp - where a rank computes -----------------------------===//

#include "Device.h"

#include "pippy/Runtime/Program.h"

#include <gtest/gtest.h>

using namespace pippy;
using namespace pippy::rt;

namespace {

TEST(Device, RanksTakeTheirLocalRankModuloTheVisibleGpus) {
  EXPECT_EQ(gpuIndex(0, 8), 0);
  EXPECT_EQ(gpuIndex(5, 8), 5);
  EXPECT_EQ(gpuIndex(9, 8), 1); // more ranks than GPUs: they share
  EXPECT_EQ(gpuIndex(3, 1), 0);
}

TEST(Device, NcclOnGpusGlooOnCpusUnlessChosen) {
  RunOptions options;
  EXPECT_EQ(backendFor(options, at::Device(at::kCPU)), Backend::Gloo);
  EXPECT_EQ(backendFor(options, at::Device(at::kCUDA, 0)), Backend::Nccl);
  options.backend = Backend::Gloo;
  EXPECT_EQ(backendFor(options, at::Device(at::kCUDA, 0)), Backend::Gloo);
}

TEST(Device, CudaIsRefusedWhereLibtorchHasNone) {
  if (at::hasCUDA())
    GTEST_SKIP() << "this libtorch has CUDA";
  EXPECT_TRUE(rankDevice(std::nullopt, 3).is_cpu());
  EXPECT_TRUE(rankDevice(DeviceKind::Cpu, 0).is_cpu());
  try {
    rankDevice(DeviceKind::Cuda, 0);
    FAIL() << "--device cuda accepted without CUDA";
  } catch (const RuntimeError &e) {
    EXPECT_NE(std::string(e.what()).find("built without CUDA"),
              std::string::npos)
        << e.what();
  }
}

TEST(Device, HostTensorsStayOnTheCpu) {
  at::Tensor t = at::ones({2});
  EXPECT_TRUE(onDevice(t, at::kCPU).is_same(t));
  EXPECT_FALSE(onDevice(at::Tensor(), at::kCPU).defined());
}

} // namespace
