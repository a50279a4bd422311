//===- TensorParallel.cpp - Megatron-style sharding of linear layers ------===//
//
// Shards a stage's linear layers over a tensor-parallel group of `tp` ranks
// as Megatron-LM does. A row-parallel linear (its weight split by input
// features) consumes a value that a few column-parallel linears (weights
// split by output features) produce through ops a split can pass
// (ShardingRules.h): an MLP's `linear -> gelu -> linear`, or attention's
// q, k and v projections -> heads -> scores -> softmax -> weighted sum ->
// output projection, split by heads. Each rank then computes 1/tp of the
// hidden features (or heads) and a partial sum of the output:
//
//   x1 = pippy.tp_copy x                  identity; gradient summed
//   h  = linear(x1, W1[slice], b1[slice]) [..., F/tp]
//   h' = gelu(h)                          [..., F/tp]
//   p  = linear(h', W2[:, slice], None)   [..., O], a partial sum
//   y  = pippy.tp_reduce p                summed over the group
//   y' = y + b2                           the bias added once
//
// An embedding is split by vocabulary: each rank holds 1/tp of the table's
// rows, looks up the indices in its range (zeros for the others) and the
// group sums the lookups:
//
//   e = pippy.tp_embedding W[slice], idx  rows of this rank's range
//   x = pippy.tp_reduce e                 the whole lookup
//
// A linear that is not part of such a region (a head, one whose weight is
// tied or shared, attention packed into one projection) and an embedding
// whose table is tied stay replicated: every rank computes them whole.
// Each is marked with what became of it (`pippy.tensor_parallel`:
// "column", "row", "vocabulary", or "replicated: why"), which
// --pippy-report lists.
//
//===----------------------------------------------------------------------===//

#include "ShardingRules.h"

#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SetVector.h"

#include <map>

#define DEBUG_TYPE "pippy-tensor-parallel"

namespace mlir::pippy {
#define GEN_PASS_DEF_PIPPYTENSORPARALLEL
#include "passes/Passes.h.inc"
} // namespace mlir::pippy

using namespace mlir;
namespace pd = mlir::pippy;
namespace td = mlir::torch;
namespace tp = ::pippy::tp;

namespace {

constexpr StringLiteral kLinear = "torch.aten.linear";
constexpr StringLiteral kEmbedding = "torch.aten.embedding";
constexpr StringLiteral kRoleAttr = "pippy.tensor_parallel";
/// How many ops a region between linears may hold.
constexpr size_t kMaxRegionOps = 64;

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

/// A linear(input, weight, bias) this pass may shard: not yet marked, its
/// weight a rank-2 parameter and its bias one or none, each its own.
bool isShardableLinear(Operation *op) {
  if (op->getName().getStringRef() != kLinear || op->hasAttr(kRoleAttr) ||
      op->getNumOperands() != 3 || op->getNumResults() != 1)
    return false;
  pd::ParamOp weight = ownParam(op->getOperand(1), op);
  Value bias = op->getOperand(2);
  std::optional<SmallVector<int64_t>> sizes =
      weight ? tp::staticSizes(weight.getType()) : std::nullopt;
  return sizes && sizes->size() == 2 &&
         tp::staticSizes(op->getResult(0).getType()) &&
         (isNone(bias) || ownParam(bias, op));
}

void shard(pd::ParamOp param, int64_t dim, int64_t parts) {
  param->setAttr("pippy.shard",
                 DenseI64ArrayAttr::get(param.getContext(), {dim, parts}));
  param.getResult().setType(tp::divided(param.getType(), dim, parts));
}

/// A row-parallel linear, the column-parallel ones feeding it and the ops
/// between, with the dimension each value between is split on.
struct Region {
  Operation *row = nullptr;
  SmallVector<Operation *> columns, ops; // in block order
  DenseMap<Value, int64_t> splitDim;
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
    SmallVector<Operation *> linears, embeddings;
    getOperation().walk([&](Operation *op) {
      if (op->getName().getStringRef() == kLinear)
        linears.push_back(op);
      if (op->getName().getStringRef() == kEmbedding)
        embeddings.push_back(op);
    });
    for (Operation *op : embeddings)
      shardEmbedding(op);
    // Later linears first: a row-parallel linear claims its columns before
    // they are tried as rows themselves.
    std::map<Operation *, std::string> why;
    for (Operation *op : llvm::reverse(linears)) {
      if (op->hasAttr(kRoleAttr))
        continue;
      std::string reason;
      if (std::optional<Region> region = regionEndingAt(op, reason))
        rewrite(*region);
      else
        why[op] = reason;
    }
    for (Operation *op : linears)
      if (!op->hasAttr(kRoleAttr))
        op->setAttr(kRoleAttr, StringAttr::get(op->getContext(),
                                               "replicated: " + why[op]));
    getOperation()->setAttr(
        "pippy.tensor_parallel",
        IntegerAttr::get(IntegerType::get(&getContext(), 64), tp));
  }

