//===- PippyOps.cpp - pippy op verifiers ----------------------------------===//
//
// The invariants of the pipeline IR: stages in index order, each consuming
// only model inputs or earlier stages' results, yields matching results,
// parameter names unique per stage and shared across stages only through a
// tied group that lists exactly the stages using them.
//
//===----------------------------------------------------------------------===//

#include "pippy/Dialect/Pippy/PippyDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::pippy;

#define GET_OP_CLASSES
#include "dialects/Pippy/PippyOps.cpp.inc"

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

// The name is read and written as a plain string literal, not through the
// attribute grammar: a graph holds one parameter op per weight.
ParseResult ParamOp::parse(OpAsmParser &parser, OperationState &result) {
  std::string name;
  Type type;
  if (parser.parseString(&name) ||
      parser.parseOptionalAttrDict(result.attributes) || parser.parseColon() ||
      parser.parseType(type))
    return failure();
  result.getOrAddProperties<Properties>().name =
      parser.getBuilder().getStringAttr(name);
  result.addTypes(type);
  return success();
}

void ParamOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printString(getName());
  p.printOptionalAttrDict((*this)->getDiscardableAttrDictionary().getValue());
  p << " : ";
  p.printType(getType());
}

/// `pippy.shard = array<i64: DIM, PARTS>`: DIM a dimension of `rank`,
/// PARTS at least 2.
static LogicalResult verifyShard(ParamOp op, int64_t rank) {
  Attribute attr = op->getAttr("pippy.shard");
  if (!attr)
    return success();
  auto shard = dyn_cast<DenseI64ArrayAttr>(attr);
  if (!shard || shard.size() != 2)
    return op.emitOpError("pippy.shard must be array<i64: DIM, PARTS>; got ")
           << attr;
  if (shard[0] < 0 || shard[0] >= rank)
    return op.emitOpError("pippy.shard dimension ")
           << shard[0] << " is not a dimension of a rank-" << rank << " tensor";
  if (shard[1] < 2)
    return op.emitOpError("pippy.shard needs at least 2 parts; got ")
           << shard[1];
  return success();
}

LogicalResult ParamOp::verify() {
  if (getName().empty())
    return emitOpError("has an empty name");
  Type type = getType();
  if (auto tensor = dyn_cast<torch::BaseTensorType>(type)) {
    if (!tensor.hasStaticShape() || !tensor.hasDtype())
      return emitOpError("type must have static sizes and a dtype; got ")
             << type;
    return verifyShard(*this, tensor.getSizes().size());
  }
  if (auto tensor = dyn_cast<RankedTensorType>(type)) {
    if (!tensor.hasStaticShape())
      return emitOpError("type must have a static shape; got ") << type;
    return success();
  }
  return emitOpError("type must be a tensor; got ") << type;
}

//===----------------------------------------------------------------------===//
// AssignOp
//===----------------------------------------------------------------------===//

LogicalResult AssignOp::verify() {
  if (!getBuffer().getDefiningOp<ParamOp>())
    return emitOpError("must assign to the result of a pippy.param");
  return success();
}

//===----------------------------------------------------------------------===//
// SplitPointOp
//===----------------------------------------------------------------------===//

LogicalResult SplitPointOp::verify() {
  if (Operation *stage = (*this)->getParentOfType<StageOp>())
    return emitOpError("must not appear inside a pippy.stage: split points "
                       "are consumed when stages are outlined")
               .attachNote(stage->getLoc())
           << "stage declared here";
  return success();
}

//===----------------------------------------------------------------------===//
// StageOp
//===----------------------------------------------------------------------===//

/// Checks that `yield` returns exactly `types`.
static LogicalResult verifyYield(Operation *parent, YieldOp yield,
                                 TypeRange types) {
  if (yield.getOperands().size() != types.size())
    return yield.emitOpError("yields ")
           << yield.getOperands().size() << " values but the parent "
           << parent->getName() << " has " << types.size() << " results";
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(yield.getOperandTypes(), types)))
    if (std::get<0>(pair) != std::get<1>(pair))
      return yield.emitOpError("operand #")
             << i << " has type " << std::get<0>(pair)
             << " but the parent result has type " << std::get<1>(pair);
  return success();
}

