//===- MixedPrecision.h - --dtype bf16 --------------------------*- C++ -*-===//
//
// Internal to runtime/: bfloat16 mixed precision as torch.autocast gives it
// (docs/MixedPrecision.md). Forwards run under libtorch's own autocast, so
// each op takes the dtype PyTorch's policy gives it (matrix products and
// convolutions in bf16, losses and reductions in f32, the rest in the
// dtype of their inputs); parameters stay f32, so their gradients and the
// optimizer state are f32 too.
//
// An activation's dtype is then known only once the producer has run, and
// receives are posted before that. A floating transfer therefore crosses
// in the pipeline's declared dtype (f32; widening bf16 is exact) with one
// more element holding the dtype the producer had, and the consumer takes
// it in that dtype, as a single process would have it. Gradients go back
// in the declared dtype too and are narrowed to their result's dtype.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_MIXEDPRECISION_H
#define PIPPY_RUNTIME_MIXEDPRECISION_H

#include "pippy/Runtime/Options.h"
#include "pippy/Runtime/Program.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace pippy::rt {

/// Autocast on for this thread while it lives, with `precision`'s dtype
/// (nothing under f32). The outermost scope's end drops autocast's cache of
/// cast weights: the optimizer changes the weights before the next forward.
class AutocastScope {
public:
  explicit AutocastScope(Precision precision,
                         c10::DeviceType device = c10::DeviceType::CPU);
  ~AutocastScope();
  AutocastScope(const AutocastScope &) = delete;
  AutocastScope &operator=(const AutocastScope &) = delete;

private:
  bool active = false;
  c10::DeviceType device;
  bool wasEnabled = false;
  c10::ScalarType oldDtype = c10::ScalarType::Undefined;
};

/// The lower-precision dtype `precision` computes in (f32: none, Undefined).
c10::ScalarType lowerDtype(Precision precision);

/// Whether a transfer of `spec` carries its producer's dtype: floating
/// transfers under mixed precision.
bool carriesDtype(Precision precision, const TensorSpec &spec);

/// What a transfer that carries its dtype receives into: the declared
/// dtype, one element more than `spec` holds, on `device`.
at::Tensor wireBuffer(const TensorSpec &spec, const at::Device &device);

/// `t` (of `spec`'s shape, any floating dtype) as such a transfer sends it.
at::Tensor toWire(const at::Tensor &t, const TensorSpec &spec);

/// The tensor a wire buffer holds, in its producer's dtype. Throws
/// RuntimeError when the dtype element names no floating dtype.
at::Tensor fromWire(const at::Tensor &buffer, const TensorSpec &spec);

/// What a stage's program takes for `received`, a leaf that collects its
/// gradient: the leaf itself, or under mixed precision a view of it.
/// Autocast caches its casts of leaves that need gradients, so that uses
/// share one cast and their gradients are summed in bf16; a single process
/// has an activation there, each use with its own cast.
at::Tensor asActivation(Precision precision, const at::Tensor &received);

/// Calls `aten::_convolution` (`traced`; its 13 arguments on `stack`) as
/// the op a module called (`conv2d`, `conv_transpose1d`, ...; tracing
/// records them all as `_convolution`), so that autocast applies its policy
/// for that op; other ranks of weight run `traced` itself.
void callAsTracedConvolution(const c10::OperatorHandle &traced,
                             torch::jit::Stack &stack);

} // namespace pippy::rt

#endif // PIPPY_RUNTIME_MIXEDPRECISION_H
