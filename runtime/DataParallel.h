//===- DataParallel.h - gradients summed over the replicas ------*- C++ -*-===//
//
// Internal to runtime/: with --dp D, every rank sums its stages' gradients
// with the ranks of the same pipeline rank in the other replicas (its
// data-parallel group, Mesh.h) once per step, before the optimizer step.
// Each replica's backward scales its micro-batches' losses by 1/M for the
// step's M micro-batches over all replicas, so the plain sum is the
// gradient of the whole step, as one process computes it.
//
// Gradients travel in buckets: the parameters of one stage, latest used
// first, packed into flat tensors of one dtype of at most kBucketBytes
// each, one all-reduce per bucket (a gradient alone in its bucket is summed
// in place, without the copies in and out). A stage's buckets start as soon as
// its last backward of the step is done (start), so that they travel while the
// rank runs its other stages and finishes its sends; finish() starts what
// is left (tied weights, whose gradients the tied all-reduce completes at
// the step's end), waits for every bucket and writes the sums back.
//
// With --zero 1 (ZeRO stage 1) the optimizer state is sharded: each
// parameter has one owner replica (shardOwners), whose optimizer alone
// holds its state and steps it; the owners then send the new values to the
// other replicas (shareStepped), so each replica keeps about 1/D of the
// state.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_DATAPARALLEL_H
#define PIPPY_RUNTIME_DATAPARALLEL_H

#include "pippy/Runtime/Comm.h"

#include <ATen/core/Tensor.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace pippy::rt {

class GradientReducer {
public:
  /// At most this many bytes per all-reduce.
  static constexpr int64_t kBucketBytes = 4 << 20;

  /// `group`: this rank's data-parallel group; `where` leads messages
  /// ("rank 2").
  GradientReducer(Communicator &group, std::string where);

  /// The parameters whose gradients are final once `stage`'s last backward
  /// of the step is done, in first-use order.
  void addStage(int stage, std::vector<std::pair<std::string, at::Tensor>>);
  /// Parameters summed at finish() alone (tied weights).
  void addLate(std::vector<std::pair<std::string, at::Tensor>> params);

  /// Starts summing `stage`'s gradients.
  void start(int stage);
  /// Starts what has not started, waits for every bucket and writes the
  /// sums into the gradients; the step's reduction is then complete.
  void finish();

  /// Bytes all-reduced over all steps so far, and the seconds finish()
  /// waited for them.
  int64_t bytesReduced() const { return bytes; }
  double waitSeconds() const { return waited; }

  /// How `params` (name, tensor, in the order given) are packed: lists of
  /// indices, each one dtype and at most `capacity` bytes (a larger tensor
  /// alone). Exposed for tests.
  static std::vector<std::vector<size_t>>
  buckets(const std::vector<at::Tensor> &tensors, int64_t capacity);

private:
  struct Bucket {
    std::vector<at::Tensor> grads;
    at::Tensor flat;
    CommHandlePtr handle;
  };
  void launch(const std::vector<std::pair<std::string, at::Tensor>> &params,
              const std::string &what);

  Communicator &group;
  std::string where;
  std::map<int, std::vector<std::pair<std::string, at::Tensor>>> stages;
  std::vector<std::pair<std::string, at::Tensor>> late;
  std::set<std::string> started; ///< this step's
  std::vector<Bucket> inFlight;
  int64_t bytes = 0;
  double waited = 0;
};

/// The replica that owns each of `params` under --zero 1: the largest
/// first, each to the replica owning the fewest bytes so far (the lowest
/// index among equals), so that the shares differ by at most one tensor.
std::vector<int> shardOwners(const std::vector<at::Tensor> &params,
                             int replicas);

/// After the owners' optimizer steps: every replica takes each parameter's
/// value from its owner (one broadcast per owner and dtype, over the
/// owner's parameters flattened). `group` is the data-parallel group, in
/// which replica r is rank r.
void shareStepped(Communicator &group, const std::vector<at::Tensor> &params,
                  const std::vector<int> &owners, const std::string &where);

} // namespace pippy::rt

#endif // PIPPY_RUNTIME_DATAPARALLEL_H
