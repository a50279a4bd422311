//===- RunFolder.cpp - a run's private folder under TMPDIR ----------------===//

#include "RunFolder.h"

#include "pippy/Runtime/Program.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace pippy::rt {
namespace {

constexpr const char *kLock = "/lock";

std::string tempBase() {
  const char *tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}

} // namespace

int removeAbandonedRunFolders(const std::string &base) {
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(base, ec), end; it != end && !ec;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    std::string path = it->path().string();
    struct stat info;
    if (name.rfind("pippy-", 0) != 0 || lstat(path.c_str(), &info) != 0 ||
        !S_ISDIR(info.st_mode) || info.st_uid != getuid())
      continue;
    // A folder without a lock file is not one of these (or is being made).
    int fd = open((path + kLock).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    bool abandoned = flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (abandoned) {
      std::error_code removeError;
      fs::remove_all(path, removeError);
      removed += !removeError;
    }
    close(fd);
  }
  return removed;
}

RunFolder::RunFolder(const std::string &kind) : maker(getpid()) {
  std::string base = tempBase();
  removeAbandonedRunFolders(base);
  std::string pattern = base + "/pippy-" + kind + "-XXXXXX";
  if (!mkdtemp(pattern.data()))
    throw RuntimeError("cannot create a folder for the run in " + base + ": " +
                       std::strerror(errno));
  dir = pattern;
  // Locked under another name, then renamed: a `lock` file is locked from
  // the moment it exists. Kept open (no O_CLOEXEC): forked ranks share the
  // lock, which is freed only when all of them are gone.
  std::string fresh = dir + kLock + ".new";
  lockFd = open(fresh.c_str(), O_RDWR | O_CREAT, 0600);
  if (lockFd < 0 || flock(lockFd, LOCK_EX) != 0 ||
      std::rename(fresh.c_str(), (dir + kLock).c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::error_code ec;
    fs::remove_all(dir, ec);
    throw RuntimeError("cannot lock " + dir + kLock + ": " + why);
  }
}

RunFolder::~RunFolder() {
  if (getpid() != maker)
    return;
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (lockFd >= 0)
    close(lockFd);
}

} // namespace pippy::rt
