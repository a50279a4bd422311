//===- TorchTypes.td - Torch-MLIR compatible types -------*- tablegen -*-===//
//
// One TypeDef per type of Torch-MLIR's grammar. Types nested in another torch
// type (`!torch.list<optional<int>>`) are written without the `!torch.` prefix.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_DIALECT_TORCH_TORCHTYPES_TD
#define PIPPY_DIALECT_TORCH_TORCHTYPES_TD

include "mlir/IR/AttrTypeBase.td"
include "TorchBase.td"
include "mlir/IR/CommonTypeConstraints.td"

class Torch_Type<string name, string typeMnemonic,
                 string baseCppClass = "::mlir::Type">
    : TypeDef<Torch_Dialect, name, [], baseCppClass> {
  let mnemonic = typeMnemonic;
}

class Torch_ContainerType<string name, string typeMnemonic>
    : Torch_Type<name, typeMnemonic> {
  let parameters = (ins "::mlir::Type":$containedType);
  let hasCustomAssemblyFormat = 1;
  let builders = [
    TypeBuilderWithInferredContext<(ins "::mlir::Type":$containedType), [{
      return Base::get(containedType.getContext(), containedType);
    }]>
  ];
}

class OptionalSizesParameter
    : AttrOrTypeParameter<"::std::optional<::llvm::ArrayRef<int64_t>>",
                          "sizes of the dimensions, absent when unranked"> {
  let allocator = [{
    if ($_self.has_value())
      $_dst.value() = $_allocator.copyInto($_self.value());
  }];
}

class Torch_TensorTypeBase<string name, string typeMnemonic>
    : Torch_Type<name, typeMnemonic, "::mlir::torch::BaseTensorType"> {
  let parameters = (ins
    OptionalSizesParameter<>:$optionalSizes,
    "::mlir::Type":$optionalDtype,
    "::mlir::Attribute":$optionalSparsity
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Torch_ValueTensorType : Torch_TensorTypeBase<"ValueTensor", "vtensor"> {
  let summary = "tensor with value semantics";
  let description = [{
    ```
    vtensor-type ::= `!torch.vtensor` (`<` sizes `,` dtype (`,` sparsity)? `>`)?
    sizes        ::= `*` | `[` (size (`,` size)*)? `]`
    size         ::= `?` | decimal-literal
    dtype        ::= `unk` | type
    ```

    A tensor that is never aliased or mutated. Sizes are `*` when the rank is
    unknown and `?` for an unknown dimension; the dtype is an MLIR type
    (`f32`, `bf16`, `si64`, `i1`, `complex<f32>`, `!torch.qint8`, ...) or
    `unk`. The optional third parameter is a sparse tensor encoding.
  }];
  let extraClassDeclaration = [{
    /// The `!torch.tensor` with the same sizes, dtype and encoding.
    NonValueTensorType getWithoutValueSemantics() const;
  }];
}

def Torch_NonValueTensorType : Torch_TensorTypeBase<"NonValueTensor", "tensor"> {
  let summary = "tensor that may be aliased or mutated";
  let description = [{
    Same syntax as `!torch.vtensor`; models a `torch.Tensor` that in-place and
    view operators may alias or write to.
  }];
  let extraClassDeclaration = [{
    /// The `!torch.vtensor` with the same sizes, dtype and encoding.
    ValueTensorType getWithValueSemantics() const;
  }];
}

def Torch_OptionalType : Torch_ContainerType<"Optional", "optional"> {
  let summary = "a value of the contained type, or none";
}
def Torch_ListType : Torch_ContainerType<"List", "list"> {
  let summary = "a list whose elements have the contained type";
}

class Torch_TypeListType<string name, string typeMnemonic>
    : Torch_Type<name, typeMnemonic> {
  let parameters = (ins ArrayRefParameter<"::mlir::Type">:$containedTypes);
  let hasCustomAssemblyFormat = 1;
}
def Torch_TupleType : Torch_TypeListType<"Tuple", "tuple"> {
  let summary = "a fixed-size tuple of the contained types";
}
def Torch_UnionType : Torch_TypeListType<"Union", "union"> {
  let summary = "a value of any one of the contained types";
}

def Torch_DictType : Torch_Type<"Dict", "dict"> {
  let summary = "a dictionary from the key type to the value type";
  let parameters = (ins "::mlir::Type":$keyType, "::mlir::Type":$valueType);
  let hasCustomAssemblyFormat = 1;
}

def Torch_NnModuleType : Torch_Type<"NnModule", "nn.Module"> {
  let summary = "an instance of a TorchScript `torch.nn.Module` class";
  let parameters = (ins StringRefParameter<"class name">:$className);
  let hasCustomAssemblyFormat = 1;
}

def Torch_BoolType : Torch_Type<"Bool", "bool"> {
  let summary = "Python `bool`";
}
def Torch_IntType : Torch_Type<"Int", "int"> {
  let summary = "Python `int`, a 64-bit signed integer in TorchScript";
}
def Torch_FloatType : Torch_Type<"Float", "float"> {
  let summary = "Python `float`, a 64-bit float in TorchScript";
}
def Torch_NoneType : Torch_Type<"None", "none"> {
  let summary = "the singleton `None`";
}
def Torch_StringType : Torch_Type<"String", "str"> {
  let summary = "an immutable string";
}
def Torch_DeviceType : Torch_Type<"Device", "Device"> {
  let summary = "a `torch.device`";
}
def Torch_GeneratorType : Torch_Type<"Generator", "Generator"> {
  let summary = "a random number generator";
}
def Torch_NumberType : Torch_Type<"Number", "number"> {
  let summary = "an int, float or complex scalar";
}
def Torch_AnyType : Torch_Type<"Any", "any"> {
  let summary = "any TorchScript value";
}
def Torch_LinearParamsType : Torch_Type<"LinearParams", "LinearParams"> {
  let summary = "packed weight and bias of a quantized linear layer";
}
def Torch_QInt8Type : Torch_Type<"QInt8", "qint8"> {
  let summary = "the `torch.qint8` dtype";
}
def Torch_QUInt8Type : Torch_Type<"QUInt8", "quint8"> {
  let summary = "the `torch.quint8` dtype";
}
def Torch_QInt32Type : Torch_Type<"QInt32", "qint32"> {
  let summary = "the `torch.qint32` dtype";
}
def Torch_QInt16Type : Torch_Type<"QInt16", "qint16"> {
  let summary = "the `torch.qint16` dtype";
}

//===----------------------------------------------------------------------===//
// Type constraints used by the registered ops.
//===----------------------------------------------------------------------===//

def AnyTorchTensorType : Type<
    CPred<"::llvm::isa<::mlir::torch::BaseTensorType>($_self)">,
    "any torch tensor type", "::mlir::torch::BaseTensorType">;
def AnyTorchListType : Type<
    CPred<"::llvm::isa<::mlir::torch::ListType>($_self)">,
    "any torch list type", "::mlir::torch::ListType">;
defvar AnyTorchType = AnyType;

#endif // PIPPY_DIALECT_TORCH_TORCHTYPES_TD
