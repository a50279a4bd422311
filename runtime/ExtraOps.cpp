//===- ExtraOps.cpp - operators libtorch 1.13 lacks, on ATen --------------===//
//
// The schemas are PyTorch's (torch/_prims, and native_functions.yaml of the
// releases that added the ATen operators), with the operands Torch-MLIR
// gives these ops; each body computes what PyTorch documents for it (for a
// prim, what its own `impl_aten` runs, except that `collapse` includes its
// end dimension, as in Torch-MLIR's text: torch 1.13's excluded it).
//
//===----------------------------------------------------------------------===//

#include "ExtraOps.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>
#include <torch/csrc/jit/runtime/custom_operator.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>

using torch::jit::Stack;

namespace {

/// An operator's inputs, in schema order, and its results.
using Args = std::vector<c10::IValue>;
using Results = std::vector<c10::IValue>;

/// Pops the operator's inputs (n of them) off the stack, in order.
Args take(Stack &stack, size_t n) {
  Args args(std::make_move_iterator(stack.end() - n),
            std::make_move_iterator(stack.end()));
  stack.erase(stack.end() - n, stack.end());
  return args;
}

int64_t wrapDim(int64_t dim, int64_t rank) {
  return dim < 0 ? dim + rank : dim;
}

Results convertElementType(Args &a) {
  return {a[0].toTensor().to(a[1].toScalarType())};
}

Results collapse(Args &a) {
  // Dimensions start..end, end included, become one.
  const at::Tensor &t = a[0].toTensor();
  return {t.flatten(wrapDim(a[1].toInt(), t.dim()),
                    wrapDim(a[2].toInt(), t.dim()))};
}

Results splitDim(Args &a) {
  const at::Tensor &t = a[0].toTensor();
  int64_t dim = wrapDim(a[1].toInt(), t.dim()), outer = a[2].toInt();
  std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
  int64_t inner = sizes[dim] / outer;
  sizes[dim] = inner;
  sizes.insert(sizes.begin() + dim, outer);
  return {t.reshape(sizes)};
}

Results squeeze(Args &a) {
  at::Tensor t = a[0].toTensor();
  std::vector<int64_t> dims = a[1].toIntVector();
  for (int64_t &d : dims)
    d = wrapDim(d, t.dim());
  std::sort(dims.rbegin(), dims.rend());
  for (int64_t d : dims)
    t = t.squeeze(d);
  return {t};
}

Results viewOf(Args &a) { return {a[0].toTensor().alias()}; }

Results broadcastInDim(Args &a) {
  // Size-1 dimensions are inserted where `broadcast_dimensions` names none of
  // the input's, then everything is expanded to `shape`.
  const at::Tensor &t = a[0].toTensor();
  std::vector<int64_t> shape = a[1].toIntVector();
  std::vector<int64_t> kept = a[2].toIntVector();
  std::vector<int64_t> sizes(shape.size(), 1);
  for (size_t i = 0; i < kept.size(); ++i)
    sizes[kept[i]] = t.size(static_cast<int64_t>(i));
  return {t.reshape(sizes).expand(shape)};
}

c10::optional<at::ScalarType> optionalDType(const c10::IValue &v) {
  if (v.isNone())
    return c10::nullopt;
  return v.toScalarType();
}

Results sum(Args &a) {
  const at::Tensor &t = a[0].toTensor();
  c10::optional<at::ScalarType> dtype = optionalDType(a[2]);
  if (a[1].isNone())
    return {dtype ? t.sum(*dtype) : t.sum()};
  return {t.sum(a[1].toIntVector(), /*keepdim=*/false, dtype)};
}

Results var(Args &a) {
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
  return {out};
}

Results iota(Args &a) {
  int64_t length = a[0].toInt(), start = a[1].toInt(), step = a[2].toInt();
  at::TensorOptions options =
      at::TensorOptions().dtype(a[3].toScalarType()).device(a[4].toDevice());
  return {at::arange(start, start + length * step, step, options)
              .requires_grad_(a[5].toBool())};
}

//===----------------------------------------------------------------------===//
// ATen operators added after 1.13
//===----------------------------------------------------------------------===//

/// PyTorch's reference for scaled_dot_product_attention: softmax(q k^T *
/// scale + bias) v, the bias -inf above the diagonal when causal and from
/// attn_mask (-inf where a boolean mask is false, else added). Dropout is
/// not run: a dropout_p above 0 is an error.
Results scaledDotProductAttention(Args &a) {
  at::Tensor q = a[0].toTensor(), k = a[1].toTensor(), v = a[2].toTensor();
  double dropout = a[4].toDouble();
  if (dropout != 0.0)
    throw std::runtime_error(
        "scaled_dot_product_attention with dropout_p > 0 is not run: its "
        "random numbers could not match PyTorch's");
  bool causal = a[5].toBool();
  double scale = a.size() > 6 && !a[6].isNone()
                     ? a[6].toDouble()
                     : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  bool gqa = a.size() > 7 && a[7].toBool();
  if (gqa && q.dim() >= 3 && k.size(-3) != q.size(-3)) {
    int64_t groups = q.size(-3) / k.size(-3);
    k = k.repeat_interleave(groups, -3);
    v = v.repeat_interleave(groups, -3);
  }
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * scale;
  int64_t l = q.size(-2), s = k.size(-2);
  double inf = std::numeric_limits<double>::infinity();
  if (causal) {
    at::Tensor keep = at::ones({l, s}, q.options().dtype(at::kBool)).tril();
    scores = scores.masked_fill(keep.logical_not(), -inf);
  }
  if (!a[3].isNone()) {
    at::Tensor mask = a[3].toTensor();
    scores = mask.scalar_type() == at::kBool
                 ? scores.masked_fill(mask.logical_not(), -inf)
                 : scores + mask;
  }
  return {at::matmul(at::softmax(scores, -1), v)};
}

Results batchNormNoTraining(Args &a) {
  auto optional = [](const c10::IValue &v) {
    return v.isNone() ? c10::optional<at::Tensor>() : v.toTensor();
  };
  auto [out, mean, invstd] = at::native_batch_norm(
      a[0].toTensor(), optional(a[1]), optional(a[2]), a[3].toTensor(),
      a[4].toTensor(), /*training=*/false, a[5].toDouble(), a[6].toDouble());
  return {out, mean, invstd};
}

Results rmsNorm(Args &a) {
  const at::Tensor &x = a[0].toTensor();
  int64_t n = static_cast<int64_t>(a[1].toIntVector().size());
  std::vector<int64_t> dims;
  for (int64_t d = x.dim() - n; d < x.dim(); ++d)
    dims.push_back(d);
  // torch.finfo(dtype).eps when eps is None.
  double eps = 0;
  if (!a[3].isNone())
    eps = a[3].toDouble();
  else if (x.scalar_type() == at::kDouble)
    eps = std::numeric_limits<double>::epsilon();
  else if (x.scalar_type() == at::kHalf)
    eps = 0.0009765625; // 2^-10
  else if (x.scalar_type() == at::kBFloat16)
    eps = 0.0078125; // 2^-7
  else
    eps = std::numeric_limits<float>::epsilon();
  at::Tensor out = x * at::rsqrt(x.pow(2).mean(dims, /*keepdim=*/true) + eps);
  if (!a[2].isNone())
    out = out * a[2].toTensor();
  return {out};
}

Results safeSoftmax(Args &a) {
  // softmax, with 0 instead of NaN for a slice that is -inf throughout.
  const at::Tensor &x = a[0].toTensor();
  int64_t dim = a[1].toInt();
  c10::optional<at::ScalarType> dtype;
  if (!a[2].isNone())
    dtype = a[2].toScalarType();
  at::Tensor out = at::softmax(x, dim, dtype);
  at::Tensor allMasked =
      x.eq(-std::numeric_limits<double>::infinity()).all(dim, true);
  return {out.masked_fill(allMasked, 0)};
}

Results unsafeIndex(Args &a) {
  c10::List<c10::optional<at::Tensor>> indices;
  for (const c10::IValue &v : a[1].toListRef())
    indices.push_back(v.isNone() ? c10::optional<at::Tensor>() : v.toTensor());
  return {at::index(a[0].toTensor(), indices)};
}

/// PyTorch 2's functional `normal_`, which 1.13 lacks (pippy-import turns a
/// traced `normal_` into it, as Torch-MLIR does).
Results normalFunctional(Args &a) {
  return {at::empty_like(a[0].toTensor())
              .normal_(a[1].toDouble(), a[2].toDouble())};
}

// What `--infer` runs in place of a random op: its expected value, which
// is what eval mode gives the masks and noise a model traced in train mode
// draws (stochastic depth's `bernoulli_(p)` divided by p keeps every row).

at::Tensor filledLike(Args &a, double value, size_t dtypeArg = 0) {
  const at::Tensor &self = a[0].toTensor();
  if (dtypeArg && !a[dtypeArg].isNone())
    return at::full_like(self, value,
                         self.options().dtype(a[dtypeArg].toScalarType()));
  return at::full_like(self, value);
}

Results expectedBernoulli(Args &a) {
  // bernoulli(self) draws 1 with probability self; bernoulli.p with p.
  return {a.size() == 3 ? filledLike(a, a[1].toDouble())
                        : a[0].toTensor().detach().clone()};
}

Results expectedUniform(Args &a) {
  return {filledLike(a, (a[1].toDouble() + a[2].toDouble()) / 2)};
}

Results expectedNormal(Args &a) { return {filledLike(a, a[1].toDouble())}; }
Results expectedRandLike(Args &a) { return {filledLike(a, 0.5, 1)}; }
Results expectedRandnLike(Args &a) { return {filledLike(a, 0.0, 1)}; }

pippy::rt::GroupSum &tensorParallelSum() {
  static pippy::rt::GroupSum sum;
  return sum;
}

int &tensorParallelRank() {
  static int rank = 0;
  return rank;
}

/// `t`'s sum over the tensor-parallel group, in a new tensor.
at::Tensor groupSum(const at::Tensor &t) {
  if (!tensorParallelSum())
    throw std::runtime_error(
        "the program is sharded for tensor parallelism "
        "(pippy.tp_copy, pippy.tp_reduce): run it with pippy-run --tp");
  at::Tensor sum = t.detach().clone(at::MemoryFormat::Contiguous);
  tensorParallelSum()(sum);
  return sum;
}

/// Megatron-LM's `g`: the partial results summed forward, the gradient
/// passed through backward.
struct TpReduce : torch::autograd::Function<TpReduce> {
  static at::Tensor forward(torch::autograd::AutogradContext *,
                            const at::Tensor &partial) {
    return groupSum(partial);
  }
  static torch::autograd::variable_list
  backward(torch::autograd::AutogradContext *,
           torch::autograd::variable_list grads) {
    return {grads[0]};
  }
};

Results tpReduce(Args &a) { return {TpReduce::apply(a[0].toTensor())}; }

/// This rank's rows of a vocabulary-parallel table: the indices in its
/// range look up their rows, the others give zeros (whose gradient reaches
/// no row).
Results tpEmbedding(Args &a) {
  if (!tensorParallelSum())
    groupSum(at::Tensor()); // throws, naming --tp
  const at::Tensor &weight = a[0].toTensor();
  int64_t rows = weight.size(0), first = tensorParallelRank() * rows;
  at::Tensor local = a[1].toTensor() - first;
  at::Tensor outside = local.lt(0).logical_or(local.ge(rows));
  at::Tensor found = at::embedding(weight, local.masked_fill(outside, 0));
  return {found.masked_fill(outside.unsqueeze(-1), 0)};
}

/// Megatron-LM's `f`: identity forward; backward, the gradient summed
/// (each rank holds only its columns' part of it).
Results tpCopy(Args &a) {
  at::Tensor x = a[0].toTensor();
  if (!x.requires_grad() || !at::GradMode::is_enabled())
    return {x};
  at::Tensor y = x.view_as(x);
  y.register_hook([](const at::Tensor &grad) { return groupSum(grad); });
  return {y};
}

struct Entry {
  const char *schema;
  Results (*body)(Args &);
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
     [](Args &a) -> Results { return {a[0].toTensor().sqrt()}; }},
    {"prims::rsqrt(Tensor self) -> Tensor",
     [](Args &a) -> Results { return {a[0].toTensor().rsqrt()}; }},
    {"prims::iota(int length, *, int start, int step, ScalarType dtype, "
     "Device device, bool requires_grad) -> Tensor",
     iota},
    {"aten::scaled_dot_product_attention(Tensor query, Tensor key, Tensor "
     "value, Tensor? attn_mask=None, float dropout_p=0.0, bool "
     "is_causal=False, *, float? scale=None) -> Tensor",
     scaledDotProductAttention},
    {"aten::scaled_dot_product_attention(Tensor query, Tensor key, Tensor "
     "value, Tensor? attn_mask=None, float dropout_p=0.0, bool "
     "is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor",
     scaledDotProductAttention},
    {"aten::_native_batch_norm_legit_no_training(Tensor input, Tensor? "
     "weight, Tensor? bias, Tensor running_mean, Tensor running_var, float "
     "momentum, float eps) -> (Tensor, Tensor, Tensor)",
     batchNormNoTraining},
    {"aten::rms_norm(Tensor input, int[] normalized_shape, Tensor? "
     "weight=None, float? eps=None) -> Tensor",
     rmsNorm},
    {"aten::_safe_softmax(Tensor self, int dim, ScalarType? dtype=None) -> "
     "Tensor",
     safeSoftmax},
    {"aten::_unsafe_index.Tensor(Tensor self, Tensor?[] indices) -> Tensor",
     unsafeIndex},
    {"aten::normal_functional(Tensor self, float mean=0., float std=1., *, "
     "Generator? generator=None) -> Tensor",
     normalFunctional},
    {"pippy::expected_bernoulli(Tensor self, *, Generator? generator=None) "
     "-> Tensor",
     expectedBernoulli},
    {"pippy::expected_bernoulli.p(Tensor self, float p, *, Generator? "
     "generator=None) -> Tensor",
     expectedBernoulli},
    {"pippy::expected_uniform(Tensor self, float from=0., float to=1., *, "
     "Generator? generator=None) -> Tensor",
     expectedUniform},
    {"pippy::expected_normal_functional(Tensor self, float mean=0., float "
     "std=1., *, Generator? generator=None) -> Tensor",
     expectedNormal},
    {"pippy::tp_copy(Tensor self) -> Tensor", tpCopy},
    {"pippy::tp_reduce(Tensor self) -> Tensor", tpReduce},
    {"pippy::tp_embedding(Tensor weight, Tensor indices) -> Tensor",
     tpEmbedding},
    {"pippy::expected_rand_like(Tensor self, *, ScalarType? dtype=None, "
     "Layout? layout=None, Device? device=None, bool? pin_memory=None, "
     "MemoryFormat? memory_format=None) -> Tensor",
     expectedRandLike},
    {"pippy::expected_randn_like(Tensor self, *, ScalarType? dtype=None, "
     "Layout? layout=None, Device? device=None, bool? pin_memory=None, "
     "MemoryFormat? memory_format=None) -> Tensor",
     expectedRandnLike},
};

