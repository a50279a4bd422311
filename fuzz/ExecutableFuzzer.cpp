//===- ExecutableFuzzer.cpp - fuzzing the stage executable reader ---------===//
//
// Verifies arbitrary bytes as a stage executable. Whatever verifies is then
// walked in full by the text printer, which follows every index the
// runtime follows: an index the verifier let through out of range is caught
// by ASan. The seeds are executables pippy-run lowered (build-and-run.sh).
//
//===----------------------------------------------------------------------===//

#include "pippy/Executable/Format.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string error;
  const pippy::exe::Executable *root = pippy::exe::verify(data, size, error);
  if (!root) {
    if (error.empty()) {
      std::fprintf(stderr, "executable fuzzer: rejected without a message\n");
      std::abort();
    }
    return 0;
  }
  if (!error.empty() || pippy::exe::toText(*root).empty()) {
    std::fprintf(stderr, "executable fuzzer: accepted but %s\n",
                 error.empty() ? "printed nothing" : error.c_str());
    std::abort();
  }
  return 0;
}
