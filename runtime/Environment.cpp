//===- Environment.cpp - the rank a launcher gave this process ------------===//
//
// The one reader of the rank variables that torchrun, Slurm, Open MPI and
// `pippy-run --nproc` set.
//
//===----------------------------------------------------------------------===//

#include "pippy/Runtime/Comm.h"

#include <cstdlib>

namespace pippy {
namespace {

std::optional<int> envInt(const char *name) {
  const char *value = std::getenv(name);
  if (!value || !*value)
    return std::nullopt;
  char *end = nullptr;
  long v = std::strtol(value, &end, 10);
  if (*end)
    throw RuntimeError(std::string("environment variable ") + name + "='" +
                       value + "' is not an integer");
  return static_cast<int>(v);
}

/// The variables that name this process's rank, torchrun's first.
constexpr const char *kRankVariables[] = {"RANK", "SLURM_PROCID",
                                          "OMPI_COMM_WORLD_RANK"};

} // namespace

bool Rendezvous::rankIsSet() {
  for (const char *var : kRankVariables)
    if (const char *v = std::getenv(var); v && *v)
      return true;
  return false;
}

std::optional<Rendezvous> Rendezvous::fromEnvironment() {
  Rendezvous rdzv;
  std::optional<int> rank = envInt("RANK"), world = envInt("WORLD_SIZE"),
                     local = envInt("LOCAL_RANK"),
                     localWorld = envInt("LOCAL_WORLD_SIZE");
  if (!rank) {
    if ((rank = envInt("SLURM_PROCID"))) {
      world = envInt("SLURM_NTASKS");
      local = envInt("SLURM_LOCALID");
      if (envInt("SLURM_NNODES") == 1)
        localWorld = world;
    } else if ((rank = envInt("OMPI_COMM_WORLD_RANK"))) {
      world = envInt("OMPI_COMM_WORLD_SIZE");
      local = envInt("OMPI_COMM_WORLD_LOCAL_RANK");
      localWorld = envInt("OMPI_COMM_WORLD_LOCAL_SIZE");
    }
  }
  if (!rank)
    return std::nullopt;
  if (!world)
    throw RuntimeError("the rank is set but the world size is not "
                       "(WORLD_SIZE)");
  if (*rank < 0 || *rank >= *world)
    throw RuntimeError("rank " + std::to_string(*rank) +
                       " is outside a world of " + std::to_string(*world));
  rdzv.rank = *rank;
  rdzv.worldSize = *world;
  rdzv.localRank = local.value_or(0);
  rdzv.localWorldSize = localWorld.value_or(0);
  if (const char *id = std::getenv("TORCHELASTIC_RUN_ID"); id && *id)
    rdzv.runId = id;
  if (const char *store = std::getenv("PIPPY_STORE"))
    rdzv.storePath = store;
  if (const char *failed = std::getenv("PIPPY_FAILED_RANKS"))
    rdzv.failedRanksPath = failed;
  if (const char *addr = std::getenv("MASTER_ADDR"); addr && *addr)
    rdzv.masterAddr = addr;
  if (std::optional<int> port = envInt("MASTER_PORT"))
    rdzv.masterPort = *port;
  rdzv.singleNode = !rdzv.storePath.empty() || rdzv.masterAddr == "127.0.0.1" ||
                    rdzv.masterAddr == "localhost";
  return rdzv;
}

} // namespace pippy
