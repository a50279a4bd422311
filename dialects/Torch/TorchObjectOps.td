//===- TorchObjectOps.td - TorchScript object graph ops -*- tablegen -*-===//
//
// The `torch` dialect's ops for a TorchScript module as an object graph:
// module instances and their slots, class types and methods, global slots
// and their initializer, and the prim ops that create objects, read and
// write their attributes, call their methods and enter `with` blocks.
// Included by TorchOps.td, whose op classes and interfaces they use.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_DIALECT_TORCH_TORCHOBJECTOPS_TD
#define PIPPY_DIALECT_TORCH_TORCHOBJECTOPS_TD

//===----------------------------------------------------------------------===//
// TorchScript object graph and global slots
//===----------------------------------------------------------------------===//

def Torch_NnModuleOp : Torch_Op<"nn_module", [
    SingleBlockImplicitTerminator<"::mlir::torch::NnModuleTerminatorOp">]> {
  let summary = "an instance of a TorchScript module class";
  let description = [{
    Its body holds one `torch.slot` per attribute of the instance.

    ```mlir
    %0 = torch.nn_module {
      torch.slot "b", %bool_true : !torch.bool
    } : !torch.nn.Module<"test">
    ```
  }];
  let results = (outs Torch_NnModuleType:$result);
  let regions = (region SizedRegion<1>:$region);
  let assemblyFormat = "$region attr-dict `:` qualified(type($result))";
}

def Torch_NnModuleTerminatorOp : Torch_Op<"nn_module_terminator", [
    Terminator, HasParent<"::mlir::torch::NnModuleOp">]> {
  let summary = "ends the body of `torch.nn_module`";
  let assemblyFormat = "attr-dict";
}

def Torch_SlotOp : Torch_Op<"slot", [HasParent<"::mlir::torch::NnModuleOp">]> {
  let summary = "the value of one attribute of a module instance";
  let arguments = (ins StrAttr:$name, AnyTorchType:$value);
  let assemblyFormat = "$name `,` $value attr-dict `:` qualified(type($value))";
}

def Torch_ClassTypeOp : Torch_Op<"class_type", [
    Symbol, SingleBlockImplicitTerminator<"::mlir::torch::ClassTypeTerminatorOp">]> {
  let summary = "a TorchScript class: its attributes and methods";
  let arguments = (ins SymbolNameAttr:$sym_name);
  let regions = (region SizedRegion<1>:$region);
  let assemblyFormat = "$sym_name $region attr-dict";
}

def Torch_ClassTypeTerminatorOp : Torch_Op<"class_type_terminator", [
    Terminator, HasParent<"::mlir::torch::ClassTypeOp">]> {
  let summary = "ends the body of `torch.class_type`";
  let assemblyFormat = "attr-dict";
}

def Torch_MethodOp : Torch_Op<"method", [
    HasParent<"::mlir::torch::ClassTypeOp">]> {
  let summary = "a method of a class, bound to a function";
  let arguments = (ins StrAttr:$name, FlatSymbolRefAttr:$function,
                       UnitAttr:$isPrivate);
  let assemblyFormat = "(`private` $isPrivate^)? $name `,` $function attr-dict";
}

def Torch_AttrOp : Torch_Op<"attr", [HasParent<"::mlir::torch::ClassTypeOp">]> {
  let summary = "an attribute of a class and its type";
  let arguments = (ins StrAttr:$name, TypeAttr:$type, UnitAttr:$isPrivate);
  let assemblyFormat = "(`private` $isPrivate^)? $name `:` $type attr-dict";
}

def Torch_GlobalSlotOp : Torch_Op<"global_slot", [Symbol]> {
  let summary = "a global variable of the flattened object graph";
  let arguments = (ins SymbolNameAttr:$sym_name,
                       OptionalAttr<StrAttr>:$sym_visibility,
                       TypeAttr:$typeBound);
  let assemblyFormat = "($sym_visibility^)? $sym_name attr-dict `:` $typeBound";
}

def Torch_GlobalSlotModuleInitializerOp
    : Torch_Op<"global_slot.module_initializer", [
        IsolatedFromAbove,
        SingleBlockImplicitTerminator<"::mlir::torch::InitializeGlobalSlotsOp">]> {
  let summary = "computes the initial values of the global slots";
  let regions = (region SizedRegion<1>:$initializer);
  let assemblyFormat = "$initializer attr-dict";
}

