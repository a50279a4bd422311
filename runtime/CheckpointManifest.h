//===- CheckpointManifest.h - what a complete checkpoint holds --*- C++ -*-===//
//
// Internal to runtime/: the manifest rank 0 writes last into a checkpoint
// folder (D/step-K/manifest.json), defined here alone:
//
//   {"step": 12, "world_size": 2, "optimizer_shards": 1,
//    "files": [{"name": "rank0.safetensors", "bytes": 4096,
//               "fnv1a64": "cbf29ce484222325"}, ...]}
//
// world_size x optimizer_shards files (--zero 1 writes a share of the
// optimizer state per replica; optimizer_shards is 1 where absent).
//
// A checkpoint is complete when its manifest reads and every file it lists
// is there with its size and checksum; `--resume` takes the newest such one
// and says which newer ones it skipped and why.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_CHECKPOINTMANIFEST_H
#define PIPPY_RUNTIME_CHECKPOINTMANIFEST_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pippy::rt {

struct CheckpointManifest {
  struct File {
    std::string name; ///< relative to the checkpoint folder
    uint64_t bytes = 0;
    uint64_t checksum = 0; ///< FNV-1a, 64 bits, of the whole file
  };
  int step = 0;
  int worldSize = 0;
  int shards = 1;
  std::vector<File> files;

  std::string toJson() const;
  /// Throws RuntimeError naming what is wrong with `text`.
  static CheckpointManifest parse(const std::string &text);
};

/// FNV-1a (64 bits) of `bytes`.
uint64_t fnv1a64(std::string_view bytes);

/// The manifest of checkpoint folder `dir` for its files `names`, each
/// read to size and checksum it.
CheckpointManifest describeCheckpoint(const std::string &dir, int step,
                                      int worldSize, int shards,
                                      const std::vector<std::string> &names);

/// Why checkpoint folder `dir` is not a complete checkpoint of `worldSize`
/// ranks ("no manifest.json", "rank1.safetensors has 12 bytes, not 4096"),
/// or empty when it is.
std::string checkCheckpoint(const std::string &dir, int worldSize);

} // namespace pippy::rt

#endif // PIPPY_RUNTIME_CHECKPOINTMANIFEST_H
