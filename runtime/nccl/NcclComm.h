//===- NcclComm.h - the NCCL engine -----------------------------*- C++ -*-===//
//
// The GPU engine of pippy's communicator interface (see Comm.h for the CPU
// one): send, recv, all-reduce (sum), broadcast and barrier on device
// buffers, each enqueued on the communicator's own CUDA stream and returning
// a handle to wait on with a timeout. A wait that times out, or finds NCCL
// reporting an asynchronous error (a peer that died), aborts the
// communicator and throws `NcclError` naming the operation.
//
// Ranks exchange NCCL's unique id through a small `Store` interface: any
// key-value store all ranks reach. `DirectoryStore` is one for a single
// node (a private directory, files written then renamed); a TCP store can
// implement the same two calls across hosts.
//
// CUDA and NCCL only: Debian's libtorch has no CUDA, so this engine works
// on raw device pointers.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_NCCL_NCCLCOMM_H
#define PIPPY_RUNTIME_NCCL_NCCLCOMM_H

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

namespace pippy::nccl {

struct NcclError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Where ranks meet.
class Store {
public:
  virtual ~Store() = default;
  virtual void set(const std::string &key, const std::string &value) = 0;
  /// Waits for `key` at most `timeout`; throws NcclError after that.
  virtual std::string get(const std::string &key,
                          std::chrono::milliseconds timeout) = 0;
};

/// A store in a directory every rank of one node can read: one file per
/// key, written to a temporary name and renamed, so a reader never sees half
/// a value.
class DirectoryStore : public Store {
public:
  explicit DirectoryStore(std::string directory)
      : directory(std::move(directory)) {}
  void set(const std::string &key, const std::string &value) override;
  std::string get(const std::string &key,
                  std::chrono::milliseconds timeout) override;

private:
  std::string directory;
};

class Communicator;

/// An operation in flight on the communicator's stream.
class Handle {
public:
  /// Covers the work enqueued on the communicator's stream so far.
  Handle(Communicator &comm, std::string what);
  /// An operation inside a group: NCCL enqueues it at the group's end, so
  /// only the handle `groupEnd` returns can be waited on.
  static Handle grouped(Communicator &comm, std::string what);
  Handle(Handle &&other) noexcept;
  Handle(const Handle &) = delete;
  ~Handle();
  /// Waits for the operation, at most the communicator's timeout. Polls
  /// without sleeping for the first `spinLimit`, so a short operation's wait
  /// costs no scheduler round trip, then every 50 us.
  void wait();
  /// Whether the operation is done, without blocking (a failed one counts
  /// as done: wait() then throws).
  bool isCompleted();
  /// Makes `stream` wait for the operation on the device, without blocking
  /// the host (wait() still reports how it ended).
  void orderBefore(cudaStream_t stream);

  static constexpr std::chrono::microseconds spinLimit{200};

private:
  Handle(Communicator &comm, std::string what, bool inGroup);

  Communicator *comm;
  cudaEvent_t event = nullptr;
  std::string what;
  bool inGroup = false;
};

class Communicator {
public:
  /// Joins a world of `size` ranks on CUDA device `device`; rank 0 creates
  /// NCCL's unique id and publishes it under `key` in `store`.
  Communicator(Store &store, const std::string &key, int rank, int size,
               int device, std::chrono::milliseconds timeout);
  ~Communicator();
  Communicator(const Communicator &) = delete;

  /// The communicator of this rank's part of a split of this one
  /// (`ncclCommSplit`): every rank of this communicator calls it at once;
  /// those with the same `color` form one communicator, ranked by `key`.
  std::unique_ptr<Communicator> split(int color, int key);

  int rank() const { return rankId; }
  int size() const { return worldSize; }

  Handle send(const void *buffer, size_t count, ncclDataType_t type, int peer,
              const std::string &what);
  Handle recv(void *buffer, size_t count, ncclDataType_t type, int peer,
              const std::string &what);
  Handle allReduceSum(const void *in, void *out, size_t count,
                      ncclDataType_t type, const std::string &what);
  Handle broadcast(const void *in, void *out, size_t count, ncclDataType_t type,
                   int root, const std::string &what);
  void barrier(const std::string &what);

  /// Sends and receives between these calls form one NCCL group (needed
  /// for a rank that sends to and receives from the same peer at once).
  void groupStart();
  Handle groupEnd(const std::string &what);

  cudaStream_t stream() const { return cudaStream; }
  std::chrono::milliseconds timeout() const { return waitLimit; }
  /// Aborts after a failure so that no later call blocks on a dead peer.
  void abort();
  /// Throws (after aborting) if NCCL reported an asynchronous error;
  /// otherwise returns ncclSuccess, or ncclInProgress while a call of a
  /// non-blocking communicator is still being carried out.
  ncclResult_t checkAsyncError(const std::string &what);

private:
  /// A communicator that `split` fills in.
  explicit Communicator(std::chrono::milliseconds timeout);
  /// Meets the other ranks (the constructor's work).
  void join(Store &store, const std::string &key, int device);
  void check(ncclResult_t result, const std::string &what);
  /// A non-blocking communicator may answer an operation with
  /// ncclInProgress before the operation is on the stream: waits (at most
  /// the timeout) until NCCL has enqueued it.
  void settle(ncclResult_t result, const std::string &what);
  /// Polls until NCCL has carried out the communicator's pending call,
  /// pausing `pause` between polls (none: yield). At the timeout it aborts
  /// and throws "rank R: `late` within T ms; communicator aborted".
  void awaitPending(const std::string &what, const std::string &late,
                    std::chrono::microseconds pause);
  /// The handle of an operation just issued.
  Handle finish(ncclResult_t result, const std::string &what);

  int rankId, worldSize;
  std::chrono::milliseconds waitLimit;
  ncclComm_t comm = nullptr;
  cudaStream_t cudaStream = nullptr;
  int groupDepth = 0;
  bool aborted = false;
};

} // namespace pippy::nccl

#endif // PIPPY_RUNTIME_NCCL_NCCLCOMM_H
