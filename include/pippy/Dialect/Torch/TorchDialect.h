//===- TorchDialect.h - Torch-MLIR compatible dialect -----------*- C++ -*-===//
//
// The `torch` dialect: Torch-MLIR's types, its hand-written ops, and every
// other `torch.<ns>.<name>[.<overload>]` op through the unknown-op hooks.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_DIALECT_TORCH_TORCHDIALECT_H
#define PIPPY_DIALECT_TORCH_TORCHDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CastInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringMap.h"

#include <mutex>

#include "dialects/Torch/TorchDialect.h.inc"

#include "pippy/Dialect/Torch/TorchTypes.h"

#define GET_OP_CLASSES
#include "dialects/Torch/TorchOps.h.inc"

namespace mlir::torch {

/// Whether `op` is a `torch` op kept unregistered and written in Torch-MLIR's
/// shared default format (`torch.aten.mm`, `torch.prims.convert_element_type`).
bool isDefaultFormatOp(Operation *op);

} // namespace mlir::torch

#endif // PIPPY_DIALECT_TORCH_TORCHDIALECT_H
