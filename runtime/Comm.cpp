//===- Comm.cpp - the Gloo engine -----------------------------------------===//
//
// Gloo through libtorch's c10d, on the store the ranks met through
// (Rendezvous.cpp).
//
//===----------------------------------------------------------------------===//

#include "pippy/Runtime/Comm.h"

#include "SharedMemory.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

using ::pippy::CommError;
using ::pippy::CommHandle;
using ::pippy::CommHandlePtr;
using ::pippy::Communicator;
using ::pippy::Rendezvous;

namespace {

/// What the launcher wrote about ranks that died, waiting briefly for it:
/// a peer's socket usually closes a moment before the launcher reaps it.
std::string failedRanks(const std::string &path) {
  if (path.empty())
    return "";
  for (int i = 0; i < 20; ++i) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    std::string s = text.str();
    while (!s.empty() && s.back() == '\n')
      s.pop_back();
    if (!s.empty())
      return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return "";
}

/// The same bytes as a dtype Gloo's collectives take: Gloo has no bool,
/// bfloat16 or complex broadcast, but moving their bytes as uint8, float16 or
/// (real, imaginary) pairs gives the same tensor.
at::Tensor glooBytes(const at::Tensor &tensor) {
  switch (tensor.scalar_type()) {
  case at::kBool:
    return tensor.view(at::kByte);
  case at::kBFloat16:
    return tensor.view(at::kHalf);
  case at::kComplexFloat:
  case at::kComplexDouble:
    return at::view_as_real(tensor);
  default:
    return tensor;
  }
}

/// `tensor` where Gloo can read and write it: Gloo moves host memory, so a
/// tensor on a GPU (--device cuda with --backend gloo) goes through a copy
/// in host memory, which the handle copies back once the operation is done.
at::Tensor onHost(const at::Tensor &tensor) {
  return !tensor.defined() || tensor.is_cpu() ? tensor : tensor.to(at::kCPU);
}

/// Where a staged operation's result goes back to: `tensor` itself when
/// Gloo worked on another tensor, else nothing.
at::Tensor copyBackTo(const at::Tensor &tensor, const at::Tensor &staged) {
  return staged.is_same(tensor) ? at::Tensor() : tensor;
}

/// A transfer with `peer` that failed: "WHAT: lost rank N" or "WHAT: no
/// answer from rank N within T s (--timeout)" (a collective without one
/// peer: "a peer ..."), with the engine's `detail` and what the launcher
/// knows of dead ranks.
CommError peerFailure(const std::string &what, int peer, bool timedOut,
                      const std::string &detail, const Rendezvous &rdzv) {
  std::string seconds = ::pippy::timeoutSeconds(rdzv.timeout);
  std::string msg =
      what + ": " +
      (peer >= 0 ? (timedOut ? "no answer from rank " + std::to_string(peer) +
                                   " within " + seconds + " s (--timeout)"
                             : "lost rank " + std::to_string(peer))
                 : (timedOut ? "a peer did not answer within the timeout"
                             : "a peer failed"));
  msg += " (" + detail + ")";
  if (std::string failed = failedRanks(rdzv.failedRanksPath); !failed.empty())
    msg += "; " + failed;
  return CommError(msg);
}

class GlooHandle : public CommHandle {
public:
  /// `result`, when given, receives `tensor` once the operation is done
  /// (a bfloat16 sum computed in float32; a tensor staged in host memory).
  GlooHandle(c10::intrusive_ptr<c10d::Work> work, at::Tensor tensor,
             std::string what, int peer, const Rendezvous &rdzv,
             at::Tensor result = at::Tensor())
      : work(std::move(work)), tensor(std::move(tensor)), what(std::move(what)),
        peer(peer), rdzv(rdzv), result(std::move(result)) {}

