//===- ProgramTest.cpp - the stage interpreter ----------------------------===//
//
// Lowers small graph-IR functions to stage executables, loads their
// programs and checks their results against direct libtorch calls, autograd
// through them, arguments bound by name, and load-time errors.
//
//===----------------------------------------------------------------------===//

#include "ProgramFixture.h"

#include "pippy/Executable/Format.h"

#include <cstring>

namespace {

const char *kLinearRelu = R"mlir(
func.func @forward(%x: !torch.vtensor<[2,4],f32>) -> !torch.vtensor<[2,3],f32> {
  %w = pippy.param "fc.weight" : !torch.vtensor<[3,4],f32>
  %b = pippy.param "fc.bias" : !torch.vtensor<[3],f32>
  %0 = torch.aten.linear %x, %w, %b : !torch.vtensor<[2,4],f32>, !torch.vtensor<[3,4],f32>, !torch.vtensor<[3],f32> -> !torch.vtensor<[2,3],f32>
  %1 = torch.aten.relu %0 : !torch.vtensor<[2,3],f32> -> !torch.vtensor<[2,3],f32>
  return %1 : !torch.vtensor<[2,3],f32>
}
)mlir";

TEST_F(ProgramTest, MatchesDirectCallsAndRecordsAutograd) {
  pippy::Program program = compile(kLinearRelu);
  ASSERT_EQ(program.parameters().size(), 2u);
  EXPECT_EQ(program.parameters()[0].first, "fc.weight");
  EXPECT_EQ(program.parameters()[0].second.sizes, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(program.numInstructions(), 2u);

  torch::manual_seed(0);
  at::Tensor x = torch::randn({2, 4});
  at::Tensor w = torch::randn({3, 4}).requires_grad_(true);
  at::Tensor b = torch::randn({3}).requires_grad_(true);
  std::vector<c10::IValue> out =
      program.run({x}, {{"fc.weight", w}, {"fc.bias", b}});
  ASSERT_EQ(out.size(), 1u);
  at::Tensor expected = at::relu(at::linear(x, w, b));
  EXPECT_TRUE(at::equal(out[0].toTensor(), expected));

  out[0].toTensor().sum().backward();
  at::Tensor wGrad = w.grad().clone();
  w.grad().zero_();
  expected.sum().backward();
  EXPECT_TRUE(at::equal(wGrad, w.grad()));
}

// Two linears with parameters of their own: one with bias on a transposed
// (non-contiguous) 3-d input, which at::linear runs as matmul + add_, and
// one without bias on a contiguous 3-d input.
const char *kTwoLinears = R"mlir(
func.func @forward(%x: !torch.vtensor<[5,2,4],f32>) -> !torch.vtensor<[2,5,3],f32> {
  %w1 = pippy.param "a.weight" : !torch.vtensor<[6,4],f32>
  %b1 = pippy.param "a.bias" : !torch.vtensor<[6],f32>
  %w2 = pippy.param "b.weight" : !torch.vtensor<[3,6],f32>
  %none = torch.constant.none
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %t = torch.aten.transpose.int %x, %int0, %int1 : !torch.vtensor<[5,2,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,5,4],f32>
  %0 = torch.aten.linear %t, %w1, %b1 : !torch.vtensor<[2,5,4],f32>, !torch.vtensor<[6,4],f32>, !torch.vtensor<[6],f32> -> !torch.vtensor<[2,5,6],f32>
  %1 = torch.aten.relu %0 : !torch.vtensor<[2,5,6],f32> -> !torch.vtensor<[2,5,6],f32>
  %2 = torch.aten.linear %1, %w2, %none : !torch.vtensor<[2,5,6],f32>, !torch.vtensor<[3,6],f32>, !torch.none -> !torch.vtensor<[2,5,3],f32>
  return %2 : !torch.vtensor<[2,5,3],f32>
}
)mlir";

