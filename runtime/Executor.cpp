//===- Executor.cpp - one rank of a pipeline
//-------------------------------===//
//
// Rank r loads the pipeline IR, compiles stage r once, builds (or reads) the
// schedule, checks it, and executes its action list:
//
//   F       runs the stage on micro-batch m with autograd recording; the
//           stage holding the pipeline's outputs also computes the loss
//   SEND_F  sends the stage's results to every stage that consumes them
//   RECV_F  waits for the activations posted for receipt at step start
//   B       backward from the loss or the received output gradients, then
//           frees the micro-batch's activations
//   SEND_B  sends the input gradients back to their producers
//   ALLREDUCE_TIED  sums replicated tied-weight gradients over the group
//   STEP    clips by the global norm (all ranks) and steps the optimizer
//
// Receives are posted when the step starts and sends are asynchronous, so
// compute overlaps communication; sends are waited for before the
// optimizer step. Errors end the process after one message (a rank whose
// peer died must not linger in communicator teardown).
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include "pippy/Analysis/GraphIR.h"
#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Dialect/Torch/TorchDialect.h"
#include "pippy/Schedule/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/xxhash.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <optional>
#include <set>
#include <unistd.h>

using namespace mlir;
using namespace ::pippy::rt;
using ::pippy::CommError;
using ::pippy::CommHandlePtr;
using ::pippy::Communicator;
using ::pippy::Program;
using ::pippy::Rendezvous;
using ::pippy::RunOptions;
using ::pippy::RuntimeError;
using ::pippy::TensorSpec;
using ::pippy::WeightGradientQueue;
namespace sched = ::pippy::schedule;
namespace pd = ::mlir::pippy;
namespace td = ::mlir::torch;

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kMaxEntries = 1024; // tensors per stage pair, for tags

/// The tensors one stage sends another per micro-batch: (producer result,
/// consumer input) pairs in the consumer's input order. Both ends derive the
/// same list from the IR, so messages need no headers.
struct Edge {
  int peer = 0;
  std::vector<std::pair<unsigned, unsigned>> entries;
  std::vector<TensorSpec> specs;
  /// Per entry: whether the consumer's input can get a gradient at all
  /// (pippy::valuesReaching). Gradients that autograd can only leave
  /// undefined are neither computed as zeros nor sent: a parameter whose
  /// gradient is None stays untouched by weight decay and momentum, as in
  /// PyTorch.
  std::vector<bool> gradFlows;
};

struct TraceEvent {
  std::string name;
  double start, duration; // microseconds since the common start
};

/// The state of one micro-batch between its forward and its backward.
struct MicroBatch {
  std::vector<at::Tensor> received; // per stage input (or undefined)
  std::vector<CommHandlePtr> recvF, recvB;
  std::vector<std::vector<at::Tensor>> gradBuffers; // per consumer edge
  std::vector<c10::IValue> outputs;
  std::vector<c10::IValue> captured; // deferred linears: input, output
  at::Tensor loss;
  std::vector<at::Tensor> inputGrads; // per stage input
};

class RankRunner {
public:
  RankRunner(const RunOptions &options, const Rendezvous &rdzv)
      : options(options), rdzv(rdzv), rank(rdzv.rank),
        prefixOwnLines(!std::getenv("PIPPY_LAUNCHED")) {}

  void run() {
    at::set_num_threads(options.threads);
    loadPipeline();
    buildSchedule();
    loadWeights();
    if (!options.infer)
      checkTrainingOptions(options);
    // With --loss none the target is forward's last argument, in --infer
    // too.
    data = std::make_unique<Dataset>(options, argSpecs,
                                     /*needTarget=*/!options.infer ||
                                         options.loss == "none");
    connect();
    if (options.infer)
      return infer();
    train();
  }

private:
  //===--------------------------------------------------------------------===//
  // Loading
  //===--------------------------------------------------------------------===//

  std::string where() const { return "rank " + std::to_string(rank); }

  void loadPipeline() {
    module = parseProgram(context, options.programPath);
    func::FuncOp forward = lookupForward(*module, options.programPath);
    for (BlockArgument arg : forward.getArguments())
      argSpecs.push_back(specOfArgument(arg));
    forward.walk([&](pd::PipelineOp op) { pipeline = op; });
    if (!pipeline && rdzv.worldSize == 1) {
      std::vector<std::string> given = executorOnlyOptions(options);
      std::string names;
      for (size_t i = 0; i < given.size(); ++i)
        names += (i == 0                  ? ""
                  : i + 1 == given.size() ? " and "
                                          : ", ") +
                 given[i];
      throw RuntimeError(options.programPath + ": " + names +
                         (given.size() == 1 ? " runs" : " run") +
                         " pipelines; make this graph IR a one-stage "
                         "pipeline first (pippy-opt --pippy-split=stages=1)");
    }
    if (!pipeline)
      throw RuntimeError(
          options.programPath +
          ": a graph IR runs as one stage on one rank; "
          "split it into a pipeline first (pippy-opt --pippy-split) to run it "
          "on " +
          std::to_string(rdzv.worldSize) + " ranks");
    for (pd::StageOp stage : pipeline.getStages())
      stages.push_back(stage);
    numStages = static_cast<int>(stages.size());
    if (numStages != rdzv.worldSize)
      throw RuntimeError(
          options.programPath + " has " + std::to_string(numStages) +
          " stages but the world has " + std::to_string(rdzv.worldSize) +
          " ranks; pippy runs one stage per rank (use --nproc " +
          std::to_string(numStages) + ")");

    auto sourceOf = [&](Value v) {
      return ::pippy::rt::sourceOf(v, forward.getOperation(),
                                   options.programPath);
    };

    // Edges between every pair of stages, and the topology the schedule
    // sees.
    topo.numStages = numStages;
    topo.producers.assign(numStages, {});
    std::vector<std::vector<Source>> inputsOf(numStages);
    for (int s = 0; s < numStages; ++s)
      for (Value v : stages[s].getInputs())
        inputsOf[s].push_back(sourceOf(v));
    for (int c = 0; c < numStages; ++c) {
      std::map<int, Edge> byProducer;
      for (unsigned i = 0; i < inputsOf[c].size(); ++i) {
        const Source &src = inputsOf[c][i];
        if (src.stage < 0)
          continue;
        if (src.stage >= c)
          throw RuntimeError(options.programPath + ": stage " +
                             std::to_string(c) + " uses a result of stage " +
                             std::to_string(src.stage) +
                             ", which does not come before it");
        Edge &edge = byProducer[src.stage];
        edge.peer = src.stage;
        edge.entries.push_back({src.index, i});
        std::optional<TensorSpec> spec =
            ::pippy::getTensorSpec(stages[c].getInputs()[i].getType());
        if (!spec)
          throw RuntimeError(options.programPath + ": stage " +
                             std::to_string(c) + " input " + std::to_string(i) +
                             " crosses ranks but is not a tensor with a "
                             "static shape and dtype");
        edge.specs.push_back(*spec);
      }
      for (auto &[p, edge] : byProducer) {
        topo.producers[c].push_back(p);
        if (edge.entries.size() >= kMaxEntries)
          throw RuntimeError("stage " + std::to_string(p) + " sends " +
                             std::to_string(edge.entries.size()) +
                             " tensors to stage " + std::to_string(c) +
                             "; at most " + std::to_string(kMaxEntries - 1) +
                             " are supported");
        if (c == rank)
          recvEdges.push_back(edge);
        if (p == rank) {
          Edge out = edge;
          out.peer = c;
          sendEdges.push_back(out);
        }
      }
    }
    myInputs = inputsOf[rank];

    // The stage holding the pipeline's results computes the loss.
    auto yield = cast<pd::YieldOp>(pipeline.getBody().front().getTerminator());
    for (Value v : yield.getOperands()) {
      Source src = sourceOf(v);
      if (src.stage < 0)
        throw RuntimeError(options.programPath +
                           ": the pipeline returns one of its inputs");
      if (outputStage >= 0 && src.stage != outputStage)
        throw RuntimeError(
            options.programPath + ": the pipeline's results come from stages " +
            std::to_string(outputStage) + " and " + std::to_string(src.stage) +
            "; they must all come from one stage");
      outputStage = src.stage;
      outputIndices.push_back(src.index);
    }
    if (outputStage < 0)
      throw RuntimeError(options.programPath +
                         ": the pipeline returns nothing");

    // Which stage inputs can get a gradient: from the loss's result
    // backwards, stage by stage (every edge goes forwards).
    std::vector<llvm::SmallVector<bool>> wanted(numStages);
    for (int s = 0; s < numStages; ++s)
      wanted[s].assign(stages[s]->getNumResults(), false);
    wanted[outputStage][outputIndices.at(0)] = true;
    std::vector<llvm::SmallVector<bool>> inputGets(numStages);
    std::set<std::string> paramsWithGradient; // in some stage
    for (int c = numStages - 1; c >= 0; --c) {
      Block &body = stages[c].getBody().front();
      Operation *terminator = body.getTerminator();
      SmallVector<Value> seeds;
      for (auto [i, v] : llvm::enumerate(terminator->getOperands())) {
        if (!wanted[c][i])
          continue;
        // computeLoss takes a tuple's or list's first element.
        Operation *def = v.getDefiningOp();
        if (c == outputStage && i == outputIndices.at(0) && def &&
            def->getNumOperands() > 0 &&
            isa<td::PrimTupleConstructOp, td::PrimListConstructOp>(def))
          v = def->getOperand(0);
        seeds.push_back(v);
      }
      llvm::DenseSet<Value> reaching = ::pippy::valuesReaching(body, seeds);
      for (BlockArgument arg : body.getArguments())
        inputGets[c].push_back(reaching.contains(arg));
      body.walk([&](pd::ParamOp op) {
        if (reaching.contains(op.getResult()))
          paramsWithGradient.insert(op.getName().str());
      });
      for (unsigned i = 0; i < inputsOf[c].size(); ++i)
        if (inputsOf[c][i].stage >= 0 && inputGets[c][i])
          wanted[inputsOf[c][i].stage][inputsOf[c][i].index] = true;
    }
    inputGetsGrad.assign(inputGets[rank].begin(), inputGets[rank].end());
    for (Edge &edge : recvEdges)
      for (const auto &[result, input] : edge.entries)
        edge.gradFlows.push_back(inputGets[rank][input]);
    for (Edge &edge : sendEdges)
      for (const auto &[result, input] : edge.entries)
        edge.gradFlows.push_back(inputGets[edge.peer][input]);

    if (ArrayAttr tied = pipeline.getTiedAttr())
      for (Attribute a : tied) {
        auto group = cast<pd::TiedGroupAttr>(a);
        // No replica's use reaches the loss: PyTorch leaves the gradient
        // None, so the group sums nothing and the weight keeps it None.
        if (!paramsWithGradient.count(group.getName().str()))
          tiedWithoutGradient.insert(group.getName().str());
        std::vector<int> members(group.getStages().begin(),
                                 group.getStages().end());
        topo.tiedGroups.push_back(members);
        tiedGroups.push_back({group.getName().str(), members});
      }

    program = std::make_unique<Program>(Program::compile(
        stages[rank].getBody().front(), "stage " + std::to_string(rank)));
    opNanoseconds.assign(program->countedOps().size(), 0);
  }

