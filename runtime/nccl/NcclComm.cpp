//===- NcclComm.cpp - the NCCL engine ------------------------------------===//

#include "NcclComm.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

using namespace pippy::nccl;

namespace {

void cudaCheck(cudaError_t status, const std::string &what) {
  if (status != cudaSuccess)
    throw NcclError(what + ": " + cudaGetErrorString(status));
}

std::string hex(const char *bytes, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    text += digits[(bytes[i] >> 4) & 15];
    text += digits[bytes[i] & 15];
  }
  return text;
}

bool unhex(const std::string &text, char *bytes, size_t n) {
  if (text.size() != 2 * n)
    return false;
  auto value = [](char c) { return c >= 'a' ? c - 'a' + 10 : c - '0'; };
  for (size_t i = 0; i < n; ++i)
    bytes[i] =
        static_cast<char>(value(text[2 * i]) << 4 | value(text[2 * i + 1]));
  return true;
}

} // namespace

void DirectoryStore::set(const std::string &key, const std::string &value) {
  std::string path = directory + "/" + key;
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out << value;
    if (!out)
      throw NcclError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw NcclError("cannot rename " + tmp + " to " + path);
}

std::string DirectoryStore::get(const std::string &key,
                                std::chrono::milliseconds timeout) {
  std::string path = directory + "/" + key;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      return text.str();
    }
    if (std::chrono::steady_clock::now() > deadline)
      throw NcclError("no value for '" + key + "' in " + directory +
                      " within " + std::to_string(timeout.count()) + " ms");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Handle::Handle(Communicator &comm, std::string what)
    : Handle(comm, std::move(what), /*inGroup=*/false) {}

Handle Handle::grouped(Communicator &comm, std::string what) {
  return Handle(comm, std::move(what), /*inGroup=*/true);
}

Handle::Handle(Communicator &comm, std::string what, bool inGroup)
    : comm(&comm), what(std::move(what)), inGroup(inGroup) {
  if (inGroup)
    return;
  cudaCheck(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
            this->what + ": cudaEventCreate");
  cudaCheck(cudaEventRecord(event, comm.stream()),
            this->what + ": cudaEventRecord");
}

Handle::Handle(Handle &&other) noexcept
    : comm(other.comm), event(other.event), what(std::move(other.what)),
      inGroup(other.inGroup) {
  other.event = nullptr;
}

Handle::~Handle() {
  if (event)
    cudaEventDestroy(event);
}

bool Handle::isCompleted() {
  if (!event)
    return !inGroup;
  return cudaEventQuery(event) != cudaErrorNotReady;
}

void Handle::orderBefore(cudaStream_t stream) {
  if (inGroup)
    throw NcclError(what + ": issued inside a group; order after the handle "
                           "that groupEnd returns");
  if (event)
    cudaCheck(cudaStreamWaitEvent(stream, event, 0),
              what + ": cudaStreamWaitEvent");
}

void Handle::wait() {
  if (inGroup)
    throw NcclError(what + ": issued inside a group; wait on the handle that "
                           "groupEnd returns");
  if (!event)
    return;
  auto start = std::chrono::steady_clock::now();
  auto deadline = start + comm->timeout();
  for (;;) {
    cudaError_t status = cudaEventQuery(event);
    if (status == cudaSuccess)
      break;
    if (status != cudaErrorNotReady)
      throw NcclError(what + ": " + cudaGetErrorString(status));
    comm->checkAsyncError(what);
    auto now = std::chrono::steady_clock::now();
    if (now > deadline) {
      comm->abort();
      throw NcclError(what + ": not done within " +
                      std::to_string(comm->timeout().count()) +
                      " ms (a peer died or hangs); communicator aborted");
    }
    if (now - start > spinLimit)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  cudaEventDestroy(event);
  event = nullptr;
}

Communicator::Communicator(Store &store, const std::string &key, int rank,
                           int size, int device,
                           std::chrono::milliseconds timeout)
    : rankId(rank), worldSize(size), waitLimit(timeout) {
  if (rank < 0 || rank >= size)
    throw NcclError("rank " + std::to_string(rank) + " outside a world of " +
                    std::to_string(size));
  try {
    join(store, key, device);
  } catch (...) {
    // No destructor runs for an object whose constructor threw.
    abort();
    if (cudaStream)
      cudaStreamDestroy(cudaStream);
    throw;
  }
}

void Communicator::join(Store &store, const std::string &key, int device) {
  cudaCheck(cudaSetDevice(device),
            "cudaSetDevice(" + std::to_string(device) + ")");
  cudaCheck(cudaStreamCreateWithFlags(&cudaStream, cudaStreamNonBlocking),
            "cudaStreamCreate");
  ncclUniqueId id;
  if (rankId == 0) {
    check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    store.set(key, hex(id.internal, sizeof(id.internal)));
  } else if (!unhex(store.get(key, waitLimit), id.internal,
                    sizeof(id.internal))) {
    throw NcclError("the store's value for '" + key +
                    "' is not an NCCL unique id");
  }
  // Non-blocking initialisation, so that a missing rank times out instead
  // of hanging here.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  check(ncclCommInitRankConfig(&comm, worldSize, id, rankId, &config),
        "ncclCommInitRank");
  awaitPending("ncclCommInitRank", "the other ranks did not join",
               std::chrono::milliseconds(1));
}

