//===- Launcher.cpp - spawning local ranks --------------------------------===//

#include "pippy/Runtime/Launcher.h"

#include "pippy/Runtime/Comm.h"

#include "RunFolder.h"

#include <algorithm>
#include <arpa/inet.h>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <optional>
#include <poll.h>
#include <string>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace {

double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/// A TCP port nobody listens on right now.
int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return 29500;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 29500;
  if (bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

struct Rank {
  int rank = 0;
  pid_t pid = -1;
  int out = -1, err = -1; // read ends, -1 once closed
  std::string outBuffer, errBuffer;
  bool exited = false;
  int status = 0;
  /// The rank's error ("pippy-run: error: ..." and the lines after it),
  /// held back and reported once for all ranks (reportErrors).
  std::string error;
};

void writeAll(int fd, const std::string &text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) {
      if (n < 0 && errno == EINTR)
        continue;
      return;
    }
    done += n;
  }
}

constexpr const char *kErrorPrefix = "pippy-run: error: ";

/// How long the other ranks have to end on their own once one has failed:
/// each has been waiting on its peers, with --timeout, since about when it
/// failed; one that is hung (stopped) never ends, and is killed.
constexpr double kGraceSeconds = 5;

/// Forwards the complete lines of `buffer` to `fd` with the rank's prefix;
/// with `flush`, also the last partial line. An error line of stderr, and
/// every stderr line after it, goes to `r.error` instead.
void forwardLines(std::string &buffer, int fd, Rank &r, bool flush) {
  std::string prefix = "[rank" + std::to_string(r.rank) + "] ";
  bool isErr = fd == STDERR_FILENO;
  if (flush && !buffer.empty() && buffer.back() != '\n')
    buffer += '\n';
  size_t start = 0, nl;
  std::string out;
  while ((nl = buffer.find('\n', start)) != std::string::npos) {
    std::string line = buffer.substr(start, nl - start + 1);
    start = nl + 1;
    if (isErr && (!r.error.empty() || line.rfind(kErrorPrefix, 0) == 0))
      r.error += line;
    else
      out += prefix + line;
  }
  buffer.erase(0, start);
  if (!out.empty())
    writeAll(fd, out);
}

/// Whether an error only follows from another rank's failure (a peer lost
/// or silent), so that the cause is printed first.
bool isConsequence(const std::string &text) {
  for (const char *mark : {"lost rank", "no answer from rank", "a peer failed",
                           "a peer did not answer"})
    if (text.find(mark) != std::string::npos)
      return true;
  return false;
}

/// Prints the ranks' errors, each text once with the ranks that gave it
/// ("every rank: ...", "ranks 0, 2: ..."), causes before consequences.
void reportErrors(const std::vector<Rank> &ranks) {
  struct Group {
    std::string text;
    std::vector<int> ranks;
  };
  std::vector<Group> groups;
  for (const Rank &r : ranks) {
    if (r.error.empty())
      continue;
    std::string text = r.error.substr(std::strlen(kErrorPrefix));
    std::string own = "rank " + std::to_string(r.rank) + ": ";
    if (text.rfind(own, 0) == 0)
      text.erase(0, own.size());
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const Group &g) { return g.text == text; });
    if (it == groups.end())
      groups.push_back({text, {r.rank}});
    else
      it->ranks.push_back(r.rank);
  }
  std::stable_partition(groups.begin(), groups.end(),
                        [](const Group &g) { return !isConsequence(g.text); });
  for (const Group &g : groups) {
    std::string who;
    if (g.ranks.size() == ranks.size() && ranks.size() > 1)
      who = "every rank";
    else
      for (int rank : g.ranks)
        who +=
            (who.empty() ? (g.ranks.size() == 1 ? "rank " : "ranks ") : ", ") +
            std::to_string(rank);
    writeAll(STDERR_FILENO, kErrorPrefix + who + ": " + g.text);
  }
}

