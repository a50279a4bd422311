//===- SafetensorsFuzzer.cpp - fuzzing the safetensors reader -------------===//
//
// Parses arbitrary bytes as a safetensors file. On success it reads every
// byte of every tensor, so that an out-of-bounds range is caught by ASan, and
// checks that writing the file back and reading it again gives the same
// tensors, metadata and bytes.
//
//===----------------------------------------------------------------------===//

#include "pippy/Support/Safetensors.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace pippy::safetensors;

namespace {

/// Aborts, so that libFuzzer records the input, when `condition` is false.
void check(bool condition, const char *what) {
  if (condition)
    return;
  std::fprintf(stderr, "safetensors fuzzer: %s\n", what);
  std::abort();
}

/// Writes `file` back with the Writer and checks that it reads back equal.
void checkRoundTrip(const File &file) {
  Writer writer;
  for (const TensorInfo &info : file.tensors()) {
    std::string error =
        writer.add(info.name, info.dtype, info.shape, file.data(info));
    if (!error.empty())
      std::fprintf(stderr, "%s\n", error.c_str());
    check(error.empty(), "a tensor that was read cannot be written back");
  }
  for (const auto &[key, value] : file.metadata())
    writer.setMetadata(key, value);

  std::string error;
  std::optional<File> again =
      File::parse(writer.serialize(), "round-trip", error);
  if (!again)
    std::fprintf(stderr, "%s\n", error.c_str());
  check(again.has_value(), "a written file cannot be read back");
  check(again->tensors().size() == file.tensors().size(),
        "the tensor count changed in the round trip");
  check(again->metadata() == file.metadata(),
        "the metadata changed in the round trip");
  for (size_t i = 0, e = file.tensors().size(); i < e; ++i) {
    const TensorInfo &before = file.tensors()[i];
    const TensorInfo &after = again->tensors()[i];
    check(before.name == after.name && before.dtype == after.dtype &&
              before.shape == after.shape,
          "a tensor changed in the round trip");
    check(file.data(before) == again->data(after),
          "tensor bytes changed in the round trip");
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  std::string error;
  std::optional<File> file = File::parse(std::move(bytes), "fuzz", error);
  if (!file) {
    check(!error.empty(), "a file was rejected without a message");
    return 0;
  }
  check(error.empty(), "a file was accepted with a message");
  // Touch every byte of every tensor; a volatile sink keeps the reads.
  uint64_t sum = 0;
  for (const TensorInfo &info : file->tensors()) {
    check(file->find(info.name) == &info, "find() misses a listed tensor");
    std::string_view tensorBytes = file->data(info);
    check(tensorBytes.size() == info.end - info.begin,
          "data() size differs from the byte range");
    check(static_cast<uint64_t>(info.numElements()) * dtypeSize(info.dtype) ==
              tensorBytes.size(),
          "byte count differs from shape x dtype size");
    for (char byte : tensorBytes)
      sum += static_cast<uint8_t>(byte);
  }
  volatile uint64_t sink = sum;
  (void)sink;
  checkRoundTrip(*file);
  return 0;
}
