//===- SharedMemory.cpp - messages between ranks of one host --------------===//
//
// The ring: a header of message slots, then an arena the messages' bytes
// take in the order they were written, wrapping at its end. The receiver
// takes messages in any order (by tag); the sender reuses arena space from
// its oldest message on, once every message before it has been taken.
//
//===----------------------------------------------------------------------===//

#include "SharedMemory.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <linux/futex.h>
#include <random>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace pippy::rt {

namespace {

constexpr uint64_t kMagic = 0x316d737970706970ULL; // "pippysm1"
constexpr int kSlots = 256;
constexpr size_t kAlign = 64;
/// A message at most this share of the ring takes it; larger ones go
/// through Gloo, so that a full ring holds many messages.
constexpr size_t kLargestShare = 8;
/// Below this the host's shared memory is too short for a ring.
constexpr size_t kSmallestRing = size_t(1) << 20;
/// How often a waiting end looks whether its peer is still alive.
constexpr std::chrono::milliseconds kLivenessPeriod{100};

size_t roundUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

void futexWait(std::atomic<uint32_t> &word, uint32_t seen,
               std::chrono::milliseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000),
              static_cast<long>(timeout.count() % 1000) * 1000000};
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAIT, seen, &ts,
          nullptr, 0);
}

void futexWake(std::atomic<uint32_t> &word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAKE, INT_MAX,
          nullptr, nullptr, 0);
}

bool processAlive(int pid) {
  return pid <= 0 || kill(pid, 0) == 0 || errno == EPERM;
}

} // namespace

struct Slot {
  std::atomic<uint32_t> full; ///< 1 from written until taken
  int32_t tag;
  uint64_t offset, bytes, seq;
};

struct RingHeader {
  uint64_t magic;
  uint64_t arenaBytes;
  int32_t senderPid, receiverPid;
  std::atomic<uint32_t> written;     ///< futex: bumped by each message written
  std::atomic<uint32_t> taken;       ///< futex: bumped by each message taken
  std::atomic<uint32_t> senderWaits; ///< 1 while a message waits for room
  Slot slots[kSlots];
};

static size_t arenaOffset() { return roundUp(sizeof(RingHeader)); }

std::unique_ptr<ShmChannel> ShmChannel::create(c10d::Store &store,
                                               const std::string &key,
                                               size_t ringBytes) {
  // A quarter of what the host's shared memory has free, at most.
  struct statvfs fs;
  size_t room = statvfs("/dev/shm", &fs) == 0
                    ? static_cast<size_t>(fs.f_bavail) * fs.f_frsize / 4
                    : 0;
  while (ringBytes > room && ringBytes >= kSmallestRing)
    ringBytes /= 2;
  std::string name;
  int fd = -1;
  if (ringBytes >= kSmallestRing) {
    std::random_device random;
    name =
        "/pippy-" + std::to_string(getpid()) + "-" + std::to_string(random());
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  }
  size_t mapped = arenaOffset() + ringBytes;
  // Reserved now, so that a full /dev/shm fails here and not with SIGBUS
  // at a write.
  if (fd >= 0 && posix_fallocate(fd, 0, static_cast<off_t>(mapped)) != 0) {
    close(fd);
    shm_unlink(name.c_str());
    fd = -1;
  }
  void *base =
      fd >= 0 ? mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
              : MAP_FAILED;
  if (fd >= 0)
    close(fd);
  if (base == MAP_FAILED) {
    if (fd >= 0)
      shm_unlink(name.c_str());
    store.set(key, std::vector<uint8_t>{'-'});
    return nullptr;
  }
  auto *header = new (base) RingHeader();
  header->arenaBytes = ringBytes;
  header->senderPid = getpid();
  header->receiverPid = 0;
  std::atomic_thread_fence(std::memory_order_release);
  header->magic = kMagic;
  store.set(key, std::vector<uint8_t>(name.begin(), name.end()));
  return std::unique_ptr<ShmChannel>(new ShmChannel(base, mapped, true));
}

std::unique_ptr<ShmChannel>
ShmChannel::open(c10d::Store &store, const std::string &key,
                 std::chrono::milliseconds timeout) {
  store.wait({key}, timeout);
  std::vector<uint8_t> value = store.get(key);
  std::string name(value.begin(), value.end());
  if (name == "-")
    return nullptr;
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0)
    throw ChannelError(ChannelError::Kind::Protocol,
                       "cannot open shared memory " + name + ": " +
                           std::strerror(errno));
  struct stat st;
  fstat(fd, &st);
  size_t mapped = static_cast<size_t>(st.st_size);
  void *base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  shm_unlink(name.c_str()); // both ends hold it now; gone when both unmap
  if (base == MAP_FAILED || static_cast<RingHeader *>(base)->magic != kMagic)
    throw ChannelError(ChannelError::Kind::Protocol,
                       "shared memory " + name + " is not a pippy ring");
  static_cast<RingHeader *>(base)->receiverPid = getpid();
  return std::unique_ptr<ShmChannel>(new ShmChannel(base, mapped, false));
}

ShmChannel::ShmChannel(void *base, size_t mapped, bool sender)
    : header(static_cast<RingHeader *>(base)),
      arena(static_cast<char *>(base) + arenaOffset()), mapped(mapped),
      sender(sender) {}

ShmChannel::~ShmChannel() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  queued.notify_all();
  if (mover.joinable()) {
    futexWake(header->taken);
    mover.join();
  }
  munmap(header, mapped);
}

bool ShmChannel::carries(size_t bytes) const {
  return bytes <= header->arenaBytes / kLargestShare;
}

bool ShmChannel::peerAlive() const {
  return processAlive(sender ? header->receiverPid : header->senderPid);
}

