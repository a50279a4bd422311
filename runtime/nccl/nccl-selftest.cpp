//===- nccl-selftest.cpp - the NCCL engine on one GPU, without libtorch ---===//
//
// Checks pippy's NCCL engine (NcclComm.h) on the one GPU a machine may
// have: a world of size 1 (the only size NCCL allows on one device) meets
// through a DirectoryStore, runs an all-reduce, a broadcast, a barrier and a
// send/receive to itself inside a group through the engine's handles, and
// the results are compared with what they must be. CUDA and NCCL only:
// Debian's libtorch has no CUDA.
//
// Exit codes: 0 all checks passed, 1 a check failed, 77 no GPU (skipped).
//
//===----------------------------------------------------------------------===//

#include "NcclComm.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

using namespace pippy::nccl;

namespace {

int failures = 0;

void cudaOk(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    throw NcclError(std::string(what) + ": " + cudaGetErrorString(status));
}

void expect(const char *what, const std::vector<float> &got,
            const std::vector<float> &want) {
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      std::fprintf(stderr,
                   "nccl-selftest: %s: element %zu is %g, expected %g\n", what,
                   i, got[i], want[i]);
      ++failures;
      return;
    }
  std::printf("nccl-selftest: %s ok (%zu floats)\n", what, got.size());
}

int run() {
  int version = 0;
  ncclGetVersion(&version);
  cudaDeviceProp prop{};
  cudaOk(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("nccl-selftest: NCCL %d on %s\n", version, prop.name);

  char dir[] = "/tmp/pippy-nccl-XXXXXX";
  if (!mkdtemp(dir))
    throw NcclError("cannot create a store directory");
  DirectoryStore store(dir);
  Communicator comm(store, "nccl-id", /*rank=*/0, /*size=*/1, /*device=*/0,
                    std::chrono::milliseconds(30000));
  std::remove((std::string(dir) + "/nccl-id").c_str());
  rmdir(dir);

  const size_t n = 1 << 20;
  std::vector<float> host(n), out(n);
  for (size_t i = 0; i < n; ++i)
    host[i] = static_cast<float>(i % 1000) * 0.5f;
  float *a = nullptr, *b = nullptr;
  cudaOk(cudaMalloc(&a, n * sizeof(float)), "cudaMalloc");
  cudaOk(cudaMalloc(&b, n * sizeof(float)), "cudaMalloc");
  cudaOk(cudaMemcpy(a, host.data(), n * sizeof(float), cudaMemcpyHostToDevice),
         "cudaMemcpy");
  auto fetch = [&] {
    cudaOk(cudaMemcpy(out.data(), b, n * sizeof(float), cudaMemcpyDeviceToHost),
           "cudaMemcpy");
  };

  // All-reduce (sum) over one rank is the identity.
  comm.allReduceSum(a, b, n, ncclFloat, "all-reduce").wait();
  fetch();
  expect("all-reduce", out, host);

  // Broadcast from rank 0 to itself.
  cudaOk(cudaMemset(b, 0, n * sizeof(float)), "cudaMemset");
  comm.broadcast(a, b, n, ncclFloat, 0, "broadcast").wait();
  fetch();
  expect("broadcast", out, host);

  comm.barrier("barrier");
  std::printf("nccl-selftest: barrier ok\n");

  // Send to and receive from itself, in one group so neither blocks.
  cudaOk(cudaMemset(b, 0, n * sizeof(float)), "cudaMemset");
  comm.groupStart();
  comm.send(a, n, ncclFloat, 0, "send to self");
  comm.recv(b, n, ncclFloat, 0, "receive from self");
  comm.groupEnd("send/recv").wait();
  fetch();
  expect("send/recv", out, host);

  cudaFree(a);
  cudaFree(b);
  std::printf("nccl-selftest: %s\n", failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}

} // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("nccl-selftest: no CUDA device; skipped\n");
    return 77;
  }
  try {
    return run();
  } catch (const NcclError &e) {
    std::fprintf(stderr, "nccl-selftest: error: %s\n", e.what());
    return 1;
  }
}
