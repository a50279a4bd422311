//===- PippyBase.td - pippy dialect and attributes --------*- tablegen -*-===//
//
// The `pippy` dialect: parameters and split points of the graph IR, and the
// pipeline IR of stages connected by SSA values.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_DIALECT_PIPPY_PIPPYBASE_TD
#define PIPPY_DIALECT_PIPPY_PIPPYBASE_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/OpBase.td"

def Pippy_Dialect : Dialect {
  let name = "pippy";
  let cppNamespace = "::mlir::pippy";
  let summary = "Pipeline-parallel structure of a PyTorch model";
  let description = [{
    The graph IR of an imported model is a `func.func @forward` of `torch` ops
    whose weights are `pippy.param`s and whose optional cut markers are
    `pippy.split_point`s. Splitting turns it into a `pippy.pipeline`: a graph of
    `pippy.stage` regions, each isolated from above and connected to the others
    by SSA values, so that every transfer between stages (skip connections
    included) is an explicit edge and every shared weight an explicit tied
    group.
  }];
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::torch::TorchDialect"];
}

class Pippy_Attr<string name, string attrMnemonic>
    : AttrDef<Pippy_Dialect, name> {
  let mnemonic = attrMnemonic;
}

def Pippy_TiedGroupAttr : Pippy_Attr<"TiedGroup", "tied_group"> {
  let summary = "a parameter shared by several stages";
  let description = [{
    Names a parameter that more than one stage uses (a GPT's token embedding
    and its tied `lm_head`) and lists exactly those stages, in increasing
    order. Each listed stage keeps its own copy; the copies start equal and
    their gradients are summed across the group before every optimizer step.

    ```mlir
    #pippy.tied_group<"wte.weight", stages = [0, 3]>
    ```
  }];
  let parameters = (ins StringRefParameter<"parameter name">:$name,
                        ArrayRefParameter<"int64_t", "stage indices">:$stages);
  let assemblyFormat = "`<` $name `,` `stages` `=` `[` $stages `]` `>`";
  let genVerifyDecl = 1;
}

class Pippy_Op<string mnemonic, list<Trait> traits = []>
    : Op<Pippy_Dialect, mnemonic, traits>;

#endif // PIPPY_DIALECT_PIPPY_PIPPYBASE_TD