  void wait() override {
    if (!work)
      return;
    try {
      work->wait(rdzv.timeout);
    } catch (const std::exception &e) {
      std::string detail = ::pippy::firstLine(e);
      work.reset();
      throw peerFailure(what, peer,
                        detail.find("imed out") != std::string::npos, detail,
                        rdzv);
    }
    work.reset();
    if (result.defined())
      result.copy_(tensor);
  }
  bool isCompleted() override { return !work || work->isCompleted(); }
  bool tellsArrival() const override { return false; }

private:
  c10::intrusive_ptr<c10d::Work> work;
  at::Tensor tensor; // kept alive while the operation is in flight
  std::string what;
  int peer;
  const Rendezvous &rdzv;
  at::Tensor result;
};

/// A receive through a shared-memory ring (SharedMemory.h): the message is
/// copied out when the handle is waited (or found complete).
class ShmReceive : public CommHandle {
public:
  ShmReceive(pippy::rt::ShmChannel &channel, at::Tensor buffer,
             at::Tensor result, int tag, std::string what, int peer,
             const Rendezvous &rdzv)
      : channel(channel), buffer(std::move(buffer)), result(std::move(result)),
        tag(tag), what(std::move(what)), peer(peer), rdzv(rdzv) {}

  void wait() override {
    if (done)
      return;
    done = true;
    try {
      channel.receive(buffer, tag, rdzv.timeout);
    } catch (const pippy::rt::ChannelError &e) {
      using Kind = pippy::rt::ChannelError::Kind;
      if (e.kind == Kind::Protocol)
        throw CommError(what + ": " + e.what());
      throw peerFailure(what, peer, e.kind == Kind::Timeout,
                        std::string("shared memory: ") + e.what(), rdzv);
    }
    finish();
  }
  bool isCompleted() override {
    if (!done && channel.tryReceive(buffer, tag)) {
      done = true;
      finish();
    }
    return done;
  }

private:
  void finish() {
    if (result.defined())
      result.copy_(buffer);
  }
  pippy::rt::ShmChannel &channel;
  at::Tensor buffer, result;
  int tag;
  std::string what;
  int peer;
  const Rendezvous &rdzv;
  bool done = false;
};

/// An operation done when it returns (a send through a shared-memory
/// ring, a collective in a world of one).
class DoneHandle : public CommHandle {
public:
  void wait() override {}
  bool isCompleted() override { return true; }
};

using GlooDevice = std::shared_ptr<::gloo::transport::Device>;

/// Where this rank's Gloo listens: GLOO_SOCKET_IFNAME's interface, loopback
/// on one host, else its address towards the master (Rendezvous.cpp).
GlooDevice glooDevice(const Rendezvous &rdzv) {
  if (const char *ifname = std::getenv("GLOO_SOCKET_IFNAME"))
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  return c10d::ProcessGroupGloo::createDeviceForHostname(
      rdzv.singleNode ? "127.0.0.1" : ::pippy::glooAddressTowardsMaster(rdzv));
}

class GlooCommunicator : public Communicator {
public:
  /// `device`: the world's, which its sub-groups share.
  GlooCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                   std::vector<int> globalRanks, const Rendezvous &rdzv,
                   GlooDevice device)
      : store(std::move(store)), globalRanks(std::move(globalRanks)),
        rdzv(rdzv), device(std::move(device)) {
    auto options = c10d::ProcessGroupGloo::Options::create(rdzv.timeout);
    options->devices.push_back(this->device);
    options->threads = 2;
    try {
      group = c10::make_intrusive<c10d::ProcessGroupGloo>(this->store, rank,
                                                          size, options);
    } catch (const std::exception &e) {
      std::string seconds = ::pippy::timeoutSeconds(rdzv.timeout);
      std::string msg = "rank " + std::to_string(rdzv.rank) +
                        ": cannot connect to the other ranks within " +
                        seconds + " s: " + ::pippy::firstLine(e);
      if (std::string failed = failedRanks(rdzv.failedRanksPath);
          !failed.empty())
        msg += "; " + failed;
      throw CommError(msg);
    }
  }

  int rank() const override { return group->getRank(); }
  int size() const override { return group->getSize(); }
  int globalRank(int r) const override { return globalRanks.at(r); }