/// Whether the autograd graph behind `node` has a fused linear.
bool hasFusedLinear(const std::shared_ptr<torch::autograd::Node> &node) {
  if (!node)
    return false;
  if (node->name().find("FusedLinear") != std::string::npos)
    return true;
  for (const torch::autograd::Edge &edge : node->next_edges())
    if (hasFusedLinear(edge.function))
      return true;
  return false;
}

/// Runs `plain` and `fused` (the same program, linears fused) on three
/// micro-batches of random inputs, accumulating gradients, and checks the
/// outputs and every gradient are bit-identical.
void expectSameTraining(const pippy::Program &plain,
                        const pippy::Program &fused,
                        const std::map<std::string, at::Tensor> &init,
                        at::IntArrayRef inputSizes,
                        at::ScalarType dtype = at::kFloat) {
  auto fresh = [&] {
    std::map<std::string, at::Tensor> copy;
    for (const auto &[name, p] : init)
      copy[name] = p.clone().requires_grad_(true);
    return copy;
  };
  std::map<std::string, at::Tensor> a = fresh(), b = fresh();
  for (int m = 0; m < 3; ++m) {
    at::Tensor x = torch::randn(inputSizes).to(dtype);
    at::Tensor xa = x.clone().requires_grad_(true);
    at::Tensor xb = x.clone().requires_grad_(true);
    at::Tensor outA = plain.run({xa}, a)[0].toTensor();
    at::Tensor outB = fused.run({xb}, b)[0].toTensor();
    EXPECT_TRUE(at::equal(outA, outB));
    EXPECT_TRUE(hasFusedLinear(outB.grad_fn()));
    at::Tensor dy = torch::randn(outA.sizes()).to(dtype);
    outA.backward(dy);
    outB.backward(dy);
    EXPECT_TRUE(at::equal(xa.grad(), xb.grad()));
  }
  for (const auto &[name, p] : a) {
    ASSERT_TRUE(b.at(name).grad().defined()) << name;
    EXPECT_TRUE(at::equal(p.grad(), b.at(name).grad())) << name;
  }
}

/// expectSameTraining for `ir` compiled twice, once with `weights` fused.
} // namespace

void ProgramTest::expectFusedTrainsLikePlain(
    const std::string &ir, const std::set<std::string> &weights,
    const std::map<std::string, at::Tensor> &init, at::IntArrayRef inputSizes,
    at::ScalarType dtype) {
  pippy::Program plain = compile(ir);
  pippy::Program fused = compile(ir);
  fused.fuseWeightGradients(weights);
  expectSameTraining(plain, fused, init, inputSizes, dtype);
}

namespace {

TEST_F(ProgramTest, FusedWeightGradientsAreAutogradsBitForBit) {
  torch::manual_seed(0);
  expectFusedTrainsLikePlain(
      kLinearRelu, {"fc.weight"},
      {{"fc.weight", torch::randn({3, 4})}, {"fc.bias", torch::randn({3})}},
      {2, 4});
  for (const char *dtype : {"f64", "bf16"}) {
    // Other dtypes have other kernels: the probe runs per dtype (bf16's
    // fused sum rounds differently on this machine, f64's does not).
    std::string ir = std::string(kLinearRelu);
    for (size_t at = ir.find("f32"); at != std::string::npos;
         at = ir.find("f32", at))
      ir.replace(at, 3, dtype);
    at::ScalarType type =
        std::string(dtype) == "f64" ? at::kDouble : at::kBFloat16;
    expectFusedTrainsLikePlain(ir, {"fc.weight"},
                               {{"fc.weight", torch::randn({3, 4}).to(type)},
                                {"fc.bias", torch::randn({3}).to(type)}},
                               {2, 4}, type);
  }
  {
    // A 1-d input: at::linear runs matmul + add_, one row.
    const char *ir = R"mlir(
func.func @forward(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[3],f32> {
  %w = pippy.param "fc.weight" : !torch.vtensor<[3,4],f32>
  %b = pippy.param "fc.bias" : !torch.vtensor<[3],f32>
  %0 = torch.aten.linear %x, %w, %b : !torch.vtensor<[4],f32>, !torch.vtensor<[3,4],f32>, !torch.vtensor<[3],f32> -> !torch.vtensor<[3],f32>
  return %0 : !torch.vtensor<[3],f32>
}
)mlir";
    expectFusedTrainsLikePlain(
        ir, {"fc.weight"},
        {{"fc.weight", torch::randn({3, 4})}, {"fc.bias", torch::randn({3})}},
        {4});
  }
  {
    // Many rows: OpenBLAS's addmm_ rounds differently from mm + add_ here,
    // so the fused linear must add the product separately.
    const char *ir = R"mlir(
func.func @forward(%x: !torch.vtensor<[2048,32],f32>) -> !torch.vtensor<[2048,32],f32> {
  %w = pippy.param "fc.weight" : !torch.vtensor<[32,32],f32>
  %none = torch.constant.none
  %0 = torch.aten.linear %x, %w, %none : !torch.vtensor<[2048,32],f32>, !torch.vtensor<[32,32],f32>, !torch.none -> !torch.vtensor<[2048,32],f32>
  return %0 : !torch.vtensor<[2048,32],f32>
}
)mlir";
    expectFusedTrainsLikePlain(
        ir, {"fc.weight"}, {{"fc.weight", torch::randn({32, 32})}}, {2048, 32});
  }
}

