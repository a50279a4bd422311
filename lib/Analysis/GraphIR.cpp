//===- GraphIR.cpp - facts about ops of the graph IR ----------------------===//

#include "pippy/Analysis/GraphIR.h"

#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Dialect/Torch/TorchDialect.h"
#include "pippy/Support/OpNames.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSwitch.h"

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

bool isRandomOp(StringRef name) {
  return llvm::StringSwitch<bool>(name)
      .Cases("dropout", "feature_dropout", "alpha_dropout",
             "feature_alpha_dropout", "native_dropout", true)
      .Cases("bernoulli", "rand", "rand_like", "randn", "randn_like", true)
      .Cases("randint", "randint_like", "randperm", "random", "normal", true)
      .Cases("normal_functional", "uniform", true)
      .Cases("multinomial", "poisson", "exponential", "geometric", "cauchy",
             true)
      .Cases("log_normal", "rrelu", "rrelu_with_noise", true)
      .Default(false);
}

void numberRandomOps(Operation *root) {
  int64_t next = 0;
  SmallVector<Operation *> unnumbered;
  root->walk([&](Operation *op) {
    if (auto stream = op->getAttrOfType<IntegerAttr>(kRandomStreamAttr)) {
      next = std::max(next, stream.getInt() + 1);
      return;
    }
    std::optional<AtenOpName> name =
        parseTorchOpName(op->getName().getStringRef());
    if (name && name->ns == "aten" && isRandomOp(name->name))
      unnumbered.push_back(op);
  });
  Builder builder(root->getContext());
  for (Operation *op : unnumbered)
    op->setAttr(kRandomStreamAttr, builder.getI64IntegerAttr(next++));
}

bool updatesInPlace(OpOperand &use) {
  Operation *op = use.getOwner();
  if (auto assign = dyn_cast<mlir::pippy::AssignOp>(op))
    return use.get() == assign.getBuffer();
  // The running mean and variance are operands 3 and 4, the flag that
  // selects batch statistics operand 5, in each of these schemas.
  bool normalises =
      llvm::StringSwitch<bool>(op->getName().getStringRef())
          .Cases("torch.aten.batch_norm", "torch.aten.native_batch_norm",
                 "torch.aten._batch_norm_impl_index",
                 "torch.aten.instance_norm", true)
          .Default(false);
  unsigned index = use.getOperandNumber();
  if (!normalises || (index != 3 && index != 4) || op->getNumOperands() < 6)
    return false;
  if (auto flag =
          op->getOperand(5).getDefiningOp<mlir::torch::ConstantBoolOp>())
    return flag.getValue();
  return true; // a flag computed at run time may be true
}

bool isStageState(mlir::pippy::ParamOp param) {
  return llvm::any_of(param->getUses(),
                      [](OpOperand &use) { return updatesInPlace(use); });
}

unsigned foldContainerRoundTrips(Block &body) {
  namespace td = mlir::torch;
  unsigned folded = 0;
  // Constructs and index constants that may be left without readers.
  llvm::SetVector<Operation *> maybeDead;
  auto replaceWith = [&](Operation *reader, Operation *construct,
                         ValueRange elements) {
    if (!llvm::equal(TypeRange(elements), reader->getResultTypes()))
      return;
    maybeDead.insert(construct);
    for (Value operand : reader->getOperands().drop_front())
      if (auto index = operand.getDefiningOp<td::ConstantIntOp>())
        maybeDead.insert(index);
    reader->replaceAllUsesWith(elements);
    reader->erase();
    ++folded;
  };
  for (Operation &op : llvm::make_early_inc_range(body)) {
    if (op.getNumOperands() == 0)
      continue;
    Operation *def = op.getOperand(0).getDefiningOp();
    if (!def)
      continue;
    if (isa<td::PrimTupleUnpackOp>(op) && isa<td::PrimTupleConstructOp>(def)) {
      replaceWith(&op, def, def->getOperands());
    } else if (isa<td::PrimListUnpackOp>(op) &&
               isa<td::PrimListConstructOp>(def)) {
      // A list is mutable: only a list that nothing but unpacking reads
      // surely holds what it was built of.
      if (llvm::all_of(def->getUsers(), [](Operation *user) {
            return isa<td::PrimListUnpackOp>(user);
          }))
        replaceWith(&op, def, def->getOperands());
    } else if (isa<td::PrimTupleConstructOp>(def) && op.getNumOperands() == 2 &&
               op.getName().getStringRef() == "torch.prim.TupleIndex") {
      auto index = op.getOperand(1).getDefiningOp<td::ConstantIntOp>();
      int64_t i = index ? index.getValue() : -1;
      if (i >= 0 && i < (int64_t)def->getNumOperands())
        replaceWith(&op, def, def->getOperand(i));
    }
  }
  for (Operation *op : llvm::reverse(maybeDead))
    if (op->use_empty() && isa<td::PrimTupleConstructOp,
                               td::PrimListConstructOp, td::ConstantIntOp>(op))
      op->erase();
  return folded;
}

