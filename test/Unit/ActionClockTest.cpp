//===- ActionClockTest.cpp - when a rank's actions ran --------------------===//

#include "ActionClock.h"

#include <gtest/gtest.h>

#include <thread>

using namespace pippy::rt;

namespace {

using Counts = ActionClock::Counts;

void sleepMs(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

TEST(ActionClock, HostSpansCountTowardsBusyTimeAndTheTrace) {
  ActionClock clock(at::Device(at::kCPU));
  EXPECT_FALSE(clock.onDevice());
  clock.setTracing(true);
  clock.startEpoch();
  ActionClock::Mark f = clock.mark();
  sleepMs(20);
  clock.close(f, "0F0", Counts::Both, 1);
  ActionClock::Mark recv = clock.mark();
  sleepMs(10);
  clock.close(recv, "0RECV_B0", Counts::TraceOnly, 1);
  ActionClock::Mark w = clock.mark();
  sleepMs(10);
  clock.close(w, "0W", Counts::Busy, 1);
  clock.settle(); // nothing pending on the host
  // Busy: F and W, not the receive; traced: F and the receive, in order.
  EXPECT_GE(clock.busySeconds(), 0.030);
  EXPECT_LT(clock.busySeconds(), 0.030 + 1.0);
  ASSERT_EQ(clock.events().size(), 2u);
  const TraceEvent &first = clock.events()[0], &second = clock.events()[1];
  EXPECT_EQ(first.name, "0F0");
  EXPECT_EQ(second.name, "0RECV_B0");
  EXPECT_EQ(first.step, 1);
  EXPECT_GE(first.duration, 20e3);
  EXPECT_GE(second.start, first.start + first.duration);
  EXPECT_GE(second.duration, 10e3);
}

TEST(ActionClock, NothingIsTracedWhenNotTracing) {
  ActionClock clock(at::Device(at::kCPU));
  ActionClock::Mark f = clock.mark();
  clock.close(f, "0F0", Counts::Both, 1);
  EXPECT_TRUE(clock.events().empty());
  EXPECT_GE(clock.busySeconds(), 0.0);
}

} // namespace