  /// Peers on this host get a shared-memory ring each way (rings only
  /// where every rank is on one host; --shared-memory=false: none).
  void prepare(const std::vector<int> &peers) override {
    if (!rdzv.singleNode || !rdzv.sharedMemory)
      return;
    auto key = [&](int from, int to) {
      return "shm/" + std::to_string(globalRank(from)) + "-" +
             std::to_string(globalRank(to));
    };
    for (int peer : peers)
      if (peer != rank())
        if (auto ring = pippy::rt::ShmChannel::create(*store, key(rank(), peer),
                                                      kRingBytes))
          rings[peer] = std::move(ring);
    for (int peer : peers)
      if (peer != rank())
        if (auto ring = pippy::rt::ShmChannel::open(*store, key(peer, rank()),
                                                    rdzv.timeout))
          incoming[peer] = std::move(ring);
  }

  CommHandlePtr send(const at::Tensor &tensor, int dst, int tag,
                     const std::string &what) override {
    if (auto it = rings.find(dst);
        it != rings.end() && it->second->carries(tensor.nbytes())) {
      it->second->send(onHost(tensor).contiguous(), tag);
      return std::make_shared<DoneHandle>();
    }
    std::vector<at::Tensor> tensors{onHost(tensor)};
    return wrap([&] { return group->send(tensors, dst, tag); }, tensors[0],
                what, dst);
  }
  CommHandlePtr recv(const at::Tensor &tensor, int src, int tag,
                     const std::string &what) override {
    std::vector<at::Tensor> tensors{
        tensor.is_cpu()
            ? tensor
            : at::empty(tensor.sizes(), tensor.options().device(at::kCPU))};
    if (auto it = incoming.find(src);
        it != incoming.end() && it->second->carries(tensor.nbytes()))
      return std::make_shared<ShmReceive>(*it->second, tensors[0],
                                          copyBackTo(tensor, tensors[0]), tag,
                                          what, globalRank(src), rdzv);
    return wrap([&] { return group->recv(tensors, src, tag); }, tensors[0],
                what, src, copyBackTo(tensor, tensors[0]));
  }
  CommHandlePtr allReduceSum(const at::Tensor &tensor,
                             const std::string &what) override {
    // Gloo cannot add bfloat16: the sum is taken in float32 and rounded
    // once (for two addends, bfloat16's own correctly rounded sum).
    at::Tensor host = tensor.scalar_type() == at::kBFloat16
                          ? tensor.to(at::kCPU, at::kFloat)
                          : onHost(tensor);
    std::vector<at::Tensor> tensors{glooBytes(host)};
    return wrap([&] { return group->allreduce(tensors); }, host, what,
                onlyPeer(), copyBackTo(tensor, host));
  }
  CommHandlePtr broadcast(const at::Tensor &tensor, int root,
                          const std::string &what) override {
    at::Tensor host = onHost(tensor);
    std::vector<at::Tensor> tensors{glooBytes(host)};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    return wrap([&] { return group->broadcast(tensors, options); }, host, what,
                onlyPeer(), copyBackTo(tensor, host));
  }
  void barrier(const std::string &what) override {
    wrap([&] { return group->barrier(); }, at::Tensor(), what, onlyPeer())
        ->wait();
  }

  std::unique_ptr<Communicator>
  subgroup(const std::string &name, const std::vector<int> &ranks) override {
    auto it = std::find(ranks.begin(), ranks.end(), globalRank(rank()));
    if (it == ranks.end())
      throw ::pippy::RuntimeError("rank " + std::to_string(rdzv.rank) +
                                  " is not in group " + name);
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>(name, store);
    return std::make_unique<GlooCommunicator>(
        prefixed, static_cast<int>(it - ranks.begin()),
        static_cast<int>(ranks.size()), ranks, rdzv, device);
  }

private:
  /// In a group of two, a collective that fails has one peer to name.
  int onlyPeer() const { return size() == 2 ? 1 - rank() : -1; }

  using Start = std::function<c10::intrusive_ptr<c10d::Work>()>;

