//===- CheckpointManifest.cpp - what a complete checkpoint holds ----------===//

#include "CheckpointManifest.h"

#include "pippy/Runtime/Program.h"
#include "pippy/Support/AtomicFile.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace pippy::rt {

namespace {

constexpr const char *kManifest = "manifest.json";

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, value);
  return text;
}

} // namespace

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string CheckpointManifest::toJson() const {
  nlohmann::json json{{"step", step}, {"world_size", worldSize}};
  if (shards != 1)
    json["optimizer_shards"] = shards;
  json["files"] = nlohmann::json::array();
  for (const File &file : files)
    json["files"].push_back({{"name", file.name},
                             {"bytes", file.bytes},
                             {"fnv1a64", hex(file.checksum)}});
  return json.dump(1) + "\n";
}

CheckpointManifest CheckpointManifest::parse(const std::string &text) {
  nlohmann::json json =
      nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [](const std::string &why) {
    return RuntimeError(std::string(kManifest) + ": " + why);
  };
  if (!json.is_object() || !json.contains("step") ||
      !json["step"].is_number_integer() || !json.contains("world_size") ||
      !json["world_size"].is_number_integer() || !json.contains("files") ||
      !json["files"].is_array())
    throw bad("not a manifest (expected step, world_size and files)");
  CheckpointManifest manifest;
  manifest.step = json["step"].get<int>();
  manifest.worldSize = json["world_size"].get<int>();
  if (json.contains("optimizer_shards")) {
    if (!json["optimizer_shards"].is_number_integer() ||
        json["optimizer_shards"].get<int>() < 1)
      throw bad("optimizer_shards is not a positive integer");
    manifest.shards = json["optimizer_shards"].get<int>();
  }
  for (const nlohmann::json &entry : json["files"]) {
    if (!entry.is_object() || !entry.contains("name") ||
        !entry["name"].is_string() || !entry.contains("bytes") ||
        !entry["bytes"].is_number_unsigned() || !entry.contains("fnv1a64") ||
        !entry["fnv1a64"].is_string())
      throw bad("a file entry lacks name, bytes or fnv1a64");
    File file;
    file.name = entry["name"].get<std::string>();
    file.bytes = entry["bytes"].get<uint64_t>();
    std::string sum = entry["fnv1a64"].get<std::string>();
    char *end = nullptr;
    errno = 0;
    file.checksum = std::strtoull(sum.c_str(), &end, 16);
    if (sum.size() != 16 || errno || *end)
      throw bad("checksum '" + sum + "' is not 16 hex digits");
    if (file.name.empty() || file.name.find('/') != std::string::npos)
      throw bad("file name '" + file.name + "' is not a plain name");
    manifest.files.push_back(std::move(file));
  }
  return manifest;
}

CheckpointManifest describeCheckpoint(const std::string &dir, int step,
                                      int worldSize, int shards,
                                      const std::vector<std::string> &names) {
  CheckpointManifest manifest;
  manifest.step = step;
  manifest.worldSize = worldSize;
  manifest.shards = shards;
  for (const std::string &name : names) {
    std::string bytes;
    if (std::string error = readFile(dir + "/" + name, bytes); !error.empty())
      throw RuntimeError(error);
    manifest.files.push_back({name, bytes.size(), fnv1a64(bytes)});
  }
  return manifest;
}

std::string checkCheckpoint(const std::string &dir, int worldSize) {
  std::string text;
  if (readFileBytes(dir + "/" + kManifest, text).code)
    return std::string("no readable ") + kManifest;
  CheckpointManifest manifest;
  try {
    manifest = CheckpointManifest::parse(text);
  } catch (const RuntimeError &e) {
    return e.what();
  }
  if (manifest.worldSize != worldSize)
    return "written by " + std::to_string(manifest.worldSize) + " ranks, not " +
           std::to_string(worldSize);
  if (manifest.files.size() !=
      static_cast<size_t>(worldSize) * static_cast<size_t>(manifest.shards))
    return std::string(kManifest) + " lists " +
           std::to_string(manifest.files.size()) + " files for " +
           std::to_string(worldSize) + " ranks" +
           (manifest.shards > 1
                ? " x " + std::to_string(manifest.shards) + " shards"
                : "");
  for (const CheckpointManifest::File &file : manifest.files) {
    std::string bytes;
    if (readFileBytes(dir + "/" + file.name, bytes).code)
      return file.name + " is missing or unreadable";
    if (bytes.size() != file.bytes)
      return file.name + " has " + std::to_string(bytes.size()) +
             " bytes, not " + std::to_string(file.bytes);
    if (fnv1a64(bytes) != file.checksum)
      return file.name + " does not match its checksum";
  }
  return "";
}

} // namespace pippy::rt
