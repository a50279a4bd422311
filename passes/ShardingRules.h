//===- ShardingRules.h - how a shard flows through ops ----------*- C++ -*-===//
//
// Internal to passes/: between a column-parallel linear (whose output's
// last dimension is split over the tensor-parallel group) and the
// row-parallel linear that consumes it, the split travels through other
// ops: element-wise ones keep it where it is, a transpose moves it, a view
// that splits features into heads puts it on the heads, a batched matmul
// of two tensors split on the same batch dimension keeps it. These rules
// say, for each op, which operands may carry the split, where it lands in
// the result, and how the op's types (and a view's sizes) shrink.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_PASSES_SHARDINGRULES_H
#define PIPPY_PASSES_SHARDINGRULES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace pippy::tp {

/// The operands of `op` through which a shard may flow (the others must be
/// whole); empty when no shard flows through `op`.
llvm::SmallVector<unsigned> shardableOperands(mlir::Operation *op);

/// The dimension of `op`'s result that is split in `parts`, given each
/// operand's split dimension (-1: whole); none, with the reason in `why`,
/// where the split cannot pass.
std::optional<int64_t> resultShardDim(mlir::Operation *op,
                                      llvm::ArrayRef<int64_t> operandDims,
                                      int64_t parts, std::string &why);

/// Shrinks `op`'s result type to its slice (dimension `dim` divided by
/// `parts`) and, for a view, its sizes list (a new list, inserted before
/// `op`).
void narrow(mlir::Operation *op, int64_t dim, int64_t parts,
            mlir::OpBuilder &builder);

/// The type of a torch tensor with dimension `dim` divided by `parts`.
mlir::Type divided(mlir::Type type, int64_t dim, int64_t parts);

/// The value of a `torch.constant.int` (or `.bool`, as 0 or 1), or none.
std::optional<int64_t> constantInt(mlir::Value v);

/// The static sizes of a torch tensor value's type, or none.
std::optional<llvm::SmallVector<int64_t>> staticSizes(mlir::Type type);

} // namespace pippy::tp

#endif // PIPPY_PASSES_SHARDINGRULES_H
