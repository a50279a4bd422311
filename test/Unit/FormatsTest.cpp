//===- FormatsTest.cpp - the files and options a run reads and writes -----===//
//
// Each format is defined in one place (Reports.h: metrics and trace;
// Profile.h: the measured profile; TensorFile.h: the weights metadata;
// Options.h: pippy-run's command line); these tests read back what the
// writers write and check that malformed input is refused with a message.
//
//===----------------------------------------------------------------------===//

#include "pippy/Runtime/Options.h"
#include "pippy/Support/AtomicFile.h"
#include "pippy/Support/Profile.h"

#include "CheckpointManifest.h"
#include "Reports.h"
#include "TensorFile.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

namespace {

using nlohmann::json;

TEST(MetricsFormat, WritesEveryStepAndTheRunsFigures) {
  pippy::rt::RunMetrics metrics;
  metrics.steps.push_back({1, 2.5, 0.25, 64.0, {0.2, 0.25}, {0.15, 0.2}});
  metrics.steps.push_back({2, 2.25, 0.125, 128.0, {0.125, 0.1}, {0.1, 0.05}});
  metrics.bubbleFraction = 0.111;
  metrics.peakInflight = {2, 1};
  metrics.peakActivationBytes = {2048, 648};
  metrics.busySeconds = {0.3, 0.28};
  metrics.schedule = "1f1b";
  metrics.dtype = "bf16";
  metrics.ranks = 2;
  json j = json::parse(pippy::rt::metricsJson(metrics));
  ASSERT_EQ(j["steps"].size(), 2u);
  EXPECT_EQ(j["steps"][1]["step"], 2);
  EXPECT_DOUBLE_EQ(j["steps"][1]["loss"].get<double>(), 2.25);
  EXPECT_DOUBLE_EQ(j["steps"][0]["step_time_s"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(j["steps"][0]["samples_per_s"].get<double>(), 64.0);
  EXPECT_EQ(j["steps"][0]["rank_step_time_s"], json({0.2, 0.25}));
  EXPECT_EQ(j["steps"][1]["rank_busy_s"], json({0.1, 0.05}));
  EXPECT_DOUBLE_EQ(j["bubble_fraction"].get<double>(), 0.111);
  EXPECT_EQ(j["peak_inflight_microbatches"], json({2, 1}));
  EXPECT_EQ(j["peak_activation_bytes"], json({2048, 648}));
  EXPECT_FALSE(j.contains("peak_device_memory_bytes")); // CPU ranks
  metrics.peakDeviceBytes = {1 << 30, 3 << 29};
  EXPECT_EQ(
      json::parse(pippy::rt::metricsJson(metrics))["peak_device_memory_bytes"],
      json({1 << 30, 3 << 29}));
  EXPECT_EQ(j["schedule"], "1f1b");
  EXPECT_EQ(j["dtype"], "bf16");
  EXPECT_EQ(j["ranks"], 2);
}

TEST(TraceFormat, MergesRanksIntoOneChromeTrace) {
  std::vector<std::string> parts = {
      pippy::rt::traceEventsJson(0, {{"0F0", 0.0, 10.0}, {"0B0", 30.0, 20.0}}),
      pippy::rt::traceEventsJson(1, {{"1F0", 12.0, 8.0}})};
  json trace = json::parse(pippy::rt::mergeTrace(parts, {{0, 3}, {1, 2}}));
  int complete = 0;
  for (const json &event : trace["traceEvents"]) {
    if (event["ph"] != "X")
      continue;
    ++complete;
    if (event["name"] == "1F0") {
      EXPECT_EQ(event["pid"], 1);
      EXPECT_DOUBLE_EQ(event["ts"].get<double>(), 12.0);
      EXPECT_DOUBLE_EQ(event["dur"].get<double>(), 8.0);
    }
  }
  EXPECT_EQ(complete, 3);
  EXPECT_EQ(trace["traceEvents"][0]["args"]["name"], "rank 0 (stages 0, 3)");
  EXPECT_THROW(pippy::rt::mergeTrace({"{not json", parts[1]}, {{0}, {1}}),
               pippy::RuntimeError);
}

TEST(ProfileFormat, RoundTripsAndDefaultsBackwardToTwiceForward) {
  pippy::profile::Profile profile;
  profile.transferNsPerByte = 0.5;
  profile.microbatchesMeasured = 6;
  profile.ops.push_back({0, "torch.aten.linear", 0, 12.5, 20.0});
  profile.ops.push_back({1, "torch.aten.relu", 1, 1.5, std::nullopt});
  std::string error;
  auto back = pippy::profile::parse(pippy::profile::write(profile), error);
  ASSERT_TRUE(back) << error;
  EXPECT_DOUBLE_EQ(back->transferNsPerByte, 0.5);
  EXPECT_EQ(back->microbatchesMeasured, 6);
  ASSERT_EQ(back->ops.size(), 2u);
  EXPECT_EQ(back->ops[0].op, "torch.aten.linear");
  EXPECT_DOUBLE_EQ(*back->ops[0].backwardUs, 20.0);
  EXPECT_EQ(back->ops[1].stage, 1);
  EXPECT_FALSE(back->ops[1].backwardUs.has_value());
}

TEST(ProfileFormat, RefusesMalformedProfiles) {
  std::string error;
  EXPECT_FALSE(pippy::profile::parse("[1, 2", error));
  EXPECT_FALSE(error.empty());
  error.clear();
  EXPECT_FALSE(pippy::profile::parse(
      R"({"format": "something-else", "version": 1, "ops": []})", error));
  EXPECT_FALSE(error.empty());
  error.clear();
  EXPECT_FALSE(pippy::profile::parse(
      R"({"format": "pippy-profile", "version": 1, "ops": [{"index": 0}]})",
      error));
  EXPECT_FALSE(error.empty());
}

TEST(WeightsMetadata, BuffersAndFrozenTensorsAreNotTrained) {
  std::map<std::string, std::string> metadata = {
      {pippy::rt::kBuffersKey, R"(["bn.running_mean"])"},
      {pippy::rt::kFrozenKey, R"(["emb.weight"])"}};
  std::set<std::string> untrained = pippy::rt::untrainedNames(metadata);
  EXPECT_EQ(untrained,
            (std::set<std::string>{"bn.running_mean", "emb.weight"}));
  at::Tensor floats = at::zeros({2});
  EXPECT_TRUE(pippy::rt::isTrainable(floats, "fc.weight", untrained));
  EXPECT_FALSE(pippy::rt::isTrainable(floats, "emb.weight", untrained));
  EXPECT_FALSE(
      pippy::rt::isTrainable(at::zeros({2}, at::kLong), "steps", untrained));
}

std::optional<pippy::RunOptions> parse(std::vector<std::string> args,
                                       std::string &message) {
  args.insert(args.begin(), "pippy-run");
  int exitCode = 0;
  return pippy::parseRunOptions(args, message, exitCode);
}

TEST(RunOptions, ParsesChoicesOnceIntoEnums) {
  std::string message;
  auto options =
      parse({"exe/", "--schedule", "gpipe", "--loss=mse", "--optimizer",
             "adamw", "--microbatches", "4", "--backend", "nccl",
             "--defer-weight-grads", "--dtype", "bf16", "--allow-tf32"},
            message);
  ASSERT_TRUE(options) << message;
  EXPECT_EQ(options->programPath, "exe/");
  EXPECT_EQ(*options->schedule, pippy::ScheduleKind::GPipe);
  EXPECT_EQ(options->loss, pippy::LossKind::Mse);
  EXPECT_EQ(options->optimizer, pippy::OptimizerKind::AdamW);
  EXPECT_EQ(*options->microbatches, 4);
  EXPECT_EQ(*options->backend, pippy::Backend::Nccl);
  EXPECT_TRUE(*options->deferWeightGrads);
  EXPECT_EQ(options->precision, pippy::Precision::BF16);
  EXPECT_TRUE(options->allowTf32);
  // What is not given stays unset, so that executables supply it.
  auto plain = parse({"exe/"}, message);
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->schedule || plain->microbatches || plain->nproc ||
               plain->deferWeightGrads || plain->allowTf32);
  EXPECT_EQ(plain->precision, pippy::Precision::F32);
}

TEST(RunOptions, RefusesBadValuesWithOneLine) {
  std::string message;
  EXPECT_FALSE(parse({"exe/", "--schedule", "zigzag"}, message));
  EXPECT_EQ(message,
            "pippy-run: error: unknown --schedule 'zigzag'; expected gpipe, "
            "1f1b, interleaved-1f1b, looped-bfs, zb-h1, zb1p, zbv or "
            "dualpipev\n");
  EXPECT_FALSE(parse({"exe/", "--microbatches", "0"}, message));
  EXPECT_NE(message.find("--microbatches"), std::string::npos) << message;
  EXPECT_FALSE(parse({"exe/", "--backend", "mpi"}, message));
  EXPECT_NE(message.find("gloo or nccl"), std::string::npos) << message;
  EXPECT_FALSE(parse({"exe/", "--dtype", "fp16"}, message));
  EXPECT_EQ(message, "pippy-run: error: unknown --dtype 'fp16'; expected f32 "
                     "or bf16\n");
  EXPECT_FALSE(parse({"exe/", "--resume"}, message));
  EXPECT_EQ(message, "pippy-run: error: --resume needs --checkpoint-dir\n");
  EXPECT_FALSE(parse({"exe/", "--steps"}, message));
  EXPECT_NE(message.find("needs a value"), std::string::npos) << message;
  EXPECT_FALSE(parse({"exe/", "--fill-forwards", "-1"}, message));
  EXPECT_NE(message.find("--fill-forwards"), std::string::npos) << message;
  EXPECT_FALSE(
      parse({"exe/", "--fill-forwards", "1", "--fill-waits=false"}, message));
  EXPECT_EQ(message, "pippy-run: error: --fill-forwards fills waits: it goes "
                     "with --fill-waits (on unless =false)\n");
  EXPECT_FALSE(parse({"exe/", "--fill-forwards", "1", "--tp", "2"}, message));
  EXPECT_NE(message.find("does not go with --tp"), std::string::npos)
      << message;
  auto forwards = parse({"exe/", "--fill-forwards", "2"}, message);
  ASSERT_TRUE(forwards);
  EXPECT_EQ(forwards->fillForwards, 2);
  EXPECT_FALSE(parse({"a/", "b/"}, message));
  EXPECT_NE(message.find("more than one program"), std::string::npos);
}

TEST(CheckpointManifest, RoundTripsAndChecksFolders) {
  // FNV-1a's published test values.
  EXPECT_EQ(pippy::rt::fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(pippy::rt::fnv1a64("a"), 0xaf63dc4c8601ec8cULL);

  std::string dir = ::testing::TempDir() + "/pippy-manifest-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ASSERT_EQ(pippy::writeFileAtomically(dir + "/rank0.safetensors", "zero"), "");
  ASSERT_EQ(pippy::writeFileAtomically(dir + "/rank1.safetensors", "one"), "");
  pippy::rt::CheckpointManifest manifest = pippy::rt::describeCheckpoint(
      dir, 4, 2, 1, {"rank0.safetensors", "rank1.safetensors"});
  pippy::rt::CheckpointManifest back =
      pippy::rt::CheckpointManifest::parse(manifest.toJson());
  EXPECT_EQ(back.step, 4);
  EXPECT_EQ(back.worldSize, 2);
  ASSERT_EQ(back.files.size(), 2u);
  EXPECT_EQ(back.files[1].name, "rank1.safetensors");
  EXPECT_EQ(back.files[1].bytes, 3u);
  EXPECT_EQ(back.files[1].checksum, pippy::rt::fnv1a64("one"));

  EXPECT_EQ(pippy::rt::checkCheckpoint(dir, 2), "no readable manifest.json");
  ASSERT_EQ(
      pippy::writeFileAtomically(dir + "/manifest.json", manifest.toJson()),
      "");
  EXPECT_EQ(pippy::rt::checkCheckpoint(dir, 2), "");
  EXPECT_EQ(pippy::rt::checkCheckpoint(dir, 3), "written by 2 ranks, not 3");
  ASSERT_EQ(pippy::writeFileAtomically(dir + "/rank1.safetensors", "on"), "");
  EXPECT_EQ(pippy::rt::checkCheckpoint(dir, 2),
            "rank1.safetensors has 2 bytes, not 3");
  ASSERT_EQ(pippy::writeFileAtomically(dir + "/rank1.safetensors", "two"), "");
  EXPECT_EQ(pippy::rt::checkCheckpoint(dir, 2),
            "rank1.safetensors does not match its checksum");
  std::filesystem::remove(dir + "/rank1.safetensors");
  EXPECT_EQ(pippy::rt::checkCheckpoint(dir, 2),
            "rank1.safetensors is missing or unreadable");

  // --zero 1: a share of the optimizer state per replica, 2 x 2 files.
  ASSERT_EQ(pippy::writeFileAtomically(dir + "/rank1.safetensors", "one"), "");
  for (const char *name :
       {"rank0.replica1.safetensors", "rank1.replica1.safetensors"})
    ASSERT_EQ(pippy::writeFileAtomically(dir + "/" + name, "shard"), "");
  pippy::rt::CheckpointManifest sharded = pippy::rt::describeCheckpoint(
      dir, 4, 2, 2,
      {"rank0.safetensors", "rank1.safetensors", "rank0.replica1.safetensors",
       "rank1.replica1.safetensors"});
  EXPECT_EQ(pippy::rt::CheckpointManifest::parse(sharded.toJson()).shards, 2);
  ASSERT_EQ(
      pippy::writeFileAtomically(dir + "/manifest.json", sharded.toJson()), "");
  EXPECT_EQ(pippy::rt::checkCheckpoint(dir, 2), "");
  sharded.files.pop_back();
  ASSERT_EQ(
      pippy::writeFileAtomically(dir + "/manifest.json", sharded.toJson()), "");
  EXPECT_EQ(pippy::rt::checkCheckpoint(dir, 2),
            "manifest.json lists 3 files for 2 ranks x 2 shards");

  for (const char *bad :
       {"[]", "{\"step\": 1}", "not json",
        "{\"step\": 1, \"world_size\": 1, \"files\": [{\"name\": "
        "\"../x\", \"bytes\": 1, \"fnv1a64\": \"0000000000000000\"}]}",
        "{\"step\": 1, \"world_size\": 1, \"files\": [{\"name\": "
        "\"x\", \"bytes\": 1, \"fnv1a64\": \"xyz\"}]}"})
    EXPECT_THROW(pippy::rt::CheckpointManifest::parse(bad), pippy::RuntimeError)
        << bad;
  std::filesystem::remove_all(dir);
}

TEST(AtomicFile, ReplacesRegularFilesOnlyAndChecksAhead) {
  std::string dir = ::testing::TempDir() + "/pippy-atomic-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string file = dir + "/out.txt";
  ASSERT_EQ(pippy::writeFileAtomically(file, "old"), "");
  ASSERT_EQ(pippy::writeFileAtomically(file, "new"), "");
  std::string bytes;
  ASSERT_EQ(pippy::readFile(file, bytes), "");
  EXPECT_EQ(bytes, "new");
  EXPECT_EQ(pippy::checkWritable(file), "");
  EXPECT_EQ(pippy::checkWritable(dir),
            "cannot write " + dir + ": it is a folder");
  EXPECT_EQ(pippy::writeFileAtomically(dir, "x"),
            "cannot write " + dir + ": it is a folder");
  EXPECT_NE(pippy::checkWritable(dir + "/nowhere/out.txt"), "");
  // Nothing left beside the file: no temporary of the writes or the checks.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir),
                          std::filesystem::directory_iterator()),
            1);
  // A device is written in place, never replaced by a regular file.
  EXPECT_EQ(pippy::checkWritable("/dev/null"), "");
  EXPECT_EQ(pippy::writeFileAtomically("/dev/null", "discarded"), "");
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
  std::filesystem::remove_all(dir);
}

} // namespace

TEST(AtomicFile, SameFileSeesThroughSpellingsAndLinks) {
  std::string dir = ::testing::TempDir() + "/pippy-samefile-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/sub");
  ASSERT_EQ(pippy::writeFileAtomically(dir + "/a", "a"), "");
  ASSERT_EQ(pippy::writeFileAtomically(dir + "/b", "b"), "");
  std::filesystem::create_symlink(dir + "/a", dir + "/link");
  EXPECT_TRUE(pippy::sameFile(dir + "/a", dir + "/sub/../a"));
  EXPECT_TRUE(pippy::sameFile(dir + "/a", dir + "/link"));
  EXPECT_FALSE(pippy::sameFile(dir + "/a", dir + "/b"));
  // Files not written yet: the same normalised path.
  EXPECT_TRUE(pippy::sameFile(dir + "/new", dir + "/./sub/../new"));
  EXPECT_FALSE(pippy::sameFile(dir + "/new", dir + "/other"));
  std::filesystem::remove_all(dir);
}
