//===- GraphIR.cpp - facts about ops of the graph IR ----------------------===//

#include "pippy/Analysis/GraphIR.h"

#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Dialect/Torch/TorchDialect.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace pippy {

std::optional<std::string> getModulePath(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (auto path = getModulePath(inner))
        return path;
  return std::nullopt;
}

bool isInModule(llvm::StringRef path, llvm::StringRef module) {
  return path == module ||
         (path.starts_with(module) && path.size() > module.size() &&
          path[module.size()] == '.');
}

bool hasDataDependentShape(Value value) {
  auto result = dyn_cast<OpResult>(value);
  if (!result)
    return false;
  auto marked = result.getOwner()->getAttrOfType<DenseI64ArrayAttr>(
      kDataDependentShapeAttr);
  return marked &&
         llvm::is_contained(marked.asArrayRef(), result.getResultNumber());
}

bool isReplicable(Operation *op) {
  namespace td = mlir::torch;
  if (isa<mlir::pippy::ParamOp, td::ConstantIntOp, td::ConstantFloatOp,
          td::ConstantBoolOp, td::ConstantNoneOp, td::ConstantStrOp,
          td::ConstantDeviceOp, td::ConstantNumberOp, td::ValueTensorLiteralOp>(
          op))
    return true;
  if (isa<td::PrimListConstructOp, td::PrimTupleConstructOp>(op))
    return llvm::all_of(op->getOperands(), [](Value v) {
      Operation *def = v.getDefiningOp();
      return def && isReplicable(def);
    });
  return false;
}

mlir::pippy::StageOp getStage(mlir::pippy::PipelineOp pipeline, int64_t index) {
  for (mlir::pippy::StageOp stage : pipeline.getStages())
    if (stage.getIndexAttr().getInt() == index)
      return stage;
  return nullptr;
}

} // namespace pippy
