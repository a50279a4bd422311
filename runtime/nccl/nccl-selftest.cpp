//===- nccl-selftest.cpp - the NCCL engine on real GPUs, without libtorch -===//
//
// Checks pippy's NCCL engine (NcclComm.h) on the GPUs a machine has. CUDA
// and NCCL only: Debian's libtorch has no CUDA.
//
//   pippy-nccl-selftest
//       A world of one rank (the only size NCCL allows on one device) meets
//       through a DirectoryStore and runs an all-reduce, a broadcast, a
//       barrier, sends to itself (float32, bfloat16, int64) and an
//       all-reduce on a split of it through the engine's handles; the
//       results are compared with what they must be.
//       Then the bad paths: waiting on an operation issued inside a group, a
//       peer that never joins (the wait ends at the timeout, the
//       communicator is aborted), a store without NCCL's id, and a receive
//       from itself whose send never comes (NCCL's error, not a hang).
//   pippy-nccl-selftest --world N --rank R --store DIR [--timeout-ms T]
//       One rank of a world of N, on device R modulo the device count,
//       meeting the others in the directory DIR: an all-reduce, a broadcast
//       from rank 0, a barrier, a ring of sends and receives and an
//       all-reduce within each half of a split by parity (ncclCommSplit),
//       checked against the values every rank computes. Start N of them at
//       once.
//   pippy-nccl-selftest --bench
//       Times an all-reduce and a send to itself at several sizes, waited
//       on through a handle and through cudaStreamSynchronize, and the same
//       on a blocking and a non-blocking communicator of plain NCCL.
//
// Exit codes: 0 all checks passed, 1 a check failed, 2 bad arguments,
// 77 no GPU (skipped).
//
//===----------------------------------------------------------------------===//

#include "NcclComm.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <unistd.h>
#include <vector>

using namespace pippy::nccl;
using Clock = std::chrono::steady_clock;

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

/// Runs `body`, which must throw an NcclError whose text holds `needle`.
void expectError(const char *what, const std::string &needle,
                 const std::function<void()> &body) {
  auto start = Clock::now();
  try {
    body();
  } catch (const NcclError &e) {
    double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    if (std::string(e.what()).find(needle) == std::string::npos) {
      std::fprintf(stderr, "nccl-selftest: %s: error '%s' does not say '%s'\n",
                   what, e.what(), needle.c_str());
      ++failures;
      return;
    }
    std::printf("nccl-selftest: %s ok after %.2f s: %s\n", what, seconds,
                e.what());
    return;
  }
  std::fprintf(stderr, "nccl-selftest: %s: no error\n", what);
  ++failures;
}

/// A private store directory, removed with what it holds.
struct StoreDirectory {
  StoreDirectory() {
    if (!mkdtemp(path))
      throw NcclError("cannot create a store directory");
  }
  ~StoreDirectory() {
    std::string command = std::string("rm -rf ") + path;
    if (std::system(command.c_str()) != 0)
      std::fprintf(stderr, "nccl-selftest: cannot remove %s\n", path);
  }
  char path[32] = "/tmp/pippy-nccl-XXXXXX";
};

/// A device buffer of `bytes`.
struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) : bytes(bytes) {
    cudaOk(cudaMalloc(&data, bytes), "cudaMalloc");
  }
  ~DeviceBuffer() { cudaFree(data); }
  void upload(const void *host) {
    cudaOk(cudaMemcpy(data, host, bytes, cudaMemcpyHostToDevice),
           "cudaMemcpy to the device");
  }
  void download(void *host) const {
    cudaOk(cudaMemcpy(host, data, bytes, cudaMemcpyDeviceToHost),
           "cudaMemcpy from the device");
  }
  void clear() { cudaOk(cudaMemset(data, 0, bytes), "cudaMemset"); }
  void *data = nullptr;
  size_t bytes;
};

std::vector<float> pattern(size_t n, float offset) {
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i)
    host[i] = static_cast<float>(i % 1000) * 0.5f + offset;
  return host;
}

/// Sends `count` elements of `type` (`elementBytes` each) to itself in a
/// group and compares the bytes that arrive.
void sendToSelf(Communicator &comm, const char *what, ncclDataType_t type,
                size_t count, size_t elementBytes) {
  size_t bytes = count * elementBytes;
  std::vector<unsigned char> host(bytes), got(bytes);
  for (size_t i = 0; i < bytes; ++i)
    host[i] = static_cast<unsigned char>((i * 131 + 7) % 251);
  DeviceBuffer a(bytes), b(bytes);
  a.upload(host.data());
  b.clear();
  comm.groupStart();
  comm.send(a.data, count, type, comm.rank(), std::string(what) + " send");
  comm.recv(b.data, count, type, comm.rank(), std::string(what) + " recv");
  comm.groupEnd(what).wait();
  b.download(got.data());
  if (got != host) {
    std::fprintf(stderr, "nccl-selftest: %s: the bytes received differ\n",
                 what);
    ++failures;
    return;
  }
  std::printf("nccl-selftest: %s ok (%zu bytes)\n", what, bytes);
}

