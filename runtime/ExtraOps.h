//===- ExtraOps.h - operators libtorch 1.13 lacks, on ATen ------*- C++ -*-===//
//
// Torch-MLIR's text can hold operators that libtorch 1.13's C++ dispatcher
// does not have: PyTorch's prims (`torch.prims.convert_element_type`,
// `prims.var`, `prims.collapse`, ..., which decompositions emit; 1.13
// registers them only from Python), and ATen operators added after 1.13
// that `torch.export` writes (`scaled_dot_product_attention`,
// `_native_batch_norm_legit_no_training`, `rms_norm`, `_safe_softmax`,
// `_unsafe_index`, `normal_functional`), which a TorchScript module saved by
// PyTorch 2.x calls too (registerMissingAtenOperators). The interpreter runs
// them here, each as ATen calls that autograd differentiates. The
// `pippy::expected_*` operators are what `--infer` runs in place of random ops,
// and `pippy::tp_copy`, `pippy::tp_reduce` and `pippy::tp_embedding` are the
// tensor-parallel ops of `--pippy-tensor-parallel` (PippyOps.td), on the
// group pippy-run installs (setTensorParallelGroup).
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_EXTRAOPS_H
#define PIPPY_RUNTIME_EXTRAOPS_H

#include <ATen/core/function_schema.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <functional>
#include <vector>

namespace pippy::rt {

struct ExtraOperator {
  c10::FunctionSchema schema;
  torch::jit::Operation operation;
};

/// The operator `name` (`prims::var`, `aten::_unsafe_index.Tensor`) taking
/// `numOperands` arguments, if pippy has it.
const ExtraOperator *findExtraOperator(const c10::OperatorName &name,
                                       size_t numOperands);

/// The operator `--infer` runs in place of random op `random`
/// (`aten::bernoulli.p`): its expected value, of the same arguments; none
/// for a random op that has none here.
const ExtraOperator *findExpectation(const c10::OperatorName &random);

/// The schemas of every operator pippy has (for the lowering's table of
/// argument names).
std::vector<const c10::FunctionSchema *> extraOperatorSchemas();

/// Registers with TorchScript's operator table each `aten::` operator of
/// pippy's that this libtorch lacks (on 1.13: scaled_dot_product_attention,
/// rms_norm, ...), so that a `.pt` saved by PyTorch 2.x that calls one loads
/// and runs in pippy-import. One schema per name: the one with the most
/// arguments, which a call of fewer fills from its defaults. Registers
/// nothing a libtorch already has; later calls do nothing.
void registerMissingAtenOperators();

/// Sums a contiguous tensor in place over the tensor-parallel group.
using GroupSum = std::function<void(at::Tensor &)>;

/// Installs this rank's place in the tensor-parallel group (which slice of
/// an embedding's rows `pippy::tp_embedding` holds) and the sum
/// `pippy::tp_copy` (its backward) and `pippy::tp_reduce` (its forward) use:
/// pippy-run does for --tp (runtime/Replicas.cpp). Without it they throw,
/// naming --tp.
void setTensorParallelGroup(int rank, GroupSum sum);

} // namespace pippy::rt

#endif // PIPPY_RUNTIME_EXTRAOPS_H
