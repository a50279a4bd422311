//===- Rendezvous.cpp - how ranks meet and become one job -----------------===//
//
// Ranks meet through a store: a FileStore in the private directory
// `pippy-run --nproc` creates on one host, or a TCPStore hosted by rank 0
// across hosts (unauthenticated, as torchrun's is: run multi-host jobs on a
// trusted network). Before any engine is built on the store, each rank joins
// the job there: rank 0 records what the job is (run id, world size and the
// pipeline hash of its executables), every other rank checks it reached
// that job, and each rank claims its rank number once. A rank of another
// job on the same master port, or a node rank given twice, is refused by
// name instead of hanging or training a mixture.
//
// Gloo listens on one address per rank, which its peers connect to. Across
// hosts that address must be reachable from the other hosts: without
// GLOO_SOCKET_IFNAME it is the address of the interface on the route to the
// master, never loopback (a host name that resolves to 127.0.1.1 would
// otherwise make peers connect to themselves).
//
//===----------------------------------------------------------------------===//

#include "pippy/Runtime/Comm.h"

#include "TorchCompat.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <c10/util/Logging.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace pippy {
namespace {

std::vector<uint8_t> bytes(const std::string &s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

std::string text(const std::vector<uint8_t> &b) {
  return std::string(b.begin(), b.end());
}

/// What every rank of one job agrees on.
std::string jobText(const Rendezvous &rdzv) {
  char hash[20];
  std::snprintf(hash, sizeof(hash), "%016llx",
                static_cast<unsigned long long>(rdzv.pipelineHash));
  return "run id '" + rdzv.runId + "', " + std::to_string(rdzv.worldSize) +
         " ranks, pipeline " + hash;
}

/// Who this process is, for the rank claim.
std::string processText() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0)
    std::strcpy(host, "?");
  return "host " + std::string(host) + " pid " + std::to_string(getpid());
}

std::string where(const Rendezvous &rdzv) {
  if (!rdzv.storePath.empty())
    return "the store " + rdzv.storePath;
  return rdzv.masterAddr + ":" + std::to_string(rdzv.masterPort);
}

/// The job rank 0 recorded at the store, waiting for it at most the
/// timeout.
std::string recordedJob(c10d::Store &store, const Rendezvous &rdzv) {
  try {
    return text(store.get("pippy/job"));
  } catch (const std::exception &e) {
    throw CommError("rank " + std::to_string(rdzv.rank) + ": no rank 0 at " +
                    where(rdzv) + " within " + timeoutSeconds(rdzv.timeout) +
                    " s (--timeout): " + firstLine(e));
  }
}

/// An IPv4 address as text.
std::string addressText(const in_addr &addr) {
  char buf[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &addr, buf, sizeof(buf));
  return buf;
}

/// This host's address on the route to `host`:`port` (no packet is sent:
/// connecting a UDP socket only picks the route). Empty when `host` does
/// not resolve or has no route.
std::string addressOnRouteTo(const std::string &host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo *found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) !=
          0 ||
      !found)
    return "";
  std::string result;
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    if (getsockname(fd, reinterpret_cast<sockaddr *>(&local), &len) == 0)
      result = addressText(local.sin_addr);
  }
  if (fd >= 0)
    close(fd);
  freeaddrinfo(found);
  return result;
}

/// The first IPv4 address of an interface that is up and not loopback.
std::string firstExternalAddress() {
  ifaddrs *list = nullptr;
  if (getifaddrs(&list) != 0)
    return "";
  std::string result;
  for (ifaddrs *it = list; it && result.empty(); it = it->ifa_next) {
    if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET ||
        !(it->ifa_flags & IFF_UP) || (it->ifa_flags & IFF_LOOPBACK))
      continue;
    result =
        addressText(reinterpret_cast<sockaddr_in *>(it->ifa_addr)->sin_addr);
  }
  freeifaddrs(list);
  return result;
}

bool isLoopback(const std::string &address) {
  return address.rfind("127.", 0) == 0;
}

/// c10d logs each failed connect or bind attempt before it throws ("Logging
/// before InitGoogleLogging", socket.cpp lines); the CommError says what
/// failed once. GLOG_minloglevel, when set, still decides.
void quietStoreLogs() {
  if (std::getenv("GLOG_minloglevel"))
    return;
  rt::compat::setC10LogLevel(3);
}

} // namespace

std::string timeoutSeconds(std::chrono::milliseconds timeout) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", timeout.count() / 1000.0);
  return text;
}