def Torch_InitializeGlobalSlotsOp : Torch_Op<"initialize.global_slots", [
    Terminator, HasParent<"::mlir::torch::GlobalSlotModuleInitializerOp">]> {
  let summary = "assigns initial values to global slots";
  let description = [{
    ```mlir
    torch.initialize.global_slots [
      @slot0(%0 : !torch.int)
    ]
    ```
  }];
  let arguments = (ins SymbolRefArrayAttr:$slotSymNames,
                       Variadic<AnyTorchType>:$initialValues);
  let builders = [OpBuilder<(ins), [{
    build($_builder, $_state, $_builder.getArrayAttr({}), ::mlir::ValueRange());
  }]>];
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Torch_GlobalSlotInitOp : Torch_Op<"global_slot.init", [
    Terminator, HasParent<"::mlir::torch::GlobalSlotOp">]> {
  let summary = "the initial value of a global slot";
  let arguments = (ins AnyTorchType:$initialValue);
  let assemblyFormat = "$initialValue attr-dict `:` qualified(type($initialValue))";
}

def Torch_GlobalSlotGetOp : Torch_Op<"global_slot.get", []> {
  let summary = "reads a global slot";
  let arguments = (ins FlatSymbolRefAttr:$slot);
  let results = (outs AnyTorchType:$result);
  let assemblyFormat = "$slot attr-dict `:` qualified(type($result))";
}

def Torch_GlobalSlotSetOp : Torch_Op<"global_slot.set", []> {
  let summary = "writes a global slot";
  let arguments = (ins FlatSymbolRefAttr:$slot, AnyTorchType:$value);
  let assemblyFormat = "$slot `=` $value attr-dict `:` qualified(type($value))";
}

def Torch_PrimCreateObjectOp : Torch_Op<"prim.CreateObject", []> {
  let summary = "creates an instance of a class";
  let results = (outs Torch_NnModuleType:$result);
  let assemblyFormat = "attr-dict qualified(type($result))";
}

def Torch_PrimGetAttrOp : Torch_Op<"prim.GetAttr", []> {
  let summary = "reads an attribute of a module instance";
  let arguments = (ins StrAttr:$name, Torch_NnModuleType:$receiver);
  let results = (outs AnyTorchType:$result);
  let assemblyFormat = [{
    $receiver `[` $name `]` attr-dict `:` qualified(type($receiver)) `->`
    qualified(type($result))
  }];
}

def Torch_PrimSetAttrOp : Torch_Op<"prim.SetAttr", []> {
  let summary = "writes an attribute of a module instance";
  let arguments = (ins StrAttr:$name, Torch_NnModuleType:$receiver,
                       AnyTorchType:$value);
  let assemblyFormat = [{
    $receiver `[` $name `]` `=` $value attr-dict `:` qualified(type($receiver))
    `,` qualified(type($value))
  }];
}

def Torch_PrimCallMethodOp : Torch_Op<"prim.CallMethod", []> {
  let summary = "calls a method of a module instance";
  let arguments = (ins StrAttr:$name, Torch_NnModuleType:$receiver,
                       Variadic<AnyTorchType>:$methodOperands);
  let results = (outs AnyTorchType:$result);
  let assemblyFormat = [{
    $receiver `[` $name `]` `(` $methodOperands `)` attr-dict `:`
    qualified(type($receiver)) `,` functional-type($methodOperands, $result)
  }];
}

def Torch_PrimStoreOp : Torch_Op<"prim.Store", []> {
  let summary = "stores a value under a name (TorchScript's environment)";
  let arguments = (ins StrAttr:$name, AnyTorchType:$value);
  let assemblyFormat = "$name `,` $value attr-dict `:` qualified(type($value))";
}

def Torch_PrimLoadOp : Torch_Op<"prim.Load", []> {
  let summary = "loads a value stored under a name";
  let arguments = (ins StrAttr:$name);
  let results = (outs AnyTorchType:$result);
  let assemblyFormat = "$name attr-dict `:` qualified(type($result))";
}

def Torch_PrimEnterOp : Torch_Op<"prim.Enter", []> {
  let summary = "enters a `with` block";
  let arguments = (ins AnyTorchType:$inp);
  let results = (outs Torch_NoneType:$result);
  let assemblyFormat = "$inp attr-dict `:` qualified(type($inp))";
}

def Torch_PrimExitOp : Torch_Op<"prim.Exit", []> {
  let summary = "leaves a `with` block";
  let arguments = (ins AnyTorchType:$inp);
  let results = (outs AnyTorchTensorType:$result);
  let assemblyFormat = [{
    $inp attr-dict `:` qualified(type($inp)) `->` qualified(type($result))
  }];
}

#endif // PIPPY_DIALECT_TORCH_TORCHOBJECTOPS_TD
