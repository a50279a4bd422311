//===- Prims.cpp - PyTorch's prims operators, on ATen ---------------------===//
//
// The schemas are PyTorch's (torch/_prims), with the operands Torch-MLIR
// gives its `torch.prims.*` ops; each body is the ATen computation PyTorch's
// own `impl_aten` runs for that prim.
//
//===----------------------------------------------------------------------===//

#include "Prims.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>

#include <map>
#include <string>

using torch::jit::Stack;

namespace {

/// Pops the operator's inputs (n of them) off the stack, in order.
std::vector<c10::IValue> take(Stack &stack, size_t n) {
  std::vector<c10::IValue> args(std::make_move_iterator(stack.end() - n),
                                std::make_move_iterator(stack.end()));
  stack.erase(stack.end() - n, stack.end());
  return args;
}

int64_t wrapDim(int64_t dim, int64_t rank) {
  return dim < 0 ? dim + rank : dim;
}

at::Tensor convertElementType(std::vector<c10::IValue> &a) {
  return a[0].toTensor().to(a[1].toScalarType());
}

at::Tensor collapse(std::vector<c10::IValue> &a) {
  // Dimensions start..end, end included, become one.
  const at::Tensor &t = a[0].toTensor();
  return t.flatten(wrapDim(a[1].toInt(), t.dim()),
                   wrapDim(a[2].toInt(), t.dim()));
}

at::Tensor splitDim(std::vector<c10::IValue> &a) {
  const at::Tensor &t = a[0].toTensor();
  int64_t dim = wrapDim(a[1].toInt(), t.dim()), outer = a[2].toInt();
  std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
  int64_t inner = sizes[dim] / outer;
  sizes[dim] = inner;
  sizes.insert(sizes.begin() + dim, outer);
  return t.reshape(sizes);
}

at::Tensor squeeze(std::vector<c10::IValue> &a) {
  at::Tensor t = a[0].toTensor();
  std::vector<int64_t> dims = a[1].toIntVector();
  for (int64_t &d : dims)
    d = wrapDim(d, t.dim());
  std::sort(dims.rbegin(), dims.rend());
  for (int64_t d : dims)
    t = t.squeeze(d);
  return t;
}

at::Tensor viewOf(std::vector<c10::IValue> &a) {
  return a[0].toTensor().alias();
}

at::Tensor broadcastInDim(std::vector<c10::IValue> &a) {
  // Size-1 dimensions are inserted where `broadcast_dimensions` names none of
  // the input's, then everything is expanded to `shape`.
  const at::Tensor &t = a[0].toTensor();
  std::vector<int64_t> shape = a[1].toIntVector();
  std::vector<int64_t> kept = a[2].toIntVector();
  std::vector<int64_t> sizes(shape.size(), 1);
  for (size_t i = 0; i < kept.size(); ++i)
    sizes[kept[i]] = t.size(static_cast<int64_t>(i));
  return t.reshape(sizes).expand(shape);
}

c10::optional<at::ScalarType> optionalDType(const c10::IValue &v) {
  if (v.isNone())
    return c10::nullopt;
  return v.toScalarType();
}

at::Tensor sum(std::vector<c10::IValue> &a) {
  const at::Tensor &t = a[0].toTensor();
  c10::optional<at::ScalarType> dtype = optionalDType(a[2]);
  if (a[1].isNone())
    return dtype ? t.sum(*dtype) : t.sum();
  return t.sum(a[1].toIntVector(), /*keepdim=*/false, dtype);
}

at::Tensor var(std::vector<c10::IValue> &a) {
  const at::Tensor &t = a[0].toTensor();
  c10::optional<int64_t> correction;
  if (!a[2].isNone())
    correction = static_cast<int64_t>(a[2].toScalar().toDouble());
  c10::optional<at::IntArrayRef> dims;
  std::vector<int64_t> dimList;
  if (!a[1].isNone()) {
    dimList = a[1].toIntVector();
    dims = dimList;
  }
  at::Tensor out = at::var(t, dims, correction, /*keepdim=*/false);
  if (c10::optional<at::ScalarType> dtype = optionalDType(a[3]))
    out = out.to(*dtype);
  return out;
}

at::Tensor iota(std::vector<c10::IValue> &a) {
  int64_t length = a[0].toInt(), start = a[1].toInt(), step = a[2].toInt();
  at::TensorOptions options =
      at::TensorOptions().dtype(a[3].toScalarType()).device(a[4].toDevice());
  return at::arange(start, start + length * step, step, options)
      .requires_grad_(a[5].toBool());
}

struct Entry {
  const char *schema;
  at::Tensor (*body)(std::vector<c10::IValue> &);
};

const Entry kEntries[] = {
    {"prims::convert_element_type(Tensor a, ScalarType dtype) -> Tensor",
     convertElementType},
    {"prims::collapse(Tensor a, int start, int end) -> Tensor", collapse},
    {"prims::collapse_view(Tensor(a) a, int start, int end) -> Tensor(a)",
     collapse},
    {"prims::split_dim(Tensor(a) a, int dim, int outer_length) -> Tensor(a)",
     splitDim},
    {"prims::squeeze(Tensor(a) a, int[] dimensions) -> Tensor(a)", squeeze},
    {"prims::view_of(Tensor(a) a) -> Tensor", viewOf},
    {"prims::broadcast_in_dim(Tensor(a) a, int[] shape, int[] "
     "broadcast_dimensions) -> Tensor(a)",
     broadcastInDim},
    {"prims::sum(Tensor inp, int[]? dims, *, ScalarType? output_dtype=None) "
     "-> Tensor",
     sum},
    {"prims::var(Tensor inp, int[]? dims, float? correction=1, *, "
     "ScalarType? output_dtype=None) -> Tensor",
     var},
    {"prims::sqrt(Tensor self) -> Tensor",
     [](std::vector<c10::IValue> &a) { return a[0].toTensor().sqrt(); }},
    {"prims::rsqrt(Tensor self) -> Tensor",
     [](std::vector<c10::IValue> &a) { return a[0].toTensor().rsqrt(); }},
    {"prims::iota(int length, *, int start, int step, ScalarType dtype, "
     "Device device, bool requires_grad) -> Tensor",
     iota},
};

std::map<std::string, pippy::rt::PrimsOperator> buildTable() {
  std::map<std::string, pippy::rt::PrimsOperator> table;
  for (const Entry &entry : kEntries) {
    c10::FunctionSchema schema = torch::jit::parseSchema(entry.schema);
    size_t arity = schema.arguments().size();
    auto body = entry.body;
    torch::jit::Operation operation([arity, body](Stack &stack) {
      std::vector<c10::IValue> args = take(stack, arity);
      stack.emplace_back(body(args));
    });
    std::string name = schema.name();
    table.emplace(name, pippy::rt::PrimsOperator{std::move(schema),
                                                 std::move(operation)});
  }
  return table;
}

} // namespace

const pippy::rt::PrimsOperator *
pippy::rt::findPrimsOperator(const c10::OperatorName &name) {
  static const std::map<std::string, PrimsOperator> table = buildTable();
  if (!name.overload_name.empty())
    return nullptr;
  auto it = table.find(name.name);
  return it == table.end() ? nullptr : &it->second;
}
