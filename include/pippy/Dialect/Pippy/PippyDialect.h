//===- PippyDialect.h - pippy dialect ---------------------------*- C++ -*-===//
//
// Parameters, split points, pipelines, stages and tied groups.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_DIALECT_PIPPY_PIPPYDIALECT_H
#define PIPPY_DIALECT_PIPPY_PIPPYDIALECT_H

#include "pippy/Dialect/Torch/TorchDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/Pippy/PippyDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Pippy/PippyAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/Pippy/PippyOps.h.inc"

#endif // PIPPY_DIALECT_PIPPY_PIPPYDIALECT_H
