//===- ShardingRules.cpp - how a shard flows through ops ------------------===//

#include "ShardingRules.h"

#include "pippy/Dialect/Pippy/PippyDialect.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
namespace td = mlir::torch;

namespace pippy::tp {
namespace {

/// Ops that keep a split where it is, with their first operand carrying
/// it and the others not tensors (or, for masked_fill, a whole mask).
bool keepsDimension(StringRef name) {
  static const StringLiteral names[] = {"torch.aten.gelu",
                                        "torch.aten.relu",
                                        "torch.aten.silu",
                                        "torch.aten.tanh",
                                        "torch.aten.sigmoid",
                                        "torch.aten.leaky_relu",
                                        "torch.aten.elu",
                                        "torch.aten.mish",
                                        "torch.aten.hardswish",
                                        "torch.aten.softplus",
                                        "torch.aten.contiguous",
                                        "torch.aten.mul.Scalar",
                                        "torch.aten.div.Scalar",
                                        "torch.aten.add.Scalar",
                                        "torch.aten.sub.Scalar",
                                        "torch.aten.softmax.int",
                                        "torch.aten.log_softmax.int",
                                        "torch.aten.masked_fill.Scalar",
                                        "torch.aten.dropout"};
  return llvm::is_contained(names, name);
}

bool isBinary(StringRef name) {
  return name == "torch.aten.mul.Tensor" || name == "torch.aten.div.Tensor" ||
         name == "torch.aten.add.Tensor" || name == "torch.aten.sub.Tensor";
}

bool isView(StringRef name) {
  return name == "torch.aten.view" || name == "torch.aten.reshape";
}

int64_t rankOf(Value v) {
  std::optional<SmallVector<int64_t>> sizes = staticSizes(v.getType());
  return sizes ? static_cast<int64_t>(sizes->size()) : -1;
}

/// Whether whole tensor `w` broadcasts against a result of rank `rank`
/// split on `dim` without being split itself: its size there is 1 (or it
/// has no such dimension).
bool broadcastsAlong(Value w, int64_t rank, int64_t dim) {
  std::optional<SmallVector<int64_t>> sizes = staticSizes(w.getType());
  if (!sizes)
    return !isa<td::BaseTensorType>(w.getType()); // a scalar
  int64_t i = dim - (rank - static_cast<int64_t>(sizes->size()));
  return i < 0 || (*sizes)[i] == 1;
}

/// A dropout that draws nothing: probability 0, or not training.
bool isIdentityDropout(Operation *op) {
  if (op->getNumOperands() != 3)
    return false;
  auto p = op->getOperand(1).getDefiningOp<td::ConstantFloatOp>();
  auto train = op->getOperand(2).getDefiningOp<td::ConstantBoolOp>();
  return (p && p.getValue().isZero()) || (train && !train.getValue());
}

/// Where a view puts input dimension `dim` split in `parts`: the output
/// dimension that starts where it starts and is its outer factor (features
/// split into heads) or has it as its outer factor (heads merged back).
std::optional<int64_t> viewDim(ArrayRef<int64_t> in, ArrayRef<int64_t> out,
                               int64_t dim, int64_t parts) {
  int64_t before = 1;
  for (int64_t i = 0; i < dim; ++i)
    before *= in[i];
  int64_t prefix = 1;
  for (int64_t e = 0; e < static_cast<int64_t>(out.size()); ++e) {
    if (prefix == before && out[e] % parts == 0 &&
        (in[dim] % out[e] == 0 || out[e] % in[dim] == 0))
      return e;
    prefix *= out[e];
    if (prefix > before)
      break;
  }
  return std::nullopt;
}

} // namespace

std::optional<int64_t> constantInt(Value v) {
  if (auto c = v.getDefiningOp<td::ConstantIntOp>())
    return c.getValueAttr().getInt();
  if (auto c = v.getDefiningOp<td::ConstantBoolOp>())
    return c.getValue();
  return std::nullopt;
}

std::optional<SmallVector<int64_t>> staticSizes(Type type) {
  auto tensor = dyn_cast<td::BaseTensorType>(type);
  if (!tensor || !tensor.hasStaticShape() || !tensor.hasDtype())
    return std::nullopt;
  return SmallVector<int64_t>(tensor.getSizes());
}

Type divided(Type type, int64_t dim, int64_t parts) {
  auto tensor = cast<td::ValueTensorType>(type);
  SmallVector<int64_t> sizes(tensor.getSizes());
  sizes[dim] /= parts;
  return td::ValueTensorType::get(type.getContext(), ArrayRef<int64_t>(sizes),
                                  tensor.getOptionalDtype(),
                                  tensor.getOptionalSparsity());
}

SmallVector<unsigned> shardableOperands(Operation *op) {
  StringRef name = op->getName().getStringRef();
  if (op->getNumResults() != 1 || op->getNumOperands() == 0 ||
      !staticSizes(op->getResult(0).getType()))
    return {};
  if (name == "torch.aten.dropout" && !isIdentityDropout(op))
    return {};
  if (keepsDimension(name) || isView(name) ||
      name == "torch.aten.transpose.int")
    return {0};
  if (isBinary(name) || name == "torch.aten.matmul")
    return {0, 1};
  return {};
}

std::optional<int64_t> resultShardDim(Operation *op,
                                      ArrayRef<int64_t> operandDims,
                                      int64_t parts, std::string &why) {
  StringRef name = op->getName().getStringRef();
  int64_t rank = rankOf(op->getResult(0));
  int64_t d = operandDims[0];
  if (keepsDimension(name)) {
    if (d < 0) {
      why = name.str() + " takes no split operand";
      return std::nullopt;
    }
    if (name.contains("softmax")) {
      std::optional<int64_t> dim = constantInt(op->getOperand(1));
      if (!dim || (*dim + rank) % rank == d) {
        why = "a softmax over the split dimension";
        return std::nullopt;
      }
    }
    if (name == "torch.aten.masked_fill.Scalar" &&
        !broadcastsAlong(op->getOperand(1), rank, d)) {
      why = "a mask that varies along the split dimension";
      return std::nullopt;
    }
    return d;
  }
  if (isBinary(name)) {
    int64_t a = operandDims[0], b = operandDims[1];
    int64_t ra = rankOf(op->getOperand(0)), rb = rankOf(op->getOperand(1));
    // Align the split dimensions to the result's, from the right.
    int64_t da = a < 0 ? -1 : a + rank - ra, db = b < 0 ? -1 : b + rank - rb;
    if (da >= 0 && db >= 0 && da == db)
      return da;
    if (da >= 0 && db < 0 && broadcastsAlong(op->getOperand(1), rank, da))
      return da;
    if (db >= 0 && da < 0 && broadcastsAlong(op->getOperand(0), rank, db))
      return db;
    why = name.str() + " of a split tensor with a whole one that varies "
                       "along the split";
    return std::nullopt;
  }
  if (name == "torch.aten.transpose.int") {
    std::optional<int64_t> x = constantInt(op->getOperand(1)),
                           y = constantInt(op->getOperand(2));
    if (!x || !y) {
      why = "a transpose of dimensions that are not constants";
      return std::nullopt;
    }
    int64_t i = (*x + rank) % rank, j = (*y + rank) % rank;
    return d == i ? j : d == j ? i : d;
  }
  if (isView(name)) {
    std::optional<SmallVector<int64_t>> in =
        staticSizes(op->getOperand(0).getType());
    std::optional<SmallVector<int64_t>> out =
        staticSizes(op->getResult(0).getType());
    std::optional<int64_t> e =
        in && out ? viewDim(*in, *out, d, parts) : std::nullopt;
    if (!e)
      why = "a view that does not keep the split dimension whole";
    return e;
  }
  if (name == "torch.aten.matmul") {
    int64_t a = operandDims[0], b = operandDims[1];
    if (a >= 0 && a == b && a < rank - 2 && rankOf(op->getOperand(0)) == rank &&
        rankOf(op->getOperand(1)) == rank)
      return a;
    why = "a matmul that is not batched over the split dimension of both "
          "operands";
    return std::nullopt;
  }
  why = name.str() + " does not pass a split";
  return std::nullopt;
}

void narrow(Operation *op, int64_t dim, int64_t parts, OpBuilder &builder) {
  Value result = op->getResult(0);
  std::optional<SmallVector<int64_t>> out = staticSizes(result.getType());
  result.setType(divided(result.getType(), dim, parts));
  if (!isView(op->getName().getStringRef()))
    return;
  // A new sizes list, with the split dimension's slice size (an inferred -1
  // stays -1).
  auto list = op->getOperand(1).getDefiningOp<td::PrimListConstructOp>();
  if (!list)
    return;
  builder.setInsertionPoint(op);
  SmallVector<Value> items(list.getOperands());
  std::optional<int64_t> given = constantInt(items[dim]);
  if (given && *given >= 0)
    items[dim] = td::ConstantIntOp::create(
        builder, op->getLoc(), td::IntType::get(op->getContext()),
        builder.getI64IntegerAttr((*out)[dim] / parts));
  auto fresh = td::PrimListConstructOp::create(builder, op->getLoc(),
                                               list.getType(), items);
  op->setOperand(1, fresh);
}

} // namespace pippy::tp