bool ShmChannel::tryWrite(const void *data, size_t bytes, int tag) {
  // Messages the receiver took, oldest first, free their space.
  while (tailSeq < nextSeq &&
         !header->slots[tailSeq % kSlots].full.load(std::memory_order_acquire))
    ++tailSeq;
  uint64_t outstanding = nextSeq - tailSeq;
  if (outstanding == kSlots)
    return false;
  size_t size = roundUp(bytes), ring = header->arenaBytes;
  uint64_t offset;
  if (outstanding == 0) {
    head = 0;
    if (size > ring)
      return false;
    offset = 0;
  } else {
    uint64_t tail = header->slots[tailSeq % kSlots].offset;
    if (head > tail && size <= ring - head)
      offset = head;
    else if (head > tail && size <= tail)
      offset = 0; // wraps
    else if (head < tail && size <= tail - head)
      offset = head;
    else
      return false;
  }
  std::memcpy(arena + offset, data, bytes);
  Slot &slot = header->slots[nextSeq % kSlots];
  slot.tag = tag;
  slot.offset = offset;
  slot.bytes = bytes;
  slot.seq = nextSeq;
  slot.full.store(1, std::memory_order_release);
  head = offset + size;
  ++nextSeq;
  header->written.fetch_add(1, std::memory_order_release);
  futexWake(header->written);
  return true;
}

void ShmChannel::send(const at::Tensor &tensor, int tag) {
  std::unique_lock<std::mutex> lock(mutex);
  if (waiting.empty() && tryWrite(tensor.data_ptr(), tensor.nbytes(), tag))
    return;
  // No room: the message waits here (a copy: the caller may reuse its
  // tensor at once), and the mover writes it once the receiver made room.
  waiting.emplace_back(tensor.clone(), tag);
  if (!mover.joinable())
    mover = std::thread([this] { drain(); });
  lock.unlock();
  queued.notify_one();
}

void ShmChannel::drain() {
  std::unique_lock<std::mutex> lock(mutex);
  while (true) {
    queued.wait(lock, [&] { return stopping || !waiting.empty(); });
    if (stopping)
      return;
    uint32_t seen = header->taken.load(std::memory_order_acquire);
    auto &[tensor, tag] = waiting.front();
    if (tryWrite(tensor.data_ptr(), tensor.nbytes(), tag)) {
      waiting.pop_front();
      if (waiting.empty())
        header->senderWaits.store(0, std::memory_order_release);
      continue;
    }
    if (!peerAlive()) { // the receiver is gone: nobody will take these
      waiting.clear();
      continue;
    }
    // A receiver waiting for a message behind this one sets the ring's
    // messages aside: wake it to look.
    if (!header->senderWaits.exchange(1, std::memory_order_acq_rel)) {
      header->written.fetch_add(1, std::memory_order_release);
      futexWake(header->written);
    }
    lock.unlock();
    futexWait(header->taken, seen, kLivenessPeriod);
    lock.lock();
  }
}

/// Throws unless a message of `bytes` fits `into`.
static void checkSize(uint64_t bytes, const at::Tensor &into, int tag) {
  if (bytes != into.nbytes())
    throw ChannelError(ChannelError::Kind::Protocol,
                       "message " + std::to_string(tag) + " has " +
                           std::to_string(bytes) + " bytes for a receive of " +
                           std::to_string(into.nbytes()));
}

void ShmChannel::setAside() {
  std::vector<Slot *> full;
  for (Slot &slot : header->slots)
    if (slot.full.load(std::memory_order_acquire))
      full.push_back(&slot);
  std::sort(full.begin(), full.end(),
            [](Slot *a, Slot *b) { return a->seq < b->seq; });
  for (Slot *slot : full) {
    at::Tensor copy = at::empty({static_cast<int64_t>(slot->bytes)}, at::kByte);
    std::memcpy(copy.data_ptr(), arena + slot->offset, slot->bytes);
    aside[slot->tag].push_back(std::move(copy));
    slot->full.store(0, std::memory_order_release);
  }
  header->taken.fetch_add(1, std::memory_order_release);
  futexWake(header->taken);
}

bool ShmChannel::tryReceive(const at::Tensor &into, int tag) {
  if (auto it = aside.find(tag); it != aside.end() && !it->second.empty()) {
    at::Tensor bytes = std::move(it->second.front());
    it->second.pop_front();
    checkSize(bytes.numel(), into, tag);
    std::memcpy(into.data_ptr(), bytes.data_ptr(), bytes.numel());
    return true;
  }
  Slot *found = nullptr;
  for (Slot &slot : header->slots)
    if (slot.full.load(std::memory_order_acquire) && slot.tag == tag &&
        (!found || slot.seq < found->seq))
      found = &slot;
  if (!found)
    return false;
  checkSize(found->bytes, into, tag);
  std::memcpy(into.data_ptr(), arena + found->offset, found->bytes);
  found->full.store(0, std::memory_order_release);
  header->taken.fetch_add(1, std::memory_order_release);
  futexWake(header->taken);
  return true;
}

void ShmChannel::receive(const at::Tensor &into, int tag,
                         std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    uint32_t seen = header->written.load(std::memory_order_acquire);
    if (tryReceive(into, tag))
      return;
    // The message may be one waiting for room: make room, then sleep
    // until the sender wrote (`seen` is from before, so no wake-up is
    // lost).
    if (header->senderWaits.load(std::memory_order_acquire))
      setAside();
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      throw ChannelError(ChannelError::Kind::Timeout, "timed out");
    if (!peerAlive())
      throw ChannelError(ChannelError::Kind::PeerGone, "the sender exited");
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
    futexWait(header->written, seen, std::min(left, kLivenessPeriod));
  }
}

} // namespace pippy::rt
