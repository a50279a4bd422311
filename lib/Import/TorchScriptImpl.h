//===- TorchScriptImpl.h - the TorchScript importer's parts -----*- C++ -*-===//
//
// Internal to lib/Import: the importer class that the TorchScript*.cpp files
// implement between them, one concern a file:
//   TorchScript.cpp          the module driver: loading, parameters, forward's
//                            arguments and results, the weights file
//   TorchScriptTypes.cpp     MLIR types of traced values, constants
//   TorchScriptNodes.cpp     running and emitting one node of the graph
//   TorchScriptShadow.cpp    data-dependent shapes: the shadow run
//   TorchScriptAliasing.cpp  in-place writes through views
//   TorchScriptLoad.cpp      loading the archive, first in a child process
//
// Only these files see both libtorch and MLIR. They are compiled with
// exceptions: a failure throws ImportError, which importTorchScript turns
// into an llvm::Error.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_LIB_IMPORT_TORCHSCRIPTIMPL_H
#define PIPPY_LIB_IMPORT_TORCHSCRIPTIMPL_H

#include "pippy/Import/TorchScript.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"

#include <torch/script.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace pippy::torchscript {

namespace jit = ::torch::jit;

/// An import failure; turned into an llvm::Error at the boundary.
struct ImportError {
  std::string message;
  bool running = false; // running the model on the example inputs failed
};

[[noreturn]] inline void fail(const std::string &message) {
  throw ImportError{message};
}

class Importer {
public:
  /// Integer example inputs hold `integerFill` everywhere.
  Importer(mlir::MLIRContext &context, const ImportOptions &options,
           int64_t integerFill)
      : context(context), options(options), builder(&context),
        integerFill(integerFill) {}

  mlir::OwningOpRef<mlir::ModuleOp> run();

private:
  /// A tensor of the example run. The weak reference keeps its TensorImpl's
  /// address from being reused without keeping its memory alive.
  struct Tracked {
    explicit Tracked(const at::Tensor &t)
        : impl(t.getIntrusivePtr()), sizes(t.sizes().begin(), t.sizes().end()) {
    }
    c10::weak_intrusive_ptr<c10::TensorImpl> impl;
    std::vector<int64_t> sizes;
    mlir::Value current;               // the IR value with its contents
    Tracked *parent = nullptr;         // what it views, if invertible
    mlir::Operation *viewOp = nullptr; // the op that made it from `parent`
    std::vector<int64_t> dims;         // a permute's dims
    bool written = false;  // `current` overrides `mapped` for its jit values
    bool stale = false;    // remade from `parent` when next read
    std::string clobbered; // overwritten by this op through a view that
                           // cannot be replayed
  };

  // The module (TorchScript.cpp).
  llvm::SmallVector<mlir::Type> makeExampleInputs(jit::Graph &graph);
  llvm::SmallVector<mlir::Value> emitResults(jit::Graph &graph,
                                             mlir::Location loc);
  jit::Module loadModule();
  void collectParameters(jit::Module &module);
  std::string canonicalName(const std::string &name);
  mlir::Location currentLocation();
  std::string describe(jit::Node *node) const;
  void orderParameters(mlir::Block &body);
  void writeWeights();

  // Types and constants (TorchScriptTypes.cpp).
  mlir::Type getDtype(at::ScalarType type);
  mlir::Type getTensorType(const at::Tensor &tensor);
  mlir::Type getStaticType(const c10::TypePtr &type, jit::Node *node);
  mlir::Type getValueType(jit::Value *value, jit::Node *node);
  mlir::Type getTupleType(const c10::IValue &tuple, jit::Node *node);
  static llvm::ArrayRef<c10::IValue> elementsOf(const c10::IValue &value);
  static bool isNestedTensors(const c10::IValue &value);
  mlir::Value flattenTuple(mlir::Value tuple, const c10::IValue &concrete,
                           mlir::Location loc);
  static bool isTupleOfTensors(const c10::IValue &value);
  mlir::Value emitConstant(const c10::IValue &value, mlir::Location loc);
  mlir::Value emitTensorLiteral(const at::Tensor &tensor, mlir::Location loc);
  mlir::Value emitInt(int64_t v, mlir::Location loc);

