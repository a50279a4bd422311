//===- StateAndRandomTest.cpp - buffers and random ops in programs --------===//
//
// What a forward changes besides its results: a training forward updates
// buffers (a BatchNorm's running statistics in place, `pippy.assign`),
// evaluation leaves them; random ops draw from (seed, step, micro-batch,
// stream) alone, at the rates they are given.
//
//===----------------------------------------------------------------------===//

#include "ProgramFixture.h"

namespace {

// A training-mode BatchNorm and its num_batches_tracked.add_(1), as
// pippy-import writes them.
const char *kBatchNorm = R"mlir(
func.func @forward(%x: !torch.vtensor<[4,3],f32>) -> !torch.vtensor<[4,3],f32> {
  %mean = pippy.param "bn.running_mean" : !torch.vtensor<[3],f32>
  %var = pippy.param "bn.running_var" : !torch.vtensor<[3],f32>
  %n = pippy.param "bn.num_batches_tracked" : !torch.vtensor<[],si64>
  %none = torch.constant.none
  %true = torch.constant.bool true
  %int1 = torch.constant.int 1
  %momentum = torch.constant.float 1.000000e-01
  %eps = torch.constant.float 1.000000e-05
  %n1 = torch.aten.add.Scalar %n, %int1, %int1 : !torch.vtensor<[],si64>, !torch.int, !torch.int -> !torch.vtensor<[],si64>
  pippy.assign %n = %n1 : !torch.vtensor<[],si64>
  %y = torch.aten.batch_norm %x, %none, %none, %mean, %var, %true, %momentum, %eps, %true : !torch.vtensor<[4,3],f32>, !torch.none, !torch.none, !torch.vtensor<[3],f32>, !torch.vtensor<[3],f32>, !torch.bool, !torch.float, !torch.float, !torch.bool -> !torch.vtensor<[4,3],f32>
  return %y : !torch.vtensor<[4,3],f32>
}
)mlir";

TEST_F(ProgramTest, TrainingUpdatesBuffersAndEvaluationReadsThem) {
  std::string bytes = lower(kBatchNorm);
  torch::manual_seed(0);
  at::Tensor x = torch::randn({4, 3}) * 3 + 1;
  auto fresh = [] {
    return std::map<std::string, at::Tensor>{
        {"bn.running_mean", torch::zeros({3})},
        {"bn.running_var", torch::ones({3})},
        {"bn.num_batches_tracked", torch::zeros({}, torch::kLong)}};
  };

  // Training: batch statistics, running ones updated in place, the count
  // assigned; twice, as two micro-batches.
  pippy::Program training = load(bytes);
  std::map<std::string, at::Tensor> params = fresh();
  at::Tensor mean = torch::zeros({3}), var = torch::ones({3});
  for (int step = 1; step <= 2; ++step) {
    at::Tensor out = training.run({x}, params)[0].toTensor();
    at::Tensor expected =
        at::batch_norm(x, {}, {}, mean, var, true, 0.1, 1e-5, true);
    EXPECT_TRUE(at::equal(out, expected));
    EXPECT_TRUE(at::equal(params["bn.running_mean"], mean));
    EXPECT_TRUE(at::equal(params["bn.running_var"], var));
    EXPECT_EQ(params["bn.num_batches_tracked"].item<int64_t>(), step);
  }
  EXPECT_FALSE(at::equal(mean, torch::zeros({3}))); // the check can fail

  // Evaluation (--infer): running statistics, buffers untouched.
  pippy::Program evaluation =
      load(bytes, pippy::Program::Semantics::Evaluation);
  EXPECT_EQ(evaluation.numInstructions(), training.numInstructions() - 1);
  at::Tensor out = evaluation.run({x}, params)[0].toTensor();
  EXPECT_TRUE(at::equal(
      out, at::batch_norm(x, {}, {}, mean, var, false, 0.1, 1e-5, true)));
  EXPECT_TRUE(at::equal(params["bn.running_mean"], mean));
  EXPECT_EQ(params["bn.num_batches_tracked"].item<int64_t>(), 2);
}

// Dropout and a functional bernoulli, as pippy-import writes them, each
// with its stream.
const char *kRandom = R"mlir(
func.func @forward(%x: !torch.vtensor<[100000],f32>) -> (!torch.vtensor<[100000],f32>, !torch.vtensor<[100000],f32>) {
  %p = torch.constant.float 3.000000e-01
  %keep = torch.constant.float 8.000000e-01
  %true = torch.constant.bool true
  %none = torch.constant.none
  %d = torch.aten.dropout %x, %p, %true {pippy.random_stream = 0 : i64} : !torch.vtensor<[100000],f32>, !torch.float, !torch.bool -> !torch.vtensor<[100000],f32>
  %b = torch.aten.bernoulli.p %x, %keep, %none {pippy.random_stream = 1 : i64} : !torch.vtensor<[100000],f32>, !torch.float, !torch.none -> !torch.vtensor<[100000],f32>
  return %d, %b : !torch.vtensor<[100000],f32>, !torch.vtensor<[100000],f32>
}
)mlir";

TEST_F(ProgramTest, RandomOpsDrawFromTheirKeyAtTheirRates) {
  std::string bytes = lower(kRandom);
  pippy::Program program = load(bytes);
  at::Tensor ones = torch::ones({100000});
  auto draw = [&](pippy::RandomKey key) {
    std::vector<c10::IValue> out =
        program.run({ones}, {}, nullptr, nullptr, nullptr, &key);
    return std::make_pair(out[0].toTensor(), out[1].toTensor());
  };
  auto [dropped, kept] = draw({7, 3, 1});
  // Rates: 100000 draws, a standard deviation of 0.0015 at most; 5 of it.
  double zeros = (dropped == 0).to(at::kDouble).mean().item<double>();
  EXPECT_NEAR(zeros, 0.3, 0.0075);
  EXPECT_TRUE(at::allclose(dropped.masked_select(dropped != 0),
                           torch::full({1}, 1 / 0.7)));
  EXPECT_NEAR(kept.to(at::kDouble).mean().item<double>(), 0.8, 0.0075);

  // The same key draws the same numbers, whatever ran in between.
  at::rand({1000});
  auto [again, keptAgain] = draw({7, 3, 1});
  EXPECT_TRUE(at::equal(dropped, again));
  EXPECT_TRUE(at::equal(kept, keptAgain));
  // Another seed, step or micro-batch draws others; so does another stream
  // (dropout's mask is not bernoulli's).
  for (pippy::RandomKey other :
       {pippy::RandomKey{8, 3, 1}, pippy::RandomKey{7, 4, 1},
        pippy::RandomKey{7, 3, 0}})
    EXPECT_FALSE(at::equal(draw(other).first, dropped));
  EXPECT_FALSE(at::equal(dropped != 0, kept != 0));

  // Evaluation: no dropout, and the bernoulli draw is its expected value.
  pippy::Program evaluation =
      load(bytes, pippy::Program::Semantics::Evaluation);
  std::vector<c10::IValue> expected =
      evaluation.run({ones}, {}, nullptr, nullptr, nullptr, nullptr);
  EXPECT_TRUE(at::equal(expected[0].toTensor(), ones));
  EXPECT_TRUE(at::equal(expected[1].toTensor(), torch::full({100000}, 0.8)));
}

} // namespace
