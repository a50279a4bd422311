//===- TorchOps.td - Torch-MLIR compatible registered ops -*- tablegen -*-===//
//
// The ops of Torch-MLIR's `torch` dialect whose textual form is not the shared
// default format: constants, containers, control flow, `torch.operator`,
// casts and copies, and the few generated ops that carry a format of their
// own; the module and global slot structure is in TorchObjectOps.td.
// Everything else is an unregistered op printed by the dialect hooks (see
// TorchDialect.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_DIALECT_TORCH_TORCHOPS_TD
#define PIPPY_DIALECT_TORCH_TORCHOPS_TD

include "TorchTypes.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/CastInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Torch_ConstantNoneOp : Torch_Op<"constant.none", [
    ConstantLike, Pure,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "the value `None`";
  let description = [{
    ```mlir
    %none = torch.constant.none
    ```
  }];
  let results = (outs Torch_NoneType:$result);
  let assemblyFormat = "attr-dict";
}

def Torch_ConstantStrOp : Torch_Op<"constant.str", [
    ConstantLike, Pure,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "a string literal";
  let description = [{
    ```mlir
    %str = torch.constant.str "floor"
    ```
  }];
  let arguments = (ins StrAttr:$value);
  let results = (outs Torch_StringType:$result);
  let assemblyFormat = "$value attr-dict";
}

def Torch_ConstantDeviceOp : Torch_Op<"constant.device", [
    Pure, DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "a device such as `cpu` or `cuda:0`";
  let description = [{
    The result is named after the device.

    ```mlir
    %cpu = torch.constant.device "cpu"
    ```
  }];
  let arguments = (ins StrAttr:$value);
  let results = (outs Torch_DeviceType:$result);
  let assemblyFormat = "$value attr-dict";
}

def Torch_ConstantIntOp : Torch_Op<"constant.int", [
    ConstantLike, Pure,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "a 64-bit signed integer literal";
  let description = [{
    The value is written without a type; the result is named after it.

    ```mlir
    %int-1 = torch.constant.int -1
    ```
  }];
  let arguments = (ins I64Attr:$value);
  let results = (outs Torch_IntType:$result);
  let hasCustomAssemblyFormat = 1;
}

