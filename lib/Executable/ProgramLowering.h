//===- ProgramLowering.h - graph IR blocks to flat programs -----*- C++ -*-===//
//
// Internal to lib/Executable: turns the ops of one or more blocks of the
// graph IR (a stage's body, or every stage of a pipeline one after another)
// into one executable program: value slots, constants computed ahead of
// time, and calls of operators by name whose operands carry their schema
// argument names.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_LIB_EXECUTABLE_PROGRAMLOWERING_H
#define PIPPY_LIB_EXECUTABLE_PROGRAMLOWERING_H

#include "pippy/Executable/Executable_generated.h"

#include "mlir/IR/Block.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/DenseMap.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace mlir::pippy {
class ParamOp;
} // namespace mlir::pippy

namespace pippy::exe {

/// A constant as the lowering holds it until it is serialized.
struct ConstantValue {
  ValueKind kind = ValueKind::None;
  int64_t intValue = 0;
  double floatValue = 0;
  bool boolValue = false;
  std::string text;
  DType dtype = DType::f32;
  std::vector<int64_t> sizes;
  std::vector<uint8_t> data;
  bool wrappedNumber = false;
  ListElement element = ListElement::Any;
  std::vector<ConstantValue> items;
};

/// A tensor type with static sizes and a dtype.
struct Spec {
  DType dtype = DType::f32;
  std::vector<int64_t> sizes;
};

/// The spec of a `!torch.vtensor` with static sizes and a dtype; none for
/// any other type (or a dtype executables have no name for).
std::optional<Spec> getSpec(mlir::Type type);

/// A parameter as executables record it: the whole tensor's spec, as the
/// weights file holds it, and where `pippy.shard` makes the op a slice of
/// it (--pippy-tensor-parallel), its dimension and number of slices.
struct ParamSpec {
  Spec whole;
  int shardDim = -1;
  int shardParts = 1;
};

/// `param`'s ParamSpec; none for a type executables cannot hold.
std::optional<ParamSpec> getParamSpec(mlir::pippy::ParamOp param);

flatbuffers::Offset<TensorSpec>
serializeSpec(flatbuffers::FlatBufferBuilder &fbb, const Spec &spec);

class ProgramWriter {
public:
  /// A new slot for a program argument of type `type`.
  int addArgument(mlir::Value arg);

  /// Lowers the ops of `body`, whose arguments read the slots `argSlots`;
  /// returns the slots its terminator (func.return or pippy.yield) names.
  /// Errors are emitted on the offending op.
  mlir::FailureOr<std::vector<int>> addBlock(mlir::Block &body,
                                             llvm::ArrayRef<int> argSlots);

  void setResults(std::vector<int> slots) { results = std::move(slots); }
  size_t numCountedOps() const { return countedOps.size(); }
  /// Parameter names in first-use order.
  std::vector<std::string> parameterNames() const;
  const std::map<std::string, ParamSpec> &parameterSpecs() const {
    return paramSpecs;
  }

  /// The program; `withGradient` names the parameters a gradient reaches.
  /// Without `withLocations`, every source location is left empty (the
  /// form the pipeline hash covers: where the IR was read from is no part
  /// of the pipeline).
  flatbuffers::Offset<Program>
  serialize(flatbuffers::FlatBufferBuilder &fbb,
            const std::set<std::string> &withGradient,
            bool withLocations = true) const;

private:
  struct Call {
    InstructionKind kind = InstructionKind::Call;
    unsigned op = 0;
    std::vector<std::pair<std::string, int>> args; ///< name, slot
    std::vector<int> inputs, outputs;
    ListElement element = ListElement::Any;
    unsigned location = 0;
    int counted = -1;
    int randomStream = -1;
  };

  int newSlot(mlir::Value value);
  mlir::FailureOr<int> slotOf(mlir::Value value, mlir::Operation *user);
  void setConstant(mlir::Value value, ConstantValue constant);
  unsigned locationOf(mlir::Operation *op);
  unsigned operatorOf(llvm::StringRef sourceName, const std::string &name,
                      const std::string &overload);
  mlir::LogicalResult lowerOp(mlir::Operation *op, int counted);
  mlir::LogicalResult lowerCall(mlir::Operation *op, Call &call);

  int numSlots = 0;
  std::vector<ValueKind> slotKinds;
  llvm::DenseMap<mlir::Value, int> slots;
  std::vector<int> arguments, results;
  std::map<int, ConstantValue> constants;
  std::vector<std::pair<int, std::string>> params; ///< slot, name
  std::map<std::string, int> paramSlotByName;
  std::map<std::string, ParamSpec> paramSpecs;
  struct OperatorEntry {
    std::string name, overload, sourceName;
  };
  std::vector<OperatorEntry> operators;
  std::map<std::string, unsigned> operatorIndex; ///< by source name
  std::vector<Call> code;
  std::vector<std::string> locations;
  std::map<std::string, unsigned> locationIndex;
  std::vector<std::string> countedOps;
};

} // namespace pippy::exe

#endif // PIPPY_LIB_EXECUTABLE_PROGRAMLOWERING_H