  /// Parameter names of a stage in first-use order, with their specs.
  std::vector<std::pair<std::string, TensorSpec>> stageParams(int s) {
    std::vector<std::pair<std::string, TensorSpec>> result;
    std::set<std::string> seen;
    stages[s].walk([&](pd::ParamOp op) {
      std::string name = op.getName().str();
      if (!seen.insert(name).second)
        return;
      std::optional<TensorSpec> spec = ::pippy::getTensorSpec(op.getType());
      if (!spec)
        throw RuntimeError("parameter '" + name +
                           "' has no static shape and dtype");
      result.push_back({name, *spec});
    });
    return result;
  }

  void buildSchedule() {
    int M = options.infer ? 0 : options.microbatches;
    if (options.infer)
      return; // built once the row count is known
    if (M < 1)
      throw RuntimeError("--microbatches must be at least 1");
    std::string text = options.scheduleText;
    std::string loweredKind;
    // A pipeline lowered ahead of time (pippy-opt --pippy-lower-schedule)
    // carries its action lists.
    if (auto lowered =
            pipeline->getAttrOfType<DictionaryAttr>("pippy.schedule");
        lowered && text.empty()) {
      auto m = lowered.getAs<IntegerAttr>("microbatches");
      auto ranks = lowered.getAs<ArrayAttr>("ranks");
      if (!m || !ranks)
        throw RuntimeError(options.programPath +
                           ": pippy.schedule needs microbatches and ranks");
      if (m.getInt() != M)
        throw RuntimeError(options.programPath +
                           ": its schedule is lowered "
                           "for " +
                           std::to_string(m.getInt()) +
                           " micro-batches; run it with --microbatches " +
                           std::to_string(m.getInt()));
      if (auto kind = lowered.getAs<StringAttr>("kind"))
        loweredKind = kind.getValue().str() + " (lowered by pippy-opt)";
      for (auto [r, list] : llvm::enumerate(ranks))
        text += "rank" + std::to_string(r) + ": " +
                cast<StringAttr>(list).getValue().str() + "\n";
    }
    llvm::Expected<sched::Schedule> s =
        text.empty()
            ? sched::generate(options.schedule, topo, M, /*training=*/true,
                              /*splitBackward=*/options.deferWeightGrads)
            : sched::parse(text, M, /*training=*/true);
    if (!s)
      throw RuntimeError(llvm::toString(s.takeError()));
    if (llvm::Error err = sched::check(*s, topo))
      throw RuntimeError("invalid schedule: " + llvm::toString(std::move(err)));
    schedule = std::move(*s);
    if (!loweredKind.empty())
      schedule.kind = loweredKind;
  }

  void loadWeights() {
    std::string path = resolveWeightsPath(options, *module);
    TensorFile file = readTensors(path);
    weightsMetadata = file.metadata;
    weightOrder = file.order;
    std::set<std::string> untrained = untrainedNames(file.metadata);
    for (const auto &[name, spec] : stageParams(rank)) {
      at::Tensor tensor = checkedParameter(file, path, name, spec);
      bool trainable = isTrainable(tensor, name, untrained) && !options.infer;
      params[name] = trainable ? tensor.requires_grad_(true) : tensor;
      if (trainable)
        trainable_.push_back({name, params[name]});
    }
    if (rank == 0)
      allWeights = std::move(file.tensors);
  }

  void connect() {
    comm = ::pippy::createGlooCommunicator(rdzv);
    checkRanksAgree();
    // Tied groups: one communicator per group, created by its members in
    // the pipeline's order. Replicas start from the first member's value.
    for (const auto &[name, members] : tiedGroups) {
      if (std::find(members.begin(), members.end(), rank) == members.end())
        continue;
      auto group = comm->subgroup("tied/" + name, members);
      auto it = params.find(name);
      if (it == params.end())
        throw RuntimeError("stage " + std::to_string(rank) +
                           " is in the tied group of '" + name +
                           "' but does not use it");
      {
        ::torch::NoGradGuard noGrad;
        at::Tensor value = it->second.detach();
        group->broadcast(value, 0, "broadcasting tied weight '" + name + "'")
            ->wait();
      }
      tiedComms.push_back({name, std::move(group)});
    }
    comm->barrier(where() + ": waiting for every rank to start");
    epoch = Clock::now();
  }

