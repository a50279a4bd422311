//===- CostModel.h - analytic per-op costs ----------------------*- C++ -*-===//
//
// Static estimates of what an op of the graph IR costs, from the static
// shapes of its operands and results. The balancer compares stages with
// them; they need to rank ops correctly, not to predict seconds.
//
//   matmul-like (linear, mm, matmul, bmm, addmm, baddbmm)
//                      2 * numel(result) * K, K the contracted size
//   convolution        2 * numel(result) * numel(weight) / weight.size(0)
//   attention (scaled_dot_product_attention)
//                      4 * numel(query) * source length
//   norms (layer/group/batch/instance norm)     8 * numel(input)
//   softmax, log_softmax                        5 * numel(input)
//   embedding          numel(result)
//   anything else      the largest numel among its tensors (elementwise ops,
//                      reductions, views, and ops the model does not know)
//
// Bytes moved are the bytes of every tensor operand and result.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_ANALYSIS_COSTMODEL_H
#define PIPPY_ANALYSIS_COSTMODEL_H

#include "mlir/IR/Operation.h"

#include <cstdint>

namespace pippy {

struct OpCost {
  int64_t flops = 0;
  int64_t bytes = 0;
};

/// Bytes of a tensor type with static shape and dtype; 0 for anything else.
int64_t getTensorBytes(mlir::Type type);

/// The estimate for one op (see the table above).
OpCost estimateOpCost(mlir::Operation *op);

} // namespace pippy

#endif // PIPPY_ANALYSIS_COSTMODEL_H
