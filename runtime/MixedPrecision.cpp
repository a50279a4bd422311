//===- MixedPrecision.cpp - --dtype bf16 ----------------------------------===//

#include "MixedPrecision.h"

#include "TorchCompat.h"

#include <ATen/autocast_mode.h>
#include <c10/util/accumulate.h>

#include <map>
#include <mutex>

namespace pippy::rt {

c10::ScalarType lowerDtype(Precision precision) {
  return precision == Precision::BF16 ? at::kBFloat16
                                      : at::ScalarType::Undefined;
}

AutocastScope::AutocastScope(Precision precision, c10::DeviceType device)
    : active(precision != Precision::F32), device(device) {
  if (!active)
    return;
  wasEnabled = compat::autocastEnabled(device);
  oldDtype = compat::autocastDtype(device);
  compat::setAutocast(device, true, lowerDtype(precision));
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active)
    return;
  if (at::autocast::decrement_nesting() == 0)
    at::autocast::clear_cache();
  compat::setAutocast(device, wasEnabled, oldDtype);
}

bool carriesDtype(Precision precision, const TensorSpec &spec) {
  return precision != Precision::F32 && at::isFloatingType(spec.dtype);
}

static int64_t elements(const TensorSpec &spec) {
  return c10::multiply_integers(spec.sizes);
}

at::Tensor wireBuffer(const TensorSpec &spec, const at::Device &device) {
  return at::empty({elements(spec) + 1},
                   at::TensorOptions().dtype(spec.dtype).device(device));
}

at::Tensor toWire(const at::Tensor &t, const TensorSpec &spec) {
  at::Tensor wire = wireBuffer(spec, t.device());
  int64_t n = elements(spec);
  wire.narrow(0, 0, n).copy_(t.reshape({n}));
  wire[n].fill_(static_cast<double>(t.scalar_type()));
  return wire;
}

at::Tensor fromWire(const at::Tensor &buffer, const TensorSpec &spec) {
  int64_t n = elements(spec);
  double code = buffer[n].item<double>();
  static const c10::ScalarType floating[] = {at::kFloat, at::kDouble, at::kHalf,
                                             at::kBFloat16};
  for (c10::ScalarType dtype : floating)
    if (code == static_cast<double>(dtype))
      return buffer.narrow(0, 0, n).view(spec.sizes).to(dtype);
  throw RuntimeError("a transfer of " + std::to_string(n) +
                     " values names dtype code " + std::to_string(code) +
                     ", which is no floating dtype");
}

at::Tensor asActivation(Precision precision, const at::Tensor &received) {
  if (precision == Precision::F32 || !received.requires_grad())
    return received;
  return received.view(received.sizes());
}

void callAsTracedConvolution(const c10::OperatorHandle &traced,
                             torch::jit::Stack &stack) {
  // _convolution(input, weight, bias, stride, padding, dilation, transposed,
  //              output_padding, groups, benchmark, deterministic,
  //              cudnn_enabled, allow_tf32)
  int64_t dims = stack.at(1).toTensor().dim() - 2;
  if (stack.size() != 13 || dims < 1 || dims > 3) {
    traced.callBoxed(stack);
    return;
  }
  bool transposed = stack[6].toBool();
  std::string name =
      std::string(transposed ? "aten::conv_transpose" : "aten::conv") +
      std::to_string(dims) + "d";
  static std::mutex mutex;
  static std::map<std::string, c10::OperatorHandle> handles;
  c10::OperatorHandle handle = [&] {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = handles.find(name);
    if (it == handles.end())
      it = handles
               .emplace(name, c10::Dispatcher::singleton().findSchemaOrThrow(
                                  name.c_str(), transposed ? "input" : ""))
               .first;
    return it->second;
  }();
  torch::jit::Stack args = {stack[0], stack[1], stack[2], stack[3], stack[4]};
  if (transposed) // ..., output_padding, groups, dilation
    args.insert(args.end(), {stack[7], stack[8], stack[5]});
  else // ..., dilation, groups
    args.insert(args.end(), {stack[5], stack[8]});
  handle.callBoxed(args);
  stack = std::move(args);
}

} // namespace pippy::rt
