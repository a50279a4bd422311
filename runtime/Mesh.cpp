//===- Mesh.cpp - where each rank sits in data x pipeline x tensor --------===//

#include "pippy/Runtime/Mesh.h"

namespace pippy {

Mesh::Coordinates Mesh::of(int globalRank) const {
  return {globalRank / (pp * tp), globalRank / tp % pp, globalRank % tp};
}

int Mesh::globalRank(Coordinates c) const {
  return (c.replica * pp + c.pipelineRank) * tp + c.tensorRank;
}

std::vector<int> Mesh::pipelineGroup(int replica, int tensorRank) const {
  std::vector<int> ranks;
  for (int p = 0; p < pp; ++p)
    ranks.push_back(globalRank({replica, p, tensorRank}));
  return ranks;
}

std::vector<int> Mesh::dataParallelGroup(int pipelineRank,
                                         int tensorRank) const {
  std::vector<int> ranks;
  for (int r = 0; r < dp; ++r)
    ranks.push_back(globalRank({r, pipelineRank, tensorRank}));
  return ranks;
}

std::vector<int> Mesh::tensorParallelGroup(int replica,
                                           int pipelineRank) const {
  std::vector<int> ranks;
  for (int t = 0; t < tp; ++t)
    ranks.push_back(globalRank({replica, pipelineRank, t}));
  return ranks;
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