std::string describeExit(int status) {
  if (WIFSIGNALED(status))
    return std::string("was killed by signal ") +
           std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

volatile sig_atomic_t interrupted = 0;
void onSignal(int sig) { interrupted = sig; }

/// The child side of a fork: the rank's output pipes and environment, the
/// default signal handling the launcher replaced, then the rank itself.
[[noreturn]] void becomeRank(int out[2], int err[2],
                             std::vector<std::string> &env,
                             const std::function<int()> &rankMain,
                             pid_t launcher) {
  // A rank ends with its launcher, whatever ended it (kill -9 included):
  // no orphan keeps the master port or a checkpoint folder busy.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != launcher)
    _exit(1);
  dup2(out[1], STDOUT_FILENO);
  dup2(err[1], STDERR_FILENO);
  for (int fd : {out[0], out[1], err[0], err[1]})
    close(fd);
  for (int sig : {SIGINT, SIGTERM})
    std::signal(sig, SIG_DFL); // SIGPIPE stays ignored: see runRank
  clearenv();
  for (std::string &kv : env)
    putenv(kv.data());
  int code = rankMain();
  std::fflush(nullptr);
  _exit(code);
}

/// Rank 0's host and port, where the ranks meet.
struct Master {
  std::string addr;
  int port = 0;
};

/// The master from the options or MASTER_ADDR/MASTER_PORT; on one node
/// this host and a free port by default. Prints why there is none.
std::optional<Master> findMaster(const pippy::LaunchOptions &options) {
  Master master{options.masterAddr, options.masterPort};
  if (master.addr.empty())
    if (const char *env = std::getenv("MASTER_ADDR"))
      master.addr = env;
  if (!master.port)
    if (const char *env = std::getenv("MASTER_PORT"); env && *env)
      master.port = std::atoi(env);
  if (options.nnodes > 1) {
    if (master.addr.empty() || !master.port) {
      std::fprintf(stderr,
                   "pippy-run: error: --nnodes %d needs --master-addr and "
                   "--master-port (or MASTER_ADDR and MASTER_PORT) naming "
                   "rank 0's host\n",
                   options.nnodes);
      return std::nullopt;
    }
    return master;
  }
  if (master.addr.empty())
    master.addr = "127.0.0.1";
  if (!master.port)
    master.port = freePort();
  return master;
}

/// What the run's ranks share: the world, where they meet, and the run
/// folder's store and failure list.
struct RankSetting {
  const pippy::LaunchOptions &options;
  Master master;
  std::string storePath, failedPath;
};

/// Local rank `local`'s environment: the launcher's, less what the
/// launcher sets, and torchrun's variables for this rank.
std::vector<std::string> rankEnvironment(const RankSetting &setting, int rank,
                                         int local) {
  const pippy::LaunchOptions &options = setting.options;
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    if (key == "RANK" || key == "WORLD_SIZE" || key == "LOCAL_RANK" ||
        key == "LOCAL_WORLD_SIZE" || key == "MASTER_ADDR" ||
        key == "MASTER_PORT" || key == "PIPPY_STORE" ||
        key == "PIPPY_FAILED_RANKS" || key == "PIPPY_LAUNCHED" ||
        key == "OMP_NUM_THREADS")
      continue;
    env.push_back(kv);
  }
  env.push_back("RANK=" + std::to_string(rank));
  env.push_back("WORLD_SIZE=" + std::to_string(options.nproc * options.nnodes));
  env.push_back("LOCAL_RANK=" + std::to_string(local));
  env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(options.nproc));
  env.push_back("MASTER_ADDR=" + setting.master.addr);
  env.push_back("MASTER_PORT=" + std::to_string(setting.master.port));
  env.push_back("OMP_NUM_THREADS=" + std::to_string(options.threadsPerRank));
  env.push_back("PIPPY_LAUNCHED=1");
  env.push_back("PIPPY_FAILED_RANKS=" + setting.failedPath);
  if (options.nnodes == 1)
    env.push_back("PIPPY_STORE=" + setting.storePath);
  return env;
}

/// Forks local rank `local` with its output piped to the launcher.
/// Prints why it could not.
bool startRank(const RankSetting &setting, int local, Rank &r,
               const std::function<int()> &rankMain) {
  r.rank = setting.options.nodeRank * setting.options.nproc + local;
  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) {
    std::perror("pippy-run: error: pipe");
    return false;
  }
  std::vector<std::string> env = rankEnvironment(setting, r.rank, local);
  std::fflush(nullptr); // nothing buffered here is written twice
  pid_t launcher = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("pippy-run: error: fork");
    return false;
  }
  if (pid == 0)
    becomeRank(out, err, env, rankMain, launcher);
  close(out[1]);
  close(err[1]);
  r.pid = pid;
  r.out = out[0];
  r.err = err[0];
  return true;
}

/// The launcher's watch over its ranks: it forwards their output and
/// notices their exits. After the first failure the others get the
/// communicator timeout (plus a margin) to notice and exit, then are
/// killed.
class Watch {
public:
  Watch(std::vector<Rank> &ranks, std::string failedPath)
      : ranks(ranks), failedPath(std::move(failedPath)) {}

  /// Until every rank has exited and said all it had to say; the run's
  /// exit code.
  int run() {
    while (!done()) {
      forwardOutput();
      reapExits();
      enforceDeadline();
    }
    reportErrors(ranks);
    if (exitCode)
      std::fprintf(stderr, "pippy-run: error: %s\n",
                   failures.empty() ? "interrupted" : failures.c_str());
    return exitCode;
  }

private:
  bool done() const {
    return std::all_of(ranks.begin(), ranks.end(), [](const Rank &r) {
      return r.exited && r.out < 0 && r.err < 0;
    });
  }
  void forwardOutput();
  void reapExits();
  void enforceDeadline();

