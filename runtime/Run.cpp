//===- Run.cpp - what pippy-run does --------------------------------------===//
//
// From the parsed options to a running rank: lower IR first where it is
// given (the full build), write executables (--emit-executables), check the
// options against what executables have baked in, spawn local ranks (the
// launcher lowers IR once, into a private folder the ranks read), or run
// this process's rank. A single process is a world of one rank.
//
//===----------------------------------------------------------------------===//

#include "pippy/Runtime/Run.h"

#include "Device.h"

#include "RunFolder.h"
#include "StagePlan.h"

#include "pippy/Runtime/Comm.h"
#include "pippy/Runtime/Launcher.h"
#include "pippy/Runtime/Mesh.h"
#include "pippy/Support/AtomicFile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>

namespace fs = std::filesystem;

namespace pippy {

void runRank(const RunOptions &options, const Rendezvous &rdzv,
             const std::function<rt::LoadedExecutable()> &load);

Mesh meshOf(const RunOptions &options, int world) {
  std::string error;
  Mesh mesh = Mesh::of(world, options.dp, options.tp, error);
  if (!error.empty())
    throw RuntimeError(error);
  return mesh;
}

namespace {

/// Set by the launcher for the ranks it spawns: the folder it lowered an IR
/// program into.
constexpr const char *kExecutablesVariable = "PIPPY_EXECUTABLES";

/// Where a lowering error names a --nproc and each pipeline rank is
/// several processes (--dp, --tp), how to scale it; or "".
std::string perPipelineRank(const RunOptions &options,
                            const std::string &error) {
  int each = options.dp * options.tp;
  if (each == 1 || error.find("--nproc ") == std::string::npos)
    return "";
  std::string flags = options.dp > 1 && options.tp > 1
                          ? "--dp " + std::to_string(options.dp) +
                                " and --tp " + std::to_string(options.tp)
                      : options.dp > 1 ? "--dp " + std::to_string(options.dp)
                                       : "--tp " + std::to_string(options.tp);
  return " (with " + flags + ", --nproc counts " + std::to_string(each) +
         " processes per pipeline rank: multiply by " + std::to_string(each) +
         ")";
}

/// Lowers the pipeline one replica of a world of `world` ranks runs: the
/// world's ranks divided by --dp, and its share of the micro-batches.
LoweredRanks lower(Compiler *compiler, const RunOptions &options, int world,
                   const std::string &folder) {
  RunOptions replica = options;
  if (replica.microbatches)
    *replica.microbatches /= options.dp;
  std::string error;
  std::optional<LoweredRanks> lowered =
      compiler->lower(replica, meshOf(options, world).pp, folder, error);
  if (!lowered)
    throw RuntimeError(error + perPipelineRank(options, error));
  int tp = exe::GetExecutable(lowered->ranks.at(0).data())->tensor_parallel();
  if (std::string why =
          tensorParallelMismatch(options.programPath, tp, options.tp);
      !why.empty())
    throw RuntimeError(why);
  return std::move(*lowered);
}

void writeExecutables(const LoweredRanks &lowered, const std::string &dir) {
  if (std::string error =
          exe::writeFolder(lowered.ranks, lowered.scheduleCsv, dir);
      !error.empty())
    throw RuntimeError(error);
}

/// The world is the executables' ranks times --dp and --tp (the tensor
/// parallelism they are sharded for); --nproc defaults to it.
void agreeOnWorld(RunOptions &options, const rt::LoadedExecutable &first) {
  const exe::Executable &exe = first.get();
  if (std::string why = tensorParallelMismatch(
          first.name(), exe.tensor_parallel(), options.tp);
      !why.empty())
    throw RuntimeError(why);
  int perReplica = exe.num_ranks() * options.tp;
  int world = perReplica * options.dp;
  if (!options.nproc) {
    if (world % options.nnodes != 0)
      throw RuntimeError(first.name() + " is lowered for " +
                         std::to_string(world) + " ranks; --nnodes " +
                         std::to_string(options.nnodes) +
                         " does not divide it");
    options.nproc = world / options.nnodes;
  }
  int given = *options.nproc * options.nnodes;
  if (given != world && options.dp == 1 && given % perReplica == 0)
    throw RuntimeError(first.name() + " is lowered for " +
                       std::to_string(perReplica) + " ranks; for " +
                       std::to_string(given) + " ranks, run " +
                       std::to_string(given / perReplica) +
                       " data-parallel replicas of it with --dp " +
                       std::to_string(given / perReplica));
  if (given != world)
    throw RuntimeError(
        first.name() + " is lowered with " + std::to_string(exe.num_ranks()) +
        (exe.num_ranks() == 1 ? " rank" : " ranks") +
        (options.dp * options.tp > 1
             ? " per pipeline, " + std::to_string(world) + " for --dp " +
                   std::to_string(options.dp) + " --tp " +
                   std::to_string(options.tp)
             : "") +
        "; --nproc " + std::to_string(*options.nproc) + " --nnodes " +
        std::to_string(options.nnodes) + " differs (lower again to change it)");
}

/// What executables baked in must agree with the options given again; the
/// ranks per node default to the executables' world times --dp, and each
/// replica's micro-batches are the executables'.
void agreeWithExecutables(RunOptions &options,
                          const rt::LoadedExecutable &first) {
  const exe::Executable &exe = first.get();
  const exe::Schedule &schedule = *exe.schedule();
  auto differ = [&](const std::string &what, const std::string &baked) {
    throw RuntimeError(first.name() + " is lowered with " + baked + "; " +
                       what + " differs (lower again to change it)");
  };
  agreeOnWorld(options, first);
  std::string kind = exe::scheduleKindText(schedule.kind());
  if (options.schedule && schedule.kind() != *options.schedule)
    differ(std::string("--schedule ") + name(*options.schedule),
           "schedule " + kind);
  if (options.microbatches &&
      *options.microbatches != schedule.microbatches() * options.dp)
    differ("--microbatches " + std::to_string(*options.microbatches),
           std::to_string(schedule.microbatches()) + " micro-batches" +
               (options.dp > 1
                    ? " per replica (" +
                          std::to_string(schedule.microbatches() * options.dp) +
                          " for --dp " + std::to_string(options.dp) + ")"
                    : ""));
  if (options.deferWeightGrads &&
      *options.deferWeightGrads != schedule.split_backward())
    differ(std::string("--defer-weight-grads") +
               (*options.deferWeightGrads ? "" : "=false"),
           schedule.split_backward() ? "--defer-weight-grads"
                                     : "no --defer-weight-grads");
  if (!options.scheduleFile.empty())
    differ("--schedule-file", "schedule " + kind);
}

/// Checks that `loaded` is rank `rank`'s executable, of a world of `world`,
/// and (where `hash` is given) of the same lowering as the others.
void checkRank(const rt::LoadedExecutable &loaded, int rank, int world,
               std::optional<uint64_t> hash, const std::string &path) {
  const exe::Executable &exe = loaded.get();
  if (exe.rank() != rank || exe.num_ranks() != world)
    throw RuntimeError(loaded.name() + " is rank " +
                       std::to_string(exe.rank()) + "'s of " +
                       std::to_string(exe.num_ranks()) + ", not rank " +
                       std::to_string(rank) + "'s of " + std::to_string(world));
  if (hash && exe.pipeline_hash() != *hash)
    throw RuntimeError(loaded.name() + " is of another pipeline than " +
                       rt::executablePath(path, 0) +
                       " (their pipeline hashes differ); lower the pipeline "
                       "again into one folder");
}

/// Reads rank `rank`'s executable under `path` and checks it (checkRank).
rt::LoadedExecutable readRank(const std::string &path, int rank, int world,
                              std::optional<uint64_t> hash) {
  rt::LoadedExecutable loaded =
      rt::LoadedExecutable::read(rt::executablePath(path, rank));
  checkRank(loaded, rank, world, hash, path);
  return loaded;
}

/// Before spawning: every rank of this node has its executable (its
/// pipeline rank's), of one lowering.
void checkNodeExecutables(const RunOptions &options,
                          const rt::LoadedExecutable &first) {
  int pipelineRanks = first.get().num_ranks();
  uint64_t hash = first.get().pipeline_hash();
  checkRank(first, 0, pipelineRanks, hash, options.programPath);
  int perNode = options.ranksPerNode();
  Mesh mesh = meshOf(options, perNode * options.nnodes);
  for (int r = options.nodeRank * perNode; r < (options.nodeRank + 1) * perNode;
       ++r)
    if (int p = mesh.of(r).pipelineRank; p != 0)
      readRank(options.programPath, p, pipelineRanks, hash);
}

/// The executable this rank runs: its pipeline rank's.
rt::LoadedExecutable loadRank(const RunOptions &options, Compiler *compiler,
                              bool isIR, const Rendezvous &rdzv) {
  Mesh mesh = meshOf(options, rdzv.worldSize);
  int pipelineRank = mesh.of(rdzv.rank).pipelineRank;
  if (const char *dir = std::getenv(kExecutablesVariable); dir && *dir)
    return readRank(dir, pipelineRank, mesh.pp, std::nullopt);
  if (!isIR)
    return readRank(options.programPath, pipelineRank, mesh.pp, std::nullopt);
  LoweredRanks lowered =
      lower(compiler, options, rdzv.worldSize, /*folder=*/"");
  return rt::LoadedExecutable::fromBytes(
      std::move(lowered.ranks.at(pipelineRank)), options.programPath, ".");
}

/// Spawns the local ranks; IR is lowered once, into a private folder.
int launchRanks(RunOptions &options, Compiler *compiler, bool isIR,
                const std::function<int()> &rankMain) {
  LaunchOptions launch;
  launch.nproc = options.ranksPerNode();
  launch.nnodes = options.nnodes;
  launch.nodeRank = options.nodeRank;
  launch.masterAddr = options.masterAddr;
  launch.masterPort = options.masterPort;
  launch.timeoutSeconds = options.timeoutSeconds;
  launch.threadsPerRank = options.threads;
  // Given IR, the launcher lowers it once into a folder the ranks read.
  std::optional<rt::RunFolder> folder;
  if (isIR) {
    folder.emplace("exe");
    writeExecutables(lower(compiler, options, launch.nproc * launch.nnodes, ""),
                     folder->path());
    setenv(kExecutablesVariable, folder->path().c_str(), 1);
  }
  return pippy::launch(launch, rankMain);
}

/// The files a run writes only at its end, checked before its first step
/// so that a path that cannot be written wastes no training, and so that
/// no output overwrites an input of the run or another output.
void checkOutputs(const RunOptions &options) {
  auto outputs = options.outputFiles();
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto &[flag, path] = outputs[i];
    if (std::string error = checkWritable(path); !error.empty())
      throw RuntimeError(error);
    for (size_t j = 0; j < i; ++j)
      if (sameFile(path, outputs[j].second))
        throw RuntimeError(std::string(outputs[j].first) + " and " + flag +
                           " name one file, " + path +
                           ": one would overwrite the other");
  }
  for (auto [what, input] :
       {std::pair{"--data", &options.dataPath},
        std::pair{"--weights", &options.weightsPath},
        std::pair{"--schedule-file", &options.scheduleFile},
        std::pair{"the program", &options.programPath}})
    if (std::string error = options.overwritingInput(
            *input, std::string(what) + " of this run");
        !error.empty())
      throw RuntimeError(error);
}

int run(int argc, char **argv, Compiler *compiler) {
  std::vector<std::string> args(argv, argv + argc);
  std::string message;
  int exitCode = 1;
  std::optional<RunOptions> parsed = parseRunOptions(args, message, exitCode);
  if (!parsed) {
    std::fputs(message.c_str(), exitCode ? stderr : stdout);
    return exitCode;
  }
  RunOptions &options = *parsed;
  if (!options.scheduleFile.empty()) {
    if (std::string error =
            readFile(options.scheduleFile, options.scheduleText);
        !error.empty())
      throw RuntimeError(error);
    if (options.scheduleText.find_first_not_of(" \t\r\n,") == std::string::npos)
      throw RuntimeError("--schedule-file " + options.scheduleFile +
                         " is empty: a schedule lists each rank's actions");
  }
  bool isIR = !rt::isExecutable(options.programPath);
  if (isIR && !compiler)
    throw RuntimeError(options.programPath +
                       " is not a folder of stage executables; this "
                       "pippy-run (a runtime-only build) runs only those: "
                       "lower the program with a full build's `pippy-run " +
                       options.programPath + " --emit-executables DIR`");
  if (!options.emitExecutablesDir.empty()) {
    if (!isIR)
      throw RuntimeError("--emit-executables lowers IR, but " +
                         options.programPath + " holds executables already");
    std::string dir = options.emitExecutablesDir;
    LoweredRanks lowered =
        lower(compiler, options, options.ranksPerNode() * options.nnodes,
              fs::absolute(dir).string());
    writeExecutables(lowered, dir);
    std::printf("wrote %zu stage executable%s and %s to %s\n",
                lowered.ranks.size(), lowered.ranks.size() == 1 ? "" : "s",
                exe::kScheduleFileName, dir.c_str());
    return 0;
  }
  if (options.dataPath.empty())
    throw RuntimeError("--data FILE is required");
  checkOutputs(options);
  // --device cuda without CUDA or a GPU stops here, before ranks start.
  (void)rt::rankDevice(options.device, 0);
  // Rank 0's executable, read once: the options are checked against it, and
  // rank 0 runs it when this process is rank 0.
  std::optional<rt::LoadedExecutable> first;
  if (!isIR && !std::getenv(kExecutablesVariable)) {
    first =
        rt::LoadedExecutable::read(rt::executablePath(options.programPath, 0));
    agreeWithExecutables(options, *first);
    if (!Rendezvous::rankIsSet())
      checkNodeExecutables(options, *first);
  }
  std::optional<Rendezvous> rdzv = Rendezvous::fromEnvironment();
  if (!rdzv && options.ranksPerNode() * options.nnodes > 1)
    return launchRanks(options, compiler, isIR,
                       [&] { return runMain(argc, argv, compiler); });
  Rendezvous one;
  Rendezvous &me = rdzv ? *rdzv : one;
  if (!options.runId.empty())
    me.runId = options.runId;
  runRank(options, me, [&] {
    if (first && me.rank == 0) {
      checkRank(*first, 0, meshOf(options, me.worldSize).pp, std::nullopt,
                options.programPath);
      return std::move(*first);
    }
    return loadRank(options, compiler, isIR, me);
  });
  return 0;
}

} // namespace

int runMain(int argc, char **argv, Compiler *compiler) {
  try {
    return run(argc, argv, compiler);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "pippy-run: error: %s\n", e.what());
    return 1;
  }
}

} // namespace pippy