def Torch_ConstantFloatOp : Torch_Op<"constant.float", [
    ConstantLike, Pure,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "a 64-bit floating-point literal";
  let description = [{
    The result is named after the value, with the characters that an SSA
    name cannot hold dropped.

    ```mlir
    %float3.200000e00 = torch.constant.float 3.200000e+00
    ```
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs Torch_FloatType:$result);
  // `$value attr-dict`, with the value's text kept by the dialect.
  let hasCustomAssemblyFormat = 1;
}

def Torch_ConstantNumberOp : Torch_Op<"constant.number", [ConstantLike, Pure]> {
  let summary = "an int or float literal typed as `!torch.number`";
  let description = [{
    Has no custom syntax: Torch-MLIR writes it in the generic form.

    ```mlir
    %0 = "torch.constant.number"() <{value = 1 : i64}> : () -> !torch.number
    ```
  }];
  let arguments = (ins AnyAttrOf<[F64Attr, I64Attr]>:$value);
  let results = (outs Torch_NumberType:$result);
}

def Torch_ConstantBoolOp : Torch_Op<"constant.bool", [
    ConstantLike, Pure,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "`true` or `false`";
  let description = [{
    ```mlir
    %true = torch.constant.bool true
    ```
  }];
  let arguments = (ins I1Attr:$value);
  let results = (outs Torch_BoolType:$result);
  let assemblyFormat = "$value attr-dict";
}

def Torch_SymbolicIntOp : Torch_Op<"symbolic_int", [Pure]> {
  let summary = "a symbolic size with its bounds";
  let description = [{
    Names a dynamic dimension shared by several tensors, as torch.export
    records it; `torch.bind_symbolic_shape` relates it to tensor shapes.

    ```mlir
    %0 = torch.symbolic_int "s0" {min_val = 2, max_val = 1024} : !torch.int
    ```
  }];
  let arguments = (ins StrAttr:$symbol_name, I64Attr:$min_val,
                       I64Attr:$max_val);
  let results = (outs Torch_IntType:$result);
  let assemblyFormat = [{
    $symbol_name ` ` `{` `min_val` `=` $min_val `,` `max_val` `=` $max_val `}`
    attr-dict `:` type($result)
  }];
}

def Torch_BindSymbolicShapeOp : Torch_Op<"bind_symbolic_shape", []> {
  let summary = "states a tensor's shape in terms of symbolic sizes";
  let description = [{
    The affine map's symbols are the given `torch.symbolic_int` values and its
    results are the tensor's sizes.

    ```mlir
    torch.bind_symbolic_shape %arg0, [%0], affine_map<()[s0] -> (s0, 3)> : !torch.vtensor<[?,3],f32>
    ```
  }];
  let arguments = (ins AnyTorchTensorType:$operand,
                       Variadic<Torch_IntType>:$shape_symbols,
                       Builtin_AffineMapAttr:$shape_expressions);
  // The map is printed inline, never hoisted into a `#map` alias.
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Tensor literals, casts and copies
//===----------------------------------------------------------------------===//

def Torch_ValueTensorLiteralOp : Torch_Op<"vtensor.literal", [
    ConstantLike, Pure]> {
  let summary = "a value tensor with constant contents";
  let description = [{
    The contents are an elements attribute (`dense<...>`, or
    `dense_resource<...>` whose bytes live in the file's resource section).
    Its shape and element type equal the result's sizes and dtype.

    ```mlir
    %0 = torch.vtensor.literal(dense<[1.0, 2.0]> : tensor<2xf32>) : !torch.vtensor<[2],f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Torch_ValueTensorType:$result);
  let assemblyFormat = "`(` $value `)` attr-dict `:` qualified(type($result))";
  let hasVerifier = 1;
}

def Torch_NonValueTensorLiteralOp : Torch_Op<"tensor.literal", []> {
  let summary = "a mutable tensor initialised with constant contents";
  let description = [{
    ```mlir
    %0 = torch.tensor.literal(dense<0.0> : tensor<2xf32>) : !torch.tensor<[2],f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Torch_NonValueTensorType:$result);
  let assemblyFormat = "`(` $value `)` attr-dict `:` qualified(type($result))";
  let hasVerifier = 1;
}

def Torch_TensorStaticInfoCastOp : Torch_Op<"tensor_static_info_cast", [Pure]> {
  let summary = "adds or drops static sizes and dtype of a tensor type";
  let description = [{
    Both types are value tensors or both are non-value tensors.

    ```mlir
    %1 = torch.tensor_static_info_cast %0 : !torch.vtensor<[2,3],f32> to !torch.vtensor<*,f32>
    ```
  }];
  let arguments = (ins AnyTorchTensorType:$operand);
  let results = (outs AnyTorchTensorType:$result);
  let assemblyFormat = [{
    $operand attr-dict `:` qualified(type($operand)) `to` qualified(type($result))
  }];
  let hasVerifier = 1;
}

def Torch_CopyToNonValueTensorOp : Torch_Op<"copy.to_tensor", [
    TypesMatchWith<"operand is the value tensor of the result's type",
                   "result", "operand",
                   "::llvm::cast<::mlir::torch::NonValueTensorType>($_self).getWithValueSemantics()">]> {
  let summary = "copies a value tensor into a fresh mutable tensor";
  let description = [{
    ```mlir
    %1 = torch.copy.to_tensor %0 : !torch.tensor<[2],f32>
    ```
  }];
  let arguments = (ins Torch_ValueTensorType:$operand);
  let results = (outs Torch_NonValueTensorType:$result);
  let assemblyFormat = "$operand attr-dict `:` qualified(type($result))";
  let hasVerifier = 1;
}

def Torch_CopyToValueTensorOp : Torch_Op<"copy.to_vtensor", [
    TypesMatchWith<"operand is the non-value tensor of the result's type",
                   "result", "operand",
                   "::llvm::cast<::mlir::torch::ValueTensorType>($_self).getWithoutValueSemantics()">]> {
  let summary = "snapshots a mutable tensor as a value tensor";
  let description = [{
    ```mlir
    %1 = torch.copy.to_vtensor %0 : !torch.vtensor<[2],f32>
    ```
  }];
  let arguments = (ins Torch_NonValueTensorType:$operand);
  let results = (outs Torch_ValueTensorType:$result);
  let assemblyFormat = "$operand attr-dict `:` qualified(type($result))";
  let hasVerifier = 1;
}

def Torch_OverwriteTensorContentsOp : Torch_Op<"overwrite.tensor.contents", []> {
  let summary = "writes a value tensor's contents into a mutable tensor";
  let description = [{
    ```mlir
    torch.overwrite.tensor.contents %v overwrites %t : !torch.vtensor<[2],f32>, !torch.tensor<[2],f32>
    ```
  }];
  let arguments = (ins Torch_ValueTensorType:$value,
                       Torch_NonValueTensorType:$overwritten);
  let assemblyFormat = [{
    $value `overwrites` $overwritten attr-dict `:` qualified(type($value)) `,`
    qualified(type($overwritten))
  }];
}

def Torch_DerefineOp : Torch_Op<"derefine", [Pure]> {
  let summary = "casts a value to a less precise type";
  let description = [{
    Used where TorchScript passes a value of a subtype, e.g. an `int` where
    an `Optional[int]` is expected.

    ```mlir
    %1 = torch.derefine %int1 : !torch.int to !torch.optional<int>
    ```
  }];
  let arguments = (ins AnyTorchType:$operand);
  let results = (outs AnyTorchType:$result);
  let assemblyFormat = [{
    $operand attr-dict `:` qualified(type($operand)) `to` qualified(type($result))
  }];
}

def Torch_PerTensorAffineCreateOp : Torch_Op<"per_tensor_affine.create", []> {
  let summary = "builds a per-tensor quantized tensor from its integer data";
  let arguments = (ins AnyTorchTensorType:$int_repr, Torch_FloatType:$scale,
                       Torch_IntType:$offset);
  let results = (outs AnyTorchTensorType:$result);
  let assemblyFormat = [{
    $int_repr `,` $scale `,` $offset attr-dict `:` qualified(type($int_repr))
    `,` qualified(type($scale)) `,` qualified(type($offset)) `->`
    qualified(type($result))
  }];
}

def Torch_LinearParamsCreateOp : Torch_Op<"linear_params.create", []> {
  let summary = "packs a weight and optional bias for quantized linear ops";
  let arguments = (ins AnyTorchTensorType:$weight,
                       Optional<AnyTorchTensorType>:$bias);
  let results = (outs Torch_LinearParamsType:$result);
  let assemblyFormat = [{
    $weight (`,` $bias^)? attr-dict `:` qualified(type($weight))
    (`,` qualified(type($bias))^)?
  }];
}

//===----------------------------------------------------------------------===//
// Lists, tuples and dicts
//===----------------------------------------------------------------------===//

def Torch_PrimListConstructOp : Torch_Op<"prim.ListConstruct", [Pure]> {
  let summary = "builds a list from its elements";
  let description = [{
    Every element has the list's element type. An empty list prints two
    spaces before the colon.

    ```mlir
    %0 = torch.prim.ListConstruct %int1, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
    ```
  }];
  let arguments = (ins Variadic<AnyTorchType>:$elements);
  let results = (outs AnyTorchListType:$result);
  let assemblyFormat = "$elements attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Torch_PrimListUnpackOp : Torch_Op<"prim.ListUnpack", []> {
  let summary = "splits a list into its elements";
  let description = [{
    ```mlir
    %a, %b = torch.prim.ListUnpack %0 : !torch.list<int> -> !torch.int, !torch.int
    ```
  }];
  let arguments = (ins AnyTorchType:$operand);
  let results = (outs Variadic<AnyTorchType>:$results);
  let assemblyFormat = [{
    $operand attr-dict `:` qualified(type($operand)) `->` qualified(type($results))
  }];
}

def Torch_PrimTupleConstructOp : Torch_Op<"prim.TupleConstruct", [Pure]> {
  let summary = "builds a tuple from its elements";
  let description = [{
    ```mlir
    %0 = torch.prim.TupleConstruct %a, %b : !torch.int, !torch.float -> !torch.tuple<int, float>
    ```
  }];
  let arguments = (ins Variadic<AnyTorchType>:$elements);
  let results = (outs Torch_TupleType:$result);
  let assemblyFormat = [{
    $elements attr-dict `:` qualified(type($elements)) `->` qualified(type($result))
  }];
  let hasVerifier = 1;
}

def Torch_PrimTupleUnpackOp : Torch_Op<"prim.TupleUnpack", []> {
  let summary = "splits a tuple into its elements";
  let description = [{
    ```mlir
    %a, %b = torch.prim.TupleUnpack %0 : !torch.tuple<int, float> -> !torch.int, !torch.float
    ```
  }];
  let arguments = (ins AnyTorchType:$tup);
  let results = (outs Variadic<AnyTorchType>:$results);
  let assemblyFormat = [{
    $tup attr-dict `:` qualified(type($tup)) `->` qualified(type($results))
  }];
}

def Torch_PrimDictConstructOp : Torch_Op<"prim.DictConstruct", [
    SameVariadicOperandSize]> {
  let summary = "builds a dict from keys and values in the same order";
  let description = [{
    ```mlir
    %0 = torch.prim.DictConstruct keys(%str : !torch.str) values(%int1 : !torch.int) -> !torch.dict<str, int>
    ```
  }];
  let arguments = (ins Variadic<AnyTorchType>:$keys,
                       Variadic<AnyTorchType>:$values);
  let results = (outs Torch_DictType:$result);
  let assemblyFormat = [{
    `keys` `(` ($keys^ `:` qualified(type($keys)))? `)` `values` `(` ($values^
    `:` qualified(type($values)))? `)` attr-dict `->` qualified(type($result))
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Control flow
//===----------------------------------------------------------------------===//

def Torch_PrimIfOp : Torch_Op<"prim.If", [
  ]> {
  let summary = "runs one of two regions depending on a bool";
  let description = [{
    Each region ends in `torch.prim.If.yield` with values of the result types.

    ```mlir
    %0 = torch.prim.If %cond -> (!torch.int) {
      torch.prim.If.yield %int2 : !torch.int
    } else {
      torch.prim.If.yield %int1 : !torch.int
    }
    ```
  }];
  let arguments = (ins Torch_BoolType:$condition);
  let results = (outs Variadic<AnyTorchType>:$results);
  let regions = (region SizedRegion<1>:$thenRegion,
                        SizedRegion<1>:$elseRegion);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Torch_PrimIfYieldOp : Torch_Op<"prim.If.yield", [
    Pure, ReturnLike, Terminator, HasParent<"::mlir::torch::PrimIfOp">]> {
  let summary = "ends a branch of `torch.prim.If` with its results";
  let arguments = (ins Variadic<AnyTorchType>:$results);
  let assemblyFormat = "attr-dict ($results^ `:` qualified(type($results)))?";
}

def Torch_PrimLoopOp : Torch_Op<"prim.Loop", []> {
  let summary = "TorchScript's loop: a trip count, a condition, loop-carried values";
  let description = [{
    The body's arguments are the iteration number and the loop-carried
    values; it ends in `torch.prim.Loop.condition`.

    ```mlir
    %1 = torch.prim.Loop %n, %true, init(%x) {
    ^bb0(%i: !torch.int, %acc: !torch.float):
      %2 = torch.aten.add.float_int %acc, %i : !torch.float, !torch.int -> !torch.float
      torch.prim.Loop.condition %true, iter(%2 : !torch.float)
    } : (!torch.int, !torch.bool, !torch.float) -> !torch.float
    ```
  }];
  let arguments = (ins Torch_IntType:$maxTripCount,
                       Torch_BoolType:$initialCondition,
                       Variadic<AnyTorchType>:$iterArgsInit);
  let results = (outs Variadic<AnyTorchType>:$results);
  let regions = (region SizedRegion<1>:$region);
  let assemblyFormat = [{
    $maxTripCount `,` $initialCondition `,` `init` `(` $iterArgsInit `)` $region
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Torch_PrimLoopConditionOp : Torch_Op<"prim.Loop.condition", [
    Terminator, HasParent<"::mlir::torch::PrimLoopOp">]> {
  let summary = "ends a loop iteration: whether to go on, and the carried values";
  let arguments = (ins Torch_BoolType:$shouldContinue,
                       Variadic<AnyTorchType>:$iterArgs);
  let assemblyFormat = [{
    $shouldContinue `,` `iter` `(` ($iterArgs^ `:` qualified(type($iterArgs)))? `)`
    attr-dict
  }];
}

//===----------------------------------------------------------------------===//
// Opaque operators
//===----------------------------------------------------------------------===//

def Torch_OperatorOp : Torch_Op<"operator", []> {
  let summary = "an operator known only by name";
  let description = [{
    Holds an operator that has no op of its own (an ONNX node, a custom op,
    `torch.pippy._pipe_split`), optionally with regions that each end in
    `torch.operator_terminator`.

    ```mlir
    %0 = torch.operator "onnx.Add"(%a, %b) : (!torch.vtensor<[1],f32>, !torch.vtensor<[1],f32>) -> !torch.vtensor<[1],f32>
    ```
  }];
  let arguments = (ins StrAttr:$name, Variadic<AnyTorchType>:$operands);
  let results = (outs Variadic<AnyTorchType>:$results);
  let regions = (region VariadicRegion<AnyRegion>:$regions);
  let assemblyFormat = [{
    $name `(` $operands `)` attr-dict `:` functional-type($operands, $results)
    $regions
  }];
}

def Torch_OperatorTerminatorOp : Torch_Op<"operator_terminator", [
    Terminator, HasParent<"::mlir::torch::OperatorOp">]> {
  let summary = "ends a region of `torch.operator`";
  let arguments = (ins Variadic<AnyTorchType>:$operands);
  let assemblyFormat = "$operands attr-dict `:` type($operands)";
}

//===----------------------------------------------------------------------===//
// Ops with a generated format of their own
//===----------------------------------------------------------------------===//

def Torch_PrimPrintOp : Torch_Op<"prim.Print", []> {
  let summary = "prints its operands";
  let arguments = (ins Variadic<AnyTorchType>:$operands);
  let assemblyFormat = "`(` $operands `)` attr-dict `:` qualified(type($operands))";
}

def Torch_PrimTolistOp : Torch_Op<"prim.tolist", []> {
  let summary = "converts a tensor into nested lists";
  let arguments = (ins Variadic<AnyTorchType>:$operands);
  let results = (outs Variadic<AnyTorchType>:$results);
  let assemblyFormat = [{
    `(` $operands `)` attr-dict `:` qualified(type($operands)) `->`
    qualified(type($results))
  }];
}

def Torch_AtenFormatOp : Torch_Op<"aten.format", []> {
  let summary = "Python's `str.format`";
  let arguments = (ins Variadic<AnyTorchType>:$operands);
  let results = (outs Torch_StringType:$result);
  let assemblyFormat = [{
    `(` $operands `)` attr-dict `:` qualified(type($operands)) `->`
    qualified(type($result))
  }];
}

include "TorchObjectOps.td"

//===----------------------------------------------------------------------===//
// Shape and dtype refinement
//===----------------------------------------------------------------------===//

def Torch_ValsemVariantAtenBernoulliFloatOp
    : Torch_Op<"valsem.aten.bernoulli.float", []> {
  let summary = "value-semantic `aten.bernoulli_.float`";
  let arguments = (ins AnyTorchTensorType:$self, Torch_FloatType:$p,
                       AnyTorchType:$generator);
  let results = (outs AnyTorchTensorType:$result);
  let assemblyFormat = [{
    $self `,` $p `,` $generator attr-dict `:` type($self) `,` type($p) `,`
    type($generator) `->` type($result)
  }];
}

def Torch_PromoteDtypesOp : Torch_Op<"promote_dtypes", []> {
  let summary = "the dtype that type promotion gives for ranks and dtypes";
  let arguments = (ins AnyTorchListType:$ranks, AnyTorchListType:$dtypes);
  let results = (outs Torch_IntType:$result);
  let assemblyFormat = "$ranks `,` $dtypes attr-dict `:` functional-type(operands, results)";
}

def Torch_RuntimeAssertOp : Torch_Op<"runtime.assert", []> {
  let summary = "fails at run time with a message when the condition is false";
  let arguments = (ins Torch_BoolType:$condition, StrAttr:$message);
  let assemblyFormat = "$condition `,` $message attr-dict";
}

class Torch_CalculateOp<string mnemonic, string keyword>
    : Torch_Op<mnemonic, []> {
  let results = (outs Variadic<AnyTorchType>:$results);
  let regions = (region SizedRegion<1>:$body, SizedRegion<1>:$calculation);
  let assemblyFormat = "$body `" # keyword # "` $calculation attr-dict `:` type($results)";
}

def Torch_ShapeCalculateOp : Torch_CalculateOp<"shape.calculate", "shapes"> {
  let summary = "a computation with the calculation of its result shapes";
}
def Torch_DtypeCalculateOp : Torch_CalculateOp<"dtype.calculate", "dtypes"> {
  let summary = "a computation with the calculation of its result dtypes";
}

class Torch_CalculateYieldOp<string mnemonic, string parent, list<Trait> traits = []>
    : Torch_Op<mnemonic, !listconcat([Terminator,
                                      HasParent<"::mlir::torch::" # parent>],
                                     traits)> {
  let arguments = (ins Variadic<AnyTorchType>:$results);
  let assemblyFormat = "attr-dict ($results^ `:` type($results))?";
}

def Torch_ShapeCalculateYieldOp
    : Torch_CalculateYieldOp<"shape.calculate.yield", "ShapeCalculateOp",
                             [ReturnLike]> {
  let summary = "ends the body of `torch.shape.calculate`";
}
def Torch_ShapeCalculateYieldShapesOp
    : Torch_CalculateYieldOp<"shape.calculate.yield.shapes", "ShapeCalculateOp"> {
  let summary = "ends the shape calculation with one shape per result";
}
def Torch_DtypeCalculateYieldOp
    : Torch_CalculateYieldOp<"dtype.calculate.yield", "DtypeCalculateOp",
                             [ReturnLike]> {
  let summary = "ends the body of `torch.dtype.calculate`";
}
def Torch_DtypeCalculateYieldDtypesOp
    : Torch_CalculateYieldOp<"dtype.calculate.yield.dtypes", "DtypeCalculateOp"> {
  let summary = "ends the dtype calculation with one dtype per result";
}

#endif // PIPPY_DIALECT_TORCH_TORCHOPS_TD