using Key =
    std::tuple<std::string, std::string, size_t>; // name, overload, arity

std::map<Key, pippy::rt::ExtraOperator> buildTable() {
  std::map<Key, pippy::rt::ExtraOperator> table;
  for (const Entry &entry : kEntries) {
    c10::FunctionSchema schema = torch::jit::parseSchema(entry.schema);
    size_t arity = schema.arguments().size();
    auto body = entry.body;
    torch::jit::Operation operation([arity, body](Stack &stack) {
      Args args = take(stack, arity);
      for (c10::IValue &result : body(args))
        stack.push_back(std::move(result));
    });
    Key key{schema.name(), schema.overload_name(), arity};
    table.emplace(std::move(key), pippy::rt::ExtraOperator{
                                      std::move(schema), std::move(operation)});
  }
  return table;
}

const std::map<Key, pippy::rt::ExtraOperator> &table() {
  static const std::map<Key, pippy::rt::ExtraOperator> table = buildTable();
  return table;
}

} // namespace

const pippy::rt::ExtraOperator *
pippy::rt::findExtraOperator(const c10::OperatorName &name,
                             size_t numOperands) {
  auto it = table().find(Key{name.name, name.overload_name, numOperands});
  return it == table().end() ? nullptr : &it->second;
}

const pippy::rt::ExtraOperator *
pippy::rt::findExpectation(const c10::OperatorName &random) {
  if (random.name.rfind("aten::", 0) != 0)
    return nullptr;
  std::string name = "pippy::expected_" + random.name.substr(6);
  auto it = table().lower_bound(Key{name, random.overload_name, 0});
  if (it == table().end() || std::get<0>(it->first) != name ||
      std::get<1>(it->first) != random.overload_name)
    return nullptr;
  return &it->second;
}

