//===- TwoRanks.h - two in-process ranks on Gloo for unit tests -*- C++ -*-===//

#ifndef PIPPY_TEST_UNIT_TWORANKS_H
#define PIPPY_TEST_UNIT_TWORANKS_H

#include "pippy/Runtime/Comm.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <unistd.h>

namespace pippy {

/// Runs `body(rank, comm)` on two ranks (threads) that meet through a
/// FileStore in a fresh directory; a rank's exception fails the test.
inline void onTwoRanks(const std::function<void(int, Communicator &)> &body) {
  char dir[] = "/tmp/pippy-commtest-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string store = std::string(dir) + "/store";
  std::string failures[2];
  auto rank = [&](int r) {
    try {
      Rendezvous rdzv;
      rdzv.rank = r;
      rdzv.worldSize = 2;
      rdzv.localRank = r;
      rdzv.storePath = store;
      rdzv.timeout = std::chrono::milliseconds(30000);
      std::unique_ptr<Communicator> comm = createGlooCommunicator(rdzv);
      body(r, *comm);
    } catch (const std::exception &e) {
      failures[r] = e.what();
    }
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
  std::remove(store.c_str());
  rmdir(dir);
}

} // namespace pippy

#endif // PIPPY_TEST_UNIT_TWORANKS_H
