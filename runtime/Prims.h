//===- Prims.h - PyTorch's prims operators, on ATen -------------*- C++ -*-===//
//
// Torch-MLIR's text can hold `torch.prims.*` ops (PyTorch's primitive
// operators, which decompositions emit: `prims.convert_element_type`,
// `prims.var`, `prims.collapse`, ...). libtorch 1.13 registers them only from
// Python, so the interpreter runs them here, each as ATen calls that autograd
// differentiates.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_PRIMS_H
#define PIPPY_RUNTIME_PRIMS_H

#include <ATen/core/function_schema.h>
#include <torch/csrc/jit/runtime/operator.h>

namespace pippy::rt {

struct PrimsOperator {
  c10::FunctionSchema schema;
  torch::jit::Operation operation;
};

/// The prims operator `name` (`prims::var`, no overload), if pippy has it.
const PrimsOperator *findPrimsOperator(const c10::OperatorName &name);

} // namespace pippy::rt

#endif // PIPPY_RUNTIME_PRIMS_H
