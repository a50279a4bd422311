//===- Mesh.h - where each rank sits in data x pipeline ---------*- C++ -*-===//
//
// The device mesh of a run: `dp` data-parallel replicas of a pipeline of
// `pp` ranks, dp x pp processes in all. As Megatron-LM orders them, the
// pipeline is the inner dimension, so a replica's ranks are consecutive
// (and on one host where a host holds a whole pipeline):
//
//   global rank g  =  replica * pp + pipelineRank
//
//   dp 2 x pp 2:   replica 0: ranks 0 1    data-parallel groups {0, 2}
//                  replica 1: ranks 2 3                         {1, 3}
//
// Every rank runs the stage executable of its pipeline rank; a replica's
// ranks exchange activations among themselves, and each rank sums its
// stages' gradients with the ranks of the same pipeline rank in the other
// replicas (DataParallel.h).
//
// No libtorch, LLVM or MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_MESH_H
#define PIPPY_RUNTIME_MESH_H

#include <string>
#include <vector>

namespace pippy {

struct Mesh {
  int dp = 1; ///< data-parallel replicas
  int pp = 1; ///< pipeline ranks per replica

  struct Coordinates {
    int replica = 0;
    int pipelineRank = 0;
  };

  int worldSize() const { return dp * pp; }
  Coordinates of(int globalRank) const;
  int globalRank(Coordinates c) const;
  /// The global ranks of `replica`'s pipeline, in pipeline order.
  std::vector<int> pipelineGroup(int replica) const;
  /// The global ranks holding pipeline rank `pipelineRank`, by replica.
  std::vector<int> dataParallelGroup(int pipelineRank) const;
  /// One line per global rank: "rank 3: replica 1, pipeline rank 1".
  std::string describe() const;
  /// The mesh of `world` ranks with `dp` replicas, or an error message in
  /// `error` (dp must divide the world).
  static Mesh of(int world, int dp, std::string &error);
};

} // namespace pippy

#endif // PIPPY_RUNTIME_MESH_H