/// Collectives, sends to itself and a split on a world of one rank.
void checkOneRankOperations() {
  StoreDirectory dir;
  DirectoryStore store(dir.path);
  Communicator comm(store, "nccl-id", /*rank=*/0, /*size=*/1,
                    /*device=*/0, std::chrono::milliseconds(30000));

  const size_t n = 1 << 20;
  std::vector<float> host = pattern(n, 0), out(n);
  DeviceBuffer a(n * sizeof(float)), b(n * sizeof(float));
  a.upload(host.data());

  // All-reduce (sum) over one rank is the identity.
  comm.allReduceSum(a.data, b.data, n, ncclFloat, "all-reduce").wait();
  b.download(out.data());
  expect("all-reduce", out, host);

  // Broadcast from rank 0 to itself.
  b.clear();
  comm.broadcast(a.data, b.data, n, ncclFloat, 0, "broadcast").wait();
  b.download(out.data());
  expect("broadcast", out, host);

  comm.barrier("barrier");
  std::printf("nccl-selftest: barrier ok\n");

  // Send to and receive from itself, in one group so neither blocks; the
  // dtypes a pipeline sends (activations, half-precision ones, indices).
  sendToSelf(comm, "send/recv float32", ncclFloat, n, 4);
  sendToSelf(comm, "send/recv bfloat16", ncclBfloat16, n + 3, 2);
  sendToSelf(comm, "send/recv int64", ncclInt64, 1000, 8);

  // A split of the world of one (pippy-run --dp/--tp's groups): a
  // communicator of one rank whose all-reduce is the identity.
  std::unique_ptr<Communicator> part = comm.split(/*color=*/0, /*key=*/0);
  b.clear();
  part->allReduceSum(a.data, b.data, n, ncclFloat, "split all-reduce").wait();
  b.download(out.data());
  expect("split all-reduce", out, host);

  // An operation inside a group is enqueued at the group's end: its own
  // handle cannot say when it is done.
  b.clear();
  comm.groupStart();
  Handle sent = comm.send(a.data, n, ncclFloat, 0, "grouped send");
  comm.recv(b.data, n, ncclFloat, 0, "grouped recv");
  expectError("waiting on a grouped send", "inside a group",
              [&] { sent.wait(); });
  comm.groupEnd("grouped send/recv").wait();
  b.download(out.data());
  expect("grouped send/recv", out, host);
}

/// Joins that fail: a peer that never comes, a store without NCCL's id.
void checkJoinErrors() {
  // A peer that never joins: rank 0 of 2 waits for rank 1 until the timeout,
  // then aborts instead of hanging.
  {
    StoreDirectory dir;
    DirectoryStore store(dir.path);
    expectError("a peer that never joins", "did not join within 2000 ms", [&] {
      Communicator comm(store, "nccl-id", /*rank=*/0, /*size=*/2,
                        /*device=*/0, std::chrono::milliseconds(2000));
    });
  }

  // A rank whose store never gets NCCL's id.
  {
    StoreDirectory dir;
    DirectoryStore store(dir.path);
    expectError("a store without the id", "no value for 'nccl-id'", [&] {
      Communicator comm(store, "nccl-id", /*rank=*/1, /*size=*/2,
                        /*device=*/0, std::chrono::milliseconds(500));
    });
  }
}

/// A receive from itself whose send never comes. NCCL 2.28 refuses it while
/// launching the group, on its own thread (invalid usage, after about a
/// second on an H200); the engine must report that error, naming the
/// operation, and abort the communicator rather than hang or go on. (Were
/// the launch accepted, the wait would end at the 2 s timeout instead; the
/// check takes either error.)
void checkUnmatchedReceive() {
  StoreDirectory dir;
  DirectoryStore store(dir.path);
  Communicator comm(store, "nccl-id", /*rank=*/0, /*size=*/1, /*device=*/0,
                    std::chrono::milliseconds(2000));
  DeviceBuffer b(1 << 12);
  expectError(
      "a receive whose send never comes", "receive without its send", [&] {
        comm.groupStart();
        comm.recv(b.data, 1 << 10, ncclFloat, 0, "receive without its send");
        comm.groupEnd("receive without its send").wait();
      });
}

