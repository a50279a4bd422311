//===- Executor.cpp - one rank of a pipeline: loading and the loops -------===//
//
// Rank r loads its stage executable, resolves its program once, loads its
// weights, meets the other ranks, and executes its action list:
//
//   F       runs the stage on micro-batch m with autograd recording; the
//           stage holding the pipeline's outputs also computes the loss
//   SEND_F  sends the stage's results to every stage that consumes them
//   RECV_F  waits for the activations posted for receipt at step start
//   B       backward from the loss or the received output gradients, then
//           frees the micro-batch's activations
//   SEND_B  sends the input gradients back to their producers
//   W       the deferred linear weight gradients (--defer-weight-grads)
//   ALLREDUCE_TIED  sums replicated tied-weight gradients over the group
//   STEP    clips by the global norm (all ranks) and steps the optimizer
//
// Receives are posted when the step starts and sends are asynchronous, so
// compute overlaps communication; sends are waited for before the
// optimizer step. The actions themselves are in Actions.cpp. Errors end
// the process after one message (a rank whose peer died must not linger in
// communicator teardown).
//
//===----------------------------------------------------------------------===//

#include "Rank.h"

#include "TensorFile.h"
#include "Training.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

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

RankRunner::RankRunner(const RunOptions &options, const Rendezvous &rdzv,
                       LoadedExecutable loaded)
    : options(options), rdzv(rdzv), executable(std::move(loaded)),
      plan(StagePlan::of(executable.get())), rank(rdzv.rank),
      prefixOwnLines(!std::getenv("PIPPY_LAUNCHED")) {}

void RankRunner::run() {
  setThreads(options.threads);
  if (plan.rank != rank)
    throw RuntimeError(executable.name() + " is rank " +
                       std::to_string(plan.rank) + "'s executable, not rank " +
                       std::to_string(rank) + "'s");
  if (plan.numRanks != rdzv.worldSize)
    throw RuntimeError(executable.name() + " is lowered for " +
                       std::to_string(plan.numRanks) +
                       (plan.numRanks == 1 ? " rank" : " ranks") +
                       " but the world has " + std::to_string(rdzv.worldSize));
  program = std::make_unique<Program>(
      Program::load(*executable.get().stages()->Get(0)->program(),
                    "stage " + std::to_string(plan.stage),
                    options.infer ? Program::Semantics::Evaluation
                                  : Program::Semantics::Training));
  opNanoseconds.assign(program->countedOps().size(), 0);
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

void RankRunner::loadWeights() {
  weightsPath = executable.weightsPath(options.weightsPath);
  if (weightsPath.empty()) {
    if (program->parameters().empty())
      return; // a pipeline without parameters needs no weights file
    throw RuntimeError(executable.name() +
                       " names no weights file; pass --weights");
  }
  // Rank 0 keeps every weight (it saves the whole model); the others read
  // their stage's.
  std::set<std::string> mine;
  for (const auto &[name, spec] : program->parameters())
    mine.insert(name);
  TensorFile file = readTensors(weightsPath, rank == 0 ? nullptr : &mine);
  weightsMetadata = file.metadata;
  weightOrder = file.order;
  std::set<std::string> untrained = untrainedNames(file.metadata);
  for (const auto &[name, spec] : program->parameters()) {
    at::Tensor tensor = checkedParameter(file, weightsPath, name, spec);
    bool trains = isTrainable(tensor, name, untrained) && !options.infer;
    params[name] = trains ? tensor.requires_grad_(true) : tensor;
    if (trains)
      trainable.push_back({name, params[name]});
  }
  if (rank == 0)
    allWeights = std::move(file.tensors);
}

void RankRunner::connect() {
  comm = rdzv.worldSize == 1 ? createLocalCommunicator()
                             : createCommunicator(options.backend, rdzv);
  checkRanksAgree();
  std::vector<int> peers;
  for (const std::vector<Edge> *edges : {&plan.recvEdges, &plan.sendEdges})
    for (const Edge &edge : *edges)
      peers.push_back(edge.peerRank);
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  comm->prepare(peers);
  // Tied groups: one communicator per group, created by its members in
  // the pipeline's order. Replicas start from the first member's value.
  for (const TiedReplicas &tied : plan.tied) {
    const std::vector<int> &members = tied.ranks;
    if (std::find(members.begin(), members.end(), rank) == members.end())
      continue;
    auto group = comm->subgroup("tied/" + tied.name, members);
    auto it = params.find(tied.name);
    if (it == params.end())
      throw RuntimeError("stage " + std::to_string(plan.stage) +
                         " is in the tied group of '" + tied.name +
                         "' but does not use it");
    {
      ::torch::NoGradGuard noGrad;
      at::Tensor value = it->second.detach();
      group->broadcast(value, 0, "broadcasting tied weight '" + tied.name + "'")
          ->wait();
    }
    tiedComms.push_back({tied.name, std::move(group)});
  }
  comm->barrier(where() + ": waiting for every rank to start");
  epoch = Clock::now();
}

void RankRunner::train() {
  chooseDeferredLinears();
  fuseWeightGradients();
  for (const Edge &edge : plan.recvEdges)
    for (const TensorSpec &spec : edge.specs)
      sendsInputGradients |= isDifferentiable(spec.dtype);
  registerTiedHooks();
  std::vector<at::Tensor> tensors;
  for (const auto &[name, p] : trainable)
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
  printRank0("schedule " + plan.scheduleKind + ", " + std::to_string(M) +
             " micro-batches of " + std::to_string(mbRows) + " rows, " +
             std::to_string(plan.numStages) +
             (plan.numStages == 1 ? " stage on " : " stages on ") +
             std::to_string(rdzv.worldSize) +
             (rdzv.worldSize == 1 ? " rank" : " ranks"));
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
    currentStep = step;
    releaseGradients(*optimizer);
    stepLoss = 0;
    std::vector<MicroBatch> mbs(M);
    postReceives(mbs, /*training=*/true);
    int inflight = 0;
    for (const ScheduledAction &action : plan.actions)
      runAction(action, mbs, step, cursor, inflight, *optimizer);
    addHeldWeightGradients();
    cursor = (cursor + M * mbRows) % data->rows();
    double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    wallSeconds += seconds;
    if (plan.holdsOutput()) {
      char line[128];
      std::snprintf(line, sizeof(line), "step %d/%d loss %.6f samples/s %.1f",
                    step, options.steps, stepLoss, M * mbRows / seconds);
      printLine(line);
    }
    losses.push_back(stepLoss);
    stepSeconds.push_back(seconds);
    if (options.checkpointEvery > 0 && !options.checkpointDir.empty() &&
        step % options.checkpointEvery == 0)
      checkpoint(*optimizer, step, cursor);
  }
  finish(firstStep, losses, stepSeconds, wallSeconds);
}