std::string firstLine(const std::exception &e) {
  const auto *c10 = dynamic_cast<const c10::Error *>(&e);
  std::string text = c10 ? c10->what_without_backtrace() : e.what();
  if (auto nl = text.find('\n'); nl != std::string::npos)
    text.resize(nl);
  return text;
}

c10::intrusive_ptr<c10d::Store> openStore(const Rendezvous &rdzv) {
  c10::intrusive_ptr<c10d::Store> store;
  quietStoreLogs();
  try {
    if (!rdzv.storePath.empty()) {
      store =
          c10::make_intrusive<c10d::FileStore>(rdzv.storePath, rdzv.worldSize);
    } else {
      c10d::TCPStoreOptions options;
      options.port = static_cast<uint16_t>(rdzv.masterPort);
      options.isServer = rdzv.rank == 0;
      options.numWorkers = rdzv.worldSize;
      // Ranks wait for each other once, in the engine's connect, so that a
      // missing peer costs one --timeout, not two.
      options.waitWorkers = false;
      options.timeout = rdzv.timeout;
      store = c10::make_intrusive<c10d::TCPStore>(rdzv.masterAddr, options);
    }
    store->setTimeout(rdzv.timeout);
  } catch (const std::exception &e) {
    std::string msg = "rank " + std::to_string(rdzv.rank) +
                      ": rendezvous failed: " + firstLine(e);
    if (msg.find("Address already in use") != std::string::npos)
      msg += "; another job or program uses port " +
             std::to_string(rdzv.masterPort) +
             " on this host: give this job its own --master-port";
    else if (rdzv.rank != 0 && msg.find("timed out") != std::string::npos)
      msg += " (is node 0 running, at this --master-addr and "
             "--master-port, and within --timeout?)";
    throw CommError(msg);
  }
  joinJob(*store, rdzv);
  return store;
}

void joinJob(c10d::Store &store, const Rendezvous &rdzv) {
  std::string job = jobText(rdzv), rank = std::to_string(rdzv.rank);
  // Rank 0 hosts the store, so it is the job's only rank 0 (another would
  // fail to listen on the port). It sets the key: libtorch 1.13's TCPStore
  // does not wake a rank waiting on a key that compareSet creates.
  if (rdzv.rank == 0)
    store.set("pippy/job", bytes(job));
  std::string found = rdzv.rank == 0 ? job : recordedJob(store, rdzv);
  if (found != job)
    throw CommError("rank " + rank + ": the job at " + where(rdzv) + " (" +
                    found + ") is not this rank's (" + job +
                    "): give each job its own --master-port, and every node "
                    "of one job the same --run-id, executables and world "
                    "size");
  std::string me = processText();
  std::string owner =
      text(store.compareSet("pippy/rank/" + rank, {}, bytes(me)));
  if (owner != me)
    throw CommError("rank " + rank + ": claimed already by " + owner +
                    " (this is " + me +
                    "): a node rank given twice, or two jobs on one master "
                    "port with the same run id");
}

std::string ranksNotJoined(c10d::Store &store, const Rendezvous &rdzv) {
  std::string missing;
  int count = 0;
  try {
    for (int r = 0; r < rdzv.worldSize; ++r)
      if (!store.check({"pippy/rank/" + std::to_string(r)})) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        ++count;
      }
  } catch (const std::exception &) {
    return ""; // the store itself is gone: nothing more to say
  }
  if (missing.empty())
    return "";
  return (count == 1 ? "rank " : "ranks ") + missing +
         (count == 1 ? " has" : " have") +
         " not joined this job (not started, unreachable, or refused at the "
         "rendezvous: see its error)";
}

std::string glooAddressTowardsMaster(const Rendezvous &rdzv) {
  std::string address = addressOnRouteTo(rdzv.masterAddr, rdzv.masterPort);
  if (!address.empty() && !isLoopback(address))
    return address;
  // The master's name resolves to this host's loopback (rank 0's host, where
  // /etc/hosts maps its own name to 127.0.1.1): peers on other hosts need an
  // address they can reach.
  if (std::string external = firstExternalAddress(); !external.empty())
    return external;
  if (rdzv.localWorldSize > 0 && rdzv.localWorldSize < rdzv.worldSize)
    throw CommError("rank " + std::to_string(rdzv.rank) +
                    ": this host has no network interface but loopback "
                    "that ranks on other hosts could reach; set "
                    "GLOO_SOCKET_IFNAME to the interface to use");
  return address.empty() ? "127.0.0.1" : address;
}

} // namespace pippy
