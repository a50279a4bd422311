//===- PipelineLowering.cpp - pipelines to stage executables --------------===//
//
// Reads the stage graph of a pipeline (who feeds whom, which inputs and
// parameters a gradient reaches, the tied groups), builds and checks the
// schedule, lowers every stage's body to a program, and writes one
// executable per rank.
//
//===----------------------------------------------------------------------===//

#include "pippy/Executable/Lowering.h"

#include "ProgramLowering.h"
#include "StageGraph.h"

#include "pippy/Analysis/GraphIR.h"
#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Dialect/Torch/TorchDialect.h"
#include "pippy/Executable/Format.h"
#include "pippy/Schedule/Schedule.h"
#include "pippy/Support/AtomicFile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/xxhash.h"

#include <filesystem>
#include <map>

using namespace mlir;
namespace td = ::mlir::torch;
namespace pd = ::mlir::pippy;
namespace sched = ::pippy::schedule;

namespace pippy::exe {
namespace {

/// The schedule given by the options, or lowered ahead of time on the
/// pipeline, checked against `topo` and `numRanks`.
FailureOr<sched::Schedule> scheduleOf(StageGraph &graph,
                                      const sched::Topology &topo,
                                      const LoweringOptions &options,
                                      int numRanks, bool merged) {
  Operation *where = graph.pipeline ? graph.pipeline.getOperation()
                                    : graph.forward.getOperation();
  std::string text = options.scheduleText;
  std::optional<ScheduleKind> loweredKind;
  int M = options.microbatches.value_or(1);
  auto lowered =
      graph.pipeline && !merged
          ? graph.pipeline->getAttrOfType<DictionaryAttr>("pippy.schedule")
          : DictionaryAttr();
  if (lowered && text.empty()) {
    auto m = lowered.getAs<IntegerAttr>("microbatches");
    auto ranks = lowered.getAs<ArrayAttr>("ranks");
    if (!m || !ranks)
      return where->emitError("pippy.schedule needs microbatches and ranks");
    if (options.microbatches && m.getInt() != *options.microbatches)
      return where->emitError("its schedule is lowered for ")
             << m.getInt() << " micro-batches; run it with --microbatches "
             << m.getInt();
    M = static_cast<int>(m.getInt());
    if (auto kind = lowered.getAs<StringAttr>("kind"))
      loweredKind = parseScheduleKind(kind.getValue().str());
    for (auto [r, list] : llvm::enumerate(ranks))
      text += "rank" + std::to_string(r) + ": " +
              cast<StringAttr>(list).getValue().str() + "\n";
  }
  llvm::Expected<sched::Schedule> s =
      !text.empty() && options.scheduleIsCsv && !lowered
          ? sched::parseCsv(text, topo, M)
      : !text.empty()
          ? sched::parse(text, topo.numStages, M)
          : sched::generate(options.schedule, topo, numRanks, M,
                            /*training=*/true, options.splitBackward);
  if (!s) {
    InFlightDiagnostic diag = where->emitError(llvm::toString(s.takeError()));
    if (merged)
      diag << " (--nproc 1 runs the pipeline's " << graph.numStages()
           << " stages as one stage)";
    return diag;
  }
  if (llvm::Error err = sched::check(*s, topo))
    return where->emitError("invalid schedule: ")
           << llvm::toString(std::move(err));
  if (s->numRanks() != numRanks)
    return where->emitError("the schedule runs on ")
           << s->numRanks() << " ranks but the world has " << numRanks
           << " (use --nproc " << s->numRanks() << ")";
  if (loweredKind)
    s->kind = *loweredKind;
  return std::move(*s);
}

/// Parameter names of a stage in first-use order, with their specs.
FailureOr<std::vector<std::pair<std::string, ParamSpec>>>
stageParameters(Block &body) {
  std::vector<std::pair<std::string, ParamSpec>> result;
  std::set<std::string> seen;
  for (pd::ParamOp op : body.getOps<pd::ParamOp>()) {
    std::string name = op.getName().str();
    if (!seen.insert(name).second)
      continue;
    std::optional<ParamSpec> spec = getParamSpec(op);
    if (!spec)
      return op.emitError("parameter '")
             << name << "' needs a tensor type with static sizes and a dtype";
    result.push_back({name, *spec});
  }
  return result;
}

/// The tensor-parallel group the module's parameters are sharded for
/// (`pippy.tensor_parallel`, set by --pippy-tensor-parallel), or 1.
int tensorParallelOf(StageGraph &graph) {
  auto module = graph.forward->getParentOfType<ModuleOp>();
  auto tp = module ? module->getAttrOfType<IntegerAttr>("pippy.tensor_parallel")
                   : IntegerAttr();
  return tp ? static_cast<int>(tp.getInt()) : 1;
}

/// What every rank's executable shares, and each rank's part.
struct Plan {
  StageGraph *graph;
  const LoweringOptions *options;
  int numRanks = 1;
  bool merged = false; ///< every stage in one program on one rank
  std::vector<Spec> inputs;
  std::vector<ProgramWriter> programs;          ///< per executable stage
  std::vector<std::vector<Source>> stageInputs; ///< per executable stage
  std::vector<std::vector<Spec>> stageInputSpecs;
  std::vector<std::vector<bool>> inputGets; ///< per executable stage
  std::vector<Source> outputs;
  std::vector<int> countedOffsets;
  std::vector<std::vector<std::pair<std::string, ParamSpec>>> stageParams;
  std::vector<TransferRow> transfers;
  sched::Schedule schedule;
  std::set<std::string> paramsWithGradient;
};

/// Stage `s`'s program, inputs and op numbering (on one rank holding every
/// stage merged, `s` 0 is that program).
flatbuffers::Offset<Stage> serializeStage(flatbuffers::FlatBufferBuilder &fbb,
                                          const Plan &plan, int s,
                                          bool anonymous) {
  std::vector<flatbuffers::Offset<StageInput>> stageInputs;
  for (size_t i = 0; i < plan.stageInputs[s].size(); ++i) {
    const Source &src = plan.stageInputs[s][i];
    stageInputs.push_back(CreateStageInput(
        fbb, src.stage, src.index,
        serializeSpec(fbb, plan.stageInputSpecs[s][i]), plan.inputGets[s][i]));
  }
  auto program = plan.programs[s].serialize(fbb, plan.paramsWithGradient,
                                            /*withLocations=*/!anonymous);
  return CreateStage(fbb, s, program, fbb.CreateVector(stageInputs),
                     plan.countedOffsets[s]);
}

/// Rank `rank`'s executable. The pipeline hash is computed over every
/// rank's `anonymous` form: no source or weights path, no source locations.
std::string serializeRank(const Plan &plan, int rank, uint64_t hash,
                          bool anonymous) {
  flatbuffers::FlatBufferBuilder fbb(1 << 16);
  StageGraph &graph = *plan.graph;
  std::vector<flatbuffers::Offset<TensorSpec>> inputs;
  for (const Spec &spec : plan.inputs)
    inputs.push_back(serializeSpec(fbb, spec));
  std::vector<flatbuffers::Offset<StageResult>> outputs;
  for (const Source &out : plan.outputs)
    outputs.push_back(CreateStageResult(fbb, out.stage, out.index));
  int numStages = static_cast<int>(plan.programs.size());
  std::vector<int> stageRanks =
      plan.merged ? std::vector<int>{0} : plan.schedule.stageRank;
  std::vector<flatbuffers::Offset<StageParameters>> stageParams;
  for (int s = 0; s < numStages; ++s) {
    std::vector<std::string> names;
    std::vector<flatbuffers::Offset<TensorSpec>> specs;
    std::vector<Shard> shards;
    for (const auto &[name, spec] : plan.stageParams[s]) {
      names.push_back(name);
      specs.push_back(serializeSpec(fbb, spec.whole));
      shards.emplace_back(spec.shardDim, spec.shardParts);
    }
    stageParams.push_back(CreateStageParameters(
        fbb, s, fbb.CreateVectorOfStrings(names), fbb.CreateVector(specs),
        fbb.CreateVectorOfStructs(shards)));
  }
  std::vector<int> held =
      plan.merged ? std::vector<int>{0} : plan.schedule.stagesOf(rank);
  std::vector<flatbuffers::Offset<Stage>> stages;
  for (int s : held)
    stages.push_back(serializeStage(fbb, plan, s, anonymous));
  auto holds = [&](int s) { return llvm::is_contained(held, s); };
  std::vector<flatbuffers::Offset<Transfer>> transfers;
  for (const TransferRow &t : plan.transfers)
    if (holds(t.from.stage) || holds(t.consumer))
      transfers.push_back(
          CreateTransfer(fbb, t.from.stage, t.from.index, t.consumer, t.input,
                         t.channel, serializeSpec(fbb, t.spec), t.gradient));
  std::vector<Action> actions;
  for (const sched::Action &a : plan.schedule.ranks[rank])
    actions.emplace_back(a.op, a.stage, a.microbatch);
  auto schedule = CreateSchedule(
      fbb, plan.schedule.kind, plan.schedule.microbatches,
      plan.options->splitBackward, fbb.CreateVectorOfStructs(actions));
  std::vector<flatbuffers::Offset<TiedGroup>> tied;
  if (!plan.merged)
    for (const auto &[name, members] : graph.tied) {
      std::vector<int> ranks;
      for (int s : members)
        ranks.push_back(plan.schedule.stageRank.at(s));
      tied.push_back(CreateTiedGroup(
          fbb, fbb.CreateString(name), fbb.CreateVector(members),
          fbb.CreateVector(ranks), plan.paramsWithGradient.count(name)));
    }
  auto root = CreateExecutable(
      fbb, kFormatVersion, fbb.CreateString(producer()), hash, rank,
      plan.numRanks, fbb.CreateString(anonymous ? "" : plan.options->source),
      fbb.CreateString(anonymous ? "" : plan.options->weights),
      fbb.CreateVector(inputs), fbb.CreateVector(outputs),
      fbb.CreateVector(stageRanks), fbb.CreateVector(stageParams),
      fbb.CreateVector(stages), fbb.CreateVector(transfers), schedule,
      fbb.CreateVector(tied), tensorParallelOf(graph));
  FinishExecutableBuffer(fbb, root);
  return std::string(reinterpret_cast<const char *>(fbb.GetBufferPointer()),
                     fbb.GetSize());
}

/// Lowers the stage programs: one per stage, or one for all when merged.
LogicalResult lowerPrograms(Plan &plan) {
  StageGraph &graph = *plan.graph;
  int S = graph.numStages();
  if (!plan.merged) {
    for (int s = 0; s < S; ++s) {
      ProgramWriter &program = plan.programs.emplace_back();
      std::vector<int> args;
      for (BlockArgument arg : graph.bodies[s]->getArguments())
        args.push_back(program.addArgument(arg));
      FailureOr<std::vector<int>> results =
          program.addBlock(*graph.bodies[s], args);
      if (failed(results))
        return failure();
      program.setResults(*results);
      plan.stageInputs.push_back(graph.inputs[s]);
      std::vector<Spec> specs;
      for (const Source &src : graph.inputs[s]) {
        std::optional<Spec> spec =
            src.stage < 0
                ? plan.inputs.at(src.index)
                : getSpec(graph.bodies[s]->getArgument(specs.size()).getType());
        if (!spec)
          return graph.owners[s]->emitError("stage ")
                 << s << " input " << specs.size()
                 << " is not a tensor with a static shape and dtype";
        specs.push_back(*spec);
      }
      plan.stageInputSpecs.push_back(std::move(specs));
    }
    return success();
  }
  // Every stage in order, reading the others' results directly.
  ProgramWriter &program = plan.programs.emplace_back();
  std::vector<int> argSlots;
  for (BlockArgument arg : graph.forward.getArguments())
    argSlots.push_back(program.addArgument(arg));
  std::vector<std::vector<int>> resultSlots;
  for (int s = 0; s < S; ++s) {
    std::vector<int> args;
    for (const Source &src : graph.inputs[s])
      args.push_back(src.stage < 0 ? argSlots.at(src.index)
                                   : resultSlots[src.stage].at(src.index));
    FailureOr<std::vector<int>> results =
        program.addBlock(*graph.bodies[s], args);
    if (failed(results))
      return failure();
    resultSlots.push_back(*results);
  }
  std::vector<int> results;
  for (const Source &out : graph.outputs)
    results.push_back(out.stage < 0 ? argSlots.at(out.index)
                                    : resultSlots[out.stage].at(out.index));
  program.setResults(results);
  std::vector<Source> inputs;
  for (unsigned i = 0; i < graph.forward.getNumArguments(); ++i)
    inputs.push_back(Source{-1, i});
  plan.stageInputs.push_back(inputs);
  plan.stageInputSpecs.push_back(plan.inputs);
  return success();
}

/// The pipeline inputs' specs: forward's arguments.
LogicalResult inputSpecs(func::FuncOp forward, std::vector<Spec> &specs) {
  for (BlockArgument arg : forward.getArguments()) {
    std::optional<Spec> spec = getSpec(arg.getType());
    if (spec) {
      specs.push_back(*spec);
      continue;
    }
    std::string type;
    llvm::raw_string_ostream os(type);
    os << arg.getType();
    os.flush();
    InFlightDiagnostic diag = forward.emitError("forward argument ")
                              << arg.getArgNumber() << " is " << type
                              << ", but must be a tensor with static sizes "
                                 "and a dtype";
    if (type.find('?') != std::string::npos)
      diag << " (a ? is a dynamic size: export the model with static shapes, "
              "the micro-batch size first)";
    return diag;
  }
  if (specs.empty())
    return forward.emitError("forward takes no input");
  if (specs.front().sizes.empty())
    return forward.emitError(
        "forward's first argument is 0-d; the first dimension of each input "
        "is the micro-batch's rows");
  return success();
}

/// Checks what running the stages on several ranks needs (the schedule
/// places them).
LogicalResult placeStages(Plan &plan) {
  StageGraph &graph = *plan.graph;
  int S = graph.numStages();
  plan.merged = plan.numRanks == 1 && S > 1;
  if (plan.numRanks == 1)
    return success();
  if (!graph.pipeline)
    return graph.forward.emitError(
               "a graph IR runs as one stage on one rank; split it into a "
               "pipeline first (pippy-opt --pippy-split) to run it on ")
           << plan.numRanks << " ranks";
  int outputStage = -1;
  for (const Source &out : graph.outputs) {
    if (out.stage < 0)
      return graph.pipeline.emitError("the pipeline returns one of its inputs");
    if (outputStage >= 0 && out.stage != outputStage)
      return graph.pipeline.emitError(
                 "the pipeline's results come from stages ")
             << outputStage << " and " << out.stage
             << "; they must all come from one stage";
    outputStage = out.stage;
  }
  return success();
}

} // namespace

std::string producer() { return std::string("pippy ") + PIPPY_VERSION; }

FailureOr<std::string> weightsOf(ModuleOp module, const std::string &source,
                                 const std::string &override) {
  if (!override.empty())
    return override;
  // Torch-MLIR output without @forward: say that first (its literals are
  // one of the reasons).
  if (failed(lookupForward(module)))
    return failure();
  auto attr = module->getAttrOfType<StringAttr>("pippy.weights");
  if (!attr) {
    if (size_t literals = countWeightLiterals(module))
      return module.emitError("the module has ")
             << countLiterals(literals)
             << " (Torch-MLIR output) and no weights file" << kLiftHint;
    bool hasParameters = false;
    module.walk([&](pd::ParamOp) { hasParameters = true; });
    if (!hasParameters)
      return std::string(); // nothing to read
    return module.emitError(
        "the module names no weights file (pippy.weights); pass --weights");
  }
  std::string path = attr.getValue().str();
  if (!llvm::sys::fs::exists(path) && !llvm::sys::path::is_absolute(path)) {
    llvm::SmallString<256> beside(llvm::sys::path::parent_path(source));
    llvm::sys::path::append(beside, path);
    if (llvm::sys::fs::exists(beside))
      path = std::string(beside);
  }
  return path;
}

std::string storedWeightsPath(const std::string &weights,
                              const std::string &folder) {
  namespace fs = std::filesystem;
  if (weights.empty())
    return weights;
  std::error_code ec;
  fs::path absolute = fs::absolute(weights, ec).lexically_normal();
  if (folder.empty() || ec)
    return absolute.string();
  fs::path relative =
      absolute.lexically_relative(fs::absolute(folder, ec).lexically_normal());
  int up = 0;
  for (const fs::path &part : relative)
    up += part == "..";
  if (ec || relative.empty() || up > 1)
    return absolute.string();
  return relative.string();
}

FailureOr<LoweredPipeline> lower(ModuleOp module,
                                 const LoweringOptions &options) {
  FailureOr<func::FuncOp> forward = lookupForward(module);
  if (failed(forward))
    return failure();
  FailureOr<StageGraph> graph = readStageGraph(*forward);
  if (failed(graph))
    return failure();
  if (graph->outputs.empty())
    return forward->emitError("the pipeline returns nothing");
  Plan plan;
  plan.graph = &*graph;
  plan.options = &options;
  plan.numRanks = options.numRanks;
  if (failed(inputSpecs(*forward, plan.inputs)) || failed(placeStages(plan)))
    return failure();
  GradientFlow flow = gradientFlow(*graph);
  plan.paramsWithGradient = flow.params;
  sched::Topology topo = sched::Topology::chain(1);
  if (!plan.merged && graph->numStages() > 1) {
    FailureOr<std::vector<TransferRow>> rows = transfersOf(*graph, flow, topo);
    if (failed(rows))
      return failure();
    plan.transfers = std::move(*rows);
  }
  FailureOr<sched::Schedule> schedule = scheduleOf(
      *graph, topo, options, plan.merged ? 1 : plan.numRanks, plan.merged);
  if (failed(schedule) || failed(lowerPrograms(plan)))
    return failure();
  plan.schedule = std::move(*schedule);
  int offset = 0;
  for (ProgramWriter &program : plan.programs) {
    plan.countedOffsets.push_back(offset);
    offset += static_cast<int>(program.numCountedOps());
  }
  if (plan.merged) {
    plan.outputs.clear();
    for (unsigned i = 0; i < graph->outputs.size(); ++i)
      plan.outputs.push_back(Source{0, i});
    plan.inputGets.push_back(
        std::vector<bool>(graph->forward.getNumArguments(), false));
    std::vector<std::pair<std::string, ParamSpec>> params;
    for (const std::string &name : plan.programs[0].parameterNames())
      params.push_back({name, plan.programs[0].parameterSpecs().at(name)});
    plan.stageParams.push_back(std::move(params));
  } else {
    plan.outputs = graph->outputs;
    for (int s = 0; s < graph->numStages(); ++s) {
      std::vector<bool> gets = flow.inputGets[s];
      for (size_t i = 0; i < gets.size(); ++i)
        gets[i] = gets[i] && graph->inputs[s][i].stage >= 0;
      plan.inputGets.push_back(gets);
      FailureOr<std::vector<std::pair<std::string, ParamSpec>>> params =
          stageParameters(*graph->bodies[s]);
      if (failed(params))
        return failure();
      plan.stageParams.push_back(std::move(*params));
    }
  }
  // The hash covers every rank's executable in its anonymous form, so the
  // same pipeline lowered from other paths (each node of a job lowering
  // its own copy) has the same hash.
  std::string all;
  for (int r = 0; r < plan.numRanks; ++r)
    all += serializeRank(plan, r, /*hash=*/0, /*anonymous=*/true);
  LoweredPipeline lowered;
  lowered.hash = llvm::xxh3_64bits(llvm::StringRef(all));
  lowered.scheduleCsv = sched::toCsv(plan.schedule, /*withCommunication=*/true);
  for (int r = 0; r < plan.numRanks; ++r)
    lowered.ranks.push_back(
        serializeRank(plan, r, lowered.hash, /*anonymous=*/false));
  return lowered;
}

FailureOr<std::string> lowerForOneRank(ModuleOp module) {
  FailureOr<LoweredPipeline> lowered = lower(module, LoweringOptions());
  if (failed(lowered))
    return failure();
  return std::move(lowered->ranks.front());
}

std::string writeExecutables(const LoweredPipeline &pipeline,
                             const std::string &dir) {
  return writeFolder(pipeline.ranks, pipeline.scheduleCsv, dir);
}

} // namespace pippy::exe
