//===- CostModel.cpp - analytic per-op costs ------------------------------===//

#include "pippy/Analysis/CostModel.h"

#include "pippy/Dialect/Torch/TorchDialect.h"

#include "llvm/ADT/StringSwitch.h"

#include <algorithm>

using namespace mlir;

namespace {

std::optional<int64_t> numel(Type type) {
  auto tensor = dyn_cast<torch::BaseTensorType>(type);
  if (!tensor)
    return std::nullopt;
  return tensor.getNumElements();
}

int64_t numelOr0(Value v) { return numel(v.getType()).value_or(0); }

int64_t lastDim(Value v) {
  auto tensor = dyn_cast<torch::BaseTensorType>(v.getType());
  if (!tensor || !tensor.hasSizes() || tensor.getSizes().empty())
    return 1;
  return std::max<int64_t>(tensor.getSizes().back(), 1);
}

int64_t dim(Value v, int64_t d) {
  auto tensor = dyn_cast<torch::BaseTensorType>(v.getType());
  if (!tensor || !tensor.hasSizes() || tensor.getSizes().empty())
    return 1;
  ArrayRef<int64_t> sizes = tensor.getSizes();
  if (d < 0)
    d += sizes.size();
  if (d < 0 || d >= (int64_t)sizes.size() || sizes[d] < 0)
    return 1;
  return std::max<int64_t>(sizes[d], 1);
}

enum class Kind {
  MatMul,
  Linear,
  Conv,
  Attention,
  Norm,
  Softmax,
  Embedding,
  Other
};

Kind classify(StringRef name) {
  // torch.aten.<name>[.<overload>]
  name.consume_front("torch.aten.");
  name = name.split('.').first;
  return llvm::StringSwitch<Kind>(name)
      .Cases({"mm", "matmul", "bmm", "addmm", "baddbmm"}, Kind::MatMul)
      .Case("linear", Kind::Linear)
      .Cases({"convolution", "_convolution", "conv1d", "conv2d", "conv3d",
              "conv_transpose1d", "conv_transpose2d"},
             Kind::Conv)
      .Case("scaled_dot_product_attention", Kind::Attention)
      .Cases({"layer_norm", "native_layer_norm", "group_norm",
              "native_group_norm", "batch_norm", "instance_norm"},
             Kind::Norm)
      .Cases({"softmax", "_softmax", "log_softmax", "_log_softmax"},
             Kind::Softmax)
      .Case("embedding", Kind::Embedding)
      .Default(Kind::Other);
}

} // namespace

int64_t pippy::getTensorBytes(Type type) {
  auto tensor = dyn_cast<torch::BaseTensorType>(type);
  if (!tensor)
    return 0;
  std::optional<ArrayRef<int64_t>> sizes = tensor.getOptionalSizes();
  Type dtype = tensor.getOptionalDtype();
  if (!sizes || !dtype)
    return 0;
  int64_t elements = 1;
  for (int64_t size : *sizes) {
    if (size == torch::kUnknownSize)
      return 0;
    elements *= size;
  }
  // f32 first: the common case needs no lookup of the float type interface.
  int64_t width = 8;
  if (isa<Float32Type>(dtype))
    width = 32;
  else if (auto complex = dyn_cast<ComplexType>(dtype))
    width = 2 * complex.getElementType().getIntOrFloatBitWidth();
  else if (dtype.isIntOrFloat())
    width = dtype.getIntOrFloatBitWidth();
  return elements * std::max<int64_t>(width / 8, 1);
}

pippy::OpCost pippy::estimateOpCost(Operation *op) {
  OpCost cost;
  int64_t largest = 0;
  for (Value v : op->getOperands()) {
    cost.bytes += getTensorBytes(v.getType());
    largest = std::max(largest, numelOr0(v));
  }
  for (Value v : op->getResults()) {
    cost.bytes += getTensorBytes(v.getType());
    largest = std::max(largest, numelOr0(v));
  }
  int64_t out = op->getNumResults() ? numelOr0(op->getResult(0)) : 0;
  Value in = op->getNumOperands() ? op->getOperand(0) : Value();
  switch (classify(op->getName().getStringRef())) {
  case Kind::MatMul: {
    // addmm/baddbmm contract their second and third operands.
    Value lhs = op->getNumOperands() >= 3 &&
                        op->getName().getStringRef().contains("addmm")
                    ? op->getOperand(1)
                    : in;
    cost.flops = 2 * out * (lhs ? lastDim(lhs) : 1);
    break;
  }
  case Kind::Linear:
    cost.flops = 2 * out * (in ? lastDim(in) : 1);
    break;
  case Kind::Conv: {
    Value weight = op->getNumOperands() > 1 ? op->getOperand(1) : Value();
    int64_t perOutput =
        weight ? numelOr0(weight) / std::max<int64_t>(dim(weight, 0), 1) : 1;
    cost.flops = 2 * out * perOutput;
    break;
  }
  case Kind::Attention: {
    Value key = op->getNumOperands() > 1 ? op->getOperand(1) : Value();
    cost.flops = 4 * (in ? numelOr0(in) : 0) * (key ? dim(key, -2) : 1);
    break;
  }
  case Kind::Norm:
    cost.flops = 8 * (in ? numelOr0(in) : largest);
    break;
  case Kind::Softmax:
    cost.flops = 5 * (in ? numelOr0(in) : largest);
    break;
  case Kind::Embedding:
    cost.flops = out;
    break;
  case Kind::Other:
    cost.flops = largest;
    break;
  }
  return cost;
}