  /// Every rank must run the same program, schedule and options (ranks on
  /// other hosts are started by hand or by a cluster launcher, each with its
  /// own command line): one that differs would wait forever on a transfer or
  /// gather its peers never start. Each rank puts a hash of every setting in
  /// its row; one all-reduce shows every rank all the rows, and a difference
  /// is an error naming the ranks and the settings before the first step.
  void checkRanksAgree() {
    auto onOff = [](const std::string &path) {
      return std::string(path.empty() ? "off" : "on");
    };
    auto num = [](double v) { return llvm::formatv("{0:e}", v).str(); };
    auto opt = [&](const std::optional<double> &v) {
      return v ? num(*v) : std::string("default");
    };
    // The program file enters as its hash; it is not copied.
    std::string program;
    if (auto buffer = llvm::MemoryBuffer::getFile(options.programPath))
      program = std::to_string(llvm::xxh3_64bits((*buffer)->getBuffer()));
    std::vector<std::pair<std::string, std::string>> settings = {
        {"the program (" + options.programPath + ")", program},
        {"--infer", options.infer ? "on" : "off"},
        {"--schedule, --schedule-file or the lowered schedule",
         options.infer ? "" : schedule.str()},
        {"--microbatches", std::to_string(options.microbatches)},
        {"--steps", std::to_string(options.steps)},
        {"--loss", options.loss},
        {"--optimizer, --lr, --momentum, --weight-decay, --betas, --eps",
         options.optimizer + " " + num(options.lr) + " " +
             opt(options.momentum) + " " + opt(options.weightDecay) + " " +
             opt(options.beta1) + " " + opt(options.beta2) + " " +
             opt(options.eps)},
        {"--clip-grad-norm", opt(options.clipGradNorm)},
        {"--defer-weight-grads", options.deferWeightGrads ? "on" : "off"},
        {"--autograd-weight-grads", options.autogradWeightGrads ? "on" : "off"},
        {"--save-weights", onOff(options.saveWeightsPath)},
        {"--save-grads", onOff(options.saveGradsPath)},
        {"--metrics", onOff(options.metricsPath)},
        {"--trace", onOff(options.tracePath)},
        {"--profile", onOff(options.profilePath)},
        {"--output", onOff(options.outputPath)},
        {"--checkpoint-dir and --checkpoint-every",
         onOff(options.checkpointDir) + " " +
             std::to_string(options.checkpointEvery)},
        {"--resume", options.resume ? "on" : "off"},
    };
    int64_t n = static_cast<int64_t>(settings.size());
    at::Tensor rows = at::zeros({rdzv.worldSize, n}, at::kLong);
    auto mine = rows[rank];
    for (int64_t i = 0; i < n; ++i)
      // Kept below 2^62 so that the sum of one row and zeros cannot wrap.
      mine[i] =
          static_cast<int64_t>(llvm::xxh3_64bits(settings[i].second) >> 2);
    comm->allReduceSum(rows, where() + ": comparing the ranks' settings")
        ->wait();
    auto all = rows.accessor<int64_t, 2>();
    std::string differ;
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int> others;
      for (int r = 0; r < rdzv.worldSize; ++r)
        if (all[r][i] != all[0][i])
          others.push_back(r);
      if (others.empty())
        continue;
      std::string list;
      for (int r : others)
        list += (list.empty() ? "" : ", ") + std::to_string(r);
      differ += "\n  " + settings[i].first + ": rank" +
                (others.size() > 1 ? "s " : " ") + list + " differ" +
                (others.size() > 1 ? "" : "s") + " from rank 0";
    }
    if (!differ.empty())
      throw RuntimeError("the ranks were not started alike; every rank needs "
                         "the same program and options:" +
                         differ);
  }

  //===--------------------------------------------------------------------===//
  // Actions
  //===--------------------------------------------------------------------===//

  static int tag(int m, int direction, size_t entry) {
    return (m * 2 + direction) * kMaxEntries + static_cast<int>(entry);
  }

  double micros(Clock::time_point t) const {
    return std::chrono::duration<double, std::micro>(t - epoch).count();
  }

  void record(const sched::Action &action, Clock::time_point begin) {
    Clock::time_point end = Clock::now();
    double duration = std::chrono::duration<double>(end - begin).count();
    if (action.op == sched::Op::Forward || action.op == sched::Op::Backward ||
        action.op == sched::Op::Step || action.op == sched::Op::Weight)
      busySeconds += duration;
    if (!options.tracePath.empty() && action.op != sched::Op::Weight)
      events.push_back({action.str(), micros(begin), duration * 1e6});
  }

  /// Posts every receive of the step so that data can land while the rank
  /// computes.
  void postReceives(std::vector<MicroBatch> &mbs, bool training) {
    int M = static_cast<int>(mbs.size());
    for (int m = 0; m < M; ++m) {
      MicroBatch &mb = mbs[m];
      mb.received.assign(myInputs.size(), at::Tensor());
      for (const Edge &edge : recvEdges)
        for (size_t e = 0; e < edge.entries.size(); ++e) {
          const TensorSpec &spec = edge.specs[e];
          at::Tensor buffer =
              at::empty(spec.sizes, at::TensorOptions().dtype(spec.dtype));
          mb.received[edge.entries[e].second] = buffer;
          mb.recvF.push_back(comm->recv(
              buffer, edge.peer, tag(m, 0, e),
              where() + ": receiving " +
                  sched::Action{sched::Op::RecvF, rank, m}.str() + " input " +
                  std::to_string(edge.entries[e].second) + " from stage " +
                  std::to_string(edge.peer)));
        }
      if (!training)
        continue;
      for (const Edge &edge : sendEdges) {
        std::vector<at::Tensor> buffers;
        for (size_t e = 0; e < edge.entries.size(); ++e) {
          const TensorSpec &spec = edge.specs[e];
          if (!isDifferentiable(spec.dtype) || !edge.gradFlows[e]) {
            buffers.push_back(at::Tensor());
            continue;
          }
          at::Tensor buffer =
              at::empty(spec.sizes, at::TensorOptions().dtype(spec.dtype));
          buffers.push_back(buffer);
          mb.recvB.push_back(
              comm->recv(buffer, edge.peer, tag(m, 1, e),
                         where() + ": receiving " +
                             sched::Action{sched::Op::RecvB, rank, m}.str() +
                             " gradient of result " +
                             std::to_string(edge.entries[e].first) +
                             " from stage " + std::to_string(edge.peer)));
        }
        mb.gradBuffers.push_back(std::move(buffers));
      }
    }
  }

  void forward(MicroBatch &mb, int m, int64_t begin, bool training) {
    int64_t rows = argSpecs[0].sizes.at(0);
    std::vector<c10::IValue> dataArgs;
    bool needsData = std::any_of(myInputs.begin(), myInputs.end(),
                                 [](const Source &s) { return s.stage < 0; });
    if (needsData)
      dataArgs = data->arguments(begin, rows, options.loss == "none");
    std::vector<c10::IValue> inputs;
    for (size_t i = 0; i < myInputs.size(); ++i) {
      if (myInputs[i].stage < 0) {
        inputs.push_back(dataArgs.at(myInputs[i].index));
        continue;
      }
      at::Tensor t = mb.received[i];
      if (training && isDifferentiable(t.scalar_type()))
        t.requires_grad_(true);
      inputs.emplace_back(t);
    }
    mb.captured.clear();
    mb.outputs = program->run(
        inputs, params, training && !deferred.empty() ? &captureSlots : nullptr,
        &mb.captured, options.profilePath.empty() ? nullptr : &opNanoseconds);
    ++forwardsRun;
    if (training && rank == outputStage) {
      at::Tensor target =
          options.loss == "none" ? at::Tensor() : data->target(begin, rows);
      mb.loss =
          computeLoss(options, mb.outputs.at(outputIndices.at(0)), target);
      stepLoss += mb.loss.item<double>() / options.microbatches;
    }
  }

  void sendForward(MicroBatch &mb, int m) {
    for (const Edge &edge : sendEdges)
      for (size_t e = 0; e < edge.entries.size(); ++e) {
        const c10::IValue &value = mb.outputs.at(edge.entries[e].first);
        at::Tensor t = value.toTensor().detach().contiguous();
        checkSpec(t, edge.specs[e], m, edge.entries[e].first);
        pendingSends.push_back(
            comm->send(t, edge.peer, tag(m, 0, e),
                       where() + ": sending " +
                           sched::Action{sched::Op::SendF, rank, m}.str() +
                           " result " + std::to_string(edge.entries[e].first) +
                           " to stage " + std::to_string(edge.peer)));
      }
  }

  void checkSpec(const at::Tensor &t, const TensorSpec &spec, int m,
                 unsigned result) {
    if (t.sizes() != at::IntArrayRef(spec.sizes) ||
        t.scalar_type() != spec.dtype)
      throw RuntimeError("stage " + std::to_string(rank) + ", micro-batch " +
                         std::to_string(m) + ": result " +
                         std::to_string(result) + " is " +
                         c10::toString(t.scalar_type()) +
                         shapeString(t.sizes()) + " but the pipeline sends " +
                         c10::toString(spec.dtype) + shapeString(spec.sizes));
  }

  void backward(MicroBatch &mb) {
    std::vector<at::Tensor> roots, grads;
    if (mb.loss.defined()) {
      roots.push_back(mb.loss / static_cast<double>(options.microbatches));
      grads.push_back(at::Tensor());
    }
    // The gradient of each result is the sum over its consumers.
    std::map<unsigned, at::Tensor> resultGrads;
    for (size_t k = 0; k < sendEdges.size(); ++k) {
      const Edge &edge = sendEdges[k];
      for (size_t e = 0; e < edge.entries.size(); ++e) {
        const at::Tensor &g = mb.gradBuffers[k][e];
        if (!g.defined())
          continue;
        at::Tensor &sum = resultGrads[edge.entries[e].first];
        sum = sum.defined() ? sum + g : g;
      }
    }
    for (auto &[index, grad] : resultGrads) {
      at::Tensor out = mb.outputs.at(index).toTensor();
      if (!out.requires_grad())
        continue;
      roots.push_back(out);
      grads.push_back(grad);
    }
    if (!deferred.empty()) {
      backwardInputs(mb, roots, grads);
      return;
    }
    if (!roots.empty()) {
      // The input gradients go first: the previous stage waits for them,
      // and the weight gradients follow once they are sent
      // (addHeldWeightGradients after the SEND_B).
      std::optional<WeightGradientQueue::Scope> hold;
      if (sendsInputGradients) {
        heldWeightGrads.push_back({currentMicrobatch, {}});
        hold.emplace(heldWeightGrads.back().queue);
      }
      ::torch::autograd::backward(roots, grads);
      if (sendsInputGradients && heldWeightGrads.back().queue.empty())
        heldWeightGrads.pop_back();
    }
    mb.inputGrads.assign(myInputs.size(), at::Tensor());
    for (const Edge &edge : recvEdges)
      for (const auto &[result, input] : edge.entries) {
        at::Tensor in = mb.received[input];
        if (!isDifferentiable(in.scalar_type()))
          continue;
        at::Tensor g = in.grad();
        checkNoGradient(input, g);
        if (inputGetsGrad[input]) // the others are not sent
          mb.inputGrads[input] = g.defined() ? g : at::zeros_like(in);
      }
    // The activations of this micro-batch are no longer needed.
    mb.outputs.clear();
    mb.loss = at::Tensor();
    mb.received.clear();
    mb.gradBuffers.clear();
  }

  /// Backward without the deferred linears' weight gradients: gradients
  /// for the stage's inputs, the other parameters, and the deferred
  /// linears' outputs, which are kept with their inputs for the W pass.
  void backwardInputs(MicroBatch &mb, const std::vector<at::Tensor> &roots,
                      const std::vector<at::Tensor> &grads) {
    std::vector<at::Tensor> wrt;
    std::vector<unsigned> inputIndex;
    for (const Edge &edge : recvEdges)
      for (const auto &[result, input] : edge.entries)
        if (isDifferentiable(mb.received[input].scalar_type())) {
          wrt.push_back(mb.received[input]);
          inputIndex.push_back(input);
        }
    size_t firstParam = wrt.size();
    std::vector<std::string> paramNames;
    for (const auto &[name, p] : trainable_)
      if (!deferred.count(name)) {
        wrt.push_back(p);
        paramNames.push_back(name);
      }
    size_t firstLinear = wrt.size();
    std::vector<size_t> linearIndex;
    for (size_t l = 0; l < linears.size(); ++l) {
      at::Tensor out = mb.captured.at(2 * l + 1).toTensor();
      if (!out.requires_grad())
        continue;
      wrt.push_back(out);
      linearIndex.push_back(l);
    }
    std::vector<at::Tensor> result;
    if (!roots.empty() && !wrt.empty())
      result = ::torch::autograd::grad(roots, wrt, grads,
                                       /*retain_graph=*/false,
                                       /*create_graph=*/false,
                                       /*allow_unused=*/true);
    else
      result.assign(wrt.size(), at::Tensor());
    mb.inputGrads.assign(myInputs.size(), at::Tensor());
    for (size_t i = 0; i < firstParam; ++i) {
      checkNoGradient(inputIndex[i], result[i]);
      if (inputGetsGrad[inputIndex[i]]) // the others are not sent
        mb.inputGrads[inputIndex[i]] =
            result[i].defined() ? result[i] : at::zeros_like(wrt[i]);
    }
    for (size_t i = firstParam; i < firstLinear; ++i) {
      if (!result[i].defined())
        continue;
      const std::string &name = paramNames[i - firstParam];
      if (auto it = tiedContributions.find(name); it != tiedContributions.end())
        it->second[currentMicrobatch] = result[i];
      at::Tensor p = wrt[i];
      p.mutable_grad() = p.grad().defined() ? p.grad() + result[i] : result[i];
    }
    for (size_t i = firstLinear; i < wrt.size(); ++i) {
      if (!result[i].defined())
        continue;
      size_t l = linearIndex[i - firstLinear];
      linearInputs[l].push_back(mb.captured[2 * l].toTensor().detach());
      linearGrads[l].push_back(result[i]);
    }
    mb.outputs.clear();
    mb.captured.clear();
    mb.loss = at::Tensor();
    mb.received.clear();
    mb.gradBuffers.clear();
  }

  /// The W pass: each deferred linear's weight gradient over the step's
  /// micro-batches as one product, G^T X, and its bias gradient as G's
  /// column sums.
  void weightGradients() {
    if (linears.empty())
      return;
    Clock::time_point begin = Clock::now();
    for (size_t l = 0; l < linears.size(); ++l) {
      if (linearGrads[l].empty())
        continue;
      at::Tensor x = at::cat(linearInputs[l]);
      at::Tensor g = at::cat(linearGrads[l]);
      x = x.reshape({-1, x.size(-1)});
      g = g.reshape({-1, g.size(-1)});
      auto accumulate = [](at::Tensor p, const at::Tensor &grad) {
        p.mutable_grad() = p.grad().defined() ? p.grad() + grad : grad;
      };
      accumulate(params.at(linears[l].weight), at::mm(g.t(), x));
      if (!linears[l].bias.empty())
        accumulate(params.at(linears[l].bias), g.sum(0));
      linearInputs[l].clear();
      linearGrads[l].clear();
    }
    Clock::time_point end = Clock::now();
    double seconds = std::chrono::duration<double>(end - begin).count();
    if (!options.tracePath.empty()) // inside W or STEP, both busy
      events.push_back(
          {std::to_string(rank) + "W", micros(begin), seconds * 1e6});
  }

  /// An input that the IR says gets no gradient must not get one from
  /// autograd either: its producer does not wait for it.
  void checkNoGradient(unsigned input, const at::Tensor &grad) {
    if (inputGetsGrad.at(input) || !grad.defined())
      return;
    throw RuntimeError(where() + ": stage input " + std::to_string(input) +
                       " got a gradient that the pipeline's IR says it "
                       "cannot get (an internal error of pippy-run; please "
                       "report it with the pipeline)");
  }

  void sendBackward(MicroBatch &mb, int m) {
    for (const Edge &edge : recvEdges)
      for (size_t e = 0; e < edge.entries.size(); ++e) {
        if (!isDifferentiable(edge.specs[e].dtype) || !edge.gradFlows[e])
          continue;
        at::Tensor g = mb.inputGrads[edge.entries[e].second].contiguous();
        pendingSends.push_back(comm->send(
            g, edge.peer, tag(m, 1, e),
            where() + ": sending " +
                sched::Action{sched::Op::SendB, rank, m}.str() +
                " gradient of input " + std::to_string(edge.entries[e].second) +
                " to stage " + std::to_string(edge.peer)));
      }
    mb.inputGrads.clear();
  }

  /// The weight gradients that B actions held back until their input
  /// gradients were sent, oldest micro-batch first, until at most `keep`
  /// micro-batches' remain. They are part of their B: busy time, and a
  /// second trace event with its name.
  void addHeldWeightGradients(size_t keep = 0) {
    while (heldWeightGrads.size() > keep) {
      HeldWeightGradients &held = heldWeightGrads.front();
      Clock::time_point begin = Clock::now();
      held.queue.run();
      double seconds =
          std::chrono::duration<double>(Clock::now() - begin).count();
      busySeconds += seconds;
      backwardSeconds += seconds;
      if (!options.tracePath.empty())
        events.push_back(
            {sched::Action{sched::Op::Backward, rank, held.microbatch}.str(),
             micros(begin), seconds * 1e6});
      heldWeightGrads.pop_front();
    }
  }

  /// Sums each replicated tied weight's gradient over its group. When the
  /// per-micro-batch contributions are small enough to exchange (at most
  /// kExactTiedBytes), they are summed in the order single-process autograd
  /// uses (per micro-batch, later stages first, then accumulated over
  /// micro-batches), so the result is bit-identical to an unsplit run;
  /// otherwise the accumulated gradients are all-reduced, which can differ
  /// in the last bits.
  static constexpr int64_t kExactTiedBytes = 256 << 20;

  void registerTiedHooks() {
    for (auto &[name, group] : tiedComms) {
      at::Tensor p = params.at(name);
      if (!p.requires_grad())
        continue; // a buffer or frozen parameter: nothing to sum
      int64_t bytes = p.numel() * p.element_size() * group->size() *
                      std::max(options.microbatches, 1);
      if (bytes > kExactTiedBytes)
        continue;
      auto &slots = tiedContributions[name];
      if (!deferred.empty())
        continue; // backwardInputs records the contributions
      p.register_hook([this, &slots](const at::Tensor &g) {
        slots[currentMicrobatch] = g.detach().clone();
        return at::Tensor();
      });
    }
  }

  void allReduceTied() {
    for (auto &[name, group] : tiedComms) {
      at::Tensor p = params.at(name);
      if (!p.requires_grad() || tiedWithoutGradient.count(name))
        continue;
      std::string what =
          where() + ": summing the gradients of tied weight '" + name + "'";
      auto it = tiedContributions.find(name);
      if (it == tiedContributions.end()) {
        if (!p.grad().defined())
          p.mutable_grad() = at::zeros_like(p);
        group->allReduceSum(p.grad(), what)->wait();
        continue;
      }
      int M = options.microbatches, G = group->size();
      std::vector<int64_t> shape{G, M};
      shape.insert(shape.end(), p.sizes().begin(), p.sizes().end());
      at::Tensor all = at::zeros(shape, p.options().requires_grad(false));
      for (auto &[m, g] : it->second)
        all[group->rank()][m].copy_(g);
      it->second.clear();
      group->allReduceSum(all, what)->wait();
      at::Tensor total;
      for (int m = 0; m < M; ++m) {
        at::Tensor b = all[G - 1][m];
        for (int k = G - 2; k >= 0; --k)
          b = b + all[k][m];
        total = total.defined() ? total + b : b.clone();
      }
      ::torch::NoGradGuard noGrad;
      if (!p.grad().defined())
        p.mutable_grad() = at::zeros_like(p);
      p.grad().copy_(total);
    }
  }

  /// Scales gradients as torch.nn.utils.clip_grad_norm_ does, with the norm
  /// taken over every stage (a replicated tied weight counted once).
  void clipGradients() {
    double local = 0;
    std::set<std::string> notMine;
    for (const auto &[name, members] : tiedGroups)
      if (members.front() != rank)
        notMine.insert(name);
    for (const auto &[name, p] : trainable_) {
      if (notMine.count(name) || !p.grad().defined())
        continue;
      double n = p.grad().norm(2).item<double>();
      local += n * n;
    }
    at::Tensor total = at::full({1}, local, at::kDouble);
    comm->allReduceSum(total, where() + ": summing gradient norms")->wait();
    double norm = std::sqrt(total.item<double>());
    double coef = std::min(*options.clipGradNorm / (norm + 1e-6), 1.0);
    for (const auto &[name, p] : trainable_)
      if (p.grad().defined())
        p.grad().mul_(coef);
  }

  void waitSends() {
    for (CommHandlePtr &h : pendingSends)
      h->wait();
    pendingSends.clear();
  }

  //===--------------------------------------------------------------------===//
  // Training
  //===--------------------------------------------------------------------===//

  std::vector<at::Tensor> trainableTensors() {
    std::vector<at::Tensor> result;
    for (const auto &[name, p] : trainable_)
      result.push_back(p);
    return result;
  }

  /// The linears whose weight and bias (if any) are trainable, not tied
  /// (tied weights' gradients are collected per micro-batch) and not
  /// deferred already.
  std::vector<Program::Linear> untiedTrainableLinears() {
    std::set<std::string> tied;
    for (const auto &[name, members] : tiedGroups)
      tied.insert(name);
    auto trainable = [&](const std::string &name) {
      return name.empty() ||
             (params.count(name) && params.at(name).requires_grad() &&
              !tied.count(name) && !deferred.count(name));
    };
    std::vector<Program::Linear> result;
    for (const Program::Linear &l : program->linearsWithOwnParameters())
      if (trainable(l.weight) && trainable(l.bias))
        result.push_back(l);
    return result;
  }

  /// --defer-weight-grads: the linears whose weight gradients wait for the
  /// W pass.
  void chooseDeferredLinears() {
    if (!options.deferWeightGrads)
      return;
    for (const Program::Linear &l : untiedTrainableLinears()) {
      linears.push_back(l);
      deferred.insert(l.weight);
      if (!l.bias.empty())
        deferred.insert(l.bias);
      captureSlots.push_back(l.inputSlot);
      captureSlots.push_back(l.outputSlot);
    }
    linearInputs.resize(linears.size());
    linearGrads.resize(linears.size());
  }

  /// The other linears add their weight gradients in place
  /// (Program::fuseWeightGradients).
  void fuseWeightGradients() {
    if (options.autogradWeightGrads)
      return;
    std::set<std::string> weights;
    for (const Program::Linear &l : untiedTrainableLinears())
      weights.insert(l.weight);
    program->fuseWeightGradients(weights);
  }

  void train() {
    chooseDeferredLinears();
    fuseWeightGradients();
    for (const Edge &edge : recvEdges)
      for (const TensorSpec &spec : edge.specs)
        sendsInputGradients |= isDifferentiable(spec.dtype);
    registerTiedHooks();
    auto optimizer = makeOptimizer(options, trainableTensors());
    int64_t mbRows = argSpecs[0].sizes.at(0);
    int M = options.microbatches;
    int64_t cursor = 0;
    int firstStep = 1;
    if (options.resume)
      firstStep = resume(*optimizer, cursor);
    if (firstStep > options.steps)
      throw RuntimeError("the last checkpoint is at step " +
                         std::to_string(firstStep - 1) + "; --steps " +
                         std::to_string(options.steps) +
                         " leaves nothing to do");
    printRank0("schedule " + schedule.kind + ", " + std::to_string(M) +
               " micro-batches of " + std::to_string(mbRows) + " rows, " +
               std::to_string(numStages) + " stages on " +
               std::to_string(rdzv.worldSize) + " ranks");
    std::vector<double> losses, stepSeconds;
    double wallSeconds = 0;
    for (int step = firstStep; step <= options.steps; ++step) {
      if (step == firstStep + 1) {
        // --profile: the first step warms up allocators and caches; measure
        // the others.
        std::fill(opNanoseconds.begin(), opNanoseconds.end(), 0);
        forwardsRun = 0;
        backwardSeconds = 0;
      }
      Clock::time_point start = Clock::now();
      releaseGradients(*optimizer);
      stepLoss = 0;
      std::vector<MicroBatch> mbs(M);
      postReceives(mbs, /*training=*/true);
      int inflight = 0;
      for (const sched::Action &action : schedule.ranks[rank]) {
        switch (action.op) {
        case sched::Op::SendF:
        case sched::Op::SendB:
          break;
        case sched::Op::Forward:
        case sched::Op::Backward:
        case sched::Op::RecvF:
        case sched::Op::RecvB:
          addHeldWeightGradients(kHeldMicrobatches);
          break;
        default: // the weight gradients must be complete
          addHeldWeightGradients();
        }
        Clock::time_point begin = Clock::now();
        int m = action.microbatch;
        switch (action.op) {
        case sched::Op::Forward:
          forward(mbs[m], m, cursor + m * mbRows, /*training=*/true);
          peakInflight = std::max(peakInflight, ++inflight);
          break;
        case sched::Op::Backward: {
          currentMicrobatch = m;
          Clock::time_point b0 = Clock::now();
          backward(mbs[m]);
          backwardSeconds +=
              std::chrono::duration<double>(Clock::now() - b0).count();
        }
          --inflight;
          break;
        case sched::Op::SendF:
          sendForward(mbs[m], m);
          break;
        case sched::Op::RecvF:
          for (CommHandlePtr &h : mbs[m].recvF)
            h->wait();
          break;
        case sched::Op::SendB:
          sendBackward(mbs[m], m);
          break;
        case sched::Op::RecvB:
          for (CommHandlePtr &h : mbs[m].recvB)
            h->wait();
          break;
        case sched::Op::Weight:
          weightGradients();
          break;
        case sched::Op::AllReduceTied:
          allReduceTied();
          break;
        case sched::Op::Step:
          waitSends();
          weightGradients();
          if (step == 1 && !options.saveGradsPath.empty())
            saveGrads();
          if (options.clipGradNorm)
            clipGradients();
          optimizer->step();
          break;
        }
        record(action, begin);
        if (action.op == sched::Op::SendB)
          addHeldWeightGradients(kHeldMicrobatches);
      }
      addHeldWeightGradients();
      cursor = (cursor + M * mbRows) % data->rows();
      double seconds =
          std::chrono::duration<double>(Clock::now() - start).count();
      wallSeconds += seconds;
      double samples = M * mbRows / seconds;
      if (rank == outputStage) {
        printLine("step " + std::to_string(step) + "/" +
                  std::to_string(options.steps) + " loss " +
                  formatDouble("%.6f", stepLoss) + " samples/s " +
                  formatDouble("%.1f", samples));
      }
      losses.push_back(stepLoss);
      stepSeconds.push_back(seconds);
      if (options.checkpointEvery > 0 && !options.checkpointDir.empty() &&
          step % options.checkpointEvery == 0)
        checkpoint(*optimizer, step, cursor);
    }
    finish(firstStep, losses, stepSeconds, wallSeconds);
  }

  /// Gathers busy times and in-flight peaks, writes metrics, the trace and
  /// the weights.
  /// A step's time is the slowest rank's.
  void finish(int firstStep, const std::vector<double> &losses,
              const std::vector<double> &stepSeconds, double wallSeconds) {
    int W = rdzv.worldSize;
    int64_t n = static_cast<int64_t>(stepSeconds.size());
    at::Tensor stats = at::zeros({3 * W}, at::kDouble);
    stats[3 * rank] = busySeconds;
    stats[3 * rank + 1] = wallSeconds;
    stats[3 * rank + 2] = static_cast<double>(peakInflight);
    at::Tensor times = at::zeros({W, std::max<int64_t>(n, 1)}, at::kDouble);
    for (int64_t i = 0; i < n; ++i)
      times[rank][i] = stepSeconds[i];
    comm->allReduceSum(stats, where() + ": gathering statistics")->wait();
    comm->allReduceSum(times, where() + ": gathering step times")->wait();
    llvm::json::Array stepMetrics;
    int64_t mbRows = argSpecs[0].sizes.at(0);
    for (int64_t i = 0; i < n; ++i) {
      double slowest = 0;
      llvm::json::Array perRank;
      for (int r = 0; r < W; ++r) {
        double t = times[r][i].item<double>();
        slowest = std::max(slowest, t);
        perRank.push_back(t);
      }
      stepMetrics.push_back(llvm::json::Object{
          {"step", firstStep + i},
          {"loss", losses[i]},
          {"step_time_s", slowest},
          {"samples_per_s", options.microbatches * mbRows / slowest},
          {"rank_step_time_s", std::move(perRank)}});
    }
    double busy = 0, wall = 0;
    llvm::json::Array peaks, busyPerRank;
    for (int r = 0; r < W; ++r) {
      busy += stats[3 * r].item<double>();
      wall = std::max(wall, stats[3 * r + 1].item<double>());
      peaks.push_back(static_cast<int64_t>(stats[3 * r + 2].item<double>()));
      busyPerRank.push_back(stats[3 * r].item<double>());
    }
    double bubble = wall > 0 ? 1 - busy / (W * wall) : 0;
    if (rank == outputStage && !options.metricsPath.empty())
      writeJson(
          options.metricsPath,
          llvm::json::Object{{"steps", std::move(stepMetrics)},
                             {"bubble_fraction", bubble},
                             {"peak_inflight_microbatches", std::move(peaks)},
                             {"busy_s", std::move(busyPerRank)},
                             {"schedule", schedule.kind},
                             {"ranks", W}});
    if (!options.tracePath.empty())
      writeTrace();
    if (!options.profilePath.empty())
      writeProfile();
    if (!options.saveWeightsPath.empty())
      saveWeights();
    comm->barrier(where() + ": waiting for every rank to finish");
  }

  /// The ops the balancer counts in stages before this one.
  int countedOpsBefore(int stage) {
    int count = 0;
    for (int s = 0; s < stage; ++s)
      for (Operation &op : stages[s].getBody().front().without_terminator())
        if (!::pippy::isReplicable(&op))
          ++count;
    return count;
  }

  /// Mean forward time per micro-batch of every op, and the stage's
  /// backward time split over its ops in proportion to their forward times,
  /// in the format `--pippy-split profile=F` reads (Passes.td).
  void writeProfile() {
    const std::vector<std::string> &names = program->countedOps();
    double forwardTotal = 0;
    for (int64_t ns : opNanoseconds)
      forwardTotal += ns;
    double runs = std::max<int64_t>(forwardsRun, 1);
    int offset = countedOpsBefore(rank);
    llvm::json::Array mine;
    for (size_t i = 0; i < names.size(); ++i) {
      double forwardUs = opNanoseconds[i] / runs / 1000.0;
      double share = forwardTotal > 0 ? opNanoseconds[i] / forwardTotal : 0;
      double backwardUs = backwardSeconds * 1e6 / runs * share;
      mine.push_back(llvm::json::Object{{"index", offset + (int64_t)i},
                                        {"op", names[i]},
                                        {"stage", rank},
                                        {"forward_us", forwardUs},
                                        {"backward_us", backwardUs}});
    }
    std::string text;
    llvm::raw_string_ostream os(text);
    os << llvm::json::Value(std::move(mine));
    os.flush();
    std::vector<std::string> all = gatherStrings(text, 0x7ffe0000);
    if (rank != 0)
      return;
    llvm::json::Array ops;
    for (int r = 0; r < rdzv.worldSize; ++r) {
      llvm::Expected<llvm::json::Value> part = llvm::json::parse(all[r]);
      if (!part)
        throw RuntimeError(
            "rank " + std::to_string(r) +
            " sent a malformed profile: " + llvm::toString(part.takeError()));
      for (llvm::json::Value &v : *part->getAsArray())
        ops.push_back(std::move(v));
    }
    writeJson(options.profilePath,
              llvm::json::Object{{"format", "pippy-profile"},
                                 {"version", 1},
                                 {"transfer_ns_per_byte", 1.0},
                                 {"microbatches_measured", forwardsRun},
                                 {"ops", std::move(ops)}});
    printLine("wrote the profile to " + options.profilePath);
  }

  //===--------------------------------------------------------------------===//
  // Inference
  //===--------------------------------------------------------------------===//

  void infer() {
    ::torch::NoGradGuard noGrad;
    int64_t mbRows = argSpecs[0].sizes.at(0);
    int64_t rows = data->rows();
    if (rows % mbRows != 0)
      throw RuntimeError(options.dataPath + ": " + std::to_string(rows) +
                         " rows do not divide into micro-batches of " +
                         std::to_string(mbRows));
    if (rank == outputStage && options.outputPath.empty())
      throw RuntimeError("--infer needs --output FILE");
    int M = static_cast<int>(rows / mbRows);
    llvm::Expected<sched::Schedule> s =
        sched::generate("gpipe", topo, M, /*training=*/false);
    if (!s)
      throw RuntimeError(llvm::toString(s.takeError()));
    if (llvm::Error err = sched::check(*s, topo))
      throw RuntimeError("invalid schedule: " + llvm::toString(std::move(err)));
    schedule = std::move(*s);
    std::vector<MicroBatch> mbs(M);
    postReceives(mbs, /*training=*/false);
    OutputRows outputs;
    for (const sched::Action &action : schedule.ranks[rank]) {
      Clock::time_point begin = Clock::now();
      int m = action.microbatch;
      if (action.op == sched::Op::RecvF) {
        for (CommHandlePtr &h : mbs[m].recvF)
          h->wait();
      } else if (action.op == sched::Op::Forward) {
        forward(mbs[m], m, m * mbRows, /*training=*/false);
        if (rank == outputStage) {
          std::vector<c10::IValue> results;
          for (unsigned index : outputIndices)
            results.push_back(mbs[m].outputs.at(index));
          outputs.add(results);
        }
      } else if (action.op == sched::Op::SendF) {
        sendForward(mbs[m], m);
        mbs[m].outputs.clear();
      }
      record(action, begin);
    }
    waitSends();
    if (rank == outputStage) {
      outputs.write(options.outputPath);
      printLine("wrote " + std::to_string(rows) + " rows to " +
                options.outputPath);
    }
    if (!options.tracePath.empty())
      writeTrace();
    if (!options.profilePath.empty())
      writeProfile();
    comm->barrier(where() + ": waiting for every rank to finish");
  }

  //===--------------------------------------------------------------------===//
  // Outputs
  //===--------------------------------------------------------------------===//

  static std::string formatDouble(const char *format, double value) {
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), format, value);
    return buffer;
  }

  void printLine(const std::string &line) {
    if (prefixOwnLines)
      std::printf("[rank%d] %s\n", rank, line.c_str());
    else
      std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  void printRank0(const std::string &line) {
    if (rank == 0)
      printLine(line);
  }

  /// Sends a byte string to rank 0 (which receives one from every rank).
  std::vector<std::string> gatherStrings(const std::string &mine, int tagBase) {
    std::vector<std::string> all(rdzv.worldSize);
    if (rank != 0) {
      at::Tensor length =
          at::full({1}, static_cast<int64_t>(mine.size()), at::kLong);
      comm->send(length, 0, tagBase, where() + ": sending its trace size")
          ->wait();
      at::Tensor bytes =
          at::empty({static_cast<int64_t>(mine.size())}, at::kByte);
      std::memcpy(bytes.data_ptr(), mine.data(), mine.size());
      comm->send(bytes, 0, tagBase + 1, where() + ": sending its trace")
          ->wait();
      return all;
    }
    all[0] = mine;
    for (int r = 1; r < rdzv.worldSize; ++r) {
      at::Tensor length = at::empty({1}, at::kLong);
      comm->recv(length, r, tagBase, where() + ": receiving a trace size")
          ->wait();
      at::Tensor bytes = at::empty({length.item<int64_t>()}, at::kByte);
      comm->recv(bytes, r, tagBase + 1, where() + ": receiving a trace")
          ->wait();
      all[r].assign(static_cast<const char *>(bytes.data_ptr()), bytes.numel());
    }
    return all;
  }

  /// One Chrome/Perfetto JSON for all ranks: pid = rank, events named in the
  /// action text form.
  void writeTrace() {
    llvm::json::Array mine;
    for (const TraceEvent &e : events)
      mine.push_back(llvm::json::Object{{"name", e.name},
                                        {"ph", "X"},
                                        {"pid", rank},
                                        {"tid", 0},
                                        {"ts", e.start},
                                        {"dur", e.duration}});
    std::string text;
    llvm::raw_string_ostream os(text);
    os << llvm::json::Value(std::move(mine));
    os.flush();
    std::vector<std::string> all = gatherStrings(text, 0x7fff0000);
    if (rank != 0)
      return;
    llvm::json::Array merged;
    for (int r = 0; r < rdzv.worldSize; ++r) {
      merged.push_back(llvm::json::Object{
          {"name", "process_name"},
          {"ph", "M"},
          {"pid", r},
          {"args", llvm::json::Object{{"name", "rank " + std::to_string(r) +
                                                   " (stage " +
                                                   std::to_string(r) + ")"}}}});
      llvm::Expected<llvm::json::Value> part = llvm::json::parse(all[r]);
      if (!part)
        throw RuntimeError(
            "rank " + std::to_string(r) +
            " sent a malformed trace: " + llvm::toString(part.takeError()));
      for (llvm::json::Value &v : *part->getAsArray())
        merged.push_back(std::move(v));
    }
    writeJson(options.tracePath,
              llvm::json::Object{{"traceEvents", std::move(merged)},
                                 {"displayTimeUnit", "ms"}});
    printLine("wrote the trace to " + options.tracePath);
  }

  /// Rank 0 writes every weight: its own, those the other stages send (a
  /// name that an earlier stage also holds comes from that stage), and the
  /// file's values for anything no stage uses.
  void saveWeights() {
    std::set<std::string> earlier;
    std::map<std::string, at::Tensor> received;
    for (int s = 0; s < numStages; ++s) {
      std::vector<std::pair<std::string, TensorSpec>> list = stageParams(s);
      std::vector<std::pair<std::string, TensorSpec>> fresh;
      for (auto &entry : list)
        if (earlier.insert(entry.first).second)
          fresh.push_back(entry);
      if (s == 0)
        continue;
      for (size_t i = 0; i < fresh.size(); ++i) {
        const auto &[name, spec] = fresh[i];
        int t = 0x7ff00000 + static_cast<int>(i);
        if (rank == s) {
          at::Tensor value = params.at(name).detach().contiguous();
          comm->send(value, 0, t, where() + ": sending weight '" + name + "'")
              ->wait();
        } else if (rank == 0) {
          at::Tensor value =
              at::empty(spec.sizes, at::TensorOptions().dtype(spec.dtype));
          comm->recv(value, s, t, where() + ": receiving weight '" + name + "'")
              ->wait();
          received[name] = value;
        }
      }
    }
    if (rank != 0)
      return;
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    for (const std::string &name : weightOrder) {
      auto mine = params.find(name);
      auto theirs = received.find(name);
      tensors.emplace_back(name, mine != params.end() ? mine->second
                                 : theirs != received.end()
                                     ? theirs->second
                                     : allWeights.at(name));
    }
    writeTensors(options.saveWeightsPath, tensors, weightsMetadata);
    printLine("wrote the weights to " + options.saveWeightsPath);
  }

  /// Each rank writes its own stage's gradients; rank 0 merges nothing, so
  /// the file name gets the rank: FILE.rankR.
  /// Every parameter's gradient: those of this stage's trained ones, zeros
  /// for its frozen ones, and on rank 0 zeros for the parameters no stage
  /// uses (PyTorch's gradient is None for both).
  void saveGrads() {
    std::vector<std::pair<std::string, at::Tensor>> grads;
    for (const auto &[name, p] : trainable_) {
      at::Tensor g = p.grad();
      grads.emplace_back(name, g.defined() ? g : at::zeros_like(p));
    }
    std::set<std::string> frozen = metadataList(weightsMetadata, "frozen");
    for (const auto &[name, p] : params)
      if (frozen.count(name))
        grads.emplace_back(name, at::zeros_like(p));
    if (rank == 0) {
      std::set<std::string> used;
      for (int s = 0; s < numStages; ++s)
        for (const auto &[name, spec] : stageParams(s))
          used.insert(name);
      std::set<std::string> untrained = untrainedNames(weightsMetadata);
      for (const std::string &name : weightOrder) {
        const at::Tensor &t = allWeights.at(name);
        if (!used.count(name) &&
            (isTrainable(t, name, untrained) || frozen.count(name)))
          grads.emplace_back(name, at::zeros_like(t));
      }
    }
    writeTensors(options.saveGradsPath + ".rank" + std::to_string(rank), grads,
                 {});
  }

  //===--------------------------------------------------------------------===//
  // Checkpoints
  //===--------------------------------------------------------------------===//

  std::string checkpointPath(const std::string &dir) const {
    return dir + "/rank" + std::to_string(rank) + ".safetensors";
  }

  /// Every rank writes its stage into DIR/step-K.tmp; once all have, rank 0
  /// renames the directory to DIR/step-K, so a checkpoint is complete
  /// exactly when its directory has its final name.
  void checkpoint(::torch::optim::Optimizer &optimizer, int step,
                  int64_t cursor) {
    std::string final = options.checkpointDir + "/step-" + std::to_string(step);
    std::string tmp = final + ".tmp";
    if (std::error_code ec = llvm::sys::fs::create_directories(tmp))
      throw RuntimeError("cannot create " + tmp + ": " + ec.message());
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    for (const auto &[name, p] : params)
      tensors.emplace_back("param:" + name, p);
    std::map<std::string, std::string> metadata{
        {"step", std::to_string(step)},
        {"cursor", std::to_string(cursor)},
        {"rank", std::to_string(rank)},
        {"world_size", std::to_string(rdzv.worldSize)},
        {"optimizer", options.optimizer}};
    saveOptimizerState(optimizer, trainable_, tensors, metadata);
    writeTensors(checkpointPath(tmp), tensors, metadata);
    comm->barrier(where() + ": waiting for every rank's checkpoint");
    if (rank == 0) {
      llvm::sys::fs::remove_directories(final);
      if (std::error_code ec = llvm::sys::fs::rename(tmp, final))
        throw RuntimeError("cannot rename " + tmp + " to " + final + ": " +
                           ec.message());
      printLine("checkpoint at step " + std::to_string(step) + " in " + final);
    }
  }

  /// Loads the newest complete checkpoint; returns the next step.
  int resume(::torch::optim::Optimizer &optimizer, int64_t &cursor) {
    if (options.checkpointDir.empty())
      throw RuntimeError("--resume needs --checkpoint-dir");
    int best = 0;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(options.checkpointDir, ec), end;
         it != end && !ec; it.increment(ec)) {
      llvm::StringRef name = llvm::sys::path::filename(it->path());
      int step;
      if (name.consume_front("step-") && !name.getAsInteger(10, step))
        best = std::max(best, step);
    }
    if (best == 0) {
      printRank0("no checkpoint in " + options.checkpointDir +
                 "; starting at step 1");
      return 1;
    }
    std::string dir = options.checkpointDir + "/step-" + std::to_string(best);
    TensorFile file = readTensors(checkpointPath(dir));
    auto meta = [&](const std::string &key) {
      auto it = file.metadata.find(key);
      if (it == file.metadata.end())
        throw RuntimeError(checkpointPath(dir) + ": no '" + key +
                           "' in the metadata");
      return it->second;
    };
    if (std::stoi(meta("world_size")) != rdzv.worldSize)
      throw RuntimeError(dir + " was written by " + meta("world_size") +
                         " ranks, not " + std::to_string(rdzv.worldSize));
    if (meta("optimizer") != options.optimizer)
      throw RuntimeError(dir + " holds " + meta("optimizer") + " state, not " +
                         options.optimizer);
    {
      ::torch::NoGradGuard noGrad;
      for (auto &[name, p] : params) {
        auto it = file.tensors.find("param:" + name);
        if (it == file.tensors.end() || it->second.sizes() != p.sizes())
          throw RuntimeError(checkpointPath(dir) + ": no weight '" + name +
                             "' of the right shape");
        p.copy_(it->second);
      }
    }
    loadOptimizerState(optimizer, options.optimizer, trainable_, file);
    cursor = std::stoll(meta("cursor"));
    printRank0("resuming from " + dir);
    return best + 1;
  }

  //===--------------------------------------------------------------------===//

  const RunOptions &options;
  Rendezvous rdzv;
  int rank;
  bool prefixOwnLines;
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  pd::PipelineOp pipeline;
  std::vector<pd::StageOp> stages;
  int numStages = 0;
  std::vector<TensorSpec> argSpecs;
  std::vector<Source> myInputs;
  std::vector<Edge> recvEdges, sendEdges;
  /// Per stage input: whether it can get a gradient (pippy::valuesReaching).
  std::vector<bool> inputGetsGrad;
  /// Tied weights that no replica's use can give a gradient.
  std::set<std::string> tiedWithoutGradient;
  int outputStage = -1;
  std::vector<unsigned> outputIndices;
  std::vector<std::pair<std::string, std::vector<int>>> tiedGroups;
  sched::Topology topo;
  sched::Schedule schedule;
  std::unique_ptr<Program> program;
  std::map<std::string, at::Tensor> params;
  std::vector<std::pair<std::string, at::Tensor>> trainable_;
  std::map<std::string, at::Tensor> allWeights; // rank 0: the file's values
  std::vector<std::string> weightOrder;
  std::map<std::string, std::string> weightsMetadata;
  std::unique_ptr<Dataset> data;
  std::unique_ptr<Communicator> comm;
  std::vector<std::pair<std::string, std::unique_ptr<Communicator>>> tiedComms;
  std::vector<CommHandlePtr> pendingSends;
  std::map<std::string, std::map<int, at::Tensor>> tiedContributions;
  /// Whether this stage sends gradients to a previous one; its fused
  /// linears' weight gradients then wait until they are sent.
  bool sendsInputGradients = false;
  /// The weight-gradient pass of micro-batch m waits until micro-batch
  /// m + kHeldMicrobatches has sent its input gradients (the last ones run
  /// before the optimizer step). Every input gradient after the first then
  /// reaches the previous stage one pass sooner, and the postponed pass
  /// fills the end of the step, where this stage would otherwise wait for
  /// the previous stage's last B, optimizer step and next F. Holding more
  /// than one would leave this stage idle early in the step instead
  /// (bench/pipeline/hold_sim.py: 141.7 ms per step holding none, 135.1 ms
  /// holding one, 138.6 ms holding two, with bench/pipeline's measured
  /// times). It keeps one more micro-batch's linear inputs and output
  /// gradients alive. Each weight still adds its gradients in micro-batch
  /// order, so they keep their bits.
  static constexpr size_t kHeldMicrobatches = 1;
  struct HeldWeightGradients {
    int microbatch;
    WeightGradientQueue queue;
  };
  std::deque<HeldWeightGradients> heldWeightGrads;
  std::vector<Program::Linear> linears; // deferred weight gradients
  std::set<std::string> deferred;
  std::vector<int> captureSlots;
  std::vector<std::vector<at::Tensor>> linearInputs, linearGrads;
  int currentMicrobatch = 0;
  std::vector<int64_t> opNanoseconds; // --profile, per counted op
  int64_t forwardsRun = 0;
  double backwardSeconds = 0;
  double stepLoss = 0;
  double busySeconds = 0;
  int peakInflight = 0;
  Clock::time_point epoch = Clock::now();
  std::vector<TraceEvent> events;
};

} // namespace

namespace pippy {

llvm::Error runRank(const RunOptions &options, const Rendezvous &given) {
  Rendezvous rdzv = given;
  rdzv.timeout = std::chrono::milliseconds(
      static_cast<int64_t>(options.timeoutSeconds * 1000));
  std::string error;
  try {
    RankRunner(options, rdzv).run();
    return llvm::Error::success();
  } catch (const c10::Error &e) {
    error = e.what_without_backtrace();
  } catch (const std::exception &e) {
    error = e.what();
  }
  // Leave without tearing down communicators: their threads may be blocked
  // on a dead peer.
  std::fflush(stdout);
  std::string prefix = "rank " + std::to_string(rdzv.rank) + ": ";
  if (error.compare(0, prefix.size(), prefix) == 0)
    error.erase(0, prefix.size());
  std::fprintf(stderr, "pippy-run: error: rank %d: %s\n", rdzv.rank,
               error.c_str());
  std::fflush(stderr);
  _exit(1);
}

} // namespace pippy