void RankRunner::runAction(const ScheduledAction &action,
                           std::vector<MicroBatch> &mbs, int step,
                           int64_t cursor, int &inflight,
                           ::torch::optim::Optimizer &optimizer) {
  using K = exe::ActionKind;
  switch (action.kind) {
  case K::SendF:
  case K::SendB:
    break;
  case K::Forward:
  case K::Backward:
  case K::RecvF:
  case K::RecvB:
    addHeldWeightGradients(kHeldMicrobatches);
    break;
  default: // the weight gradients must be complete
    addHeldWeightGradients();
  }
  Clock::time_point begin = Clock::now();
  int m = action.microbatch;
  switch (action.kind) {
  case K::Forward:
    forward(mbs[m], m, cursor + m * plan.microbatchRows(), /*training=*/true);
    peakInflight = std::max(peakInflight, ++inflight);
    break;
  case K::Backward:
    currentMicrobatch = m;
    backward(mbs[m]);
    backwardSeconds +=
        std::chrono::duration<double>(Clock::now() - begin).count();
    --inflight;
    break;
  case K::SendF:
    sendForward(mbs[m], m);
    break;
  case K::RecvF:
    for (CommHandlePtr &h : mbs[m].recvF)
      h->wait();
    break;
  case K::SendB:
    sendBackward(mbs[m], m);
    break;
  case K::RecvB:
    for (CommHandlePtr &h : mbs[m].recvB)
      h->wait();
    break;
  case K::Weight:
    weightGradients();
    break;
  case K::AllReduceTied:
    allReduceTied();
    break;
  case K::Step:
    waitSends();
    weightGradients();
    if (step == 1 && !options.saveGradsPath.empty())
      saveGrads();
    if (options.clipGradNorm)
      clipGradients();
    optimizer.step();
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
  int M = static_cast<int>(rows / mbRows);
  std::vector<MicroBatch> mbs(M);
  postReceives(mbs, /*training=*/false);
  OutputRows outputs;
  // Forward only: every micro-batch in order, as it arrives (GPipe's
  // forward half, which every schedule shares).
  for (int m = 0; m < M; ++m) {
    if (!plan.recvEdges.empty()) {
      Clock::time_point begin = Clock::now();
      for (CommHandlePtr &h : mbs[m].recvF)
        h->wait();
      record({exe::ActionKind::RecvF, plan.stage, m}, begin);
    }
    Clock::time_point begin = Clock::now();
    forward(mbs[m], m, m * mbRows, /*training=*/false);
    if (plan.holdsOutput()) {
      std::vector<c10::IValue> results;
      for (unsigned index : plan.outputIndices)
        results.push_back(mbs[m].outputs.at(index));
      outputs.add(results);
    }
    record({exe::ActionKind::Forward, plan.stage, m}, begin);
    if (!plan.sendEdges.empty()) {
      begin = Clock::now();
      sendForward(mbs[m], m);
      record({exe::ActionKind::SendF, plan.stage, m}, begin);
    }
    mbs[m].outputs.clear();
  }
  waitSends();
  if (plan.holdsOutput()) {
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

} // namespace pippy::rt

namespace pippy {

void runRank(const RunOptions &options, const Rendezvous &given,
             const std::function<rt::LoadedExecutable()> &load) {
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
