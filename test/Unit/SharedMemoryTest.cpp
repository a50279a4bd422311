//===- SharedMemoryTest.cpp - the shared-memory rings ---------------------===//
//
// runtime/SharedMemory.h: messages by tag in any order, a full ring that
// queues sends instead of blocking them, sizes that disagree, a receiver
// that times out and one whose sender died. Every multi-rank test of
// test/Run and test/Zoo runs its messages through these rings too.
//
//===----------------------------------------------------------------------===//

#include "SharedMemory.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>

#include <sys/wait.h>
#include <unistd.h>

using namespace pippy::rt;
using namespace std::chrono_literals;

namespace {

struct Store {
  Store() {
    char dir[] = "/tmp/pippy-shmtest-XXXXXX";
    path = mkdtemp(dir);
    store = c10::make_intrusive<c10d::FileStore>(path + "/store", 1);
  }
  ~Store() {
    store.reset();
    std::remove((path + "/store").c_str());
    rmdir(path.c_str());
  }
  std::string path;
  c10::intrusive_ptr<c10d::FileStore> store;
};

TEST(SharedMemory, MessagesArriveByTagInAnyOrder) {
  Store s;
  auto out = ShmChannel::create(*s.store, "k", 1 << 20);
  auto in = ShmChannel::open(*s.store, "k", 5000ms);
  ASSERT_TRUE(out && in);
  EXPECT_TRUE(out->carries(1 << 17));
  EXPECT_FALSE(in->carries((1 << 17) + 1)); // more than an eighth
  for (int tag = 0; tag < 5; ++tag)
    out->send(at::full({100}, tag, at::kFloat), tag);
  at::Tensor got = at::empty({100}, at::kFloat);
  for (int tag : {3, 0, 4, 1, 2}) {
    in->receive(got, tag, 1000ms);
    EXPECT_TRUE(at::equal(got, at::full({100}, tag, at::kFloat))) << tag;
  }
  EXPECT_FALSE(in->tryReceive(got, 0)); // each message is taken once
}

TEST(SharedMemory, AFullRingQueuesSendsInsteadOfBlocking) {
  Store s;
  auto out = ShmChannel::create(*s.store, "k", 1 << 20);
  auto in = ShmChannel::open(*s.store, "k", 5000ms);
  ASSERT_TRUE(out && in);
  // 40 messages of 100 KB: four times the ring, sent before any is taken.
  const int n = 40;
  for (int i = 0; i < n; ++i)
    out->send(at::full({25600}, i, at::kFloat), i);
  at::Tensor got = at::empty({25600}, at::kFloat);
  for (int i = n - 1; i >= 0; --i) { // the last ones wait for room
    in->receive(got, i, 5000ms);
    EXPECT_EQ(got[0].item<float>(), static_cast<float>(i));
    EXPECT_EQ(got[25599].item<float>(), static_cast<float>(i));
  }
}

TEST(SharedMemory, SizesThatDisagreeAreAnError) {
  Store s;
  auto out = ShmChannel::create(*s.store, "k", 1 << 20);
  auto in = ShmChannel::open(*s.store, "k", 5000ms);
  out->send(at::zeros({8}, at::kFloat), 7);
  at::Tensor got = at::empty({4}, at::kFloat);
  try {
    in->receive(got, 7, 1000ms);
    FAIL() << "a 32-byte message filled a 16-byte receive";
  } catch (const ChannelError &e) {
    EXPECT_EQ(e.kind, ChannelError::Kind::Protocol);
    EXPECT_NE(std::string(e.what()).find("32 bytes"), std::string::npos)
        << e.what();
  }
}

TEST(SharedMemory, AQuietSenderTimesOut) {
  Store s;
  auto out = ShmChannel::create(*s.store, "k", 1 << 20);
  auto in = ShmChannel::open(*s.store, "k", 5000ms);
  at::Tensor got = at::empty({4}, at::kFloat);
  auto begin = std::chrono::steady_clock::now();
  try {
    in->receive(got, 1, 300ms);
    FAIL() << "received a message nobody sent";
  } catch (const ChannelError &e) {
    EXPECT_EQ(e.kind, ChannelError::Kind::Timeout);
  }
  EXPECT_GE(std::chrono::steady_clock::now() - begin, 300ms);
}

TEST(SharedMemory, AReceiverLearnsThatItsSenderDied) {
  Store s;
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) { // the sender: makes the ring, then exits
    auto out = ShmChannel::create(*s.store, "k", 1 << 20);
    _exit(out ? 0 : 1);
  }
  auto in = ShmChannel::open(*s.store, "k", 5000ms);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(in);
  at::Tensor got = at::empty({4}, at::kFloat);
  try {
    in->receive(got, 1, 10000ms);
    FAIL() << "received from a dead sender";
  } catch (const ChannelError &e) {
    EXPECT_EQ(e.kind, ChannelError::Kind::PeerGone);
  }
}

} // namespace
