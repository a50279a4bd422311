//===- Executor.cpp - one rank of a pipeline: loading and the loops -------===//
//
// Rank r loads its stage executable, resolves its stages' programs once,
// loads their weights, meets the other ranks, and executes its action list;
// each action names the stage it runs:
//
//   F       runs the stage on micro-batch m with autograd recording; the
//           stage holding the pipeline's outputs also computes the loss;
//           consumers on this rank take its results at once (hand-over)
//   SEND_F  sends the stage's results to its consumers on other ranks
//   RECV_F  waits for the activations posted for receipt at step start
//   B       backward from the loss or the output gradients received or
//           handed over, then frees the micro-batch's activations
//   I, W    B split: I the input gradients (the graph kept), W the weight
//           gradients, which zero-bubble schedules run later
//   SEND_B  sends the input gradients back to producers on other ranks
//   W (no micro-batch)  the deferred linear weight gradients
//           (--defer-weight-grads)
//   ALLREDUCE_TIED  sums replicated tied-weight gradients over the groups
//   STEP    the rank's first STEP clips by the global norm (all ranks) and
//           steps the optimizer over every stage it holds; the others,
//           which come right after it, have nothing left to do
//
// Receives are posted when the step starts and sends are asynchronous, so
// compute overlaps communication; sends are waited for before the
// optimizer step. The actions themselves are in Actions.cpp. Errors end
// the process after one message (a rank whose peer died must not linger in
// communicator teardown).
//
//===----------------------------------------------------------------------===//

#include "Rank.h"

#include "Device.h"
#include "TorchCompat.h"

#include "TensorFile.h"
#include "Training.h"
#include "pippy/Runtime/MemoryMeter.h"
#include "pippy/Runtime/Run.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <unistd.h>

