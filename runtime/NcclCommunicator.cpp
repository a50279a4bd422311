//===- NcclCommunicator.cpp - the NCCL engine behind Communicator ---------===//
//
// `pippy-run --backend nccl`: the communicator interface (Comm.h) on the
// NCCL engine of runtime/nccl. Ranks meet through the same c10d store as
// Gloo's (FileStore on one node, TCPStore across hosts), where rank 0
// publishes NCCL's unique id; each rank drives the GPU `LOCAL_RANK` modulo
// the GPUs it sees.
//
// Sends and receives go through one two-rank NCCL communicator per
// direction between two ranks (`prepare` makes them before the first step,
// in one global order so that no two ranks wait on each other), each with
// its own stream: on one stream, rank 0's send of F1 queued before its
// receive of B0 and rank 1's send of B0 queued before its receive of F1
// would wait on each other, which 1F1B does every step.
//
// Tensors on a CUDA device are exchanged in place. Host tensors (a libtorch
// without CUDA, as Debian's) are staged through a device buffer: copied in
// when the operation is issued and out when its handle is waited, so that
// issuing a receive never blocks on its sender.
//
// Built where CUDA and NCCL are found (PIPPY_HAVE_NCCL).
//
//===----------------------------------------------------------------------===//

#include "pippy/Runtime/Comm.h"

#include "NcclComm.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <map>
#include <tuple>

namespace pippy {
namespace {

/// NCCL's element type for a tensor's bytes; complex numbers go as pairs
/// of reals (the caller passes view_as_real) and bool as bytes.
ncclDataType_t ncclType(at::ScalarType type, const std::string &what) {
  switch (type) {
  case at::kFloat:
    return ncclFloat32;
  case at::kDouble:
    return ncclFloat64;
  case at::kHalf:
    return ncclFloat16;
  case at::kBFloat16:
    return ncclBfloat16;
  case at::kLong:
    return ncclInt64;
  case at::kInt:
    return ncclInt32;
  case at::kChar:
    return ncclInt8;
  case at::kByte:
  case at::kBool:
    return ncclUint8;
  default:
    throw CommError(what + ": NCCL cannot exchange " +
                    std::string(c10::toString(type)) + " tensors");
  }
}

/// A tensor's storage on the device, staged when it lives on the host.
class DeviceView {
public:
  DeviceView(const at::Tensor &tensor, const std::string &what)
      : tensor(tensor.is_complex() ? at::view_as_real(tensor) : tensor) {
    type = ncclType(this->tensor.scalar_type(), what);
    count = static_cast<size_t>(this->tensor.numel());
    if (this->tensor.is_cuda()) {
      pointer = this->tensor.data_ptr();
      return;
    }
    size_t bytes = std::max<size_t>(this->tensor.nbytes(), 1);
    if (cudaMalloc(&pointer, bytes) != cudaSuccess)
      throw CommError(what + ": cannot allocate " + std::to_string(bytes) +
                      " bytes on the GPU to stage a host tensor");
    staged = true;
  }
  DeviceView(const DeviceView &) = delete;
  ~DeviceView() {
    if (staged)
      cudaFree(pointer);
  }

  /// Readies the operation on `stream`: a host tensor is copied in; a
  /// device tensor's operation waits for what libtorch queued before it
  /// (the kernels that wrote it, or last used its memory). libtorch queues
  /// on the legacy default stream, which pippy never changes; `stream` is
  /// a non-blocking one, so the order is an event, not a host wait.
  void ready(cudaStream_t stream, const std::string &what) {
    if (staged) {
      cudaMemcpyAsync(pointer, tensor.data_ptr(), tensor.nbytes(),
                      cudaMemcpyHostToDevice, stream);
      return;
    }
    cudaEvent_t queued;
    if (cudaEventCreateWithFlags(&queued, cudaEventDisableTiming) !=
            cudaSuccess ||
        cudaEventRecord(queued, cudaStreamLegacy) != cudaSuccess ||
        cudaStreamWaitEvent(stream, queued, 0) != cudaSuccess)
      throw CommError(what + ": cannot order the transfer after the "
                             "computation that made its tensor");
    cudaEventDestroy(queued); // released once the wait is done
  }
  /// Device to host, once the operation is done.
  void copyOut() {
    if (staged)
      cudaMemcpy(tensor.data_ptr(), pointer, tensor.nbytes(),
                 cudaMemcpyDeviceToHost);
  }

  at::Tensor tensor; // kept alive while the operation is in flight
  void *pointer = nullptr;
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  bool staged = false;
};

class NcclHandle : public CommHandle {
public:
  NcclHandle(nccl::Handle handle, std::unique_ptr<DeviceView> view,
             bool copyOut)
      : handle(std::move(handle)), view(std::move(view)), copyOut(copyOut) {}