  /// Splits `op`'s table by rows where it can, else marks why not.
  void shardEmbedding(Operation *op) {
    MLIRContext *ctx = &getContext();
    auto mark = [&](Operation *target, const std::string &role) {
      target->setAttr(kRoleAttr, StringAttr::get(ctx, role));
    };
    pd::ParamOp table =
        op->getNumOperands() == 5 ? ownParam(op->getOperand(0), op) : nullptr;
    std::optional<SmallVector<int64_t>> sizes =
        table ? tp::staticSizes(table.getType()) : std::nullopt;
    if (!sizes || sizes->size() != 2 ||
        !tp::staticSizes(op->getResult(0).getType()))
      return mark(op, "replicated: its table is not a parameter it alone "
                      "uses (tied or shared tables stay whole)");
    if (tp::constantInt(op->getOperand(2)) != -1 ||
        tp::constantInt(op->getOperand(3)) != 0 ||
        tp::constantInt(op->getOperand(4)) != 0)
      return mark(op, "replicated: a padding index, scaling by frequency or "
                      "sparse gradients");
    if ((*sizes)[0] % tp != 0)
      return mark(op, "replicated: " + std::to_string((*sizes)[0]) +
                          " rows do not divide by tp " + std::to_string(tp));
    shard(table, 0, tp);
    OpBuilder b(op);
    Type type = op->getResult(0).getType();
    auto lookup =
        pd::TpEmbeddingOp::create(b, op->getLoc(), type, table,
                                  op->getOperand(1), b.getI64IntegerAttr(tp));
    mark(lookup, "vocabulary");
    auto whole = pd::TpReduceOp::create(b, op->getLoc(), type, lookup,
                                        b.getI64IntegerAttr(tp));
    op->getResult(0).replaceAllUsesWith(whole.getResult());
    op->erase();
  }

  /// The region whose row-parallel linear is `row`, or none with the reason
  /// in `why`.
  std::optional<Region> regionEndingAt(Operation *row, std::string &why) {
    if (!isShardableLinear(row)) {
      why = "its weight or bias is not a parameter it alone uses (tied or "
            "shared weights stay whole), or its shapes are not static";
      return std::nullopt;
    }
    Region region;
    region.row = row;
    if (!collect(region, why) || !propagate(region, why) ||
        !staysInside(region, why))
      return std::nullopt;
    return region;
  }

