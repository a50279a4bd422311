//===- RunFolder.h - a run's private folder under TMPDIR --------*- C++ -*-===//
//
// Internal to runtime/: the folders a launcher makes for one run (the
// rendezvous store, lowered executables), `$TMPDIR/pippy-KIND-XXXXXX` (or
// /tmp). Each holds a `lock` file that its maker keeps locked (flock) while
// it lives; forked ranks inherit the lock. The maker removes the folder when
// it is done; a run killed with SIGKILL cannot, so making a folder first
// removes every earlier `pippy-*` folder of this user whose lock is free,
// whatever process namespace made it.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_RUNFOLDER_H
#define PIPPY_RUNTIME_RUNFOLDER_H

#include <string>
#include <sys/types.h>

namespace pippy::rt {

class RunFolder {
public:
  /// Makes a new folder `pippy-KIND-XXXXXX`; throws RuntimeError naming
  /// the place when it cannot.
  explicit RunFolder(const std::string &kind);
  /// Removes the folder, in the process that made it (not in a forked
  /// child that leaves through here).
  ~RunFolder();
  RunFolder(const RunFolder &) = delete;
  RunFolder &operator=(const RunFolder &) = delete;

  const std::string &path() const { return dir; }

private:
  std::string dir;
  int lockFd = -1;
  pid_t maker = 0;
};

/// Removes the `pippy-*` folders in `base` that nothing holds locked (their
/// run was killed) and that belong to this user; returns how many.
int removeAbandonedRunFolders(const std::string &base);

} // namespace pippy::rt

#endif // PIPPY_RUNTIME_RUNFOLDER_H
