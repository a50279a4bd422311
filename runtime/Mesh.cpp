//===- Mesh.cpp - where each rank sits in data x pipeline x tensor --------===//

#include "pippy/Runtime/Mesh.h"

namespace pippy {

Mesh::Coordinates Mesh::of(int globalRank) const {
  return {globalRank / (pp * tp), globalRank / tp % pp, globalRank % tp};
}

int Mesh::globalRank(Coordinates c) const {
  return (c.replica * pp + c.pipelineRank) * tp + c.tensorRank;
}

std::vector<int> Mesh::along(Coordinates from, int Coordinates::*axis,
                             int count) const {
  std::vector<int> ranks;
  for (int i = 0; i < count; ++i) {
    from.*axis = i;
    ranks.push_back(globalRank(from));
  }
  return ranks;
}

std::vector<int> Mesh::pipelineGroup(int replica, int tensorRank) const {
  return along({replica, 0, tensorRank}, &Coordinates::pipelineRank, pp);
}

std::vector<int> Mesh::dataParallelGroup(int pipelineRank,
                                         int tensorRank) const {
  return along({0, pipelineRank, tensorRank}, &Coordinates::replica, dp);
}

std::vector<int> Mesh::tensorParallelGroup(int replica,
                                           int pipelineRank) const {
  return along({replica, pipelineRank, 0}, &Coordinates::tensorRank, tp);
}

std::string Mesh::describe() const {
  std::string text;
  for (int g = 0; g < worldSize(); ++g) {
    Coordinates c = of(g);
    text += (text.empty() ? "" : "\n") + std::string("rank ") +
            std::to_string(g) + ": replica " + std::to_string(c.replica) +
            ", pipeline rank " + std::to_string(c.pipelineRank) +
            (tp > 1 ? ", tensor rank " + std::to_string(c.tensorRank) : "");
  }
  return text;
}

std::string tensorParallelMismatch(const std::string &program, int shardedFor,
                                   int tp) {
  if (shardedFor == tp)
    return "";
  if (shardedFor > 1)
    return program + " is sharded for tensor parallelism over " +
           std::to_string(shardedFor) + " ranks; run it with --tp " +
           std::to_string(shardedFor);
  return program +
         " is not sharded for tensor parallelism; shard it with pippy-opt "
         "--pippy-tensor-parallel=\"tp=" +
         std::to_string(tp) + "\" before running it with --tp";
}

Mesh Mesh::of(int world, int dp, int tp, std::string &error) {
  Mesh mesh;
  if (dp < 1 || tp < 1 || world % (dp * tp) != 0) {
    error =
        (tp > 1 ? "--dp " + std::to_string(dp) + " x --tp " + std::to_string(tp)
                : "--dp " + std::to_string(dp)) +
        " does not divide the " + std::to_string(world) +
        " ranks (--nproc x --nnodes) into replicas of one pipeline";
    return mesh;
  }
  mesh.dp = dp;
  mesh.tp = tp;
  mesh.pp = world / (dp * tp);
  return mesh;
}

} // namespace pippy