  /// Walks back from the row linear's input to the column linears, through
  /// ops a split can pass.
  bool collect(Region &region, std::string &why) {
    llvm::SetVector<Operation *> ops, columns;
    SmallVector<Value> work{region.row->getOperand(0)};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (!def || ops.contains(def) || columns.contains(def))
        continue;
      if (isShardableLinear(def)) {
        columns.insert(def);
        continue;
      }
      SmallVector<unsigned> through = tp::shardableOperands(def);
      if (through.empty() || def->getBlock() != region.row->getBlock())
        continue; // a whole value
      if (ops.size() == kMaxRegionOps) {
        why = "more than " + std::to_string(kMaxRegionOps) +
              " ops lie between it and the linears before it";
        return false;
      }
      ops.insert(def);
      for (unsigned i : through)
        work.push_back(def->getOperand(i));
    }
    if (columns.empty()) {
      why = "no linear it could pair with reaches its input through ops a "
            "split can pass";
      return false;
    }
    auto inOrder = [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    };
    region.columns.assign(columns.begin(), columns.end());
    region.ops.assign(ops.begin(), ops.end());
    llvm::sort(region.columns, inOrder);
    llvm::sort(region.ops, inOrder);
    return true;
  }

  /// Splits the columns' outputs on their features and follows the split
  /// through the ops; it must reach the row linear on its features.
  bool propagate(Region &region, std::string &why) {
    for (Operation *column : region.columns) {
      Value out = column->getResult(0);
      auto weight = column->getOperand(1).getDefiningOp<pd::ParamOp>();
      int64_t features = (*tp::staticSizes(weight.getType()))[0];
      if (features % tp != 0) {
        why = std::to_string(features) + " features do not divide by tp " +
              std::to_string(tp);
        return false;
      }
      region.splitDim[out] = tp::staticSizes(out.getType())->size() - 1;
    }
    for (Operation *op : region.ops) {
      SmallVector<int64_t> dims;
      bool any = false;
      for (Value v : op->getOperands()) {
        auto it = region.splitDim.find(v);
        dims.push_back(it == region.splitDim.end() ? -1 : it->second);
        any |= dims.back() >= 0;
      }
      std::optional<int64_t> d =
          any ? tp::resultShardDim(op, dims, tp, why) : std::nullopt;
      if (!d) {
        if (!any)
          why = "a value between it and the linears before it does not come "
                "from them";
        return false;
      }
      region.splitDim[op->getResult(0)] = *d;
    }
    Value in = region.row->getOperand(0);
    auto it = region.splitDim.find(in);
    if (it == region.splitDim.end() ||
        it->second !=
            static_cast<int64_t>(tp::staticSizes(in.getType())->size() - 1)) {
      why = "its input is not split on its features";
      return false;
    }
    return true;
  }

  /// Every value of the region is used inside it (or by the row linear).
  bool staysInside(Region &region, std::string &why) {
    llvm::SmallPtrSet<Operation *, 16> inside(region.ops.begin(),
                                              region.ops.end());
    inside.insert(region.row);
    for (auto &[value, dim] : region.splitDim)
      for (Operation *user : value.getUsers())
        if (!inside.contains(user)) {
          why = "a value between it and the linears before it is also used "
                "elsewhere";
          return false;
        }
    return true;
  }

  void rewrite(Region &region) {
    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    // One tp_copy per input of the column linears.
    DenseMap<Value, Value> copies;
    for (Operation *column : region.columns) {
      Value x = column->getOperand(0);
      auto [it, fresh] = copies.try_emplace(x, Value());
      if (fresh) {
        if (Operation *def = x.getDefiningOp())
          b.setInsertionPointAfter(def);
        else
          b.setInsertionPointToStart(cast<BlockArgument>(x).getOwner());
        it->second = pd::TpCopyOp::create(b, column->getLoc(), x.getType(), x,
                                          b.getI64IntegerAttr(tp));
      }
      column->setOperand(0, it->second);
      shard(column->getOperand(1).getDefiningOp<pd::ParamOp>(), 0, tp);
      if (!isNone(column->getOperand(2)))
        shard(column->getOperand(2).getDefiningOp<pd::ParamOp>(), 0, tp);
      Value out = column->getResult(0);
      out.setType(tp::divided(out.getType(), region.splitDim.at(out), tp));
      column->setAttr(kRoleAttr, StringAttr::get(ctx, "column"));
    }
    for (Operation *op : region.ops)
      tp::narrow(op, region.splitDim.at(op->getResult(0)), tp, b);
    Operation *row = region.row;
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
    row->setAttr(kRoleAttr, StringAttr::get(ctx, "row"));
  }
};

} // namespace
