//===- pippy-run.cpp - train or run a model with pippy's runtime ----------===//
//
//   pippy-run pipe.mlir --nproc 2 --schedule 1f1b --microbatches 4 \
//       --emit-executables exe/
//   pippy-run exe/ --steps 3 --data data.safetensors --loss cross_entropy \
//       --optimizer sgd --lr 0.05 --metrics metrics.json
//   pippy-run model.mlir --infer --data inputs.safetensors --output
//   out.safetensors
//
// Everything is in the runtime library (pippy/Runtime/Run.h); the full
// build adds the lowering of IR, the runtime-only build runs executables.
//
//===----------------------------------------------------------------------===//

#include "pippy/Runtime/Run.h"
#include "pippy/Support/Allocator.h"

#ifndef PIPPY_RUNTIME_ONLY
#include "pippy/Executable/IRCompiler.h"
#endif

int main(int argc, char **argv) {
  pippy::keepFreedMemory();
#ifdef PIPPY_RUNTIME_ONLY
  return pippy::runMain(argc, argv, nullptr);
#else
  pippy::exe::IRCompiler compiler;
  return pippy::runMain(argc, argv, &compiler);
#endif
}
