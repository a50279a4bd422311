//===- comm.cpp - pippy's communicator against raw c10d -------------------===//
//
//   pippy-bench-comm [ITERS] [SIZES...]      (default 200 8x1024 64x1024
//   512x1024)
//
// Two local ranks (forked, FileStore rendezvous in a private directory)
// ping-pong one float32 tensor per size through pippy's Communicator (the
// Gloo engine, as the executor uses it: send and receive handles, waits
// with a timeout). Rank 0 times each round trip; the one-way time is half
// the median, and MB/s = bytes / one-way time / 1e6, the same measure as
// bench/pipeline/raw_sendrecv.py reports for torch.distributed's own
// send/recv, so the two show what the interface costs.
//
//===----------------------------------------------------------------------===//

#include "pippy/Runtime/Comm.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

int runRank(int rank, const std::string &store, int iters,
            const std::vector<std::pair<int64_t, int64_t>> &sizes) {
  at::set_num_threads(1);
  pippy::Rendezvous rdzv;
  rdzv.rank = rank;
  rdzv.worldSize = 2;
  rdzv.storePath = store;
  auto comm = pippy::createGlooCommunicator(rdzv);
  int peer = 1 - rank;
  for (auto [rows, cols] : sizes) {
    at::Tensor t = at::ones({rows, cols});
    std::vector<double> rtt;
    for (int i = 0; i < iters + 10; ++i) {
      auto start = std::chrono::steady_clock::now();
      if (rank == 0) {
        comm->send(t, peer, 0, "ping")->wait();
        comm->recv(t, peer, 1, "pong")->wait();
      } else {
        comm->recv(t, peer, 0, "ping")->wait();
        comm->send(t, peer, 1, "pong")->wait();
      }
      if (i >= 10)
        rtt.push_back(std::chrono::duration<double, std::micro>(
                          std::chrono::steady_clock::now() - start)
                          .count());
    }
    if (rank == 0) {
      std::sort(rtt.begin(), rtt.end());
      double median = rtt[rtt.size() / 2];
      double bytes = rows * cols * 4.0;
      std::printf("%6lldx%-6lld %10.0f bytes  rtt %9.1f us  one-way %9.1f us  "
                  "%9.1f MB/s\n",
                  (long long)rows, (long long)cols, bytes, median, median / 2,
                  bytes / (median / 2) / 1.0);
    }
  }
  comm->barrier("done");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  int iters = argc > 1 ? std::atoi(argv[1]) : 200;
  if (iters < 1) {
    std::fprintf(stderr,
                 "usage: pippy-bench-comm [ITERS >= 1] [ROWSxCOLS ...]\n");
    return 2;
  }
  std::vector<std::pair<int64_t, int64_t>> sizes;
  for (int i = 2; i < argc; ++i) {
    long long r, c;
    if (std::sscanf(argv[i], "%lldx%lld", &r, &c) != 2 || r < 1 || c < 1) {
      std::fprintf(stderr, "pippy-bench-comm: '%s' is not a size ROWSxCOLS\n",
                   argv[i]);
      return 2;
    }
    sizes.push_back({r, c});
  }
  if (sizes.empty())
    sizes = {{8, 1024}, {64, 1024}, {512, 1024}};
  char dir[] = "/tmp/pippy-bench-comm-XXXXXX";
  if (!mkdtemp(dir))
    return 1;
  std::string store = std::string(dir) + "/store";
  std::printf("pippy Communicator (Gloo), ping-pong, median of %d\n", iters);
  std::fflush(stdout);
  pid_t child = fork();
  if (child == 0)
    _exit(runRank(1, store, iters, sizes));
  int rc = runRank(0, store, iters, sizes);
  int status = 0;
  waitpid(child, &status, 0);
  std::remove(store.c_str());
  rmdir(dir);
  return rc || !WIFEXITED(status) || WEXITSTATUS(status);
}
