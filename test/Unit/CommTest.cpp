//===- CommTest.cpp - the Gloo communicator on two in-process ranks -------===//

#include "TwoRanks.h"

#include "pippy/Runtime/Comm.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <unistd.h>

using namespace pippy;

namespace {

// Gloo has no bool, bfloat16 or complex collectives; the communicator moves
// their bytes as other types, so every dtype pippy can hold broadcasts.
TEST(CommTest, BroadcastsEveryDtypeBitForBit) {
  std::vector<at::Tensor> sent = {
      at::tensor({1, 0, 1}, at::kByte).to(at::kBool),
      at::randn({5}).to(at::kBFloat16),
      at::randn({2, 3}, at::kComplexFloat),
      at::randn({4}, at::kComplexDouble),
      at::randn({3}).to(at::kHalf),
      at::tensor({1, -2, 3}, at::kInt),
  };
  onTwoRanks([&](int r, Communicator &comm) {
    for (const at::Tensor &expected : sent) {
      at::Tensor t = r == 0 ? expected.clone() : at::zeros_like(expected);
      comm.broadcast(t, 0, "broadcast")->wait();
      EXPECT_EQ(t.scalar_type(), expected.scalar_type());
      EXPECT_TRUE(t.equal(expected))
          << "rank " << r << " dtype " << expected.scalar_type();
    }
  });
}

// A bfloat16 sum is taken in float32 and rounded once: for two addends,
// what bfloat16 addition itself gives. Complex sums add both parts.
TEST(CommTest, AllReducesBFloat16AndComplex) {
  at::Tensor a = at::randn({64}).to(at::kBFloat16);
  at::Tensor b = at::randn({64}).to(at::kBFloat16);
  at::Tensor c = at::randn({8}, at::kComplexFloat);
  at::Tensor d = at::randn({8}, at::kComplexFloat);
  onTwoRanks([&](int r, Communicator &comm) {
    at::Tensor t = (r == 0 ? a : b).clone();
    comm.allReduceSum(t, "sum")->wait();
    EXPECT_EQ(t.scalar_type(), at::kBFloat16);
    EXPECT_TRUE(t.equal(a + b)) << "rank " << r;
    at::Tensor z = (r == 0 ? c : d).clone();
    comm.allReduceSum(z, "sum")->wait();
    EXPECT_TRUE(z.equal(c + d)) << "rank " << r;
  });
}

Rendezvous jobRank(int rank, const std::string &runId, uint64_t hash) {
  Rendezvous rdzv;
  rdzv.rank = rank;
  rdzv.worldSize = 2;
  rdzv.runId = runId;
  rdzv.pipelineHash = hash;
  rdzv.masterAddr = "node0";
  rdzv.masterPort = 1234;
  rdzv.timeout = std::chrono::milliseconds(200);
  return rdzv;
}

/// The message of the CommError `join` throws ("" when it throws none).
std::string joinError(const std::function<void()> &join) {
  try {
    join();
  } catch (const CommError &e) {
    return e.what();
  }
  return "";
}

// Rank 0 records the job; a rank of another run id or pipeline is refused
// naming both jobs, and the job's own rank joins.
TEST(RendezvousTest, RefusesARankOfAnotherJob) {
  c10d::HashStore store;
  joinJob(store, jobRank(0, "a", 0xab));
  EXPECT_EQ(joinError([&] { joinJob(store, jobRank(1, "b", 0xab)); }),
            "rank 1: the job at node0:1234 (run id 'a', 2 ranks, pipeline "
            "00000000000000ab) is not this rank's (run id 'b', 2 ranks, "
            "pipeline 00000000000000ab): give each job its own "
            "--master-port, and every node of one job the same --run-id, "
            "executables and world size");
  EXPECT_NE(joinError([&] { joinJob(store, jobRank(1, "a", 0xac)); }), "");
  EXPECT_EQ(joinError([&] { joinJob(store, jobRank(1, "a", 0xab)); }), "");
}

// A rank number claimed by another process is refused, naming that process.
TEST(RendezvousTest, RefusesARankClaimedTwice) {
  c10d::HashStore store;
  joinJob(store, jobRank(0, "a", 1));
  std::string other = "host elsewhere pid 1";
  store.set("pippy/rank/1", std::vector<uint8_t>(other.begin(), other.end()));
  std::string error = joinError([&] { joinJob(store, jobRank(1, "a", 1)); });
  EXPECT_EQ(error.rfind("rank 1: claimed already by host elsewhere pid 1 "
                        "(this is host ",
                        0),
            0u)
      << error;
}

// A rank that finds no job recorded within the timeout says so.
TEST(RendezvousTest, NamesAMissingRankZero) {
  c10d::HashStore store;
  store.setTimeout(std::chrono::milliseconds(200)); // as openStore sets it
  std::string error = joinError([&] { joinJob(store, jobRank(1, "a", 1)); });
  EXPECT_EQ(error.rfind("rank 1: no rank 0 at node0:1234 within 0.2 s", 0), 0u)
      << error;
}

// c10's errors are quoted by their first line, without the backtrace.
TEST(RendezvousTest, QuotesTheFirstLineOfAnError) {
  try {
    TORCH_CHECK(false, "Socket Timeout\nsecond line");
  } catch (const std::exception &e) {
    EXPECT_EQ(firstLine(e), "Socket Timeout");
  }
}

} // namespace
