//===- DataParallelTest.cpp - the mesh and the gradient buckets -----------===//

#include "TwoRanks.h"

#include "DataParallel.h"

#include "pippy/Runtime/Mesh.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

using namespace pippy;
using pippy::rt::GradientReducer;

namespace {

// Pipeline ranks are the inner dimension: a replica's ranks are consecutive.
TEST(MeshTest, PlacesThePipelineInnermost) {
  std::string error;
  Mesh mesh = Mesh::of(6, 2, 1, error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(mesh.pp, 3);
  EXPECT_EQ(mesh.of(4).replica, 1);
  EXPECT_EQ(mesh.of(4).pipelineRank, 1);
  EXPECT_EQ(mesh.globalRank({1, 2}), 5);
  EXPECT_EQ(mesh.pipelineGroup(1), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(mesh.dataParallelGroup(2), (std::vector<int>{2, 5}));
  for (int g = 0; g < 6; ++g)
    EXPECT_EQ(mesh.globalRank(mesh.of(g)), g);
  EXPECT_EQ(Mesh::of(2, 2, 1, error).describe(),
            "rank 0: replica 0, pipeline rank 0\n"
            "rank 1: replica 1, pipeline rank 0");
}

// Tensor ranks innermost, then the pipeline, then the replicas.
TEST(MeshTest, PlacesTensorRanksInnermost) {
  std::string error;
  Mesh mesh = Mesh::of(8, 2, 2, error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(mesh.pp, 2);
  Mesh::Coordinates c = mesh.of(6);
  EXPECT_EQ(c.replica, 1);
  EXPECT_EQ(c.pipelineRank, 1);
  EXPECT_EQ(c.tensorRank, 0);
  EXPECT_EQ(mesh.tensorParallelGroup(1, 0), (std::vector<int>{4, 5}));
  EXPECT_EQ(mesh.pipelineGroup(0, 1), (std::vector<int>{1, 3}));
  EXPECT_EQ(mesh.dataParallelGroup(1, 1), (std::vector<int>{3, 7}));
  for (int g = 0; g < 8; ++g)
    EXPECT_EQ(mesh.globalRank(mesh.of(g)), g);
  EXPECT_EQ(Mesh::of(2, 1, 2, error).describe(),
            "rank 0: replica 0, pipeline rank 0, tensor rank 0\n"
            "rank 1: replica 0, pipeline rank 0, tensor rank 1");
  Mesh::of(6, 1, 4, error);
  EXPECT_EQ(error, "--dp 1 x --tp 4 does not divide the 6 ranks (--nproc x "
                   "--nnodes) into replicas of one pipeline");
}

TEST(MeshTest, RefusesReplicasThatDoNotDivideTheWorld) {
  std::string error;
  Mesh::of(6, 4, 1, error);
  EXPECT_EQ(error, "--dp 4 does not divide the 6 ranks (--nproc x --nnodes) "
                   "into replicas of one pipeline");
}

// One bucket per dtype, closed when the next tensor would overflow it; a
// tensor larger than a bucket travels alone.
TEST(GradientReducerTest, PacksBucketsByDtypeAndSize) {
  std::vector<at::Tensor> tensors = {
      at::zeros({4}, at::kFloat),  // 16 bytes
      at::zeros({2}, at::kDouble), // 16
      at::zeros({3}, at::kFloat),  // 12: 28 with the first
      at::zeros({2}, at::kFloat),  // 8: would be 36
      at::zeros({20}, at::kFloat), // 80: alone
      at::zeros({1}, at::kDouble)};
  auto buckets = GradientReducer::buckets(tensors, 32);
  std::vector<std::vector<size_t>> expected = {{0, 2}, {1, 5}, {3}, {4}};
  EXPECT_EQ(buckets, expected);
}

// Two replicas: every gradient becomes the sum of both ranks' gradients,
// each is sent once however often its stage starts, a parameter without a
// gradient keeps none, and the late ones (tied weights) go at finish().
TEST(GradientReducerTest, SumsEveryGradientOnce) {
  onTwoRanks([](int rank, Communicator &comm) {
    auto param = [&](std::vector<int64_t> sizes, at::ScalarType dtype,
                     bool withGrad) {
      at::Tensor p = at::zeros(sizes, dtype).requires_grad_(true);
      if (withGrad)
        p.mutable_grad() = at::arange(p.numel(), at::TensorOptions(dtype))
                               .reshape(sizes)
                               .add(10 * (rank + 1));
      return p;
    };
    at::Tensor a = param({2, 3}, at::kFloat, true);
    at::Tensor b = param({4}, at::kDouble, true);
    at::Tensor none = param({5}, at::kFloat, false);
    at::Tensor c = param({300000, 4}, at::kFloat, true); // 4.8 MB: alone
    at::Tensor tied = param({3}, at::kFloat, true);
    GradientReducer reducer(comm, "rank " + std::to_string(rank));
    reducer.addStage(0, {{"a", a}, {"b", b}, {"none", none}});
    reducer.addStage(1, {{"c", c}});
    reducer.addLate({{"tied", tied}});
    reducer.start(0);
    reducer.start(0);
    reducer.finish(); // starts stage 1 and the late ones
    for (const at::Tensor &p : {a, b, c, tied}) {
      at::Tensor expected =
          at::arange(p.numel(), p.options().requires_grad(false))
              .reshape(p.sizes())
              .mul(2)
              .add(30);
      EXPECT_TRUE(at::equal(p.grad(), expected));
    }
    EXPECT_FALSE(none.grad().defined());
    int64_t bytes = (6 + 300000 * 4 + 3) * 4 + 4 * 8;
    EXPECT_EQ(reducer.bytesReduced(), bytes);
    reducer.finish(); // a second step
    EXPECT_EQ(reducer.bytesReduced(), 2 * bytes);
  });
}

// Largest first, each to the replica holding the fewest bytes so far.
TEST(ZeroTest, BalancesTheShares) {
  std::vector<at::Tensor> params = {at::zeros({10}), at::zeros({40}),
                                    at::zeros({30}), at::zeros({25}),
                                    at::zeros({5}, at::kDouble)};
  // In bytes: 160 -> 0; 120 -> 1; 100 -> 1 (120 < 160); 40 -> 0 (160 <
  // 220); the double's 40 -> 0 (200 < 220).
  EXPECT_EQ(pippy::rt::shardOwners(params, 2),
            (std::vector<int>{0, 0, 1, 1, 0}));
  EXPECT_EQ(pippy::rt::shardOwners(params, 1), (std::vector<int>(5, 0)));
}

// Every replica ends with each parameter's owner's value.
TEST(ZeroTest, SharesTheSteppedWeights) {
  onTwoRanks([](int rank, Communicator &comm) {
    std::vector<at::Tensor> params = {
        at::full({2, 2}, 10.0 + rank), at::full({3}, 20.0 + rank),
        at::full({2}, 30.0 + rank, at::kDouble).requires_grad_(true)};
    std::vector<int> owners = {1, 0, 1};
    pippy::rt::shareStepped(comm, params, owners,
                            "rank " + std::to_string(rank));
    EXPECT_TRUE(at::equal(params[0], at::full({2, 2}, 11.0)));
    EXPECT_TRUE(at::equal(params[1], at::full({3}, 20.0)));
    EXPECT_TRUE(
        at::equal(params[2].detach(), at::full({2}, 31.0, at::kDouble)));
  });
}

} // namespace