namespace pippy::rt {

namespace {

/// ATen's thread count, and OpenBLAS's where libtorch uses it: OpenBLAS
/// reads OMP_NUM_THREADS once, when it loads, and a forked rank has the
/// launcher's loaded copy.
void setThreads(int threads) {
  at::set_num_threads(threads);
  using SetBlasThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetBlasThreads>(
          dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    set(threads);
}

} // namespace

static std::vector<exe::WaitFill::Step>
earlySteps(const std::vector<ScheduledAction> &actions) {
  std::vector<exe::WaitFill::Step> steps;
  for (const ScheduledAction &a : actions)
    steps.push_back({a.kind, a.stage, a.microbatch});
  return steps;
}

RankRunner::RankRunner(const RunOptions &options, const Rendezvous &rdzv,
                       LoadedExecutable loaded)
    : options(options), rdzv(rdzv), executable(std::move(loaded)),
      plan(StagePlan::of(executable.get())),
      mesh(meshOf(options, rdzv.worldSize)),
      replica(mesh.of(rdzv.rank).replica),
      rank(mesh.of(rdzv.rank).pipelineRank),
      tensorRank(mesh.of(rdzv.rank).tensorRank),
      device(rankDevice(options.device, rdzv.localRank)),
      prefixOwnLines(!std::getenv("PIPPY_LAUNCHED")),
      early(earlySteps(plan.actions)), times(device) {
  times.setTracing(!options.tracePath.empty());
}

StageRun &RankRunner::stageRun(int stage) {
  for (StageRun &run : stages)
    if (run.plan->stage == stage)
      return run;
  throw RuntimeError(where() + " does not hold stage " + std::to_string(stage));
}

void RankRunner::run() {
  setThreads(options.threads);
  useDevice(device);
  compat::setAllowTf32(options.allowTf32);
  if (!options.metricsPath.empty())
    installMemoryMeter();
  if (plan.rank != rank)
    throw RuntimeError(executable.name() + " is rank " +
                       std::to_string(plan.rank) + "'s executable, not rank " +
                       std::to_string(rank) + "'s");
  if (plan.numRanks != mesh.pp)
    throw RuntimeError(executable.name() + " is lowered for " +
                       std::to_string(plan.numRanks) +
                       (plan.numRanks == 1 ? " rank" : " ranks") +
                       " but the world has " + std::to_string(rdzv.worldSize) +
                       (mesh.dp > 1 ? " (" + std::to_string(mesh.pp) +
                                          " per replica for --dp " +
                                          std::to_string(mesh.dp) + ")"
                                    : ""));
  if (std::string why = tensorParallelMismatch(executable.name(),
                                               plan.tensorParallel, mesh.tp);
      !why.empty())
    throw RuntimeError(why);
  loadPrograms();
  loadWeights();
  // With --loss none the target is forward's last argument, in --infer too.
  data = std::make_unique<Dataset>(options, plan.inputs,
                                   /*needTarget=*/!options.infer ||
                                       options.loss == LossKind::None);
  connect();
  if (options.infer)
    return infer();
  train();
}

void RankRunner::loadPrograms() {
  for (const HeldStage &held : plan.stages) {
    StageRun &run = stages.emplace_back();
    run.plan = &held;
    run.program = std::make_unique<Program>(
        Program::load(*held.program, "stage " + std::to_string(held.stage),
                      options.infer ? Program::Semantics::Evaluation
                                    : Program::Semantics::Training,
                      device));
    if (options.precision != Precision::F32)
      run.program->runConvolutionsAsTraced();
    run.opNanoseconds.assign(run.program->countedOps().size(), 0);
  }
}

void RankRunner::loadWeights() {
  weightsPath = executable.weightsPath(options.weightsPath);
  if (std::string error =
          options.overwritingInput(weightsPath, "the run's weights file");
      !error.empty())
    throw RuntimeError(error);
  // The parameters of the rank's stages, each once (stages of one rank
  // share a tied weight's tensor).
  std::vector<std::pair<std::string, TensorSpec>> used;
  std::set<std::string> mine;
  for (StageRun &run : stages)
    for (const auto &[name, spec] : run.program->parameters())
      if (mine.insert(name).second)
        used.push_back({name, spec});
  if (weightsPath.empty()) {
    if (used.empty())
      return; // a pipeline without parameters needs no weights file
    throw RuntimeError(executable.name() +
                       " names no weights file; pass --weights");
  }
  // Rank 0 keeps every weight (it saves the whole model); the others read
  // their stages'.
  TensorFile file = readTensors(weightsPath, rank == 0 ? nullptr : &mine);
  weightsMetadata = file.metadata;
  weightOrder = file.order;
  std::set<std::string> untrained = untrainedNames(file.metadata);
  for (const auto &[name, spec] : used) {
    at::Tensor tensor =
        plan.sliceOf(name, checkedParameter(file, weightsPath, name, spec),
                     tensorRank)
            .to(device);
    bool trains = isTrainable(tensor, name, untrained) && !options.infer;
    params[name] = trains ? tensor.requires_grad_(true) : tensor;
    if (trains)
      trainable.push_back({name, params[name]});
  }
  if (rank == 0)
    allWeights = std::move(file.tensors);
}

void RankRunner::connect() {
  rdzv.pipelineHash = plan.pipelineHash;
  rdzv.sharedMemory = options.sharedMemory;
  worldComm = rdzv.worldSize == 1
                  ? createLocalCommunicator()
                  : createCommunicator(backendFor(options, device), rdzv);
  checkRanksAgree();
  connectReplicas();
  std::vector<int> peers;
  for (const HeldStage &held : plan.stages)
    for (const std::vector<Edge> *edges : {&held.recvEdges, &held.sendEdges})
      for (const Edge &edge : *edges)
        if (!edge.local)
          peers.push_back(edge.peerRank);
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  comm->prepare(peers);
  // Tied groups: one communicator per group that spans ranks, created by
  // its members in the pipeline's order. Replicas start from the first
  // member's value. Stages of one rank share the tensor; a group within
  // one rank needs no communicator (its parts are still summed in the
  // unsplit run's order).
  for (const TiedReplicas &tied : plan.tied) {
    const std::vector<int> &members = tied.ranks;
    if (std::find(members.begin(), members.end(), rank) == members.end())
      continue;
    auto it = params.find(tied.name);
    if (it == params.end())
      throw RuntimeError(where() + " is in the tied group of '" + tied.name +
                         "' but does not use it");
    if (members.size() == 1) {
      tiedComms.push_back({tied.name, nullptr});
      continue;
    }
    std::vector<int> global;
    for (int member : members)
      global.push_back(comm->globalRank(member));
    auto group = comm->subgroup("tied/" + tied.name, global);
    {
      ::torch::NoGradGuard noGrad;
      at::Tensor value = it->second.detach();
      group->broadcast(value, 0, "broadcasting tied weight '" + tied.name + "'")
          ->wait();
    }
    tiedComms.push_back({tied.name, std::move(group)});
  }
  comm->barrier(where() + ": waiting for every rank to start");
  times.startEpoch();
}

void RankRunner::train() {
  chooseDeferredLinears();
  fuseWeightGradients();
  registerTiedHooks();
  prepareGradientReducer();
  std::vector<int> reduceAfter = reduceAfterActions();
  shardOptimizerState();
  prepareStageSteps();
  std::vector<at::Tensor> tensors;
  for (const auto &[name, p] : optimized)
    tensors.push_back(p);
  auto optimizer = makeOptimizer(options, tensors);
  int64_t mbRows = plan.microbatchRows();
  int M = plan.microbatches;
  int64_t cursor = 0;
  int firstStep = 1;
  if (options.resume)
    firstStep = resume(*optimizer, cursor);
  if (firstStep > options.steps)
    throw RuntimeError("the last checkpoint is at step " +
                       std::to_string(firstStep - 1) + "; --steps " +
                       std::to_string(options.steps) + " leaves nothing to do");
  printRank0(describeRun());
  StepHistory history;
  for (int step = firstStep; step <= options.steps; ++step) {
    if (step == firstStep + 1) {
      // --profile: the first step warms up allocators and caches; measure
      // the others.
      for (StageRun &run : stages)
        std::fill(run.opNanoseconds.begin(), run.opNanoseconds.end(), 0);
      forwardsRun = 0;
      backwardSeconds = 0;
    }
    Clock::time_point start = Clock::now();
    double busyBefore = times.busySeconds();
    currentStep = step;
    releaseGradients(trainable);
    stepLoss = 0;
    stageStepped.assign(stages.size(), false);
    for (StageRun &run : stages) {
      run.mbs.assign(M, MicroBatch());
      postReceives(run, /*training=*/true);
    }
    int inflight = 0;
    early.reset();
    for (size_t i = 0; i < plan.actions.size(); ++i) {
      if (!early.wasRunEarly(i)) {
        fillWait(i, step, cursor, inflight, *optimizer);
        runAction(plan.actions[i], step, cursor, inflight, *optimizer);
      }
      if (!reduceAfter.empty() && reduceAfter[i] >= 0)
        reduceStage(reduceAfter[i]);
    }
    addHeldWeightGradients();
    waitReceives();
    sumStepLoss();
    times.settle(); // after the loss was read: the device is done
    cursor = (cursor + stepMicrobatches() * mbRows) % data->rows();
    double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    history.wallSeconds += seconds;
    if (plan.holdsOutput() && reports()) {
      char line[128];
      std::snprintf(line, sizeof(line), "step %d/%d loss %.6f samples/s %.1f",
                    step, options.steps, stepLoss,
                    stepMicrobatches() * mbRows / seconds);
      printLine(line);
    }
    history.losses.push_back(stepLoss);
    history.seconds.push_back(seconds);
    history.busySeconds.push_back(times.busySeconds() - busyBefore);
    if (options.checkpointEvery > 0 && !options.checkpointDir.empty() &&
        step % options.checkpointEvery == 0)
      checkpoint(*optimizer, step, cursor);
  }
  optimizerBytes = optimizerStateBytes(*optimizer, optimized);
  finish(firstStep, history);
}

/// "schedule 1f1b, 4 micro-batches of 2 rows, 2 stages on 2 ranks", and the
/// replicas with --dp.
std::string RankRunner::describeRun() const {
  int M = plan.microbatches;
  std::string text = "schedule " + plan.scheduleKind + ", " +
                     std::to_string(stepMicrobatches()) + " micro-batches of " +
                     std::to_string(plan.microbatchRows()) + " rows, " +
                     std::to_string(plan.numStages) +
                     (plan.numStages == 1 ? " stage on " : " stages on ") +
                     std::to_string(plan.numRanks) +
                     (plan.numRanks == 1 ? " rank" : " ranks");
  if (mesh.tp > 1)
    text += " of " + std::to_string(mesh.tp) + " tensor-parallel ranks each";
  if (mesh.dp > 1)
    text += ", " + std::to_string(mesh.dp) + " data-parallel replicas of " +
            std::to_string(M) + (M == 1 ? " micro-batch" : " micro-batches") +
            " each";
  if (mesh.dp * mesh.tp > 1)
    text += " (" + std::to_string(rdzv.worldSize) + " ranks)";
  return text;
}

void RankRunner::runAction(const ScheduledAction &action, int step,
                           int64_t cursor, int &inflight,
                           ::torch::optim::Optimizer &optimizer) {
  using K = exe::ActionKind;
  switch (action.kind) {
  case K::SendF:
  case K::SendB:
    break;
  case K::Forward:
  case K::Backward:
  case K::BackwardInput:
  case K::RecvF:
  case K::RecvB:
    addHeldWeightGradients(kHeldMicrobatches);
    break;
  default: // the weight gradients must be complete
    addHeldWeightGradients();
  }
  ActionClock::Mark begin = times.mark();
  int m = action.microbatch;
  StageRun &run = stageRun(action.stage);
  switch (action.kind) {
  case K::Forward: {
    int64_t before = liveBytes(device);
    forward(run, m, cursor + globalMicrobatch(m) * plan.microbatchRows(),
            /*training=*/true);
    int64_t kept = liveBytes(device) - before;
    addStepLoss(run.mbs[m].loss); // after the count: it is no activation
    forwardBytes[{action.stage, m}] = kept;
    activationBytes += kept;
    peakActivationBytes = std::max(peakActivationBytes, activationBytes);
    peakInflight = std::max(peakInflight, ++inflight);
    break;
  }
  case K::Backward:
  case K::BackwardInput:
  case K::BackwardWeight:
    if (action.kind == K::Backward)
      backward(run, m);
    else if (action.kind == K::BackwardInput)
      backwardInput(run, m);
    else
      backwardWeight(run, m);
    backwardSeconds +=
        std::chrono::duration<double>(Clock::now() - begin.host).count();
    if (action.kind != K::BackwardInput) {
      --inflight;
      activationBytes -= forwardBytes[{action.stage, m}];
    }
    break;
  case K::SendF:
    sendForward(run, m);
    break;
  case K::RecvF:
    for (CommHandlePtr &h : run.mbs[m].recvF)
      h->waitOnDevice();
    break;
  case K::SendB:
    sendBackward(run, m);
    break;
  case K::RecvB:
    for (CommHandlePtr &h : run.mbs[m].recvB)
      h->waitOnDevice();
    break;
  case K::Weight:
    weightGradients();
    break;
  case K::AllReduceTied:
    allReduceTied();
    break;
  case K::Step:
    optimizerStep(step, action.stage, optimizer);
    break;
  }
  record(action, begin);
  if (action.kind == K::SendB)
    addHeldWeightGradients(kHeldMicrobatches);
}

void RankRunner::infer() {
  ::torch::NoGradGuard noGrad;
  int64_t mbRows = plan.microbatchRows();
  int64_t rows = data->rows();
  if (rows % mbRows != 0)
    throw RuntimeError(options.dataPath + ": " + std::to_string(rows) +
                       " rows do not divide into micro-batches of " +
                       std::to_string(mbRows));
  if (plan.holdsOutput() && options.outputPath.empty())
    throw RuntimeError("--infer needs --output FILE");
  // This replica's micro-batches: replica, replica + D, ... of the data's.
  int total = static_cast<int>(rows / mbRows);
  int M = total > replica ? (total - replica + mesh.dp - 1) / mesh.dp : 0;
  for (StageRun &run : stages) {
    run.mbs.assign(M, MicroBatch());
    postReceives(run, /*training=*/false);
  }
  std::vector<std::vector<at::Tensor>> outputs;
  // Forward only: every micro-batch in order, through the rank's stages in
  // order, as it arrives (GPipe's forward half, which every schedule
  // shares).
  for (int m = 0; m < M; ++m)
    for (StageRun &run : stages) {
      MicroBatch &mb = run.mbs[m];
      int stage = run.plan->stage;
      if (!mb.recvF.empty()) {
        ActionClock::Mark begin = times.mark();
        for (CommHandlePtr &h : mb.recvF)
          h->wait();
        record({exe::ActionKind::RecvF, stage, m}, begin);
      }
      ActionClock::Mark begin = times.mark();
      forward(run, m, globalMicrobatch(m) * mbRows, /*training=*/false);
      if (run.plan->holdsOutput) {
        std::vector<c10::IValue> results;
        for (unsigned index : plan.outputIndices)
          results.push_back(mb.outputs.at(index));
        outputs.push_back(OutputRows::flatten(results));
      }
      record({exe::ActionKind::Forward, stage, m}, begin);
      if (std::any_of(run.plan->sendEdges.begin(), run.plan->sendEdges.end(),
                      [](const Edge &e) { return !e.local; })) {
        begin = times.mark();
        sendForward(run, m);
        record({exe::ActionKind::SendF, stage, m}, begin);
      }
      mb.outputs.clear();
    }
  waitSends();
  times.settle();
  // Replica 0 writes every replica's rows, in the data's order.
  if (plan.holdsOutput() && tensorRank == 0) {
    outputs = gatherOutputs(std::move(outputs), total);
    if (replica == 0) {
      OutputRows rowsOut;
      for (std::vector<at::Tensor> &chunk : outputs)
        rowsOut.add(std::move(chunk));
      rowsOut.write(options.outputPath);
      printLine("wrote " + std::to_string(rows) + " rows to " +
                options.outputPath);
    }
  }
  if (reports() && !options.tracePath.empty())
    writeTrace();
  if (reports() && !options.profilePath.empty())
    writeProfile();
  worldComm->barrier(where() + ": waiting for every rank to finish");
}

} // namespace pippy::rt

namespace pippy {

void runRank(const RunOptions &options, const Rendezvous &given,
             const std::function<rt::LoadedExecutable()> &load) {
  // A peer that dies closes its sockets: writing to one must fail (EPIPE)
  // and be reported naming the peer, not end this rank with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  Rendezvous rdzv = given;
  rdzv.timeout = std::chrono::milliseconds(
      static_cast<int64_t>(options.timeoutSeconds * 1000));
  std::string error;
  try {
    rt::RankRunner(options, rdzv, load()).run();
    return;
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
  if (rdzv.worldSize > 1)
    std::fprintf(stderr, "pippy-run: error: rank %d: %s\n", rdzv.rank,
                 error.c_str());
  else
    std::fprintf(stderr, "pippy-run: error: %s\n", error.c_str());
  std::fflush(stderr);
  _exit(1);
}

} // namespace pippy
