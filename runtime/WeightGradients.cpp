//===- WeightGradients.cpp - linear weight gradients added in place -------===//
//
// The fused linear of Program::fuseWeightGradients: `aten::linear` whose
// backward adds its weight and bias gradients to the parameters' `grad`
// itself (or queues them in a WeightGradientQueue), with the products and
// operand layouts autograd's own backward uses, so the gradients keep their
// bits.
//
//===----------------------------------------------------------------------===//

#include "WeightGradients.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace {

/// Whether `c.addmm_(g.t(), x)` gives the same bits as `c += g.t().mm(x)`
/// (what autograd does: the product into a new tensor, then the sum) for
/// contiguous g [rows, out] and x [rows, in]. That depends on the BLAS and
/// the shape: OpenBLAS adds a product into C at the end of each block of
/// `rows`, so it holds while `rows` fits in one block; a BLAS that adds
/// each term into C as it goes (the reference one), or that fuses the last
/// multiply with the add to C, rounds differently even for one row. Probed
/// once per shape and dtype (each dtype has its own kernels), on random
/// data from a private generator.
bool fusedAccumulationIsExact(int64_t rows, int64_t out, int64_t in,
                              at::ScalarType dtype) {
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, int64_t, at::ScalarType>, bool>
      known;
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_tuple(rows, out, in, dtype);
  if (auto it = known.find(key); it != known.end())
    return it->second;
  // Beyond a few thousand rows no BLAS keeps one block; for large weights
  // the probe uses a 1024 x 1024 corner (blocking depends on the rows, and
  // past small sizes not on the others), to bound its memory and time.
  bool exact = rows <= 4096;
  at::NoGradGuard noGrad;
  at::Generator gen = at::detail::createCPUGenerator(rows * 31 + out);
  if (out * in > (int64_t(1) << 22)) {
    out = std::min<int64_t>(out, 1024);
    in = std::min<int64_t>(in, 1024);
  }
  for (int trial = 0; trial < 2 && exact; ++trial) {
    at::Tensor c = at::randn({out, in}, gen).to(dtype);
    at::Tensor g = at::randn({rows, out}, gen).to(dtype);
    at::Tensor x =
        at::randn({rows, in}, gen).mul_(trial ? 1e3 : 1e-3).to(dtype);
    at::Tensor separate = c.clone();
    separate.add_(g.t().mm(x));
    exact = at::equal(c.addmm_(g.t(), x), separate);
  }
  known[key] = exact;
  return exact;
}

/// The gradient buffers of fused linears' weights between steps: a step
/// starts by taking every gradient away (releaseGradient), and the first
/// micro-batch writes its product into the old buffer (mm_out) instead of
/// a new one: no allocation, and no page faults when the allocator has
/// returned a large buffer to the system in between.
struct GradientBuffers {
  std::mutex mutex;
  std::unordered_set<const c10::TensorImpl *> fused;
  std::unordered_map<const c10::TensorImpl *, at::Tensor> spare;

  static GradientBuffers &get() {
    static GradientBuffers buffers;
    return buffers;
  }

  /// The buffer `weight`'s last gradient was in, if nothing else holds it.
  at::Tensor take(const at::Tensor &weight) {
    std::lock_guard<std::mutex> lock(mutex);
    fused.insert(weight.unsafeGetTensorImpl());
    auto it = spare.find(weight.unsafeGetTensorImpl());
    if (it == spare.end())
      return at::Tensor();
    at::Tensor buffer = std::move(it->second);
    spare.erase(it);
    if (buffer.use_count() != 1 || buffer.sizes() != weight.sizes() ||
        buffer.scalar_type() != weight.scalar_type() || !buffer.is_contiguous())
      return at::Tensor();
    return buffer;
  }
};

/// The queue of this thread's WeightGradientQueue::Scope, if one lives.
thread_local ::pippy::WeightGradientQueue *activeQueue = nullptr;

/// `aten::linear` whose backward adds the weight and bias gradients
/// straight to the parameters' `grad` and gives autograd none for them.
/// Autograd computes the weight gradient G^T X into a new tensor and then
/// adds it to `grad`: a zero-fill, a write and a sum over a weight-sized
/// buffer per micro-batch, where one `addmm_` with beta = 1 reads and
/// writes `grad` once. Every product is the one autograd's addmm/mm
/// backward computes, with the same operand layouts, so the gradients are
/// autograd's bit for bit; the fused sum is used only where the probe above
/// shows it gives the same bits as the separate one. Inside a
/// WeightGradientQueue::Scope the two additions wait in the queue.
struct FusedLinearFunction : ::torch::autograd::Function<FusedLinearFunction> {
  static at::Tensor forward(::torch::autograd::AutogradContext *ctx,
                            const at::Tensor &input, const at::Tensor &weight,
                            const c10::IValue &bias) {
    // The bias is not an autograd input (an undefined tensor cannot be
    // one); the weight, which needs a gradient, makes the output need one.
    ctx->save_for_backward({input});
    ctx->saved_data["weight"] = weight;
    ctx->saved_data["bias"] = bias;
    return at::linear(input, weight,
                      bias.isNone() ? at::Tensor() : bias.toTensor());
  }

