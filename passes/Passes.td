//===- Passes.td - pippy compiler passes ------------------*- tablegen -*-===//
//
// Every pass argument starts with `pippy-`. Each pass has a file of its own
// in this folder and a lit test named after its argument in test/Passes/.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_PASSES_TD
#define PIPPY_PASSES_TD

include "mlir/Pass/PassBase.td"

#endif // PIPPY_PASSES_TD
