//===- SharedMemory.h - messages between ranks of one host ------*- C++ -*-===//
//
// Internal to runtime/: one direction of point-to-point messages between two
// ranks on the same host through a shared-memory ring, beside Gloo, which
// then carries only the collectives and the messages too large for the
// ring. A send is a copy into the ring, done when it returns (a full ring
// queues the copy in the sender, and a thread of the channel moves it in
// once the receiver has made room), so a send never waits for its
// receiver, as with Gloo's posted receives; a receive copies its message
// out when its handle is waited. A receiver that waits for a message while
// its sender waits for room copies the ring's other messages aside, so the
// order in which a schedule takes its messages can never block the ring.
// Waiting sleeps on a futex in the ring: no spinning, which two ranks sharing
// cores could not afford.
//
// Which messages take the ring is a function of their size and the ring's
// (the sender's choice, written in the ring's header), so both sides
// agree on every tag. A receiver whose sender dies stops waiting ("lost
// rank N"); a quiet sender makes it wait the communicator's timeout.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_SHAREDMEMORY_H
#define PIPPY_RUNTIME_SHAREDMEMORY_H

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace pippy::rt {

/// Why a channel operation failed.
struct ChannelError : std::runtime_error {
  enum class Kind { Timeout, PeerGone, Protocol };
  ChannelError(Kind kind, const std::string &what)
      : std::runtime_error(what), kind(kind) {}
  Kind kind;
};

struct RingHeader; // in the shared memory (SharedMemory.cpp)

class ShmChannel {
public:
  /// The sending end: creates the ring (`ringBytes` of messages, less
  /// where the host's shared memory is short; none at all where it has
  /// too little) and publishes its name in `store` under `key`. Returns
  /// null when no ring could be made; the receiver then gets null too.
  static std::unique_ptr<ShmChannel>
  create(c10d::Store &store, const std::string &key, size_t ringBytes);
  /// The receiving end: opens the ring the sender published under `key`,
  /// waiting at most `timeout` for it.
  static std::unique_ptr<ShmChannel> open(c10d::Store &store,
                                          const std::string &key,
                                          std::chrono::milliseconds timeout);
  ~ShmChannel();
  ShmChannel(const ShmChannel &) = delete;
  ShmChannel &operator=(const ShmChannel &) = delete;

  /// Whether a message of `bytes` goes through this ring (the same answer
  /// at both ends).
  bool carries(size_t bytes) const;
  /// Copies `tensor` (contiguous, host memory) in as message `tag`.
  void send(const at::Tensor &tensor, int tag);
  /// Copies message `tag` into `into` if it has arrived; false if not.
  /// Throws ChannelError (Protocol) when its size is not `into`'s.
  bool tryReceive(const at::Tensor &into, int tag);
  /// Waits for message `tag` and copies it into `into`. Throws
  /// ChannelError: Timeout after `timeout`, PeerGone when the sender died.
  void receive(const at::Tensor &into, int tag,
               std::chrono::milliseconds timeout);

private:
  ShmChannel(void *base, size_t mapped, bool sender);
  /// Writes one message if the ring has room (sender; under `mutex`).
  bool tryWrite(const void *data, size_t bytes, int tag);
  /// Moves queued messages into the ring as room appears (sender thread).
  void drain();
  bool peerAlive() const;
  /// Receiver: copies every message in the ring aside (`aside`), making
  /// room for a sender that waits for it.
  void setAside();

  RingHeader *header;
  char *arena;
  size_t mapped;
  bool sender;
  // Sender only: the ring's next free offset and sequence number, the
  // oldest message not yet known to be taken, and the queue of messages
  // waiting for room, which `mover` writes.
  uint64_t head = 0, nextSeq = 0, tailSeq = 0;
  std::mutex mutex;
  std::condition_variable queued;
  std::deque<std::pair<at::Tensor, int>> waiting;
  bool stopping = false;
  std::thread mover;
  // Receiver only: messages taken out of the ring before their receive,
  // by tag, oldest first.
  std::map<int, std::deque<at::Tensor>> aside;
};

} // namespace pippy::rt

#endif // PIPPY_RUNTIME_SHAREDMEMORY_H