TEST_F(ProgramTest, FusedLinearsLeaveFrozenAndLeftOutWeightsToAutograd) {
  torch::manual_seed(0);
  pippy::Program plain = compile(kTwoLinears);
  pippy::Program fused = compile(kTwoLinears);
  std::vector<pippy::Program::Linear> linears =
      fused.linearsWithOwnParameters();
  ASSERT_EQ(linears.size(), 2u);
  EXPECT_EQ(linears[0].bias, "a.bias");
  EXPECT_EQ(linears[1].weight, "b.weight");
  EXPECT_EQ(linears[1].bias, "");
  fused.fuseWeightGradients({"a.weight", "b.weight"});
  std::map<std::string, at::Tensor> params = {
      {"a.weight", torch::randn({6, 4})},
      {"a.bias", torch::randn({6})},
      {"b.weight", torch::randn({3, 6})}};
  expectSameTraining(plain, fused, params, {5, 2, 4});

  // Without grad mode, or for a frozen weight, the plain op runs.
  {
    at::NoGradGuard noGrad;
    at::Tensor out = fused.run({torch::randn({5, 2, 4})}, params)[0].toTensor();
    EXPECT_FALSE(out.grad_fn());
  }
  {
    at::Tensor x = torch::randn({5, 2, 4});
    std::map<std::string, at::Tensor> trainable = params;
    trainable["b.weight"] = params.at("b.weight").clone().requires_grad_(true);
    at::Tensor out = plain.run({x}, trainable)[0].toTensor();
    ASSERT_TRUE(out.grad_fn());
    EXPECT_FALSE(hasFusedLinear(out.grad_fn()));
  }
  std::map<std::string, at::Tensor> frozen = params;
  frozen["b.weight"] = params.at("b.weight").clone().requires_grad_(true);
  at::Tensor out = fused.run({torch::randn({5, 2, 4})}, frozen)[0].toTensor();
  out.sum().backward();
  EXPECT_FALSE(params.at("a.weight").grad().defined());
  EXPECT_TRUE(frozen.at("b.weight").grad().defined());

  // A weight left out of the set stays with autograd; a mixed program
  // trains the same.
  pippy::Program partly = compile(kTwoLinears);
  partly.fuseWeightGradients({"b.weight"});
  expectSameTraining(plain, partly, params, {5, 2, 4});
}