  void wait() override {
    if (done)
      return;
    try {
      handle.wait();
    } catch (const nccl::NcclError &e) {
      done = true;
      throw CommError(e.what());
    }
    done = true;
    if (copyOut && view)
      view->copyOut();
  }
  bool isCompleted() override { return done || handle.isCompleted(); }
  /// A device tensor's operation: libtorch's stream waits for it on the
  /// device; a staged host tensor needs the host to copy it out.
  void waitOnDevice() override {
    if (done || !view || view->staged)
      return wait();
    try {
      handle.orderBefore(cudaStreamLegacy);
    } catch (const nccl::NcclError &e) {
      done = true;
      throw CommError(e.what());
    }
  }

private:
  nccl::Handle handle;
  std::unique_ptr<DeviceView> view;
  bool copyOut;
  bool done = false;
};

/// NCCL's unique id goes through the run's c10d store.
class C10dStore : public nccl::Store {
public:
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> store)
      : store(std::move(store)) {}
  void set(const std::string &key, const std::string &value) override {
    store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  }
  std::string get(const std::string &key,
                  std::chrono::milliseconds timeout) override {
    try {
      store->wait({key}, timeout);
    } catch (const std::exception &e) {
      throw nccl::NcclError("no NCCL id under '" + key + "' within " +
                            std::to_string(timeout.count()) + " ms");
    }
    std::vector<uint8_t> value = store->get(key);
    return std::string(value.begin(), value.end());
  }

private:
  c10::intrusive_ptr<c10d::Store> store;
};

int deviceOf(const Rendezvous &rdzv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    throw CommError("rank " + std::to_string(rdzv.rank) +
                    ": --backend nccl needs a GPU, and this host has none");
  return rdzv.localRank % devices;
}

class NcclCommunicator : public Communicator {
public:
  NcclCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                   std::vector<int> globalRanks, const Rendezvous &rdzv)
      : store(std::move(store)), globalRanks(std::move(globalRanks)),
        rdzv(rdzv) {
    C10dStore ids(this->store);
    try {
      comm = std::make_unique<nccl::Communicator>(
          ids, "pippy-nccl-id", rank, size, deviceOf(rdzv), rdzv.timeout);
    } catch (const nccl::NcclError &e) {
      throw CommError("rank " + std::to_string(rdzv.rank) +
                      ": cannot join the NCCL world: " + e.what());
    }
  }

  /// A group split from another (`split`): its NCCL communicator made.
  NcclCommunicator(c10::intrusive_ptr<c10d::Store> store,
                   std::unique_ptr<nccl::Communicator> made,
                   std::vector<int> globalRanks, const Rendezvous &rdzv)
      : store(std::move(store)), comm(std::move(made)),
        globalRanks(std::move(globalRanks)), rdzv(rdzv) {}

  int rank() const override { return comm->rank(); }
  int size() const override { return comm->size(); }
  int globalRank(int r) const override { return globalRanks.at(r); }

  void prepare(const std::vector<int> &peers) override {
    // Every direction between two ranks in (lower rank, higher rank,
    // direction) order: the same order on every rank.
    std::vector<std::pair<int, int>> directions;
    for (int peer : peers)
      if (peer != rank()) {
        directions.push_back({rank(), peer});
        directions.push_back({peer, rank()});
      }
    std::sort(directions.begin(), directions.end(), [](auto a, auto b) {
      return std::make_tuple(std::min(a.first, a.second),
                             std::max(a.first, a.second), a.first) <
             std::make_tuple(std::min(b.first, b.second),
                             std::max(b.first, b.second), b.first);
    });
    for (auto [from, to] : directions)
      direction(from, to);
  }

  CommHandlePtr send(const at::Tensor &tensor, int dst, int,
                     const std::string &what) override {
    nccl::Communicator &pair = direction(rank(), dst);
    auto view = std::make_unique<DeviceView>(tensor, what);
    view->ready(pair.stream(), what);
    return issue(what, std::move(view), /*copyOut=*/false, [&](DeviceView &v) {
      return pair.send(v.pointer, v.count, v.type, 1, what);
    });
  }
  CommHandlePtr recv(const at::Tensor &tensor, int src, int,
                     const std::string &what) override {
    nccl::Communicator &pair = direction(src, rank());
    auto view = std::make_unique<DeviceView>(tensor, what);
    if (!view->staged) // its memory may still be in use by earlier kernels
      view->ready(pair.stream(), what);
    return issue(what, std::move(view), /*copyOut=*/true, [&](DeviceView &v) {
      return pair.recv(v.pointer, v.count, v.type, 0, what);
    });
  }
  CommHandlePtr allReduceSum(const at::Tensor &tensor,
                             const std::string &what) override {
    auto view = std::make_unique<DeviceView>(tensor, what);
    view->ready(comm->stream(), what);
    return issue(what, std::move(view), /*copyOut=*/true, [&](DeviceView &v) {
      return comm->allReduceSum(v.pointer, v.pointer, v.count, v.type, what);
    });
  }
  CommHandlePtr broadcast(const at::Tensor &tensor, int root,
                          const std::string &what) override {
    auto view = std::make_unique<DeviceView>(tensor, what);
    view->ready(comm->stream(), what);
    return issue(what, std::move(view), /*copyOut=*/true, [&](DeviceView &v) {
      return comm->broadcast(v.pointer, v.pointer, v.count, v.type, root, what);
    });
  }
  void barrier(const std::string &what) override {
    try {
      comm->barrier(what);
    } catch (const nccl::NcclError &e) {
      throw CommError(e.what());
    }
  }

