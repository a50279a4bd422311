//===- ExecutableTest.cpp - lowering, verifying and printing executables --===//
//
// The stage executable format (include/pippy/Executable/Executable.fbs):
// what the lowering writes for a two-stage pipeline, and that the verifier
// turns every damaged or foreign file into one line instead of a crash.
//
//===----------------------------------------------------------------------===//

#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Dialect/Torch/TorchDialect.h"
#include "pippy/Executable/Format.h"
#include "pippy/Executable/Lowering.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <random>

namespace exe = pippy::exe;

namespace {

constexpr const char *kTwoStages = R"mlir(
module attributes {pippy.weights = "net.safetensors"} {
  func.func @forward(%x: !torch.vtensor<[4,8],f32>) -> !torch.vtensor<[4,4],f32> {
    %0 = pippy.pipeline -> !torch.vtensor<[4,4],f32> {
      %1 = pippy.stage 0 (%x) : (!torch.vtensor<[4,8],f32>) -> !torch.vtensor<[4,32],f32> {
      ^bb0(%a: !torch.vtensor<[4,8],f32>):
        %w = pippy.param "0.weight" : !torch.vtensor<[32,8],f32>
        %b = pippy.param "0.bias" : !torch.vtensor<[32],f32>
        %2 = torch.aten.linear %a, %w, %b : !torch.vtensor<[4,8],f32>, !torch.vtensor<[32,8],f32>, !torch.vtensor<[32],f32> -> !torch.vtensor<[4,32],f32>
        %3 = torch.aten.tanh %2 : !torch.vtensor<[4,32],f32> -> !torch.vtensor<[4,32],f32>
        pippy.yield %3 : !torch.vtensor<[4,32],f32>
      }
      %4 = pippy.stage 1 (%1) : (!torch.vtensor<[4,32],f32>) -> !torch.vtensor<[4,4],f32> {
      ^bb0(%a: !torch.vtensor<[4,32],f32>):
        %w = pippy.param "1.weight" : !torch.vtensor<[4,32],f32>
        %b = pippy.param "1.bias" : !torch.vtensor<[4],f32>
        %2 = torch.aten.linear %a, %w, %b : !torch.vtensor<[4,32],f32>, !torch.vtensor<[4,32],f32>, !torch.vtensor<[4],f32> -> !torch.vtensor<[4,4],f32>
        pippy.yield %2 : !torch.vtensor<[4,4],f32>
      }
      pippy.yield %4 : !torch.vtensor<[4,4],f32>
    }
    return %0 : !torch.vtensor<[4,4],f32>
  }
}
)mlir";

/// An MLP's pair sharded for two tensor-parallel ranks, as
/// --pippy-tensor-parallel=tp=2 writes it.
constexpr const char *kSharded = R"mlir(
module attributes {pippy.tensor_parallel = 2 : i64, pippy.weights = "net.safetensors"} {
  func.func @forward(%x: !torch.vtensor<[4,8],f32>) -> !torch.vtensor<[4,8],f32> {
    %w1 = pippy.param "fc.weight" {pippy.shard = array<i64: 0, 2>} : !torch.vtensor<[16,8],f32>
    %b1 = pippy.param "fc.bias" {pippy.shard = array<i64: 0, 2>} : !torch.vtensor<[16],f32>
    %c = pippy.tp_copy %x {tp = 2 : i64} : !torch.vtensor<[4,8],f32>
    %h = torch.aten.linear %c, %w1, %b1 : !torch.vtensor<[4,8],f32>, !torch.vtensor<[16,8],f32>, !torch.vtensor<[16],f32> -> !torch.vtensor<[4,16],f32>
    %w2 = pippy.param "proj.weight" {pippy.shard = array<i64: 1, 2>} : !torch.vtensor<[8,16],f32>
    %none = torch.constant.none
    %p = torch.aten.linear %h, %w2, %none : !torch.vtensor<[4,16],f32>, !torch.vtensor<[8,16],f32>, !torch.none -> !torch.vtensor<[4,8],f32>
    %r = pippy.tp_reduce %p {tp = 2 : i64} : !torch.vtensor<[4,8],f32>
    return %r : !torch.vtensor<[4,8],f32>
  }
}
)mlir";

