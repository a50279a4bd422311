//===- StageGraph.cpp - the pipeline as the lowering reads it -------------===//
//
// Reads forward's stages and their edges, walks the gradient from the loss
// back through them, and lists the transfers between stages.
//
//===----------------------------------------------------------------------===//

#include "StageGraph.h"

#include "pippy/Analysis/GraphIR.h"
#include "pippy/Dialect/Torch/TorchDialect.h"

#include <map>

using namespace mlir;
namespace td = ::mlir::torch;
namespace pd = ::mlir::pippy;
namespace sched = ::pippy::schedule;

namespace pippy::exe {

size_t countWeightLiterals(ModuleOp module) {
  size_t count = 0;
  module.walk([&](td::ValueTensorLiteralOp literal) {
    auto type =
        cast<ShapedType>(cast<ElementsAttr>(literal.getValue()).getType());
    if (isa<FloatType>(type.getElementType()) && type.getNumElements() > 1)
      ++count;
  });
  return count;
}

std::string countLiterals(size_t n) {
  return std::to_string(n) + (n == 1 ? " weight literal" : " weight literals");
}

FailureOr<func::FuncOp> lookupForward(ModuleOp module) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (forward && !forward.isExternal())
    return forward;
  InFlightDiagnostic diag = module.emitError("no func.func @forward");
  if (size_t literals = countWeightLiterals(module))
    diag << " (it holds " << countLiterals(literals) << ": Torch-MLIR output)"
         << kLiftHint << ", which also names its function forward";
  else if (module.lookupSymbol<func::FuncOp>("main"))
    diag << " (it has a @main, as Torch-MLIR's FX importer writes)" << kLiftHint
         << ", which names it forward";
  return diag;
}

namespace {

FailureOr<Source> sourceOf(Value value, func::FuncOp forward) {
  if (auto arg = dyn_cast<BlockArgument>(value))
    if (arg.getOwner()->getParentOp() == forward.getOperation())
      return Source{-1, arg.getArgNumber()};
  auto result = dyn_cast<OpResult>(value);
  auto stage =
      result ? dyn_cast<pd::StageOp>(result.getOwner()) : pd::StageOp();
  if (!stage)
    return forward.emitError("a pipeline value comes neither from forward's "
                             "arguments nor from a stage");
  return Source{static_cast<int>(stage.getIndexAttr().getInt()),
                result.getResultNumber()};
}

} // namespace

FailureOr<StageGraph> readStageGraph(func::FuncOp forward) {
  StageGraph graph;
  graph.forward = forward;
  forward.walk([&](pd::PipelineOp op) { graph.pipeline = op; });
  Block &body = forward.getBody().front();
  if (!graph.pipeline) {
    graph.bodies.push_back(&body);
    graph.owners.push_back(forward);
    std::vector<Source> inputs;
    for (BlockArgument arg : body.getArguments())
      inputs.push_back(Source{-1, arg.getArgNumber()});
    graph.inputs.push_back(std::move(inputs));
    for (unsigned i = 0; i < body.getTerminator()->getNumOperands(); ++i)
      graph.outputs.push_back(Source{0, i});
    return graph;
  }
  for (Value v : body.getTerminator()->getOperands())
    if (v.getDefiningOp() != graph.pipeline.getOperation())
      return forward.emitError("forward must return the pipeline's results");
  for (pd::StageOp stage : graph.pipeline.getStages()) {
    graph.bodies.push_back(&stage.getBody().front());
    graph.owners.push_back(stage);
    std::vector<Source> inputs;
    for (Value v : stage.getInputs()) {
      FailureOr<Source> src = sourceOf(v, forward);
      if (failed(src))
        return failure();
      if (src->stage >= static_cast<int>(graph.bodies.size()) - 1)
        return stage.emitError("uses a result of stage ")
               << src->stage << ", which does not come before it";
      inputs.push_back(*src);
    }
    graph.inputs.push_back(std::move(inputs));
  }
  for (Value v :
       graph.pipeline.getBody().front().getTerminator()->getOperands()) {
    FailureOr<Source> src = sourceOf(v, forward);
    if (failed(src))
      return failure();
    graph.outputs.push_back(*src);
  }
  if (ArrayAttr tied = graph.pipeline.getTiedAttr())
    for (Attribute a : tied) {
      auto group = cast<pd::TiedGroupAttr>(a);
      graph.tied.push_back(
          {group.getName().str(),
           {group.getStages().begin(), group.getStages().end()}});
    }
  return graph;
}