mlir::pippy::StageOp getStage(mlir::pippy::PipelineOp pipeline, int64_t index) {
  for (mlir::pippy::StageOp stage : pipeline.getStages())
    if (stage.getIndexAttr().getInt() == index)
      return stage;
  return nullptr;
}

namespace {

/// Whether a value of this type can carry a gradient: a float or complex
/// tensor, or a container that may hold one. Numbers, strings, devices,
/// None and integer or boolean tensors cannot.
bool canCarryGradient(Type type) {
  if (auto tensor = dyn_cast<torch::BaseTensorType>(type)) {
    if (!tensor.hasDtype())
      return true;
    Type dtype = tensor.getDtype();
    return isa<FloatType, ComplexType>(dtype);
  }
  return !isa<torch::IntType, torch::FloatType, torch::BoolType,
              torch::NumberType, torch::StringType, torch::NoneType,
              torch::DeviceType, torch::GeneratorType>(type);
}

/// Ops whose results never require a gradient, whatever their operands.
bool cutsGradient(Operation *op) {
  return llvm::StringSwitch<bool>(op->getName().getStringRef())
      .Cases({"torch.aten.detach", "torch.aten.zeros_like",
              "torch.aten.ones_like", "torch.aten.empty_like",
              "torch.aten.full_like", "torch.aten.rand_like",
              "torch.aten.randn_like", "torch.aten.randint_like",
              "torch.aten.new_zeros", "torch.aten.new_ones",
              "torch.aten.new_empty", "torch.aten.new_full"},
             true)
      .Default(false);
}

} // namespace

llvm::SmallVector<bool> argumentsReachingResults(Block &body,
                                                 llvm::ArrayRef<bool> wanted) {
  llvm::SmallVector<Value> seeds;
  for (auto [i, v] : llvm::enumerate(body.getTerminator()->getOperands()))
    if (i < wanted.size() && wanted[i])
      seeds.push_back(v);
  return argumentsReaching(body, seeds);
}

llvm::SmallVector<bool> argumentsReaching(Block &body,
                                          llvm::ArrayRef<Value> seeds) {
  llvm::DenseSet<Value> reaching = valuesReaching(body, seeds);
  llvm::SmallVector<bool> result;
  for (BlockArgument arg : body.getArguments())
    result.push_back(reaching.contains(arg));
  return result;
}

llvm::DenseSet<Value> valuesReaching(Block &body, llvm::ArrayRef<Value> seeds) {
  llvm::DenseSet<Value> reaching;
  for (Value v : seeds)
    if (canCarryGradient(v.getType()))
      reaching.insert(v);
  // Uses come after definitions in a block, so one walk backwards suffices.
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (cutsGradient(&op))
      continue;
    bool reaches = llvm::any_of(op.getResults(), [&](Value r) {
      return reaching.contains(r) && canCarryGradient(r.getType());
    });
    if (!reaches)
      continue;
    // Operands of ops in nested regions count as the op's own.
    op.walk([&](Operation *inner) {
      for (Value operand : inner->getOperands())
        if (canCarryGradient(operand.getType()))
          reaching.insert(operand);
    });
  }
  return reaching;
}

} // namespace pippy