class ExecutableTest : public ::testing::Test {
protected:
  ExecutableTest() {
    context.loadDialect<mlir::func::FuncDialect, mlir::pippy::PippyDialect,
                        mlir::torch::TorchDialect>();
  }

  /// The two-stage pipeline lowered for two ranks, 1F1B, 4 micro-batches.
  exe::LoweredPipeline lowerTwoRanks() {
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(kTwoStages, &context);
    EXPECT_TRUE(module);
    exe::LoweringOptions options;
    options.numRanks = 2;
    options.microbatches = 4;
    options.source = "pipe.mlir";
    options.weights = "net.safetensors";
    mlir::FailureOr<exe::LoweredPipeline> lowered =
        exe::lower(*module, options);
    EXPECT_TRUE(mlir::succeeded(lowered));
    return *lowered;
  }

  static std::string verifyError(const std::string &bytes) {
    std::string error;
    const exe::Executable *root = exe::verify(
        reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size(), error);
    EXPECT_EQ(root == nullptr, !error.empty());
    return error;
  }

  mlir::MLIRContext context;
};

std::vector<std::string> actionTexts(const exe::Executable &root) {
  std::vector<std::string> texts;
  for (const exe::Action *action : *root.schedule()->actions())
    texts.push_back(exe::actionText(*action));
  return texts;
}

TEST_F(ExecutableTest, EachRankHoldsItsStageTransfersAndSchedule) {
  exe::LoweredPipeline pipeline = lowerTwoRanks();
  ASSERT_EQ(pipeline.ranks.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string &bytes = pipeline.ranks[rank];
    ASSERT_EQ(verifyError(bytes), "");
    const exe::Executable *root = exe::GetExecutable(bytes.data());
    EXPECT_EQ(root->format_version(), exe::kFormatVersion);
    EXPECT_EQ(root->producer()->str().rfind("pippy ", 0), 0u);
    EXPECT_EQ(root->rank(), rank);
    EXPECT_EQ(root->num_ranks(), 2);
    EXPECT_EQ(root->pipeline_hash(), pipeline.hash);
    EXPECT_EQ(root->weights()->str(), "net.safetensors");
    ASSERT_EQ(root->stages()->size(), 1u);
    EXPECT_EQ(root->stages()->Get(0)->index(), rank);
    // One transfer, stage 0's result to stage 1, its gradient flowing back.
    ASSERT_EQ(root->transfers()->size(), 1u);
    const exe::Transfer *t = root->transfers()->Get(0);
    EXPECT_EQ(t->producer_stage(), 0);
    EXPECT_EQ(t->consumer_stage(), 1);
    EXPECT_TRUE(t->gradient());
    EXPECT_EQ(exe::specText(*t->spec()), "f32[4, 32]");
    EXPECT_EQ(root->schedule()->kind(), exe::ScheduleKind::OneFOneB);
    EXPECT_EQ(root->schedule()->microbatches(), 4);
  }
  const exe::Executable *first = exe::GetExecutable(pipeline.ranks[0].data());
  std::vector<std::string> expected = {
      "0F0",      "0SEND_F0", "0F1",      "0SEND_F1", "0RECV_B0", "0B0",
      "0F2",      "0SEND_F2", "0RECV_B1", "0B1",      "0F3",      "0SEND_F3",
      "0RECV_B2", "0B2",      "0RECV_B3", "0B3",      "0STEP"};
  EXPECT_EQ(actionTexts(*first), expected);
  // Stage 0's program: the input, two parameters with gradients, two calls
  // whose arguments carry their schema names.
  const exe::Program *program = first->stages()->Get(0)->program();
  ASSERT_EQ(program->parameters()->size(), 2u);
  EXPECT_EQ(program->parameters()->Get(0)->name()->str(), "0.weight");
  EXPECT_TRUE(program->parameters()->Get(0)->gets_gradient());
  ASSERT_EQ(program->code()->size(), 2u);
  const exe::Instruction *linear = program->code()->Get(0);
  const exe::Operator *op = program->operators()->Get(linear->op());
  EXPECT_EQ(op->name()->str(), "aten::linear");
  EXPECT_EQ(op->source_name()->str(), "torch.aten.linear");
  ASSERT_EQ(linear->args()->size(), 3u);
  EXPECT_EQ(linear->args()->Get(1)->name()->str(), "weight");
}