TEST_F(ProgramTest, ReleasedGradientBuffersAreReusedByFusedLinears) {
  pippy::Program plain = compile(kLinearRelu);
  pippy::Program fused = compile(kLinearRelu);
  fused.fuseWeightGradients({"fc.weight"});
  torch::manual_seed(1);
  at::Tensor w0 = torch::randn({3, 4}), b0 = torch::randn({3});
  std::map<std::string, at::Tensor> a = {
      {"fc.weight", w0.clone().requires_grad_(true)},
      {"fc.bias", b0.clone().requires_grad_(true)}};
  std::map<std::string, at::Tensor> b = {
      {"fc.weight", w0.clone().requires_grad_(true)},
      {"fc.bias", b0.clone().requires_grad_(true)}};
  const void *buffer = nullptr;
  for (int step = 0; step < 3; ++step) {
    for (auto *params : {&a, &b})
      for (auto &[name, p] : *params)
        pippy::releaseGradient(p);
    EXPECT_FALSE(b.at("fc.weight").grad().defined());
    at::Tensor x = torch::randn({2, 4});
    plain.run({x}, a)[0].toTensor().sum().backward();
    fused.run({x}, b)[0].toTensor().sum().backward();
    EXPECT_TRUE(at::equal(a.at("fc.weight").grad(), b.at("fc.weight").grad()));
    EXPECT_TRUE(at::equal(a.at("fc.bias").grad(), b.at("fc.bias").grad()));
    const void *now = b.at("fc.weight").grad().data_ptr();
    if (step > 0)
      EXPECT_EQ(now, buffer) << "step " << step;
    buffer = now;
  }
  // A gradient someone else still holds is not overwritten.
  at::Tensor held = b.at("fc.weight").grad();
  at::Tensor copy = held.clone();
  pippy::releaseGradient(b.at("fc.weight"));
  fused.run({torch::randn({2, 4})}, b)[0].toTensor().sum().backward();
  EXPECT_NE(b.at("fc.weight").grad().data_ptr(), held.data_ptr());
  EXPECT_TRUE(at::equal(held, copy));
}

TEST_F(ProgramTest, HeldWeightGradientsWaitForTheQueueAndKeepTheirBits) {
  pippy::Program plain = compile(kLinearRelu);
  pippy::Program fused = compile(kLinearRelu);
  fused.fuseWeightGradients({"fc.weight"});
  torch::manual_seed(2);
  at::Tensor w0 = torch::randn({3, 4}), b0 = torch::randn({3});
  std::map<std::string, at::Tensor> a = {
      {"fc.weight", w0.clone().requires_grad_(true)},
      {"fc.bias", b0.clone().requires_grad_(true)}};
  std::map<std::string, at::Tensor> b = {
      {"fc.weight", w0.clone().requires_grad_(true)},
      {"fc.bias", b0.clone().requires_grad_(true)}};
  pippy::WeightGradientQueue queue;
  for (int mb = 0; mb < 3; ++mb) {
    at::Tensor x = torch::randn({2, 4});
    at::Tensor xa = x.clone().requires_grad_(true);
    at::Tensor xb = x.clone().requires_grad_(true);
    plain.run({xa}, a)[0].toTensor().sum().backward();
    at::Tensor weightBefore = b.at("fc.weight").grad().defined()
                                  ? b.at("fc.weight").grad().clone()
                                  : at::Tensor();
    {
      pippy::WeightGradientQueue::Scope hold(queue);
      fused.run({xb}, b)[0].toTensor().sum().backward();
    }
    // The input gradient is there; the weight and bias gradients wait.
    EXPECT_TRUE(at::equal(xa.grad(), xb.grad())) << "micro-batch " << mb;
    ASSERT_FALSE(queue.empty());
    if (mb == 0) {
      EXPECT_FALSE(b.at("fc.weight").grad().defined());
      EXPECT_FALSE(b.at("fc.bias").grad().defined());
    } else {
      EXPECT_TRUE(at::equal(b.at("fc.weight").grad(), weightBefore));
    }
    queue.run();
    EXPECT_TRUE(queue.empty());
    EXPECT_TRUE(at::equal(a.at("fc.weight").grad(), b.at("fc.weight").grad()))
        << "micro-batch " << mb;
    EXPECT_TRUE(at::equal(a.at("fc.bias").grad(), b.at("fc.bias").grad()))
        << "micro-batch " << mb;
  }
  // Without a scope the gradients are added at once.
  at::Tensor before = b.at("fc.weight").grad().clone();
  fused.run({torch::randn({2, 4})}, b)[0].toTensor().sum().backward();
  EXPECT_TRUE(queue.empty());
  EXPECT_FALSE(at::equal(b.at("fc.weight").grad(), before));
}

