//===- Comm.h - the communicator interface ----------------------*- C++ -*-===//
//
// One small asynchronous interface for everything ranks exchange: send,
// recv, all-reduce (sum), broadcast and barrier. Each call returns a handle
// to wait on; a wait that fails or times out throws `CommError` naming the
// peer and what was being exchanged. The CPU engine is Gloo through
// libtorch's c10d (`ProcessGroupGloo`); the GPU engine is NCCL
// (runtime/nccl, built where CUDA is found).
//
// Runtime code: it uses libtorch and may throw.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_COMM_H
#define PIPPY_RUNTIME_COMM_H

#include "pippy/Runtime/Options.h"
#include "pippy/Runtime/Program.h"

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace c10d {
class Store;
} // namespace c10d

namespace pippy {

/// A peer failed, hung or disconnected.
struct CommError : RuntimeError {
  using RuntimeError::RuntimeError;
};

/// An operation in flight.
class CommHandle {
public:
  virtual ~CommHandle() = default;
  /// Blocks until the operation is done, at most the communicator timeout;
  /// throws CommError when it failed. Waiting again returns at once.
  virtual void wait() = 0;
  /// Whether the operation is done (or failed), without blocking.
  virtual bool isCompleted() = 0;
  /// Whether isCompleted() can say so before wait() is called: c10d's Gloo
  /// send and receive work completes only when waited for.
  virtual bool tellsArrival() const { return true; }
  /// Orders the rank's later computation after the operation. Where the
  /// engine can (NCCL on a GPU tensor) the device waits and the host goes
  /// on, and wait() must still be called before the host reads what the
  /// device computed (it reports failures and timeouts); elsewhere it is
  /// wait().
  virtual void waitOnDevice() { wait(); }
};
using CommHandlePtr = std::shared_ptr<CommHandle>;

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// `what` names the exchange in errors ("0SEND_F2 activation 1").
  /// Tensors must be contiguous and stay alive until the handle is waited.
  virtual CommHandlePtr send(const at::Tensor &tensor, int dst, int tag,
                             const std::string &what) = 0;
  virtual CommHandlePtr recv(const at::Tensor &tensor, int src, int tag,
                             const std::string &what) = 0;
  virtual CommHandlePtr allReduceSum(const at::Tensor &tensor,
                                     const std::string &what) = 0;
  virtual CommHandlePtr broadcast(const at::Tensor &tensor, int root,
                                  const std::string &what) = 0;
  virtual void barrier(const std::string &what) = 0;

  /// Connects to the ranks this one will send to or receive from, before
  /// the first step (NCCL's point-to-point communicators); every rank calls
  /// it once, after creating the communicator.
  virtual void prepare(const std::vector<int> &peers) {}

  /// A communicator over `ranks` (global ranks, ascending), created by every
  /// member with the same `name`; this rank must be a member.
  virtual std::unique_ptr<Communicator>
  subgroup(const std::string &name, const std::vector<int> &ranks) = 0;

  /// The same, where every rank of this communicator calls it at once, each
  /// naming its own group, and the groups partition the ranks (the mesh's
  /// groups): NCCL splits its communicator (`ncclCommSplit`) instead of
  /// making a new one per group; Gloo makes a sub-group.
  virtual std::unique_ptr<Communicator> split(const std::string &name,
                                              const std::vector<int> &ranks) {
    return subgroup(name, ranks);
  }

  /// The global rank of a rank of this communicator.
  virtual int globalRank(int rank) const = 0;
};

/// Where and how ranks meet: torchrun's variables, or what `pippy-run
/// --nproc` passes to the ranks it spawns.
struct Rendezvous {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  /// A FileStore path in a private directory (single-node runs); when empty,
  /// a TCPStore at masterAddr:masterPort hosted by rank 0.
  std::string storePath;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  bool singleNode = true;
  /// Point-to-point messages between ranks of one host go through
  /// shared-memory rings (Gloo's engine, single-node runs; pippy-run
  /// --shared-memory=false turns them off).
  bool sharedMemory = true;
  std::chrono::milliseconds timeout{60000};
  /// Where the launcher records ranks that died (may be empty).
  std::string failedRanksPath;
  /// Ranks on this host (LOCAL_WORLD_SIZE and its kin; the world when
  /// unset): fewer than the world means a multi-host run.
  int localWorldSize = 0;
  /// What makes ranks one job (Rendezvous.cpp): a rank whose run id, world
  /// size or pipeline (the hash of its executables) differs from rank 0's is
  /// refused at the rendezvous, before it can disturb the job.
  std::string runId = "none";
  uint64_t pipelineHash = 0;

  /// Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (or
  /// Slurm's SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID, Open MPI's
  /// OMPI_COMM_WORLD_*) and pippy's PIPPY_STORE; none when no rank is set
  /// (Environment.cpp, the one reader of these variables).
  static std::optional<Rendezvous> fromEnvironment();
  /// Whether a launcher set this process's rank (any of the variables
  /// above), so that pippy-run is that rank instead of spawning ranks.
  static bool rankIsSet();
};

/// A timeout as errors write it ("60", "0.2"): seconds (Rendezvous.cpp).
std::string timeoutSeconds(std::chrono::milliseconds timeout);

/// The first line of a libtorch error, without c10's backtrace: what a
/// CommError quotes (Rendezvous.cpp).
std::string firstLine(const std::exception &e);

/// The store ranks meet through: a FileStore at `storePath`, or a TCPStore
/// hosted by rank 0. Throws CommError when it cannot be reached, or when
/// this rank cannot join the job there (joinJob).
c10::intrusive_ptr<c10d::Store> openStore(const Rendezvous &rdzv);

/// Joins the job at `store`: rank 0 records the job (run id, world size,
/// pipeline hash), every other rank checks that it is that job, and each
/// rank claims its rank number once. Throws CommError naming both sides
/// when a rank of another job, or a second process with the same rank,
/// arrives (Rendezvous.cpp).
void joinJob(c10d::Store &store, const Rendezvous &rdzv);

/// Which ranks have not claimed their number at `store` ("rank 1 has not
/// joined this job ..."), for an error; empty when all have.
std::string ranksNotJoined(c10d::Store &store, const Rendezvous &rdzv);

/// The address Gloo listens on in a multi-host run where GLOO_SOCKET_IFNAME
/// is unset: this host's address on the route to the master, or where that
/// is loopback (the master's name resolves to this host's loopback), the
/// first other address of an interface that is up. Throws when there is
/// none (Rendezvous.cpp).
std::string glooAddressTowardsMaster(const Rendezvous &rdzv);

/// The Gloo engine (c10d ProcessGroupGloo). Blocks until every rank joined
/// or the timeout passed.
std::unique_ptr<Communicator> createGlooCommunicator(const Rendezvous &rdzv);

/// The engine `backend` names (NCCL where the build has it).
std::unique_ptr<Communicator> createCommunicator(Backend backend,
                                                 const Rendezvous &rdzv);

/// A world of one rank: collectives return their input, and there is no
/// peer to send to.
std::unique_ptr<Communicator> createLocalCommunicator();

} // namespace pippy

#endif // PIPPY_RUNTIME_COMM_H
