//===- Mesh.cpp - where each rank sits in data x pipeline -----------------===//

#include "pippy/Runtime/Mesh.h"

namespace pippy {

Mesh::Coordinates Mesh::of(int globalRank) const {
  return {globalRank / pp, globalRank % pp};
}

int Mesh::globalRank(Coordinates c) const {
  return c.replica * pp + c.pipelineRank;
}

std::vector<int> Mesh::pipelineGroup(int replica) const {
  std::vector<int> ranks;
  for (int p = 0; p < pp; ++p)
    ranks.push_back(globalRank({replica, p}));
  return ranks;
}

std::vector<int> Mesh::dataParallelGroup(int pipelineRank) const {
  std::vector<int> ranks;
  for (int r = 0; r < dp; ++r)
    ranks.push_back(globalRank({r, pipelineRank}));
  return ranks;
}

std::string Mesh::describe() const {
  std::string text;
  for (int g = 0; g < worldSize(); ++g) {
    Coordinates c = of(g);
    text += (text.empty() ? "" : "\n") + std::string("rank ") +
            std::to_string(g) + ": replica " + std::to_string(c.replica) +
            ", pipeline rank " + std::to_string(c.pipelineRank);
  }
  return text;
}

Mesh Mesh::of(int world, int dp, std::string &error) {
  Mesh mesh;
  if (dp < 1 || world % dp != 0) {
    error = "--dp " + std::to_string(dp) + " does not divide the " +
            std::to_string(world) + " ranks (--nproc x --nnodes) into " +
            "replicas of one pipeline";
    return mesh;
  }
  mesh.dp = dp;
  mesh.pp = world / dp;
  return mesh;
}

} // namespace pippy
