//===- Launcher.h - spawning local ranks ------------------------*- C++ -*-===//
//
// `pippy-run --nproc N` without RANK in the environment starts N ranks of
// itself on this node (forked, not executed again: a rank inherits the
// launcher's loaded libtorch instead of paying its start-up once more), hosts
// their rendezvous (a FileStore in a private directory on a single node; rank
// 0's TCPStore across nodes), forwards their output line by line with a
// `[rankK] ` prefix and exits non-zero if any rank fails. When a rank dies, the
// launcher records it where the other ranks can read it, so their errors name
// the dead rank, and kills whatever is still running 5 s after the first
// failure. The ranks' error messages are held back and printed once, grouped
// by text, causes first.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_LAUNCHER_H
#define PIPPY_RUNTIME_LAUNCHER_H

#include <functional>
#include <string>

namespace pippy {

struct LaunchOptions {
  int nproc = 1; ///< ranks on this node
  int nnodes = 1;
  int nodeRank = 0;
  std::string masterAddr; ///< multi-node: rank 0's host
  int masterPort = 0;     ///< 0: MASTER_PORT, or a free port
  double timeoutSeconds = 60;
  int threadsPerRank = 1;
};

/// True when this process should spawn ranks rather than be one: no rank
/// variable (RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK) is set and the world
/// has more than one rank.
bool shouldLaunch(const LaunchOptions &options);

/// Forks once per local rank and waits for all of them. Each child sets its
/// rank's environment (RANK, WORLD_SIZE, the store, ...), restores default
/// signal handling, runs `rankMain` and exits with its result; it never
/// returns here. Returns the exit code for the launcher.
int launch(const LaunchOptions &options, const std::function<int()> &rankMain);

} // namespace pippy

#endif // PIPPY_RUNTIME_LAUNCHER_H
