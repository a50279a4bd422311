//===- Passes.td - pippy compiler passes ------------------*- tablegen -*-===//
//
// Every pass argument starts with `pippy-`. Each pass has a file of its own
// in this folder and a lit test named after its argument in test/Passes/.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_PASSES_TD
#define PIPPY_PASSES_TD

include "mlir/Pass/PassBase.td"

def PippyLiftParams : Pass<"pippy-lift-params", "::mlir::ModuleOp"> {
  let summary = "Turns Torch-MLIR's weight literals into named parameters";
  let description = [{
    Torch-MLIR output carries a model's weights inline, as
    `torch.vtensor.literal(dense<...>)` or `dense_resource<...>` constants.
    This pass makes them parameters of the graph IR:

    - every floating-point literal with more than one element becomes a
      `pippy.param`, and its value is written to the safetensors file
      `weights`, which the module's `pippy.weights` attribute then names;
    - integer and single-element literals stay constants;
    - `torch.operator "torch.pippy._pipe_split"` (a user's `pipe_split()`)
      becomes `pippy.split_point`.

    A `dense_resource` literal keeps its resource key as the parameter name,
    so every literal of one resource becomes one (tied) parameter. A `dense`
    literal is named `<function>.literal<N>`, counting the function's lifted
    literals in op order. A `dense_resource` whose bytes are missing from the
    file is an error that names it.

    Before:

    ```mlir
    %w = torch.vtensor.literal(dense_resource<fc_weight> : tensor<4x3xf32>) : !torch.vtensor<[4,3],f32>
    %y = torch.aten.mm %x, %w : ...
    torch.operator "torch.pippy._pipe_split"() : () -> ()
    ```

    After `--pippy-lift-params="weights=w.safetensors"`:

    ```mlir
    module attributes {pippy.weights = "w.safetensors"} {
      ...
      %w = pippy.param "fc_weight" : !torch.vtensor<[4,3],f32>
      %y = torch.aten.mm %x, %w : ...
      pippy.split_point
    ```
  }];
  let options = [
    Option<"weights", "weights", "std::string", /*default=*/"\"\"",
           "safetensors file that receives the lifted values">,
  ];
  let dependentDialects = ["::mlir::pippy::PippyDialect"];
}

#endif // PIPPY_PASSES_TD