  // Nodes (TorchScriptNodes.cpp).
  mlir::Value lookup(jit::Value *value, jit::Node *user);
  static void runNode(jit::Node *node, jit::Stack &stack);
  bool isNumberOperand(jit::Node *node, size_t index);
  const c10::FunctionSchema *functionalOverload(jit::Node *node,
                                                size_t outIndex);
  void wrapNumbers(jit::Node *node, jit::Stack &stack);
  void execute(jit::Node *node);
  void importNode(jit::Node *node, const std::string &path);
  void importNodeBody(jit::Node *node, const std::string &path);
  void importConstant(jit::Node *node, mlir::Location loc);
  bool propagateDataDependence(jit::Node *node);
  void importContainerOp(jit::Node *node, mlir::Location loc);
  void importCall(jit::Node *node);
  bool isFoldable(jit::Node *node);
  void importGetAttr(jit::Node *node, mlir::Location loc);
  void importOperator(jit::Node *node, mlir::Location loc);
  /// The tensor an operator node writes into (in place or `out=`), if any.
  struct OperatorWrite {
    jit::Value *written = nullptr;
    std::optional<size_t> outArg; ///< the `out=` argument's index
    std::string assignedBuffer;   ///< a buffer updated in place (training)
  };
  OperatorWrite resolveWrite(jit::Node *node, const std::string &ns,
                             std::string &name, std::string &overload);
  llvm::SmallVector<mlir::Value> operatorOperands(jit::Node *node,
                                                  std::optional<size_t> outArg);
  bool toFunctional(jit::Node *node, const std::string &ns, std::string &name,
                    std::string &overload);
  void assignBuffer(jit::Node *node, const std::string &buffer,
                    mlir::Value value, mlir::Location loc);

  // Data-dependent shapes (TorchScriptShadow.cpp).
  const c10::IValue &shadowOf(jit::Value *v);
  bool shadowDiffers(jit::Value *v);
  void copyShadow(jit::Value *from, jit::Value *to);
  void executeShadow(jit::Node *node);
  void markDataDependentShapes(jit::Node *node);

  // Aliasing (TorchScriptAliasing.cpp).
  Tracked *trackedOf(jit::Value *value);
  void track(jit::Value *value, jit::Node *node);
  void checkNotParameterMemory(jit::Node *node, jit::Value *written);
  [[noreturn]] void failWriteTo(jit::Node *node, const std::string &name,
                                const std::string &how,
                                const std::string &kind = "in-place op ");
  mlir::Value resolve(Tracked &entry, jit::Node *user);
  mlir::Value emitScatter(Tracked &view, mlir::Value base, mlir::Value src,
                          mlir::Location loc);
  void recordWrite(jit::Node *node, jit::Value *writtenValue,
                   mlir::Value result);

  mlir::MLIRContext &context;
  const ImportOptions &options;
  mlir::OpBuilder builder;
  int64_t integerFill;

  std::unordered_map<jit::Value *, c10::IValue> values;
  std::unordered_map<jit::Value *, mlir::Value> mapped;
  std::set<jit::Value *> dataDependent;
  std::unordered_map<jit::Value *, std::string> attrPaths;
  std::map<std::string, at::Tensor> parameters;
  std::vector<std::string> parameterOrder;
  std::vector<std::string> buffers;
  std::vector<std::string> frozen;
  std::map<std::string, std::string> aliases;
  std::map<std::string, mlir::Value> paramValues;
  /// Buffers given a new value in place (`pippy.assign`), by name.
  std::map<std::string, mlir::Value> assignedBuffers;
  int64_t nextRandomStream = 0; ///< the next random op's `pippy.random_stream`
  mlir::Operation *lastParam = nullptr;
  std::string currentPath;
  std::unordered_map<jit::Value *, c10::IValue> shadow;
  std::set<jit::Value *> opaque; // the shadow run failed downstream of a
                                 // size difference
  std::vector<std::unique_ptr<Tracked>> trackedArena;
  std::unordered_map<c10::TensorImpl *, Tracked *> tracked;
  std::unordered_map<c10::StorageImpl *, std::vector<Tracked *>> storageUsers;
  std::map<std::string, at::Tensor> parameterTensors;
};

} // namespace pippy::torchscript

#endif // PIPPY_LIB_IMPORT_TORCHSCRIPTIMPL_H
