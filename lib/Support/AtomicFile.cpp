//===- AtomicFile.cpp - writing a file all at once ------------------------===//

#include "pippy/Support/AtomicFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pippy {

namespace {

/// Writes all of `bytes` to `fd`; 0, or the errno of the failure.
int writeAll(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return n < 0 ? errno : EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

/// Whether `path` exists as something other than a regular file: a folder,
/// or a device or pipe (`/dev/null`, `/dev/stdout`), which is written in
/// place and never replaced by a file.
bool isSpecial(const std::string &path, bool &folder) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0 || S_ISREG(info.st_mode))
    return false;
  folder = S_ISDIR(info.st_mode);
  return true;
}

} // namespace

std::string writeFileAtomically(const std::string &path,
                                std::string_view bytes) {
  auto failed = [&](const std::string &what, int error) {
    return "cannot write " + path + ": " + what + std::strerror(error);
  };
  bool folder = false;
  if (isSpecial(path, folder)) {
    if (folder)
      return "cannot write " + path + ": it is a folder";
    int fd = open(path.c_str(), O_WRONLY);
    if (fd < 0)
      return failed("", errno);
    int error = writeAll(fd, bytes);
    if (close(fd) != 0 && !error)
      error = errno;
    return error ? failed("", error) : "";
  }
  std::string temp = path + ".tmp-XXXXXX";
  int fd = mkstemp(temp.data());
  if (fd < 0)
    return failed("", errno);
  if (int error = writeAll(fd, bytes)) {
    close(fd);
    unlink(temp.c_str());
    return failed("", error);
  }
  // mkstemp makes the file private; give it the usual permissions.
  mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);
  if (close(fd) != 0) {
    int error = errno;
    unlink(temp.c_str());
    return failed("", error);
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    int error = errno;
    unlink(temp.c_str());
    return failed("cannot rename " + temp + " to it: ", error);
  }
  return "";
}

std::string checkWritable(const std::string &path) {
  bool folder = false;
  if (isSpecial(path, folder)) {
    if (folder)
      return "cannot write " + path + ": it is a folder";
    if (access(path.c_str(), W_OK) != 0)
      return "cannot write " + path + ": " + std::strerror(errno);
    return "";
  }
  // What writeFileAtomically does first: a new file beside the destination.
  std::string temp = path + ".tmp-XXXXXX";
  int fd = mkstemp(temp.data());
  if (fd < 0)
    return "cannot write " + path + ": " + std::strerror(errno);
  close(fd);
  unlink(temp.c_str());
  return "";
}

bool sameFile(const std::string &a, const std::string &b) {
  struct stat x, y;
  if (stat(a.c_str(), &x) == 0 && stat(b.c_str(), &y) == 0)
    return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
  std::error_code ignored;
  return std::filesystem::weakly_canonical(a, ignored) ==
         std::filesystem::weakly_canonical(b, ignored);
}

ReadError readFileBytes(const std::string &path, std::string &bytes) {
  bytes.clear();
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return {errno, /*opening=*/true};
  struct stat info;
  if (fstat(fd, &info) == 0) {
    if (S_ISDIR(info.st_mode)) {
      close(fd);
      return {EISDIR, /*opening=*/true};
    }
    if (S_ISREG(info.st_mode) && info.st_size > 0)
      bytes.reserve(static_cast<size_t>(info.st_size));
  }
  char chunk[1 << 16];
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int error = errno;
      close(fd);
      return {error, /*opening=*/false};
    }
    if (n == 0)
      break;
    bytes.append(chunk, static_cast<size_t>(n));
  }
  close(fd);
  return {};
}

FileBytes::FileBytes(std::string text) {
  auto owned = std::make_shared<const std::string>(std::move(text));
  bytes = *owned;
  owner = std::move(owned);
}

std::optional<FileBytes> FileBytes::open(const std::string &path,
                                         ReadError &error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = {errno, /*opening=*/true};
    return std::nullopt;
  }
  struct stat info;
  if (fstat(fd, &info) == 0 && S_ISREG(info.st_mode) && info.st_size > 0) {
    size_t size = static_cast<size_t>(info.st_size);
    void *map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map != MAP_FAILED) {
      std::shared_ptr<const void> owner(
          map, [size](const void *p) { munmap(const_cast<void *>(p), size); });
      return FileBytes(std::move(owner),
                       std::string_view(static_cast<const char *>(map), size));
    }
  } else {
    close(fd);
  }
  // Not mappable (empty, a pipe, a device): read it.
  std::string text;
  error = readFileBytes(path, text);
  if (error.code)
    return std::nullopt;
  return FileBytes(std::move(text));
}

std::string readFile(const std::string &path, std::string &bytes) {
  ReadError error = readFileBytes(path, bytes);
  if (!error.code)
    return "";
  return (error.opening ? "cannot open input file '" + path + "': "
                        : "cannot read " + path + ": ") +
         std::strerror(error.code);
}

} // namespace pippy
