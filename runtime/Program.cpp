//===- Program.cpp - compiled stage programs ------------------------------===//
//
// Compiles a graph-IR function into a flat instruction list over value
// slots, resolving every op once, and runs it.
//
//===----------------------------------------------------------------------===//

#include "pippy/Runtime/Program.h"

#include "ExtraOps.h"

#include "pippy/Analysis/GraphIR.h"
#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Dialect/Torch/TorchDialect.h"
#include "pippy/Support/OpNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/Support/raw_ostream.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

using namespace mlir;
namespace td = ::mlir::torch;
namespace pd = ::mlir::pippy;
using ::pippy::Program;
using ::pippy::RuntimeError;
using ::pippy::TensorSpec;

namespace {

/// `file:line:col`, `module 'h.0.attn'`, or both.
void printLocation(Location loc, llvm::raw_ostream &os) {
  if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    os << file.getFilename().getValue() << ":" << file.getLine() << ":"
       << file.getColumn();
    return;
  }
  if (auto name = dyn_cast<NameLoc>(loc)) {
    os << "module '" << name.getName().getValue() << "'";
    if (!isa<UnknownLoc>(name.getChildLoc())) {
      os << " (";
      printLocation(name.getChildLoc(), os);
      os << ")";
    }
    return;
  }
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    llvm::interleave(
        fused.getLocations(), os, [&](Location l) { printLocation(l, os); },
        ", ");
    return;
  }
  os << loc;
}

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

std::string describe(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "'" << op->getName() << "' at ";
  printLocation(op->getLoc(), os);
  return text;
}

TensorSpec specOf(Type type, Operation *where) {
  std::optional<TensorSpec> spec = ::pippy::getTensorSpec(type);
  if (!spec)
    throw RuntimeError(describe(where) +
                       ": expected a tensor with static sizes and a dtype");
  return *spec;
}

/// The element type a list value must carry for the dispatcher to unbox it.
c10::TypePtr listElementType(Type elementType) {
  if (isa<td::BaseTensorType>(elementType))
    return c10::TensorType::get();
  if (auto optional = dyn_cast<td::OptionalType>(elementType))
    return c10::OptionalType::create(
        listElementType(optional.getContainedType()));
  if (isa<td::IntType>(elementType))
    return c10::IntType::get();
  if (isa<td::FloatType>(elementType))
    return c10::FloatType::get();
  if (isa<td::BoolType>(elementType))
    return c10::BoolType::get();
  if (isa<td::NumberType>(elementType))
    return c10::NumberType::get();
  return c10::AnyType::get();
}

at::Tensor literalTensor(td::ValueTensorLiteralOp op) {
  auto value = cast<ElementsAttr>(op.getValue());
  auto shaped = cast<ShapedType>(value.getType());
  std::vector<int64_t> sizes(shaped.getShape().begin(),
                             shaped.getShape().end());
  at::ScalarType dtype = ::pippy::toScalarType(shaped.getElementType());
  at::Tensor tensor = at::empty(sizes, at::TensorOptions().dtype(dtype));
  size_t bytes = tensor.numel() * tensor.element_size();
  if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
    if (dtype == at::kBool) {
      auto *out = tensor.data_ptr<bool>();
      int64_t i = 0;
      for (bool b : dense.getValues<bool>())
        out[i++] = b;
      return tensor;
    }
    ArrayRef<char> raw = dense.getRawData();
    if (dense.isSplat()) {
      size_t width = tensor.element_size();
      for (size_t offset = 0; offset < bytes; offset += width)
        std::memcpy(static_cast<char *>(tensor.data_ptr()) + offset, raw.data(),
                    width);
    } else {
      std::memcpy(tensor.data_ptr(), raw.data(), bytes);
    }
    return tensor;
  }
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    const AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob || blob->getData().size() != bytes)
      throw RuntimeError(describe(op) + ": dense_resource<" +
                         resource.getRawHandle().getKey().str() +
                         "> has no data of the right size");
    std::memcpy(tensor.data_ptr(), blob->getData().data(), bytes);
    return tensor;
  }
  throw RuntimeError(describe(op) + ": unsupported literal");
}