// Sharded parameters keep the whole tensor's spec and say which slice each
// tensor rank loads; the collectives are pippy's operators; a shard that
// does not fit the executable's tensor-parallel group is refused.
TEST_F(ExecutableTest, RecordsShardedParameters) {
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(kSharded, &context);
  ASSERT_TRUE(module);
  mlir::FailureOr<std::string> bytes = exe::lowerForOneRank(*module);
  ASSERT_TRUE(mlir::succeeded(bytes));
  ASSERT_EQ(verifyError(*bytes), "");
  const exe::Executable *root = exe::GetExecutable(bytes->data());
  EXPECT_EQ(root->tensor_parallel(), 2);
  const exe::Program *program = root->stages()->Get(0)->program();
  ASSERT_EQ(program->parameters()->size(), 3u);
  const exe::Parameter *fc = program->parameters()->Get(0);
  EXPECT_EQ(exe::specText(*fc->spec()), "f32[32, 8]");
  ASSERT_NE(fc->shard(), nullptr);
  EXPECT_EQ(fc->shard()->dim(), 0);
  EXPECT_EQ(fc->shard()->parts(), 2);
  const exe::Parameter *proj = program->parameters()->Get(2);
  EXPECT_EQ(exe::specText(*proj->spec()), "f32[8, 32]");
  EXPECT_EQ(proj->shard()->dim(), 1);
  std::vector<std::string> names;
  for (const exe::Operator *op : *program->operators())
    names.push_back(op->name()->str());
  EXPECT_EQ(names, (std::vector<std::string>{"pippy::tp_copy", "aten::linear",
                                             "pippy::tp_reduce"}));
  const exe::StageParameters *listed = root->stage_parameters()->Get(0);
  EXPECT_EQ(listed->shards()->Get(2)->dim(), 1);
  EXPECT_EQ(listed->shards()->Get(2)->parts(), 2);

  std::string damaged = *bytes;
  auto *param = exe::GetMutableExecutable(damaged.data())
                    ->mutable_stages()
                    ->GetMutableObject(0)
                    ->mutable_program()
                    ->mutable_parameters()
                    ->GetMutableObject(0);
  param->mutable_shard()->mutate_parts(3);
  EXPECT_EQ(verifyError(damaged), "stage 0 has a malformed parameter");
}

TEST_F(ExecutableTest, PrintsAsText) {
  exe::LoweredPipeline pipeline = lowerTwoRanks();
  std::string text = exe::toText(*exe::GetExecutable(pipeline.ranks[1].data()));
  EXPECT_NE(text.find("rank 1 of 2"), std::string::npos) << text;
  EXPECT_NE(text.find("aten::linear(input=%"), std::string::npos) << text;
  EXPECT_NE(text.find("stage 0 result 0 -> stage 1 input 0, channel 0, "
                      "f32[4, 32], gradient back"),
            std::string::npos)
      << text;
}

TEST_F(ExecutableTest, ForeignBytesAreNotAnExecutable) {
  const std::string message =
      "not a pippy stage executable (no PIPX identifier)";
  EXPECT_EQ(verifyError(""), message);
  EXPECT_EQ(verifyError("PIPX"), message);
  // A safetensors header and an MLIR file.
  EXPECT_EQ(verifyError(std::string("\x08\0\0\0\0\0\0\0{}      ", 16)),
            message);
  EXPECT_EQ(verifyError("module {\n}\n"), message);
}