  std::vector<Rank> &ranks;
  std::string failedPath;
  int exitCode = 0;
  double killAt = -1;
  std::string failures;
};

/// Waits up to 100 ms for output and forwards what came, line by line.
void Watch::forwardOutput() {
  std::vector<pollfd> fds;
  std::vector<std::pair<Rank *, bool>> owners; // rank, is stdout
  for (Rank &r : ranks) {
    if (r.out >= 0) {
      fds.push_back({r.out, POLLIN, 0});
      owners.push_back({&r, true});
    }
    if (r.err >= 0) {
      fds.push_back({r.err, POLLIN, 0});
      owners.push_back({&r, false});
    }
  }
  int n = fds.empty() ? (usleep(50000), 0) : poll(fds.data(), fds.size(), 100);
  for (size_t i = 0; n > 0 && i < fds.size(); ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
      continue;
    auto [r, isOut] = owners[i];
    char chunk[65536];
    ssize_t got = read(fds[i].fd, chunk, sizeof(chunk));
    std::string &buffer = isOut ? r->outBuffer : r->errBuffer;
    int target = isOut ? STDOUT_FILENO : STDERR_FILENO;
    if (got > 0) {
      buffer.append(chunk, got);
      forwardLines(buffer, target, *r, false);
    } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
      forwardLines(buffer, target, *r, true);
      close(fds[i].fd);
      (isOut ? r->out : r->err) = -1;
    }
  }
}

/// Notes the ranks that exited; a failure is recorded in the run folder
/// (for the ranks still running) and starts the grace period.
void Watch::reapExits() {
  for (Rank &r : ranks) {
    if (r.exited)
      continue;
    int status;
    if (waitpid(r.pid, &status, WNOHANG) != r.pid)
      continue;
    r.exited = true;
    r.status = status;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
      continue;
    exitCode = 1;
    std::string what =
        "rank " + std::to_string(r.rank) + " " + describeExit(status);
    failures += (failures.empty() ? "" : "; ") + what;
    if (FILE *f = std::fopen(failedPath.c_str(), "a")) {
      std::fprintf(f, "%s\n", what.c_str());
      std::fclose(f);
    }
    if (WIFSIGNALED(status))
      std::fprintf(stderr, "pippy-run: %s\n", what.c_str());
    if (killAt < 0)
      killAt = now() + kGraceSeconds;
  }
}

/// Passes an interrupt on to the ranks, and kills those still running
/// past the grace period.
void Watch::enforceDeadline() {
  if (interrupted && killAt < 0) {
    for (Rank &r : ranks)
      if (!r.exited)
        kill(r.pid, interrupted);
    exitCode = 1;
    killAt = now() + 5;
  }
  if (killAt < 0 || now() <= killAt)
    return;
  for (Rank &r : ranks)
    if (!r.exited) {
      std::fprintf(stderr,
                   "pippy-run: rank %d still running %.0f s after %s; "
                   "killing it\n",
                   r.rank, kGraceSeconds, failures.c_str());
      kill(r.pid, SIGKILL);
    }
  killAt = now() + 3600;
}

} // namespace

namespace pippy {

bool shouldLaunch(const LaunchOptions &options) {
  return !Rendezvous::rankIsSet() && options.nproc * options.nnodes > 1;
}

int launch(const LaunchOptions &options, const std::function<int()> &rankMain) {
  if (options.nproc < 1 || options.nnodes < 1 || options.nodeRank < 0 ||
      options.nodeRank >= options.nnodes) {
    std::fprintf(stderr,
                 "pippy-run: error: --nproc %d --nnodes %d "
                 "--node-rank %d is not a valid layout\n",
                 options.nproc, options.nnodes, options.nodeRank);
    return 1;
  }
  // Single node: a FileStore in a private directory. Several nodes: rank 0
  // hosts a TCPStore at the master address, which every node must be given.
  std::optional<rt::RunFolder> folder;
  try {
    folder.emplace("run");
  } catch (const RuntimeError &e) {
    std::fprintf(stderr, "pippy-run: error: %s\n", e.what());
    return 1;
  }
  std::optional<Master> master = findMaster(options);
  if (!master)
    return 1;
  RankSetting setting{options, *master, folder->path() + "/store",
                      folder->path() + "/failed"};

  std::signal(SIGINT, onSignal);
  std::signal(SIGTERM, onSignal);
  std::signal(SIGPIPE, SIG_IGN);

  std::vector<Rank> ranks(options.nproc);
  for (int local = 0; local < options.nproc; ++local)
    if (!startRank(setting, local, ranks[local], rankMain))
      return 1;
  return Watch(ranks, setting.failedPath).run();
}

} // namespace pippy