/// Whether a value of MLIR type `type` may be passed where the schema
/// expects `expected`.
bool isCompatible(Type type, const c10::TypePtr &expected) {
  c10::TypePtr target = expected;
  if (auto optional = target->cast<c10::OptionalType>()) {
    if (isa<td::NoneType>(type))
      return true;
    target = optional->getElementType();
  }
  bool wantsTensor = target->kind() == c10::TypeKind::TensorType;
  bool isTensor = isa<td::BaseTensorType>(type);
  if (wantsTensor != isTensor)
    return false;
  if (target->kind() == c10::TypeKind::ListType)
    return isa<td::ListType>(type);
  return true;
}

} // namespace

namespace pippy {
at::ScalarType toScalarType(Type dtype) {
  if (dtype.isF32())
    return at::kFloat;
  if (dtype.isF64())
    return at::kDouble;
  if (dtype.isF16())
    return at::kHalf;
  if (dtype.isBF16())
    return at::kBFloat16;
  if (dtype.isSignedInteger(64))
    return at::kLong;
  if (dtype.isSignedInteger(32))
    return at::kInt;
  if (dtype.isSignedInteger(16))
    return at::kShort;
  if (dtype.isSignedInteger(8))
    return at::kChar;
  if (dtype.isUnsignedInteger(8))
    return at::kByte;
  if (dtype.isSignlessInteger(1))
    return at::kBool;
  if (auto complex = dyn_cast<ComplexType>(dtype)) {
    Type part = complex.getElementType();
    if (part.isF32())
      return at::kComplexFloat;
    if (part.isF64())
      return at::kComplexDouble;
    if (part.isF16())
      return at::kComplexHalf;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << dtype;
  throw RuntimeError("unsupported dtype " + text);
}

std::optional<TensorSpec> getTensorSpec(Type type) {
  auto tensor = dyn_cast<td::ValueTensorType>(type);
  if (!tensor || !tensor.hasStaticShape() || !tensor.hasDtype())
    return std::nullopt;
  TensorSpec spec;
  spec.sizes.assign(tensor.getSizes().begin(), tensor.getSizes().end());
  spec.dtype = toScalarType(tensor.getDtype());
  return spec;
}
} // namespace pippy

Program Program::compile(func::FuncOp func) {
  if (func.isExternal())
    throw RuntimeError("function '" + func.getSymName().str() +
                       "' has no body");
  return compile(func.getBody().front(),
                 "function '" + func.getSymName().str() + "'");
}

Program Program::compile(Block &body, const std::string &name) {
  Program program;
  Operation *owner = body.getParentOp();
  llvm::DenseMap<Value, int> slotOf;
  auto newSlot = [&](Value value) {
    int slot = program.numSlots++;
    slotOf[value] = slot;
    program.constantSlots.emplace_back();
    program.isConstant.push_back(false);
    return slot;
  };
  auto slot = [&](Value value, Operation *user) {
    auto it = slotOf.find(value);
    if (it == slotOf.end())
      throw RuntimeError(describe(user) + ": uses a value defined outside "
                                          "the function");
    return it->second;
  };
  auto setConstant = [&](Value value, c10::IValue constant) {
    int s = newSlot(value);
    program.constantSlots[s] = std::move(constant);
    program.isConstant[s] = true;
  };
  // A constant no IR value names: an operand the runtime passes otherwise.
  auto addConstant = [&](c10::IValue constant) {
    program.constantSlots.push_back(std::move(constant));
    program.isConstant.push_back(true);
    return program.numSlots++;
  };

  for (BlockArgument arg : body.getArguments()) {
    program.argSlots.push_back(newSlot(arg));
    program.argSpecs.push_back(specOf(arg.getType(), owner));
  }

  std::map<std::string, int> paramSlotByName;
  for (Operation &operation : body) {
    Operation *op = &operation;
    // A graph IR run as it is: its split points mark nothing to compute.
    if (isa<pd::SplitPointOp>(op))
      continue;
    int countedOp = -1;
    if (!op->hasTrait<OpTrait::IsTerminator>() && !::pippy::isReplicable(op)) {
      countedOp = static_cast<int>(program.countedOpNames.size());
      program.countedOpNames.push_back(op->getName().getStringRef().str());
    }
    if (isa<func::ReturnOp, pd::YieldOp>(op)) {
      for (Value v : op->getOperands())
        program.resultSlots.push_back(slot(v, op));
      break;
    }
    if (auto param = dyn_cast<pd::ParamOp>(op)) {
      std::string name = param.getName().str();
      auto it = paramSlotByName.find(name);
      if (it != paramSlotByName.end()) {
        slotOf[param.getResult()] = it->second;
        continue;
      }
      int s = newSlot(param.getResult());
      paramSlotByName[name] = s;
      program.paramSlots.emplace_back(s, name);
      program.paramSpecs.emplace_back(name, specOf(param.getType(), op));
      continue;
    }
    if (auto c = dyn_cast<td::ConstantIntOp>(op)) {
      setConstant(c.getResult(), c10::IValue(c.getValueAttr().getInt()));
      continue;
    }
    if (auto c = dyn_cast<td::ConstantFloatOp>(op)) {
      setConstant(c.getResult(), c10::IValue(c.getValue().convertToDouble()));
      continue;
    }
    if (auto c = dyn_cast<td::ConstantBoolOp>(op)) {
      setConstant(c.getResult(), c10::IValue(c.getValue()));
      continue;
    }
    if (auto c = dyn_cast<td::ConstantNoneOp>(op)) {
      setConstant(c.getResult(), c10::IValue());
      continue;
    }
    if (auto c = dyn_cast<td::ConstantStrOp>(op)) {
      setConstant(c.getResult(), c10::IValue(c.getValue().str()));
      continue;
    }
    if (auto c = dyn_cast<td::ConstantDeviceOp>(op)) {
      setConstant(c.getResult(), c10::IValue(c10::Device(c.getValue().str())));
      continue;
    }
    if (auto c = dyn_cast<td::ValueTensorLiteralOp>(op)) {
      at::Tensor literal = literalTensor(c);
      if (op->hasAttr(::pippy::kWrappedNumberAttr))
        literal.unsafeGetTensorImpl()->set_wrapped_number(true);
      setConstant(c.getResult(), c10::IValue(literal));
      continue;
    }
    if (isa<td::DerefineOp, td::TensorStaticInfoCastOp>(op)) {
      slotOf[op->getResult(0)] = slot(op->getOperand(0), op);
      continue;
    }

    Instruction inst;
    inst.countedOp = countedOp;
    for (Value operand : op->getOperands())
      inst.inputs.push_back(slot(operand, op));

    if (auto list = dyn_cast<td::PrimListConstructOp>(op)) {
      inst.kind = Kind::BuildList;
      inst.listElement = listElementType(list.getType().getContainedType());
      bool allConstant = llvm::all_of(
          inst.inputs, [&](int s) { return program.isConstant[s]; });
      if (allConstant) {
        c10::impl::GenericList value(inst.listElement);
        for (int s : inst.inputs)
          value.push_back(program.constantSlots[s]);
        setConstant(list.getResult(), c10::IValue(std::move(value)));
        continue;
      }
    } else if (isa<td::PrimTupleConstructOp>(op)) {
      inst.kind = Kind::BuildTuple;
    } else if (isa<td::PrimTupleUnpackOp, td::PrimListUnpackOp>(op)) {
      inst.kind = Kind::Unpack;
    } else if (td::isDefaultFormatOp(op) ||
               (isa<td::OperatorOp>(op) && op->getNumRegions() == 0)) {
      // Torch-MLIR writes an operator its build does not know as
      // `torch.operator "torch.aten.name"`.
      auto generic = dyn_cast<td::OperatorOp>(op);
      std::optional<::pippy::AtenOpName> name = ::pippy::parseTorchOpName(
          generic ? generic.getName() : op->getName().getStringRef());
      if (!name)
        throw RuntimeError(describe(op) + ": not an operator name");
      c10::OperatorName opName(name->qualifiedName(), name->overload);
      const c10::FunctionSchema *schema = nullptr;
      if (auto handle = c10::Dispatcher::singleton().findSchema(opName)) {
        inst.kind = Kind::Dispatch;
        inst.handle = handle;
        schema = &handle->schema();
      } else if (auto jitOp = ::torch::jit::findOperatorFor(opName)) {
        inst.kind = Kind::Operator;
        inst.operation = jitOp->getOperation();
        schema = &jitOp->schema();
      } else if (const auto *extra = ::pippy::rt::findExtraOperator(
                     opName, op->getNumOperands())) {
        inst.kind = Kind::Operator;
        inst.operation = extra->operation;
        schema = &extra->schema;
      } else {
        throw RuntimeError(describe(op) + ": libtorch 1.13 has no operator " +
                           name->str());
      }
      const auto &args = schema->arguments();
      if (args.size() != op->getNumOperands() ||
          schema->returns().size() != op->getNumResults()) {
        std::ostringstream os;
        os << *schema;
        throw RuntimeError(
            describe(op) + ": has " + std::to_string(op->getNumOperands()) +
            " operands and " + std::to_string(op->getNumResults()) +
            " results but the schema is " + os.str());
      }
      for (size_t i = 0; i < args.size(); ++i)
        if (!isCompatible(op->getOperand(i).getType(), args[i].type())) {
          std::string text;
          llvm::raw_string_ostream tos(text);
          tos << op->getOperand(i).getType();
          throw RuntimeError(describe(op) + ": operand " + std::to_string(i) +
                             " ('" + args[i].name() + "') has type " + text +
                             " but the schema expects " +
                             args[i].type()->str());
        }
      // Newer PyTorch widened some int arguments to Scalar (var's and std's
      // `correction`), so Torch-MLIR can give a float where libtorch 1.13
      // takes an int: a whole-number constant is passed as that int.
      for (size_t i = 0; i < args.size(); ++i) {
        c10::TypePtr want = args[i].type();
        if (auto optional = want->cast<c10::OptionalType>())
          want = optional->getElementType();
        if (want->kind() != c10::TypeKind::IntType ||
            !isa<td::FloatType>(op->getOperand(i).getType()))
          continue;
        int s = inst.inputs[i];
        const c10::IValue &value = program.constantSlots[s];
        bool whole = program.isConstant[s] && value.isDouble() &&
                     value.toDouble() == std::trunc(value.toDouble()) &&
                     std::abs(value.toDouble()) < 9.0e15;
        if (!whole)
          throw RuntimeError(
              describe(op) + ": operand " + std::to_string(i) + " ('" +
              args[i].name() +
              "') is a float, which libtorch 1.13 takes only as an int; "
              "pippy-run passes a constant whole number as one" +
              (program.isConstant[s] && value.isDouble()
                   ? ", and " + std::to_string(value.toDouble()) + " is not"
                   : ", and this one is computed"));
        inst.inputs[i] = addConstant(static_cast<int64_t>(value.toDouble()));
      }
      // `Embedding(sparse=True)` and `EmbeddingBag(sparse=True)` would give
      // their table a sparse gradient, which gradient sums between stages,
      // tied groups and checkpoints do not take: the table gets the dense
      // gradient of the same values instead (what SGD adds is the same).
      for (size_t i = 0; i < args.size(); ++i) {
        int s = inst.inputs[i];
        if (args[i].name() == "sparse" &&
            args[i].type()->kind() == c10::TypeKind::BoolType &&
            program.isConstant[s] && program.constantSlots[s].isBool() &&
            program.constantSlots[s].toBool())
          inst.inputs[i] = addConstant(false);
      }
    } else {
      throw RuntimeError(describe(op) + ": is not supported by the runtime");
    }
    for (Value result : op->getResults())
      inst.outputs.push_back(newSlot(result));
    program.code.push_back(std::move(inst));
  }
  if (!body.mightHaveTerminator())
    throw RuntimeError(name + " has no terminator");
  return program;
}

std::vector<c10::IValue>
Program::run(const std::vector<c10::IValue> &args,
             const std::map<std::string, at::Tensor> &params,
             const std::vector<int> *capture,
             std::vector<c10::IValue> *captured,
             std::vector<int64_t> *opNanoseconds) const {
  if (args.size() != argSlots.size())
    throw RuntimeError("expected " + std::to_string(argSlots.size()) +
                       " inputs but got " + std::to_string(args.size()));
  std::vector<c10::IValue> slots = constantSlots;
  for (size_t i = 0; i < args.size(); ++i)
    slots[argSlots[i]] = args[i];
  for (const auto &[s, name] : paramSlots) {
    auto it = params.find(name);
    if (it == params.end())
      throw RuntimeError("no value for parameter '" + name + "'");
    slots[s] = it->second;
  }

  ::torch::jit::Stack stack;
  stack.reserve(16);
  std::chrono::steady_clock::time_point started;
  for (const Instruction &inst : code) {
    if (opNanoseconds)
      started = std::chrono::steady_clock::now();
    stack.clear();
    for (int s : inst.inputs)
      stack.push_back(slots[s]);
    switch (inst.kind) {
    case Kind::Dispatch:
      inst.handle->callBoxed(stack);
      break;
    case Kind::FusedLinear: {
      const at::Tensor &weight = stack[1].toTensor();
      if (!at::GradMode::is_enabled() || !weight.requires_grad()) {
        inst.handle->callBoxed(stack);
        break;
      }
      at::Tensor out =
          FusedLinearFunction::apply(stack[0].toTensor(), weight, stack[2]);
      stack.clear();
      stack.emplace_back(std::move(out));
      break;
    }
    case Kind::Operator:
      (*inst.operation)(stack);
      break;
    case Kind::BuildList: {
      c10::impl::GenericList list(inst.listElement);
      list.reserve(stack.size());
      for (c10::IValue &v : stack)
        list.push_back(std::move(v));
      stack.clear();
      stack.emplace_back(std::move(list));
      break;
    }
    case Kind::BuildTuple: {
      auto tuple = c10::ivalue::Tuple::create(std::move(stack));
      stack.clear();
      stack.emplace_back(std::move(tuple));
      break;
    }
    case Kind::Unpack: {
      c10::IValue container = std::move(stack.back());
      stack.clear();
      if (container.isTuple())
        for (const c10::IValue &e : container.toTupleRef().elements())
          stack.push_back(e);
      else
        for (const c10::IValue &e : container.toListRef())
          stack.push_back(e);
      break;
    }
    }
    for (size_t i = 0; i < inst.outputs.size(); ++i)
      slots[inst.outputs[i]] = std::move(stack[i]);
    if (opNanoseconds && inst.countedOp >= 0)
      (*opNanoseconds)[inst.countedOp] +=
          std::chrono::duration_cast<std::chrono::nanoseconds>(
              std::chrono::steady_clock::now() - started)
              .count();
  }
  std::vector<c10::IValue> results;
  results.reserve(resultSlots.size());
  for (int s : resultSlots)
    results.push_back(slots[s]);
  if (capture)
    for (int s : *capture)
      captured->push_back(slots[s]);
  return results;
}

std::vector<std::pair<size_t, Program::Linear>> Program::ownLinears() const {
  std::map<int, int> uses;
  for (const Instruction &inst : code)
    for (int s : inst.inputs)
      ++uses[s];
  for (int s : resultSlots)
    ++uses[s];
  std::map<int, std::string> paramName;
  for (const auto &[s, name] : paramSlots)
    paramName[s] = name;
  std::vector<std::pair<size_t, Linear>> result;
  for (size_t i = 0; i < code.size(); ++i) {
    const Instruction &inst = code[i];
    if ((inst.kind != Kind::Dispatch && inst.kind != Kind::FusedLinear) ||
        inst.inputs.size() != 3 || inst.outputs.size() != 1)
      continue;
    const c10::OperatorName &name = inst.handle->schema().operator_name();
    if (name.name != "aten::linear" || !name.overload_name.empty())
      continue;
    int weight = inst.inputs[1], bias = inst.inputs[2];
    bool biasIsNone = isConstant[bias] && constantSlots[bias].isNone();
    if (!paramName.count(weight) || uses[weight] != 1)
      continue;
    if (!biasIsNone && (!paramName.count(bias) || uses[bias] != 1))
      continue;
    result.push_back({i,
                      {inst.inputs[0], inst.outputs[0], paramName[weight],
                       biasIsNone ? "" : paramName[bias]}});
  }
  return result;
}

std::vector<Program::Linear> Program::linearsWithOwnParameters() const {
  std::vector<Linear> result;
  for (auto &[index, linear] : ownLinears())
    result.push_back(std::move(linear));
  return result;
}

void Program::fuseWeightGradients(const std::set<std::string> &weights) {
  for (const auto &[index, linear] : ownLinears())
    code[index].kind =
        weights.count(linear.weight) ? Kind::FusedLinear : Kind::Dispatch;
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
