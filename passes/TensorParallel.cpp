//===- TensorParallel.cpp - Megatron-style sharding of linear pairs -------===//
//
// Finds pairs of linear layers joined by element-wise ops (an MLP's up and
// down projections: `linear -> gelu -> linear`) and shards them over a
// tensor-parallel group of `tp` ranks as Megatron-LM does: the first by
// output features (column-parallel: its weight's rows and its bias split
// into `tp` slices), the second by input features (row-parallel: its
// weight's columns split). Each rank then computes `tp`-th of the hidden
// features and a partial sum of the output:
//
//   x1 = pippy.tp_copy x                  identity; gradient summed
//   h  = linear(x1, W1[slice], b1[slice]) [..., F/tp]
//   h' = gelu(h)                          [..., F/tp]
//   p  = linear(h', W2[:, slice], None)   [..., O], a partial sum
//   y  = pippy.tp_reduce p                summed over the group
//   y' = y + b2                           the bias added once
//
// A linear that is not part of such a pair (attention projections, a head,
// one whose weight is tied or shared) stays replicated: every rank computes
// it whole. Each linear is marked with what became of it
// (`pippy.tensor_parallel`: "column", "row", or "replicated: why"), which
// --pippy-report lists.
//
//===----------------------------------------------------------------------===//

#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#define DEBUG_TYPE "pippy-tensor-parallel"

namespace mlir::pippy {
#define GEN_PASS_DEF_PIPPYTENSORPARALLEL
#include "passes/Passes.h.inc"
} // namespace mlir::pippy

using namespace mlir;
namespace pd = mlir::pippy;
namespace td = mlir::torch;