TEST_F(ProgramTest, BuildsListsAndUnpacksTuples) {
  pippy::Program program = compile(R"mlir(
func.func @forward(%a: !torch.vtensor<[2,2],f32>, %b: !torch.vtensor<[2,2],f32>) -> !torch.vtensor<[4,2],f32> {
  %int0 = torch.constant.int 0
  %l = torch.prim.ListConstruct %a, %b : (!torch.vtensor<[2,2],f32>, !torch.vtensor<[2,2],f32>) -> !torch.list<vtensor>
  %c = torch.aten.cat %l, %int0 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[4,2],f32>
  %t = torch.prim.TupleConstruct %c, %a : !torch.vtensor<[4,2],f32>, !torch.vtensor<[2,2],f32> -> !torch.tuple<vtensor<[4,2],f32>, vtensor<[2,2],f32>>
  %u:2 = torch.prim.TupleUnpack %t : !torch.tuple<vtensor<[4,2],f32>, vtensor<[2,2],f32>> -> !torch.vtensor<[4,2],f32>, !torch.vtensor<[2,2],f32>
  return %u#0 : !torch.vtensor<[4,2],f32>
}
)mlir");
  at::Tensor a = torch::ones({2, 2}), b = torch::zeros({2, 2});
  std::vector<c10::IValue> out = program.run({a, b}, {});
  EXPECT_TRUE(at::equal(out[0].toTensor(), at::cat({a, b}, 0)));
}