int runOneRank() {
  int version = 0;
  ncclGetVersion(&version);
  cudaDeviceProp prop{};
  cudaOk(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("nccl-selftest: NCCL %d on %s\n", version, prop.name);
  checkOneRankOperations();
  checkJoinErrors();
  // Last, as it leaves an aborted communicator behind.
  checkUnmatchedReceive();
  std::printf("nccl-selftest: %s\n", failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}

int runWorldRank(int world, int rank, const std::string &storeDir,
                 int timeoutMs) {
  int devices = 0;
  cudaOk(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  int device = rank % devices;
  std::printf("nccl-selftest: rank %d of %d on device %d of %d\n", rank, world,
              device, devices);
  DirectoryStore store(storeDir);
  Communicator comm(store, "nccl-id", rank, world, device,
                    std::chrono::milliseconds(timeoutMs));

  const size_t n = 1 << 20;
  std::vector<float> mine = pattern(n, static_cast<float>(rank)), out(n);
  DeviceBuffer a(n * sizeof(float)), b(n * sizeof(float));
  a.upload(mine.data());

  // Every rank's pattern plus its rank, summed: exact in float32.
  std::vector<float> sum = pattern(n, 0);
  for (float &v : sum)
    v = v * world + static_cast<float>(world * (world - 1) / 2);
  comm.allReduceSum(a.data, b.data, n, ncclFloat, "all-reduce").wait();
  b.download(out.data());
  expect("all-reduce", out, sum);

  b.clear();
  comm.broadcast(a.data, b.data, n, ncclFloat, 0, "broadcast from rank 0")
      .wait();
  b.download(out.data());
  expect("broadcast from rank 0", out, pattern(n, 0));

  comm.barrier("barrier");
  std::printf("nccl-selftest: barrier ok\n");

  // A ring: each rank sends to the next and receives from the previous, as
  // pipeline stages pass activations on.
  int next = (rank + 1) % world, previous = (rank + world - 1) % world;
  b.clear();
  comm.groupStart();
  comm.send(a.data, n, ncclFloat, next, "send to rank " + std::to_string(next));
  comm.recv(b.data, n, ncclFloat, previous,
            "receive from rank " + std::to_string(previous));
  comm.groupEnd("ring").wait();
  b.download(out.data());
  expect("ring send/recv", out, pattern(n, static_cast<float>(previous)));

  // Split by parity (as pippy-run --dp/--tp split the world into groups):
  // each all-reduce sums the patterns of the ranks of its own parity.
  std::unique_ptr<Communicator> half = comm.split(rank % 2, rank);
  std::vector<float> parity(n, 0.0f);
  for (int r = rank % 2; r < world; r += 2) {
    std::vector<float> p = pattern(n, static_cast<float>(r));
    for (size_t i = 0; i < n; ++i)
      parity[i] += p[i];
  }
  half->allReduceSum(a.data, b.data, n, ncclFloat, "split all-reduce").wait();
  b.download(out.data());
  expect("all-reduce within a split", out, parity);

  std::printf("nccl-selftest: rank %d: %s\n", rank,
              failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}

/// Median microseconds of `iterations` runs of `body`.
double medianMicros(int iterations, const std::function<void()> &body) {
  std::vector<double> times;
  for (int i = 0; i < iterations; ++i) {
    auto start = Clock::now();
    body();
    times.push_back(
        std::chrono::duration<double, std::micro>(Clock::now() - start)
            .count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void synchronize(cudaStream_t stream) {
  cudaOk(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

/// Plain NCCL on one rank, a blocking communicator and a non-blocking one,
/// with a stream of their own: what the bench compares the engine with.
struct PlainNccl {
  PlainNccl() {
    int device = 0;
    if (ncclCommInitAll(&blocking, 1, &device) != ncclSuccess)
      throw NcclError("ncclCommInitAll failed");
    ncclUniqueId id;
    ncclGetUniqueId(&id);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    settle(ncclCommInitRankConfig(&nonBlocking, 1, id, 0, &config));
    cudaOk(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
           "cudaStreamCreate");
  }
  ~PlainNccl() {
    cudaStreamDestroy(stream);
    ncclCommDestroy(blocking);
    ncclCommDestroy(nonBlocking);
  }
  /// Waits until a non-blocking call has finished (NCCL's documented way).
  void settle(ncclResult_t result) {
    while (result == ncclInProgress)
      ncclCommGetAsyncError(nonBlocking, &result);
    if (result != ncclSuccess)
      throw NcclError(std::string("plain non-blocking NCCL: ") +
                      ncclGetErrorString(result));
  }

  ncclComm_t blocking, nonBlocking;
  cudaStream_t stream;
};

/// One size's rows: all-reduce and send/recv through the engine (waiting on
/// its handle, or on its stream) and through plain NCCL.
void benchSize(Communicator &comm, PlainNccl &plainNccl, size_t bytes) {
  DeviceBuffer a(bytes), b(bytes);
  a.clear();
  size_t count = bytes / sizeof(float);
  cudaStream_t stream = plainNccl.stream;
  auto allReduce = [&] {
    return comm.allReduceSum(a.data, b.data, count, ncclFloat, "all-reduce");
  };
  auto sendRecv = [&] {
    comm.groupStart();
    comm.send(a.data, count, ncclFloat, 0, "send");
    comm.recv(b.data, count, ncclFloat, 0, "recv");
    return comm.groupEnd("send/recv");
  };
  auto plainAllReduce = [&](ncclComm_t c) {
    return ncclAllReduce(a.data, b.data, count, ncclFloat, ncclSum, c, stream);
  };
  auto plainSendRecv = [&](ncclComm_t c) {
    ncclGroupStart();
    ncclSend(a.data, count, ncclFloat, 0, c, stream);
    ncclRecv(b.data, count, ncclFloat, 0, c, stream);
    return ncclGroupEnd();
  };
  struct Row {
    const char *name;
    std::function<Handle()> op;
    std::function<ncclResult_t(ncclComm_t)> plain;
  };
  for (const Row &row : {Row{"all-reduce", allReduce, plainAllReduce},
                         Row{"send/recv", sendRecv, plainSendRecv}}) {
    for (int i = 0; i < 5; ++i) {
      row.op().wait();
      row.plain(plainNccl.blocking);
      plainNccl.settle(row.plain(plainNccl.nonBlocking));
      synchronize(stream);
    }
    double handle = medianMicros(50, [&] { row.op().wait(); });
    double streamSync = medianMicros(50, [&] {
      row.op();
      synchronize(comm.stream());
    });
    double plain = medianMicros(50, [&] {
      row.plain(plainNccl.blocking);
      synchronize(stream);
    });
    double plainNonBlocking = medianMicros(50, [&] {
      plainNccl.settle(row.plain(plainNccl.nonBlocking));
      synchronize(stream);
    });
    std::printf("%-10s %-10zu %10.1f %14.1f %12.1f %16.1f %10.1f\n", row.name,
                bytes, handle, streamSync, plain, plainNonBlocking,
                bytes / handle / 1e3);
  }
}

/// The same operations on communicators of plain NCCL, a blocking one and a
/// non-blocking one, for what the engine's non-blocking communicator (which
/// lets a missing peer time out) and its own code cost.
int runBench() {
  StoreDirectory dir;
  DirectoryStore store(dir.path);
  Communicator comm(store, "nccl-id", 0, 1, 0,
                    std::chrono::milliseconds(30000));
  PlainNccl plainNccl;
  std::printf("%-10s %-10s %10s %14s %12s %16s %10s\n", "operation", "bytes",
              "handle us", "stream-sync us", "blocking us", "non-blocking us",
              "GB/s");
  for (size_t bytes : {size_t(4), size_t(4) << 10, size_t(256) << 10,
                       size_t(4) << 20, size_t(64) << 20})
    benchSize(comm, plainNccl, bytes);
  return 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: pippy-nccl-selftest [--bench | --world N --rank R "
               "--store DIR [--timeout-ms T]]\n");
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  int world = 0, rank = -1, timeoutMs = 30000;
  bool bench = false;
  std::string storeDir;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    bool hasValue = i + 1 < argc;
    if (arg == "--bench")
      bench = true;
    else if (arg == "--world" && hasValue)
      world = std::atoi(argv[++i]);
    else if (arg == "--rank" && hasValue)
      rank = std::atoi(argv[++i]);
    else if (arg == "--store" && hasValue)
      storeDir = argv[++i];
    else if (arg == "--timeout-ms" && hasValue)
      timeoutMs = std::atoi(argv[++i]);
    else
      return usage();
  }
  bool worldMode = world > 0 || rank >= 0 || !storeDir.empty();
  if (worldMode && (world < 1 || rank < 0 || rank >= world ||
                    storeDir.empty() || timeoutMs <= 0 || bench))
    return usage();

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("nccl-selftest: no CUDA device; skipped\n");
    return 77;
  }
  try {
    if (bench)
      return runBench();
    if (worldMode)
      return runWorldRank(world, rank, storeDir, timeoutMs);
    return runOneRank();
  } catch (const NcclError &e) {
    std::fprintf(stderr, "nccl-selftest: error: %s\n", e.what());
    return 1;
  }
}