  /// Starts an operation; Gloo sends on the calling thread, so a peer that
  /// is gone can fail it here already, as a CommError naming the peer.
  c10::intrusive_ptr<c10d::Work> start(const Start &begin,
                                       const std::string &what, int peer) {
    try {
      return begin();
    } catch (const CommError &) {
      throw;
    } catch (const std::exception &e) {
      std::string msg =
          what + ": " +
          (peer >= 0 ? "lost rank " + std::to_string(globalRank(peer))
                     : std::string("a peer failed")) +
          " (" + ::pippy::firstLine(e) + ")";
      if (std::string failed = failedRanks(rdzv.failedRanksPath);
          !failed.empty())
        msg += "; " + failed;
      throw CommError(msg);
    }
  }

  /// `tensor`: what Gloo works on, kept alive until the handle is waited;
  /// `result`: where it is copied then (or nothing).
  CommHandlePtr wrap(const Start &begin, const at::Tensor &tensor,
                     const std::string &what, int peer,
                     const at::Tensor &result = at::Tensor()) {
    return std::make_shared<GlooHandle>(start(begin, what, peer), tensor, what,
                                        peer >= 0 ? globalRank(peer) : -1, rdzv,
                                        result);
  }

  /// Each way's ring: messages up to an eighth of it take it.
  static constexpr size_t kRingBytes = size_t(64) << 20;

  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  std::map<int, std::unique_ptr<pippy::rt::ShmChannel>> rings, incoming;
  std::vector<int> globalRanks;
  Rendezvous rdzv;
  GlooDevice device;
};

} // namespace

namespace pippy {

std::unique_ptr<Communicator> createGlooCommunicator(const Rendezvous &rdzv) {
  c10::intrusive_ptr<c10d::Store> store = openStore(rdzv);
  std::vector<int> all(rdzv.worldSize);
  for (int r = 0; r < rdzv.worldSize; ++r)
    all[r] = r;
  GlooDevice device = glooDevice(rdzv);
  try {
    return std::make_unique<GlooCommunicator>(store, rdzv.rank, rdzv.worldSize,
                                              all, rdzv, device);
  } catch (const CommError &e) {
    std::string missing = ranksNotJoined(*store, rdzv);
    if (missing.empty())
      throw;
    throw CommError(std::string(e.what()) + "; " + missing);
  }
}

/// The NCCL engine behind this interface (NcclCommunicator.cpp), where
/// built.
std::unique_ptr<Communicator> createNcclCommunicator(const Rendezvous &rdzv);

#ifndef PIPPY_HAVE_NCCL
std::unique_ptr<Communicator> createNcclCommunicator(const Rendezvous &) {
  throw RuntimeError("--backend nccl: this pippy-run was built without NCCL "
                     "(no CUDA toolkit with NCCL where it was configured)");
}
#endif

std::unique_ptr<Communicator> createCommunicator(Backend backend,
                                                 const Rendezvous &rdzv) {
  if (backend == Backend::Nccl)
    return createNcclCommunicator(rdzv);
  return createGlooCommunicator(rdzv);
}

namespace {

class LocalCommunicator : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int globalRank(int r) const override { return r; }
  CommHandlePtr send(const at::Tensor &, int, int,
                     const std::string &what) override {
    throw CommError(what + ": a world of one rank has no peer");
  }
  CommHandlePtr recv(const at::Tensor &, int, int,
                     const std::string &what) override {
    throw CommError(what + ": a world of one rank has no peer");
  }
  CommHandlePtr allReduceSum(const at::Tensor &, const std::string &) override {
    return std::make_shared<DoneHandle>();
  }
  CommHandlePtr broadcast(const at::Tensor &, int,
                          const std::string &) override {
    return std::make_shared<DoneHandle>();
  }
  void barrier(const std::string &) override {}
  std::unique_ptr<Communicator> subgroup(const std::string &,
                                         const std::vector<int> &) override {
    return std::make_unique<LocalCommunicator>();
  }
};

} // namespace

std::unique_ptr<Communicator> createLocalCommunicator() {
  return std::make_unique<LocalCommunicator>();
}

} // namespace pippy
