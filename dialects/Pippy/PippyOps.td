//===- PippyOps.td - pippy ops ----------------------------*- tablegen -*-===//
//
// Ops of the graph IR (`pippy.param`, `pippy.assign`, `pippy.split_point`)
// and of the pipeline IR (`pippy.pipeline`, `pippy.stage`, `pippy.yield`).
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_DIALECT_PIPPY_PIPPYOPS_TD
#define PIPPY_DIALECT_PIPPY_PIPPYOPS_TD

include "PippyBase.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Pippy_ParamOp : Pippy_Op<"param", [Pure]> {
  let summary = "a trained parameter or buffer of the model, by name";
  let description = [{
    Stands for the tensor that `named_parameters()` or `named_buffers()` calls
    `name` (its fully qualified module path). Its value lives in the
    safetensors file named by the module's `pippy.weights` attribute. The
    type is a tensor with static sizes and a dtype.

    A tied parameter is one op used everywhere it appears. Within a stage a
    name appears at most once; in several stages only as a tied group of the
    enclosing `pippy.pipeline`.

    ```mlir
    %w = pippy.param "layers.0.weight" : !torch.vtensor<[16,32],f32>
    ```

    With `pippy.shard = array<i64: DIM, PARTS>` (from
    `--pippy-tensor-parallel`) the op stands for one of PARTS equal slices
    of the tensor along dimension DIM: the type is the slice's, and rank t
    of the tensor-parallel group loads slice t of the file's tensor.
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs AnyType:$result);
  // `$name attr-dict : type($result)`, written by hand: the generated
  // printer builds the op's whole attribute dictionary (a uniqued attribute)
  // for every parameter it prints.
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Pippy_AssignOp : Pippy_Op<"assign", [
    MemoryEffects<[MemWrite]>, AllTypesMatch<["buffer", "value"]>]> {
  let summary = "a buffer takes a new value for the forwards that follow";
  let description = [{
    What an in-place update of a buffer while training becomes in the graph
    IR (`self.num_batches_tracked.add_(1)` in a BatchNorm): `buffer`, the
    result of a `pippy.param`, holds `value` from here on, for the next
    micro-batch's forward and the next step; later ops of this forward read
    `value` itself. The runtime copies `value` into the stage's tensor in
    training forwards and skips the op in `--infer`, which has eval
    semantics. A buffer that is written, or that an op updates in place
    (a training-mode `aten.batch_norm`'s running statistics), is stage
    state: every op that uses it must be in one stage.

    ```mlir
    %n = pippy.param "bn.num_batches_tracked" : !torch.vtensor<[],si64>
    %n1 = torch.aten.add.Tensor %n, %one, %int1 : ...
    pippy.assign %n = %n1 : !torch.vtensor<[],si64>
    ```
  }];
  let arguments = (ins AnyType:$buffer, AnyType:$value);
  let assemblyFormat = "$buffer `=` $value attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}

def Pippy_SplitPointOp : Pippy_Op<"split_point", []> {
  let summary = "marks a cut between two pipeline stages in the graph IR";
  let description = [{
    Ops before the marker (in block order) go to one stage, ops after it to
    the next, as with PyTorch's `pipe_split()`. Split points live in the graph
    IR only: outlining consumes them, and none may appear inside a
    `pippy.pipeline`.

    ```mlir
    pippy.split_point
    ```
  }];
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

def Pippy_PipelineOp : Pippy_Op<"pipeline", [
    SingleBlock, NoRegionArguments]> {
  let summary = "a model cut into stages connected by SSA values";
  let description = [{
    The body holds `pippy.stage` ops with indices 0, 1, 2, ... in order,
    then a `pippy.yield` of the model's outputs. A stage's operands come from
    outside the pipeline (the model's inputs) or from the results of earlier
    stages, so the body is the stage graph in the order the balancer cut it: a
    value passed to a stage that is not the next one is a skip connection.

    `tied` lists the parameters used by more than one stage. Every
    `pippy.param` name that appears in several stages has exactly one tied
    group, which lists exactly those stages.

    ```mlir
    %out = pippy.pipeline tied [#pippy.tied_group<"wte.weight", stages = [0, 1]>] -> !torch.vtensor<[4,8,64],f32> {
      %h = pippy.stage 0 (%tokens) : (!torch.vtensor<[4,8],si64>) -> !torch.vtensor<[4,8,32],f32> {
      ^bb0(%t: !torch.vtensor<[4,8],si64>):
        ...
        pippy.yield %e : !torch.vtensor<[4,8,32],f32>
      }
      %o = pippy.stage 1 (%h) : (!torch.vtensor<[4,8,32],f32>) -> !torch.vtensor<[4,8,64],f32> {
      ^bb0(%x: !torch.vtensor<[4,8,32],f32>):
        ...
        pippy.yield %logits : !torch.vtensor<[4,8,64],f32>
      }
      pippy.yield %o : !torch.vtensor<[4,8,64],f32>
    }
    ```
  }];
  let arguments = (ins
    OptionalAttr<TypedArrayAttrBase<Pippy_TiedGroupAttr, "tied groups">>:$tied);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    (`tied` $tied^)? (`->` type($results)^)? $body attr-dict
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The stages, in index order.
    auto getStages() { return getBody().front().getOps<StageOp>(); }
  }];
}

def Pippy_StageOp : Pippy_Op<"stage", [
    IsolatedFromAbove, SingleBlock, HasParent<"::mlir::pippy::PipelineOp">]> {
  let summary = "one pipeline stage: a region run by one rank";
  let description = [{
    The operands are the values the stage receives (from the model's inputs
    or from earlier stages); the region's arguments take their place inside,
    since a stage is isolated from above. The region ends in `pippy.yield`
    with one value per result: what the stage sends on. `index` is the
    stage's position in the pipeline.

    ```mlir
    %h = pippy.stage 0 (%x) : (!torch.vtensor<[4,32],f32>) -> !torch.vtensor<[4,16],f32> {
    ^bb0(%in: !torch.vtensor<[4,32],f32>):
      %w = pippy.param "fc1.weight" : !torch.vtensor<[16,32],f32>
      %b = pippy.param "fc1.bias" : !torch.vtensor<[16],f32>
      %y = torch.aten.linear %in, %w, %b : !torch.vtensor<[4,32],f32>, !torch.vtensor<[16,32],f32>, !torch.vtensor<[16],f32> -> !torch.vtensor<[4,16],f32>
      pippy.yield %y : !torch.vtensor<[4,16],f32>
    }
    ```
  }];
  let arguments = (ins I64Attr:$index, Variadic<AnyType>:$inputs);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $index ` ` `(` $inputs `)` attr-dict `:` functional-type($inputs, $results)
    $body
  }];
  let hasRegionVerifier = 1;
}

def Pippy_YieldOp : Pippy_Op<"yield", [
    Pure, ReturnLike, Terminator,
    ParentOneOf<["::mlir::pippy::StageOp", "::mlir::pippy::PipelineOp"]>]> {
  let summary = "the values a stage sends on, or a pipeline's outputs";
  let description = [{
    Ends a `pippy.stage` or a `pippy.pipeline`; its operand types equal the
    parent's result types.

    ```mlir
    pippy.yield %y : !torch.vtensor<[4,16],f32>
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$operands);
  let assemblyFormat = "attr-dict ($operands^ `:` type($operands))?";
}

//===----------------------------------------------------------------------===//
// Tensor parallelism (--pippy-tensor-parallel)
//===----------------------------------------------------------------------===//

def Pippy_TpCopyOp : Pippy_Op<"tp_copy", [
    Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "enters a tensor-parallel region: identity forward, gradient summed";
  let description = [{
    Megatron-LM's `f`: the input of a column-parallel layer, the same tensor
    on every rank of the tensor-parallel group of size `tp`. Forward returns
    it unchanged; backward sums its gradient over the group, since each rank
    computes only its columns' part of it. `pippy-run --tp` runs it; the
    group is the ranks of one pipeline rank that differ only in their
    tensor-parallel index (`include/pippy/Runtime/Mesh.h`).

    ```mlir
    %x1 = pippy.tp_copy %x {tp = 2} : !torch.vtensor<[2,8,32],f32>
    ```
  }];
  let arguments = (ins AnyType:$input, I64Attr:$tp);
  let results = (outs AnyType:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Pippy_TpReduceOp : Pippy_Op<"tp_reduce", [
    Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "leaves a tensor-parallel region: partial results summed";
  let description = [{
    Megatron-LM's `g`: the output of a row-parallel layer, of which each
    rank of the tensor-parallel group of size `tp` holds a partial sum over
    its rows. Forward all-reduces (sums) it over the group, so that every
    rank holds the whole result; backward passes the gradient through
    unchanged.

    ```mlir
    %y = pippy.tp_reduce %partial {tp = 2} : !torch.vtensor<[2,8,32],f32>
    ```
  }];
  let arguments = (ins AnyType:$input, I64Attr:$tp);
  let results = (outs AnyType:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Pippy_TpEmbeddingOp : Pippy_Op<"tp_embedding", [Pure]> {
  let summary = "a vocabulary-parallel embedding's partial lookup";
  let description = [{
    Megatron-LM's vocabulary-parallel embedding: `weight` is tensor rank
    t's slice of the table's rows (rows [t V/tp, (t+1) V/tp) of V, a
    `pippy.param` with `pippy.shard = array<i64: 0, tp>`). Each index in
    that range gives its row, every other index zeros, so that summing the
    group's results (`pippy.tp_reduce`) gives the whole table's lookup.
    Like `aten.embedding` with no padding index.

    ```mlir
    %e = pippy.tp_embedding %w, %idx {tp = 2} : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64> -> !torch.vtensor<[2,8,16],f32>
    %x = pippy.tp_reduce %e {tp = 2} : !torch.vtensor<[2,8,16],f32>
    ```
  }];
  let arguments = (ins AnyType:$weight, AnyType:$indices, I64Attr:$tp);
  let results = (outs AnyType:$result);
  let assemblyFormat = [{
    $weight `,` $indices attr-dict `:` type($weight) `,` type($indices) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

#endif // PIPPY_DIALECT_PIPPY_PIPPYOPS_TD