LogicalResult StageOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("has ")
           << getInputs().size() << " inputs but its region takes "
           << body.getNumArguments() << " arguments";
  for (auto [i, pair] : llvm::enumerate(
           llvm::zip(getInputs().getTypes(), body.getArgumentTypes())))
    if (std::get<0>(pair) != std::get<1>(pair))
      return emitOpError("input #") << i << " has type " << std::get<0>(pair)
                                    << " but region argument #" << i
                                    << " has type " << std::get<1>(pair);
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("region must end in pippy.yield");
  if (failed(verifyYield(*this, yield, getResultTypes())))
    return failure();

  // Names are uniqued attributes: compare them by pointer.
  llvm::DenseMap<StringAttr, ParamOp> seen;
  WalkResult result = walk([&](ParamOp param) {
    auto [it, inserted] = seen.try_emplace(param.getNameAttr(), param);
    if (inserted)
      return WalkResult::advance();
    param.emitOpError("duplicates parameter \"")
            .append(param.getName(), "\" in stage ", getIndex())
            .attachNote(it->second.getLoc())
        << "first defined here";
    return WalkResult::interrupt();
  });
  return failure(result.wasInterrupted());
}

//===----------------------------------------------------------------------===//
// PipelineOp
//===----------------------------------------------------------------------===//

LogicalResult PipelineOp::verify() {
  if (!getTied())
    return success();
  llvm::StringMap<TiedGroupAttr> groups;
  for (auto group : getTied()->getAsRange<TiedGroupAttr>())
    if (!groups.try_emplace(group.getName(), group).second)
      return emitOpError("has two tied groups for \"")
             << group.getName() << "\"";
  return success();
}

/// Stages in index order, each fed by model inputs or earlier stages.
static LogicalResult verifyStageOrder(PipelineOp pipeline, Block &body) {
  int64_t expected = 0;
  for (Operation &op : body.without_terminator()) {
    auto stage = dyn_cast<StageOp>(op);
    if (!stage)
      return op.emitOpError("is not allowed in a pippy.pipeline body; "
                            "expected pippy.stage or pippy.yield");
    if (stage.getIndexAttr().getInt() != expected)
      return stage.emitOpError("has index ")
             << stage.getIndexAttr().getInt() << "; expected " << expected
             << " (stage indices are 0, 1, 2, ... in order)";
    for (auto [i, input] : llvm::enumerate(stage.getInputs())) {
      auto producer = input.getDefiningOp<StageOp>();
      if (!producer || producer->getParentOp() != pipeline.getOperation())
        continue;
      if (producer.getIndex() >= stage.getIndex())
        return stage.emitOpError("input #")
                   .append(i, " comes from stage ", producer.getIndex(),
                           ", which does not run before stage ",
                           stage.getIndex())
                   .attachNote(producer.getLoc())
               << "producer declared here";
    }
    ++expected;
  }
  if (expected == 0)
    return pipeline.emitOpError("has no stages");
  return success();
}