GradientFlow gradientFlow(StageGraph &graph) {
  int S = graph.numStages();
  GradientFlow flow;
  flow.inputGets.resize(S);
  std::vector<std::vector<bool>> wanted(S);
  for (int s = 0; s < S; ++s)
    wanted[s].assign(graph.bodies[s]->getTerminator()->getNumOperands(), false);
  const Source &loss = graph.outputs.front();
  if (loss.stage >= 0)
    wanted[loss.stage][loss.index] = true;
  for (int c = S - 1; c >= 0; --c) {
    Block &body = *graph.bodies[c];
    SmallVector<Value> seeds;
    for (auto [i, v] : llvm::enumerate(body.getTerminator()->getOperands())) {
      if (!wanted[c][i])
        continue;
      // The loss is taken on a tuple's or list's first element.
      Operation *def = v.getDefiningOp();
      if (c == loss.stage && i == loss.index && def &&
          def->getNumOperands() > 0 &&
          isa<td::PrimTupleConstructOp, td::PrimListConstructOp>(def))
        v = def->getOperand(0);
      seeds.push_back(v);
    }
    llvm::DenseSet<Value> reaching = ::pippy::valuesReaching(body, seeds);
    for (BlockArgument arg : body.getArguments())
      flow.inputGets[c].push_back(reaching.contains(arg));
    body.walk([&](pd::ParamOp op) {
      if (reaching.contains(op.getResult()))
        flow.params.insert(op.getName().str());
    });
    for (unsigned i = 0; i < graph.inputs[c].size(); ++i) {
      const Source &src = graph.inputs[c][i];
      if (src.stage >= 0 && flow.inputGets[c][i])
        wanted[src.stage][src.index] = true;
    }
  }
  return flow;
}

FailureOr<std::vector<TransferRow>> transfersOf(StageGraph &graph,
                                                const GradientFlow &flow,
                                                sched::Topology &topo) {
  constexpr unsigned kMaxChannels = 1024;
  std::vector<TransferRow> rows;
  topo.numStages = graph.numStages();
  topo.producers.assign(graph.numStages(), {});
  for (int c = 0; c < graph.numStages(); ++c) {
    std::map<int, std::vector<unsigned>> byProducer; // inputs, in order
    for (unsigned i = 0; i < graph.inputs[c].size(); ++i)
      if (graph.inputs[c][i].stage >= 0)
        byProducer[graph.inputs[c][i].stage].push_back(i);
    for (const auto &[p, inputs] : byProducer) {
      topo.producers[c].push_back(p);
      if (inputs.size() >= kMaxChannels)
        return graph.owners[p]->emitError("stage ")
               << p << " sends " << inputs.size() << " tensors to stage " << c
               << "; at most " << kMaxChannels - 1 << " are supported";
      for (unsigned e = 0; e < inputs.size(); ++e) {
        unsigned i = inputs[e];
        std::optional<Spec> spec =
            getSpec(graph.bodies[c]->getArgument(i).getType());
        if (!spec)
          return graph.owners[c]->emitError("stage ")
                 << c << " input " << i
                 << " crosses ranks but is not a tensor with a static shape "
                    "and dtype";
        rows.push_back({graph.inputs[c][i], c, i, e, *spec,
                        static_cast<bool>(flow.inputGets[c][i])});
      }
    }
  }
  for (const auto &[name, stages] : graph.tied)
    topo.tiedGroups.push_back(stages);
  return rows;
}

} // namespace pippy::exe