namespace {

constexpr StringLiteral kLinear = "torch.aten.linear";
constexpr StringLiteral kRoleAttr = "pippy.tensor_parallel";

/// `aten.dropout(x, p, train)` with a constant p of 0 or train false: the
/// identity. (A dropout that draws would draw the same numbers on every
/// slice, since random streams are keyed by micro-batch, not tensor rank.)
bool isIdentityDropout(Operation *op) {
  if (op->getName().getStringRef() != "torch.aten.dropout" ||
      op->getNumOperands() != 3)
    return false;
  auto p = op->getOperand(1).getDefiningOp<td::ConstantFloatOp>();
  auto train = op->getOperand(2).getDefiningOp<td::ConstantBoolOp>();
  return (p && p.getValue().isZero()) || (train && !train.getValue());
}

/// Element-wise ops a hidden activation may pass through between the two
/// linears: one tensor operand (the first), the rest constants.
bool isElementwise(Operation *op) {
  if (isIdentityDropout(op))
    return true;
  static const StringLiteral names[] = {
      "torch.aten.gelu",    "torch.aten.relu",    "torch.aten.silu",
      "torch.aten.tanh",    "torch.aten.sigmoid", "torch.aten.leaky_relu",
      "torch.aten.elu",     "torch.aten.mish",    "torch.aten.hardswish",
      "torch.aten.softplus"};
  StringRef name = op->getName().getStringRef();
  if (!llvm::is_contained(names, name) || op->getNumResults() != 1 ||
      op->getNumOperands() == 0)
    return false;
  for (Value v : op->getOperands().drop_front())
    if (isa<td::BaseTensorType>(v.getType()))
      return false;
  return op->getOperand(0).getType() == op->getResult(0).getType();
}

/// The static sizes of a torch tensor value, or none.
std::optional<SmallVector<int64_t>> sizesOf(Type type) {
  auto tensor = dyn_cast<td::BaseTensorType>(type);
  if (!tensor || !tensor.hasStaticShape() || !tensor.hasDtype())
    return std::nullopt;
  return SmallVector<int64_t>(tensor.getSizes());
}

/// `type` with dimension `dim` divided by `parts`.
Type divided(Type type, int64_t dim, int64_t parts) {
  auto tensor = cast<td::ValueTensorType>(type);
  SmallVector<int64_t> sizes(tensor.getSizes());
  sizes[dim] /= parts;
  return td::ValueTensorType::get(type.getContext(), ArrayRef<int64_t>(sizes),
                                  tensor.getOptionalDtype(),
                                  tensor.getOptionalSparsity());
}

/// Whether `param` belongs to a tied group of its pipeline (used by
/// several stages: it stays whole, the same tensor everywhere).
bool isTied(pd::ParamOp param) {
  auto pipeline = param->getParentOfType<pd::PipelineOp>();
  ArrayAttr tied = pipeline ? pipeline.getTiedAttr() : ArrayAttr();
  if (!tied)
    return false;
  return llvm::any_of(tied, [&](Attribute a) {
    return cast<pd::TiedGroupAttr>(a).getName() == param.getName();
  });
}

/// A parameter only `user` uses, unsharded and untied, of a value-tensor
/// type.
pd::ParamOp ownParam(Value v, Operation *user) {
  auto param = v.getDefiningOp<pd::ParamOp>();
  if (!param || !v.hasOneUse() || *v.getUsers().begin() != user ||
      param->hasAttr("pippy.shard") || isTied(param) ||
      !isa<td::ValueTensorType>(param.getType()))
    return nullptr;
  return param;
}

bool isNone(Value v) {
  return v.getDefiningOp<td::ConstantNoneOp>() != nullptr;
}

void shard(pd::ParamOp param, int64_t dim, int64_t parts) {
  param->setAttr("pippy.shard",
                 DenseI64ArrayAttr::get(param.getContext(), {dim, parts}));
  param.getResult().setType(divided(param.getType(), dim, parts));
}

struct Pair {
  Operation *column = nullptr, *row = nullptr;
  SmallVector<Operation *> between;
};

struct TensorParallelPass
    : public pd::impl::PippyTensorParallelBase<TensorParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    if (tp < 2) {
      getOperation().emitError("--pippy-tensor-parallel needs tp of at "
                               "least 2; got ")
          << static_cast<int64_t>(tp);
      return signalPassFailure();
    }
    SmallVector<Operation *> linears;
    getOperation().walk([&](Operation *op) {
      if (op->getName().getStringRef() == kLinear)
        linears.push_back(op);
    });
    for (Operation *op : linears) {
      if (op->hasAttr(kRoleAttr))
        continue;
      std::string why;
      std::optional<Pair> pair = findPair(op, why);
      if (!pair) {
        op->setAttr(kRoleAttr,
                    StringAttr::get(op->getContext(), "replicated: " + why));
        continue;
      }
      rewrite(*pair);
    }
    getOperation()->setAttr(
        "pippy.tensor_parallel",
        IntegerAttr::get(IntegerType::get(&getContext(), 64), tp));
  }

  /// The pair `column` begins, or none with the reason in `why`.
  std::optional<Pair> findPair(Operation *column, std::string &why) {
    if (column->getNumOperands() != 3 || column->getNumResults() != 1) {
      why = "not linear(input, weight, bias)";
      return std::nullopt;
    }
    Pair pair;
    pair.column = column;
    Value h = column->getResult(0);
    while (h.hasOneUse()) {
      Operation *user = *h.getUsers().begin();
      if (user->getName().getStringRef() == kLinear &&
          user->getOperand(0) == h && !user->hasAttr(kRoleAttr)) {
        pair.row = user;
        break;
      }
      if (!isElementwise(user))
        break;
      pair.between.push_back(user);
      h = user->getResult(0);
    }
    if (!pair.row) {
      why = "its output does not reach another linear through element-wise "
            "ops alone";
      return std::nullopt;
    }
    Operation *row = pair.row;
    pd::ParamOp w1 = ownParam(column->getOperand(1), column);
    pd::ParamOp w2 = ownParam(row->getOperand(1), row);
    if (!w1 || !w2) {
      why = "a weight of the pair is not a parameter used by it alone (tied "
            "or shared weights stay whole)";
      return std::nullopt;
    }
    Value b1 = column->getOperand(2), b2 = row->getOperand(2);
    if ((!isNone(b1) && !ownParam(b1, column)) ||
        (!isNone(b2) && !ownParam(b2, row))) {
      why = "a bias of the pair is not a parameter used by it alone";
      return std::nullopt;
    }
    std::optional<SmallVector<int64_t>> s1 = sizesOf(w1.getType()),
                                        s2 = sizesOf(w2.getType());
    if (!s1 || !s2 || s1->size() != 2 || s2->size() != 2 ||
        (*s1)[0] != (*s2)[1] || !sizesOf(column->getResult(0).getType()) ||
        !sizesOf(row->getResult(0).getType())) {
      why = "shapes are not static, or the weights do not chain";
      return std::nullopt;
    }
    if ((*s1)[0] % tp != 0) {
      why = std::to_string((*s1)[0]) + " hidden features do not divide by tp " +
            std::to_string(tp);
      return std::nullopt;
    }
    return pair;
  }

  void rewrite(Pair &pair) {
    MLIRContext *ctx = &getContext();
    Operation *column = pair.column, *row = pair.row;
    OpBuilder b(column);
    Value x = column->getOperand(0);
    auto copy = pd::TpCopyOp::create(b, column->getLoc(), x.getType(), x,
                                     b.getI64IntegerAttr(tp));
    column->setOperand(0, copy);
    shard(column->getOperand(1).getDefiningOp<pd::ParamOp>(), 0, tp);
    if (!isNone(column->getOperand(2)))
      shard(column->getOperand(2).getDefiningOp<pd::ParamOp>(), 0, tp);
    int64_t last = cast<td::BaseTensorType>(column->getResult(0).getType())
                       .getSizes()
                       .size() -
                   1;
    SmallVector<Operation *> narrowed{column};
    narrowed.append(pair.between.begin(), pair.between.end());
    for (Operation *op : narrowed)
      op->getResult(0).setType(divided(op->getResult(0).getType(), last, tp));
    shard(row->getOperand(1).getDefiningOp<pd::ParamOp>(), 1, tp);
    Value bias = row->getOperand(2);
    b.setInsertionPoint(row);
    if (!isNone(bias))
      row->setOperand(2, td::ConstantNoneOp::create(b, row->getLoc(),
                                                    td::NoneType::get(ctx)));
    b.setInsertionPointAfter(row);
    Value partial = row->getResult(0);
    auto reduce = pd::TpReduceOp::create(b, row->getLoc(), partial.getType(),
                                         partial, b.getI64IntegerAttr(tp));
    Value whole = reduce;
    if (!isNone(bias)) {
      Value one = td::ConstantIntOp::create(
          b, row->getLoc(), td::IntType::get(ctx), b.getI64IntegerAttr(1));
      OperationState state(row->getLoc(), "torch.aten.add.Tensor");
      state.addOperands({reduce, bias, one});
      state.addTypes(partial.getType());
      whole = b.create(state)->getResult(0);
    }
    partial.replaceAllUsesExcept(whole, reduce);
    column->setAttr(kRoleAttr, StringAttr::get(ctx, "column"));
    row->setAttr(kRoleAttr, StringAttr::get(ctx, "row"));
  }
};

} // namespace
