//===- WeightGradients.h - linear weight gradients added in place -*- C++
//-*-===//
//
// Internal to runtime/: the fused linear Program runs for the linears of
// Program::fuseWeightGradients (WeightGradients.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_WEIGHTGRADIENTS_H
#define PIPPY_RUNTIME_WEIGHTGRADIENTS_H

#include "pippy/Runtime/Program.h"

namespace pippy::rt {

/// `aten::linear(input, weight, bias)` whose backward adds the weight's and
/// the bias's gradients to their `grad` (in place, or queued in the active
/// WeightGradientQueue::Scope) and gives autograd none for them.
at::Tensor fusedLinear(const at::Tensor &input, const at::Tensor &weight,
                       const c10::IValue &bias);

} // namespace pippy::rt

#endif // PIPPY_RUNTIME_WEIGHTGRADIENTS_H