  static ::torch::autograd::variable_list
  backward(::torch::autograd::AutogradContext *ctx,
           ::torch::autograd::variable_list grads) {
    at::Tensor grad = grads.at(0);
    if (!grad.defined())
      return {at::Tensor(), at::Tensor(), at::Tensor()};
    at::Tensor input = ctx->get_saved_variables().at(0);
    at::Tensor weight = ctx->saved_data["weight"].toTensor();
    const c10::IValue &biasValue = ctx->saved_data["bias"];
    at::Tensor bias = biasValue.isNone() ? at::Tensor() : biasValue.toTensor();
    int64_t in = weight.size(1), out = weight.size(0);
    // at::linear runs addmm on a 2-d view of the input when there is a
    // bias and the input is 2-d, or 3-d and contiguous; otherwise matmul
    // (an mm on the folded input) and, with a bias, add_.
    bool addmmPath =
        bias.defined() &&
        (input.dim() == 2 || (input.dim() == 3 && input.is_contiguous()));
    at::Tensor g = grad.reshape({-1, out});
    at::Tensor x = input.reshape({-1, in});
    at::Tensor inputGrad;
    if (ctx->needs_input_grad(0)) {
      // mm_mat1_backward, with mat2 = weight.t().
      bool columnMajor = x.stride(0) == 1 && x.stride(1) == x.size(0);
      inputGrad = columnMajor ? weight.t().mm(g.t()).t() : g.mm(weight);
      inputGrad = inputGrad.reshape(input.sizes());
    }
    auto addParameterGradients = [g, x, grad, weight, bias, addmmPath, out,
                                  in]() mutable {
      at::NoGradGuard noGrad;
      if (weight.requires_grad()) {
        if (!weight.grad().defined()) {
          at::Tensor buffer = GradientBuffers::get().take(weight);
          weight.mutable_grad() =
              buffer.defined() ? at::mm_out(buffer, g.t(), x) : g.t().mm(x);
        } else if (g.is_contiguous() && x.is_contiguous() &&
                   fusedAccumulationIsExact(x.size(0), out, in,
                                            weight.scalar_type()))
          weight.mutable_grad().addmm_(g.t(), x);
        else
          weight.mutable_grad().add_(g.t().mm(x));
      }
      if (bias.defined() && bias.requires_grad()) {
        // The engine's sum_to of the gradient that reaches the bias.
        at::Tensor b = at::sum_to(addmmPath ? g : grad, bias.sizes());
        if (bias.grad().defined())
          bias.mutable_grad().add_(b);
        else
          bias.mutable_grad() = b.clone(); // b may alias `grad`
      }
    };
    if (activeQueue)
      activeQueue->push(std::move(addParameterGradients));
    else
      addParameterGradients();
    return {inputGrad, at::Tensor(), at::Tensor()};
  }
};

} // namespace

at::Tensor pippy::rt::fusedLinear(const at::Tensor &input,
                                  const at::Tensor &weight,
                                  const c10::IValue &bias) {
  return FusedLinearFunction::apply(input, weight, bias);
}

void ::pippy::releaseGradient(at::Tensor &param) {
  if (!param.grad().defined())
    return;
  GradientBuffers &buffers = GradientBuffers::get();
  std::lock_guard<std::mutex> lock(buffers.mutex);
  const c10::TensorImpl *impl = param.unsafeGetTensorImpl();
  if (buffers.fused.count(impl))
    buffers.spare[impl] = param.grad();
  param.mutable_grad().reset();
}

::pippy::WeightGradientQueue::Scope::Scope(WeightGradientQueue &queue)
    : previous(activeQueue) {
  activeQueue = &queue;
}

::pippy::WeightGradientQueue::Scope::~Scope() { activeQueue = previous; }

void ::pippy::WeightGradientQueue::run() {
  std::vector<std::function<void()>> work = std::move(pending);
  pending.clear();
  for (std::function<void()> &w : work)
    w();
}