TEST_F(ExecutableTest, EveryTruncationIsRejected) {
  const std::string bytes = lowerTwoRanks().ranks[1];
  for (size_t size = 0; size < bytes.size(); ++size) {
    std::string error = verifyError(bytes.substr(0, size));
    ASSERT_FALSE(error.empty()) << "a prefix of " << size << " bytes verified";
  }
}

TEST_F(ExecutableTest, FlippedBytesNeverCrashTheVerifier) {
  const std::string bytes = lowerTwoRanks().ranks[0];
  std::mt19937 random(7);
  int rejected = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string damaged = bytes;
    for (int flips = 0; flips < 3; ++flips)
      damaged[random() % damaged.size()] ^=
          static_cast<char>(1 + random() % 255);
    std::string error;
    const exe::Executable *root =
        exe::verify(reinterpret_cast<const uint8_t *>(damaged.data()),
                    damaged.size(), error);
    if (!root) {
      EXPECT_FALSE(error.empty()) << "rejected without saying why";
      ++rejected;
      continue;
    }
    // What verifies can be walked in full.
    EXPECT_FALSE(exe::toText(*root).empty());
  }
  EXPECT_GT(rejected, 0);
}

TEST_F(ExecutableTest, OtherFormatVersionsAreNamed) {
  std::string bytes = lowerTwoRanks().ranks[0];
  ASSERT_TRUE(
      exe::GetMutableExecutable(bytes.data())->mutate_format_version(4));
  EXPECT_EQ(verifyError(bytes),
            "written in format version 4, but this pippy reads version 3; "
            "lower the pipeline again with this pippy");
}

TEST_F(ExecutableTest, IndicesOutOfRangeAreRejected) {
  // (FlatBuffers leaves fields at their default value out of the file, so
  // only fields that are not 0 can be changed in place.)
  {
    std::string bytes = lowerTwoRanks().ranks[0];
    ASSERT_TRUE(exe::GetMutableExecutable(bytes.data())
                    ->mutable_transfers()
                    ->GetMutableObject(0)
                    ->mutate_consumer_stage(7));
    EXPECT_EQ(verifyError(bytes),
              "a transfer connects stages that do not exist");
  }
  {
    std::string bytes = lowerTwoRanks().ranks[1];
    ASSERT_TRUE(exe::GetMutableExecutable(bytes.data())->mutate_rank(5));
    EXPECT_EQ(verifyError(bytes), "rank 5 is outside a world of 2");
  }
  {
    std::string bytes = lowerTwoRanks().ranks[1];
    auto *code = exe::GetMutableExecutable(bytes.data())
                     ->mutable_stages()
                     ->GetMutableObject(0)
                     ->mutable_program()
                     ->mutable_code();
    ASSERT_TRUE(code->GetMutableObject(0)
                    ->mutable_args()
                    ->GetMutableObject(1)
                    ->mutate_slot(999));
    EXPECT_EQ(verifyError(bytes),
              "stage 1 instruction 0 has an argument out of range");
  }
}

TEST(StoredWeightsPath, RelativeInsideOrBesideTheFolderAbsoluteElsewhere) {
  EXPECT_EQ(exe::storedWeightsPath("/m/net.safetensors", "/m/ex"),
            "../net.safetensors");
  EXPECT_EQ(exe::storedWeightsPath("/m/ex/w.safetensors", "/m/ex"),
            "w.safetensors");
  EXPECT_EQ(exe::storedWeightsPath("/data/w.safetensors", "/m/ex"),
            "/data/w.safetensors");
  EXPECT_EQ(exe::storedWeightsPath("/data/w.safetensors", ""),
            "/data/w.safetensors");
  EXPECT_EQ(exe::storedWeightsPath("", "/m/ex"), "");
}

} // namespace
