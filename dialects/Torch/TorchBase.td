//===- TorchBase.td - Torch-MLIR compatible dialect definition -*- tablegen -*-===//
//
// The `torch` dialect reads and writes Torch-MLIR's textual IR without linking
// Torch-MLIR. The hand-written ops of Torch-MLIR (constants, lists, control
// flow, `torch.operator`, ...) are registered here; every other
// `torch.<ns>.<name>[.<overload>]` op goes through the dialect's hooks for
// unknown operations, in Torch-MLIR's shared format.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_DIALECT_TORCH_TORCHBASE_TD
#define PIPPY_DIALECT_TORCH_TORCHBASE_TD

include "mlir/IR/OpBase.td"

def Torch_Dialect : Dialect {
  let name = "torch";
  let cppNamespace = "::mlir::torch";
  let summary = "Textual compatibility with Torch-MLIR's `torch` dialect";
  let description = [{
    Models PyTorch programs as Torch-MLIR does: value-semantic tensors
    (`!torch.vtensor<[4,16],f32>`), TorchScript's scalar and container types,
    and one op per ATen or prim operator (`torch.aten.linear`,
    `torch.prim.ListConstruct`, ...).

    Only the ops whose textual form is not Torch-MLIR's shared default format
    are registered. Every other op named `torch.<namespace>.<name>` or
    `torch.<namespace>.<name>.<overload>` is parsed and printed in the shared
    format

    ```mlir
    %r = torch.aten.mm %a, %b : !torch.vtensor<[2,3],f32>, !torch.vtensor<[3,4],f32> -> !torch.vtensor<[2,4],f32>
    ```

    and kept as an unregistered operation whose name maps one-to-one to the
    ATen dispatcher's `<namespace>::<name>` and overload.
  }];

  let useDefaultTypePrinterParser = 0;
  let dependentDialects = ["::mlir::sparse_tensor::SparseTensorDialect"];
  let extraClassDeclaration = [{
    ::mlir::Type parseType(::mlir::DialectAsmParser &parser) const override;
    void printType(::mlir::Type type,
                   ::mlir::DialectAsmPrinter &printer) const override;

    std::optional<ParseOpHook>
    getParseOperationHook(::llvm::StringRef opName) const override;
    ::llvm::unique_function<void(::mlir::Operation *,
                                 ::mlir::OpAsmPrinter &)>
    getOperationPrinter(::mlir::Operation *op) const override;

    /// The text of a tensor type whose dtype is a builtin type and that has
    /// no sparse encoding, without the `!torch.` prefix
    /// (`vtensor<[4,16],f32>`). Such a type prints the same in every module
    /// (builtin types never get aliases), so it is written once and kept.
    ::llvm::StringRef getTensorTypeText(::mlir::Type type) const;

    /// How `torch.constant.float` prints a value: MLIR's text for it
    /// (`1.000000e-05`) and the SSA name made of it (`float1.000000e-05`).
    /// Kept by the value's bits: writing a double in decimal and parsing it
    /// back (MLIR's check that the text round-trips) costs tens of thousands
    /// of instructions, and a model repeats a few values (an epsilon, a
    /// scale) in every layer.
    struct FloatText {
      ::llvm::StringRef value, name;
    };
    FloatText getFloatText(::mlir::FloatAttr value) const;

  private:
    void registerTypes();

    /// The texts above, and the memory that holds them.
    mutable ::llvm::DenseMap<::mlir::Type, ::llvm::StringRef> tensorTypeTexts;
    mutable ::llvm::DenseMap<uint64_t, FloatText> floatTexts;
    mutable ::llvm::BumpPtrAllocator printedTextMemory;
    mutable ::std::mutex printedTextsMutex;

    /// Types parsed so far, by their text (`vtensor<[4,16],f32>`): a large
    /// graph spells a few hundred distinct types hundreds of thousands of
    /// times.
    mutable ::llvm::StringMap<::mlir::Type> parsedTypes;
    mutable ::std::mutex parsedTypesMutex;
  }];
}

class Torch_Op<string mnemonic, list<Trait> traits = []>
    : Op<Torch_Dialect, mnemonic, traits>;

#endif // PIPPY_DIALECT_TORCH_TORCHBASE_TD