std::vector<const c10::FunctionSchema *> pippy::rt::extraOperatorSchemas() {
  std::vector<const c10::FunctionSchema *> schemas;
  for (const auto &[key, op] : table())
    schemas.push_back(&op.schema);
  return schemas;
}

void pippy::rt::registerMissingAtenOperators() {
  static const bool registered = [] {
    std::vector<c10::optional<torch::jit::Operator>> missing;
    std::set<std::pair<std::string, std::string>> named;
    // Descending: each name and overload comes first with its most arguments.
    for (auto it = table().rbegin(); it != table().rend(); ++it) {
      const c10::FunctionSchema &schema = it->second.schema;
      if (schema.name().rfind("aten::", 0) != 0 ||
          !named.insert({schema.name(), schema.overload_name()}).second ||
          !torch::jit::getAllOperatorsFor(
               c10::Symbol::fromQualString(schema.name()))
               .empty())
        continue;
      missing.emplace_back(torch::jit::Operator(
          schema.name(), schema.overload_name(), schema.arguments(),
          schema.returns(), it->second.operation,
          c10::AliasAnalysisKind::FROM_SCHEMA));
    }
    static torch::jit::RegisterOperators registration(std::move(missing));
    return true;
  }();
  (void)registered;
}

void pippy::rt::setTensorParallelGroup(int rank, GroupSum sum) {
  tensorParallelRank() = rank;
  tensorParallelSum() = std::move(sum);
}
