//===- nccl-selftest.cpp - NCCL on one GPU, without libtorch --------------===//
//
// Checks the NCCL engine's building blocks on the one GPU a machine may have:
// a world of size 1 (the only size NCCL allows on one device) runs an
// all-reduce, a broadcast, and a send/receive to itself inside a group, and
// the results are compared with what they must be. CUDA and NCCL only:
// Debian's libtorch has no CUDA.
//
// Exit codes: 0 all checks passed, 1 a check failed, 77 no GPU (skipped).
//
//===----------------------------------------------------------------------===//

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <vector>

namespace {

int failures = 0;

bool cudaOk(cudaError_t status, const char *what) {
  if (status == cudaSuccess)
    return true;
  std::fprintf(stderr, "nccl-selftest: %s failed: %s\n", what,
               cudaGetErrorString(status));
  ++failures;
  return false;
}

bool ncclOk(ncclResult_t status, const char *what) {
  if (status == ncclSuccess)
    return true;
  std::fprintf(stderr, "nccl-selftest: %s failed: %s\n", what,
               ncclGetErrorString(status));
  ++failures;
  return false;
}

void expect(const char *what, const std::vector<float> &got,
            const std::vector<float> &want) {
  for (size_t i = 0; i < got.size(); ++i)
    if (std::fabs(got[i] - want[i]) > 0) {
      std::fprintf(stderr,
                   "nccl-selftest: %s: element %zu is %g, expected %g\n", what,
                   i, got[i], want[i]);
      ++failures;
      return;
    }
  std::printf("nccl-selftest: %s ok (%zu floats)\n", what, got.size());
}

} // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("nccl-selftest: no CUDA device; skipped\n");
    return 77;
  }
  int version = 0;
  ncclGetVersion(&version);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("nccl-selftest: NCCL %d on %s (%d device(s))\n", version,
              prop.name, devices);

  const size_t n = 1 << 20;
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i)
    host[i] = static_cast<float>(i % 1000) * 0.5f;

  cudaSetDevice(0);
  ncclUniqueId id;
  ncclComm_t comm;
  cudaStream_t stream;
  float *a = nullptr, *b = nullptr;
  if (!ncclOk(ncclGetUniqueId(&id), "ncclGetUniqueId") ||
      !ncclOk(ncclCommInitRank(&comm, 1, id, 0), "ncclCommInitRank") ||
      !cudaOk(cudaStreamCreate(&stream), "cudaStreamCreate") ||
      !cudaOk(cudaMalloc(&a, n * sizeof(float)), "cudaMalloc") ||
      !cudaOk(cudaMalloc(&b, n * sizeof(float)), "cudaMalloc"))
    return 1;
  std::vector<float> out(n);

  // All-reduce (sum) over one rank is the identity.
  cudaMemcpy(a, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  ncclOk(ncclAllReduce(a, b, n, ncclFloat, ncclSum, comm, stream),
         "ncclAllReduce");
  cudaOk(cudaStreamSynchronize(stream), "all-reduce sync");
  cudaMemcpy(out.data(), b, n * sizeof(float), cudaMemcpyDeviceToHost);
  expect("all-reduce", out, host);

  // Broadcast from rank 0 to itself.
  cudaMemset(b, 0, n * sizeof(float));
  ncclOk(ncclBroadcast(a, b, n, ncclFloat, 0, comm, stream), "ncclBroadcast");
  cudaOk(cudaStreamSynchronize(stream), "broadcast sync");
  cudaMemcpy(out.data(), b, n * sizeof(float), cudaMemcpyDeviceToHost);
  expect("broadcast", out, host);

  // Send to and receive from itself, in one group so neither blocks.
  cudaMemset(b, 0, n * sizeof(float));
  ncclOk(ncclGroupStart(), "ncclGroupStart");
  ncclOk(ncclSend(a, n, ncclFloat, 0, comm, stream), "ncclSend");
  ncclOk(ncclRecv(b, n, ncclFloat, 0, comm, stream), "ncclRecv");
  ncclOk(ncclGroupEnd(), "ncclGroupEnd");
  cudaOk(cudaStreamSynchronize(stream), "send/recv sync");
  cudaMemcpy(out.data(), b, n * sizeof(float), cudaMemcpyDeviceToHost);
  expect("send/recv", out, host);

  ncclCommDestroy(comm);
  cudaFree(a);
  cudaFree(b);
  cudaStreamDestroy(stream);
  std::printf("nccl-selftest: %s\n", failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}
