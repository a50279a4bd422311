//===- Mesh.h - where each rank sits in data x pipeline x tensor -*- C++
//-*-===//
//
// The device mesh of a run: `dp` data-parallel replicas of a pipeline of
// `pp` ranks, each pipeline rank split over `tp` tensor-parallel ranks;
// dp x pp x tp processes in all. As Megatron-LM orders them, tensor
// parallelism is the innermost dimension (its ranks exchange the most, so
// they are neighbours, on one host), then the pipeline, then the replicas:
//
//   global rank g  =  (replica * pp + pipelineRank) * tp + tensorRank
//
//   dp 2 x pp 2 (tp 1):  replica 0: ranks 0 1    data-parallel groups {0, 2}
//                        replica 1: ranks 2 3                         {1, 3}
//   pp 2 x tp 2:         pipeline rank 0: ranks 0 1 (its tensor-parallel
//                        group), pipeline rank 1: ranks 2 3; the pipelines
//                        of tensor rank 0 and 1: {0, 2} and {1, 3}
//
// Every rank runs the stage executable of its pipeline rank, its tensor
// rank's slices of sharded parameters; it exchanges activations with the
// ranks of its pipeline (same replica and tensor rank), sums partial results
// with its tensor-parallel group (TensorParallel.h), and sums gradients with
// the ranks of the same pipeline and tensor rank in the other replicas
// (DataParallel.h).
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
  int tp = 1; ///< tensor-parallel ranks per pipeline rank

  struct Coordinates {
    int replica = 0;
    int pipelineRank = 0;
    int tensorRank = 0;
  };

  int worldSize() const { return dp * pp * tp; }
  Coordinates of(int globalRank) const;
  int globalRank(Coordinates c) const;
  /// The global ranks of the pipeline of `replica` and `tensorRank`, in
  /// pipeline order.
  std::vector<int> pipelineGroup(int replica, int tensorRank = 0) const;
  /// The global ranks holding pipeline rank `pipelineRank` and tensor rank
  /// `tensorRank`, by replica.
  std::vector<int> dataParallelGroup(int pipelineRank,
                                     int tensorRank = 0) const;
  /// The global ranks of the tensor-parallel group of `replica`'s
  /// `pipelineRank`, by tensor rank.
  std::vector<int> tensorParallelGroup(int replica, int pipelineRank) const;
  /// One line per global rank: "rank 3: replica 1, pipeline rank 1" (and
  /// ", tensor rank 0" where tp > 1).
  std::string describe() const;
  /// The mesh of `world` ranks with `dp` replicas and `tp` tensor ranks, or
  /// an error message in `error` (dp x tp must divide the world).
  static Mesh of(int world, int dp, int tp, std::string &error);

private:
  /// The global ranks from `from` along `axis`, its index 0 .. count-1.
  std::vector<int> along(Coordinates from, int Coordinates::*axis,
                         int count) const;
};

/// Why `program`, sharded for `shardedFor` tensor-parallel ranks (1: not
/// sharded), cannot run with --tp `tp` ("pipe.mlir is sharded for tensor
/// parallelism over 2 ranks; run it with --tp 2"); empty when it can.
std::string tensorParallelMismatch(const std::string &program, int shardedFor,
                                   int tp);

} // namespace pippy

#endif // PIPPY_RUNTIME_MESH_H