Communicator::Communicator(std::chrono::milliseconds timeout)
    : rankId(0), worldSize(1), waitLimit(timeout) {}

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  std::unique_ptr<Communicator> child(new Communicator(waitLimit));
  child->rankId = rankId; // for messages until NCCL says its rank there
  cudaCheck(
      cudaStreamCreateWithFlags(&child->cudaStream, cudaStreamNonBlocking),
      "cudaStreamCreate");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  check(ncclCommSplit(comm, color, key, &child->comm, &config),
        "ncclCommSplit");
  // The split is carried out on the new communicator (and the parent).
  child->awaitPending("ncclCommSplit", "the other ranks did not split",
                      std::chrono::microseconds(1000));
  child->check(ncclCommUserRank(child->comm, &child->rankId),
               "ncclCommUserRank");
  child->check(ncclCommCount(child->comm, &child->worldSize), "ncclCommCount");
  return child;
}

Communicator::~Communicator() {
  if (comm && !aborted)
    ncclCommDestroy(comm);
  if (cudaStream)
    cudaStreamDestroy(cudaStream);
}

void Communicator::check(ncclResult_t result, const std::string &what) {
  if (result == ncclSuccess || result == ncclInProgress)
    return;
  std::string detail = ncclGetErrorString(result);
  if (comm)
    if (const char *last = ncclGetLastError(comm); last && *last)
      detail += std::string(" (") + last + ")";
  throw NcclError("rank " + std::to_string(rankId) + ": " + what + ": " +
                  detail);
}

ncclResult_t Communicator::checkAsyncError(const std::string &what) {
  ncclResult_t state;
  check(ncclCommGetAsyncError(comm, &state), what);
  if (state != ncclSuccess && state != ncclInProgress) {
    // NCCL's last error names the cause; aborting first would replace it.
    try {
      check(state, what);
    } catch (...) {
      abort();
      throw;
    }
  }
  return state;
}

void Communicator::abort() {
  if (comm && !aborted) {
    ncclCommAbort(comm);
    aborted = true;
  }
}

void Communicator::settle(ncclResult_t result, const std::string &what) {
  check(result, what);
  if (result == ncclInProgress)
    awaitPending(what, what + ": not enqueued", std::chrono::microseconds(0));
}

void Communicator::awaitPending(const std::string &what,
                                const std::string &late,
                                std::chrono::microseconds pause) {
  auto deadline = std::chrono::steady_clock::now() + waitLimit;
  while (checkAsyncError(what) == ncclInProgress) {
    if (std::chrono::steady_clock::now() > deadline) {
      abort();
      throw NcclError("rank " + std::to_string(rankId) + ": " + late +
                      " within " + std::to_string(waitLimit.count()) +
                      " ms; communicator aborted");
    }
    if (pause.count() > 0)
      std::this_thread::sleep_for(pause);
    else
      std::this_thread::yield();
  }
}

Handle Communicator::finish(ncclResult_t result, const std::string &what) {
  if (groupDepth > 0) {
    // NCCL defers the operation to the group's end.
    check(result, what);
    return Handle::grouped(*this, what);
  }
  settle(result, what);
  return Handle(*this, what);
}

Handle Communicator::send(const void *buffer, size_t count, ncclDataType_t type,
                          int peer, const std::string &what) {
  return finish(ncclSend(buffer, count, type, peer, comm, cudaStream), what);
}

Handle Communicator::recv(void *buffer, size_t count, ncclDataType_t type,
                          int peer, const std::string &what) {
  return finish(ncclRecv(buffer, count, type, peer, comm, cudaStream), what);
}

Handle Communicator::allReduceSum(const void *in, void *out, size_t count,
                                  ncclDataType_t type,
                                  const std::string &what) {
  return finish(ncclAllReduce(in, out, count, type, ncclSum, comm, cudaStream),
                what);
}

Handle Communicator::broadcast(const void *in, void *out, size_t count,
                               ncclDataType_t type, int root,
                               const std::string &what) {
  return finish(ncclBroadcast(in, out, count, type, root, comm, cudaStream),
                what);
}

void Communicator::barrier(const std::string &what) {
  void *scratch = nullptr;
  cudaCheck(cudaMalloc(&scratch, sizeof(float)), what + ": cudaMalloc");
  cudaCheck(cudaMemsetAsync(scratch, 0, sizeof(float), cudaStream),
            what + ": cudaMemset");
  try {
    allReduceSum(scratch, scratch, 1, ncclFloat, what).wait();
  } catch (...) {
    cudaFree(scratch);
    throw;
  }
  cudaFree(scratch);
}

void Communicator::groupStart() {
  check(ncclGroupStart(), "ncclGroupStart");
  ++groupDepth;
}

Handle Communicator::groupEnd(const std::string &what) {
  if (groupDepth == 0)
    throw NcclError(what + ": groupEnd without groupStart");
  --groupDepth;
  // A non-blocking communicator may still be launching the group (setting
  // up connections to new peers, say) when ncclGroupEnd returns.
  ncclResult_t result = ncclGroupEnd();
  if (groupDepth > 0) {
    check(result, what);
    return Handle::grouped(*this, what);
  }
  settle(result, what);
  return Handle(*this, what);
}