TEST_F(ProgramTest, ConstantListsLiteralsAndJitRegistryOps) {
  pippy::Program program = compile(R"mlir(
func.func @forward(%x: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[3,2],f32> {
  %int3 = torch.constant.int 3
  %int2 = torch.constant.int 2
  %shape = torch.prim.ListConstruct %int3, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %v = torch.aten.view %x, %shape : !torch.vtensor<[2,3],f32>, !torch.list<int> -> !torch.vtensor<[3,2],f32>
  %s = torch.vtensor.literal(dense<2.0> : tensor<f32>) : !torch.vtensor<[],f32>
  %n = torch.aten.Int.Tensor %s : !torch.vtensor<[],f32> -> !torch.int
  %m = torch.aten.mul.Scalar %v, %n : !torch.vtensor<[3,2],f32>, !torch.int -> !torch.vtensor<[3,2],f32>
  return %m : !torch.vtensor<[3,2],f32>
}
)mlir");
  at::Tensor x = torch::arange(6, torch::kFloat).view({2, 3});
  std::vector<c10::IValue> out = program.run({x}, {});
  EXPECT_TRUE(at::equal(out[0].toTensor(), x.view({3, 2}) * 2));
}

TEST_F(ProgramTest, ReportsUnknownOpsAtLoadTime) {
  std::string error = compileError(R"mlir(
func.func @forward(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  %0 = torch.aten.frobnicate %x : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32> loc("blocks.3.attn")
  return %0 : !torch.vtensor<[2],f32>
}
)mlir");
  EXPECT_EQ(error, "stage 0: 'torch.aten.frobnicate' at module "
                   "'blocks.3.attn': libtorch 1.13.0 has no operator "
                   "aten::frobnicate");
}

TEST_F(ProgramTest, ReportsSchemaMismatchesAtLoadTime) {
  std::string error = compileError(R"mlir(
func.func @forward(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  %int1 = torch.constant.int 1
  %0 = torch.aten.relu %x, %int1 : !torch.vtensor<[2],f32>, !torch.int -> !torch.vtensor<[2],f32> loc("fc")
  return %0 : !torch.vtensor<[2],f32>
}
)mlir");
  EXPECT_EQ(error, "stage 0: 'torch.aten.relu' at module 'fc': has 2 operands "
                   "and 1 results but the schema is aten::relu(Tensor self) "
                   "-> Tensor");
}

/// An executable written for a libtorch whose schema had fewer arguments
/// (here: `aten::sum.dim_IntList` without `keepdim` and `dtype`, and
/// `aten::add.Tensor` without `alpha`) loads, the running schema's defaults
/// filling the rest, and computes what the full call computes.
TEST_F(ProgramTest, OmittedTrailingDefaultsTakeTheRunningSchemasDefaults) {
  pippy::Program program = compile(R"mlir(
func.func @forward(%x: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2],f32> {
  %int1 = torch.constant.int 1
  %dims = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %0 = torch.aten.add.Tensor %x, %x : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32> -> !torch.vtensor<[2,3],f32>
  %1 = torch.aten.sum.dim_IntList %0, %dims : !torch.vtensor<[2,3],f32>, !torch.list<int> -> !torch.vtensor<[2],f32>
  return %1 : !torch.vtensor<[2],f32>
}
)mlir");
  torch::manual_seed(0);
  at::Tensor x = torch::randn({2, 3});
  std::vector<c10::IValue> out = program.run({x}, {});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(at::equal(out[0].toTensor(), at::sum(at::add(x, x), {1})));
}

/// Arguments are bound by name: an executable whose operands name their
/// schema arguments in another order (as a libtorch that moved a defaulted
/// argument would need) binds each where the running schema has it.
TEST_F(ProgramTest, ArgumentsBindByNameInAnyOrder) {
  mlir::OwningOpRef<mlir::ModuleOp> ir =
      mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
func.func @forward(%x: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,3],f32> {
  %lo = torch.constant.float -5.000000e-01
  %hi = torch.constant.float 5.000000e-01
  %0 = torch.aten.clamp %x, %lo, %hi : !torch.vtensor<[2,3],f32>, !torch.float, !torch.float -> !torch.vtensor<[2,3],f32>
  return %0 : !torch.vtensor<[2,3],f32>
}
)mlir",
                                              &context);
  ASSERT_TRUE(ir);
  mlir::FailureOr<std::string> bytes = pippy::exe::lowerForOneRank(*ir);
  ASSERT_TRUE(mlir::succeeded(bytes));
  const pippy::exe::Executable *exe = pippy::exe::GetExecutable(bytes->data());
  const auto *args = exe->stages()->Get(0)->program()->code()->Get(0)->args();
  ASSERT_EQ(args->size(), 3u);
  ASSERT_EQ(args->Get(1)->name()->str(), "min");
  ASSERT_EQ(args->Get(2)->name()->str(), "max");
  // Rename the operands in place: the second is now `max`, the third `min`.
  std::memcpy(const_cast<char *>(args->Get(1)->name()->c_str()), "max", 3);
  std::memcpy(const_cast<char *>(args->Get(2)->name()->c_str()), "min", 3);
  pippy::Program program = load(*bytes);
  torch::manual_seed(0);
  at::Tensor x = torch::randn({2, 3});
  std::vector<c10::IValue> out = program.run({x}, {});
  EXPECT_TRUE(at::equal(out[0].toTensor(), at::clamp(x, 0.5, -0.5)));
  EXPECT_FALSE(at::equal(out[0].toTensor(), at::clamp(x, -0.5, 0.5)));
}

TEST_F(ProgramTest, RejectsMissingParametersAndWrongArgumentCounts) {
  pippy::Program program = compile(kLinearRelu);
  at::Tensor x = torch::randn({2, 4});
  try {
    program.run({x}, {{"fc.weight", torch::randn({3, 4})}});
    FAIL() << "expected an error";
  } catch (const pippy::RuntimeError &e) {
    EXPECT_STREQ(e.what(), "no value for parameter 'fc.bias'");
  }
  try {
    program.run({x, x}, {});
    FAIL() << "expected an error";
  } catch (const pippy::RuntimeError &e) {
    EXPECT_STREQ(e.what(), "expected 1 inputs but got 2");
  }
}

} // namespace