/// Which stages use each parameter name, and the copies of a tied
/// parameter agree on its type (one walk; names compared by pointer).
static LogicalResult
collectParamUsers(PipelineOp pipeline,
                  llvm::MapVector<StringAttr, SmallVector<int64_t>> &users) {
  llvm::DenseMap<StringAttr, ParamOp> firstUse;
  for (StageOp stage : pipeline.getStages()) {
    WalkResult result = stage.walk([&](ParamOp param) {
      StringAttr name = param.getNameAttr();
      SmallVector<int64_t> &list = users[name];
      if (list.empty() || list.back() != (int64_t)stage.getIndex())
        list.push_back(stage.getIndex());
      auto [it, inserted] = firstUse.try_emplace(name, param);
      if (inserted || it->second.getType() == param.getType())
        return WalkResult::advance();
      param.emitOpError("has type ")
              .append(param.getType(), " but parameter \"", param.getName(),
                      "\" has type ", it->second.getType(),
                      " in an earlier stage")
              .attachNote(it->second.getLoc())
          << "first use here";
      return WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      return failure();
  }
  return success();
}

/// Stage indices as "[0, 2]".
static std::string formatStages(ArrayRef<int64_t> stages) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleaveComma(stages, os);
  os << "]";
  return text;
}

/// A parameter used by several stages has a tied group, which lists exactly
/// those stages; every tied group names a parameter in use.
static LogicalResult verifyTiedGroups(
    PipelineOp pipeline,
    const llvm::MapVector<StringAttr, SmallVector<int64_t>> &users) {
  llvm::StringMap<TiedGroupAttr> groups;
  if (pipeline.getTied())
    for (auto group : pipeline.getTied()->getAsRange<TiedGroupAttr>())
      groups[group.getName()] = group;
  llvm::StringSet<> used;
  for (auto &entry : users)
    used.insert(entry.first.getValue());

  for (auto &[nameAttr, stages] : users) {
    StringRef name = nameAttr.getValue();
    auto group = groups.find(name);
    if (stages.size() > 1 && group == groups.end())
      return pipeline.emitOpError("parameter \"")
             << name << "\" is used by stages " << formatStages(stages)
             << " but has no tied group";
    if (group != groups.end() &&
        ArrayRef<int64_t>(stages) != group->second.getStages())
      return pipeline.emitOpError("tied group \"")
             << name << "\" lists stages "
             << formatStages(group->second.getStages())
             << " but the parameter is used by stages " << formatStages(stages);
  }
  for (auto &[name, group] : groups)
    if (!used.count(name))
      return pipeline.emitOpError("tied group \"")
             << name << "\" names a parameter that no stage uses";
  return success();
}

LogicalResult PipelineOp::verifyRegions() {
  Block &body = getBody().front();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("body must end in pippy.yield");
  if (failed(verifyYield(*this, yield, getResultTypes())))
    return failure();
  if (failed(verifyStageOrder(*this, body)))
    return failure();
  llvm::MapVector<StringAttr, SmallVector<int64_t>> users;
  if (failed(collectParamUsers(*this, users)))
    return failure();
  return verifyTiedGroups(*this, users);
}

//===----------------------------------------------------------------------===//
// TpCopyOp, TpReduceOp
//===----------------------------------------------------------------------===//

/// A tensor-parallel collective takes a torch tensor with a dtype, over a
/// group of at least two ranks.
static LogicalResult verifyTensorParallel(Operation *op, Type type,
                                          int64_t tp) {
  if (tp < 2)
    return op->emitOpError("needs a group of at least 2 ranks; got tp = ")
           << tp;
  auto tensor = dyn_cast<torch::BaseTensorType>(type);
  if (!tensor || !tensor.hasDtype() || !isa<FloatType>(tensor.getDtype()))
    return op->emitOpError("takes a floating-point torch tensor; got ") << type;
  return success();
}

LogicalResult TpCopyOp::verify() {
  return verifyTensorParallel(*this, getInput().getType(), getTp());
}

LogicalResult TpReduceOp::verify() {
  return verifyTensorParallel(*this, getInput().getType(), getTp());
}

/// The weight is a floating-point table, the indices integers, and the
/// result the indices' shape with the table's row size.
LogicalResult TpEmbeddingOp::verify() {
  if (failed(verifyTensorParallel(*this, getWeight().getType(), getTp())))
    return failure();
  auto weight = cast<torch::BaseTensorType>(getWeight().getType());
  auto indices = dyn_cast<torch::BaseTensorType>(getIndices().getType());
  auto result = dyn_cast<torch::BaseTensorType>(getResult().getType());
  if (!indices || !indices.hasDtype() || !isa<IntegerType>(indices.getDtype()))
    return emitOpError("takes integer indices; got ") << getIndices().getType();
  if (!weight.hasSizes() || weight.getSizes().size() != 2 ||
      !indices.hasSizes() || !result || !result.hasSizes())
    return emitOpError("needs a rank-2 table and ranked indices and result");
  SmallVector<int64_t> expected(indices.getSizes());
  expected.push_back(weight.getSizes()[1]);
  if (ArrayRef<int64_t>(expected) != result.getSizes() ||
      result.getDtype() != weight.getDtype())
    return emitOpError("result must be the indices' shape with the table's "
                       "row size and dtype; got ")
           << getResult().getType();
  return success();
}