  std::unique_ptr<Communicator>
  subgroup(const std::string &name, const std::vector<int> &ranks) override {
    auto it = std::find(ranks.begin(), ranks.end(), globalRank(rank()));
    if (it == ranks.end())
      throw RuntimeError("rank " + std::to_string(rdzv.rank) +
                         " is not in group " + name);
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>(name, store);
    return std::make_unique<NcclCommunicator>(
        prefixed, static_cast<int>(it - ranks.begin()),
        static_cast<int>(ranks.size()), ranks, rdzv);
  }

  /// Every rank splits at once: one `ncclCommSplit` of this communicator,
  /// coloured by each group's first member.
  std::unique_ptr<Communicator> split(const std::string &name,
                                      const std::vector<int> &ranks) override {
    auto it = std::find(ranks.begin(), ranks.end(), globalRank(rank()));
    if (it == ranks.end())
      throw RuntimeError("rank " + std::to_string(rdzv.rank) +
                         " is not in group " + name);
    std::unique_ptr<nccl::Communicator> made;
    try {
      made = comm->split(ranks.front(), static_cast<int>(it - ranks.begin()));
    } catch (const nccl::NcclError &e) {
      throw CommError("rank " + std::to_string(rdzv.rank) +
                      ": cannot make group " + name + ": " + e.what());
    }
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>(name, store);
    return std::make_unique<NcclCommunicator>(prefixed, std::move(made), ranks,
                                              rdzv);
  }

private:
  /// Issues an operation; NCCL's errors become CommError. Tags are not
  /// needed: NCCL keeps the order of the operations of one communicator.
  template <typename Issue>
  CommHandlePtr issue(const std::string &what, std::unique_ptr<DeviceView> view,
                      bool copyOut, Issue &&call) {
    try {
      nccl::Handle handle = call(*view);
      return std::make_shared<NcclHandle>(std::move(handle), std::move(view),
                                          copyOut);
    } catch (const nccl::NcclError &e) {
      throw CommError(e.what());
    }
  }

  /// The two-rank communicator from global rank `from` to `to` (rank 0 of
  /// it sends, rank 1 receives), made on first use.
  nccl::Communicator &direction(int from, int to) {
    auto key = std::make_pair(globalRank(from), globalRank(to));
    auto it = pairs.find(key);
    if (it != pairs.end())
      return *it->second;
    C10dStore ids(store);
    std::string name = "pippy-nccl-p2p-" + std::to_string(key.first) + "-" +
                       std::to_string(key.second);
    try {
      auto pair = std::make_unique<nccl::Communicator>(
          ids, name, from == rank() ? 0 : 1, 2, deviceOf(rdzv), rdzv.timeout);
      return *pairs.emplace(key, std::move(pair)).first->second;
    } catch (const nccl::NcclError &e) {
      throw CommError("rank " + std::to_string(rdzv.rank) +
                      ": cannot connect to rank " +
                      std::to_string(from == rank() ? key.second : key.first) +
                      " through NCCL: " + e.what());
    }
  }

  c10::intrusive_ptr<c10d::Store> store;
  std::unique_ptr<nccl::Communicator> comm;
  std::map<std::pair<int, int>, std::unique_ptr<nccl::Communicator>> pairs;
  std::vector<int> globalRanks;
  Rendezvous rdzv;
};

} // namespace

std::unique_ptr<Communicator> createNcclCommunicator(const Rendezvous &rdzv) {
  c10::intrusive_ptr<c10d::Store> store = openStore(rdzv);
  std::vector<int> all(rdzv.worldSize);
  for (int r = 0; r < rdzv.worldSize; ++r)
    all[r] = r;
  return std::make_unique<NcclCommunicator>(store, rdzv.rank, rdzv.worldSize,
                                            all, rdzv);
}

} // namespace pippy
