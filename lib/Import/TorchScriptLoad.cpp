//===- TorchScriptLoad.cpp - reading a .pt archive without trusting it ----===//
//
// libtorch's torch::jit::load trusts its archive (PyTorch treats `.pt` files
// as trusted input): a malformed or truncated one can crash it. The archive
// is therefore read once in a child process first; the child reports the
// loader's error through a pipe, and a child that crashes is an error here,
// not a crash of pippy-import. Only an archive that loads there is loaded
// again in this process, through the memory meter, and its tensors are
// checked against their data before anything reads them: the reader takes a
// tensor's sizes from the pickle and its bytes from a separate record
// without comparing the two.
//
//===----------------------------------------------------------------------===//

#include "TorchScriptImpl.h"

#include "ExtraOps.h"
#include "pippy/Runtime/MemoryMeter.h"

#include <torch/csrc/jit/ir/constants.h>

#include <llvm/Support/FileSystem.h>

#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <optional>
#include <sys/wait.h>
#include <unistd.h>

namespace pippy::torchscript {
namespace {

/// Exit status of a child whose load threw: the message is in the pipe.
constexpr int kLoadThrew = 3;

[[noreturn]] void loadInChild(const std::string &path, int pipeOut) {
  // The crash's own banner is not the user's concern: the parent reports.
  if (int devnull = open("/dev/null", O_WRONLY); devnull >= 0)
    dup2(devnull, STDERR_FILENO);
  std::string error;
  try {
    jit::load(path);
  } catch (const c10::Error &e) {
    error = e.what_without_backtrace();
  } catch (const std::exception &e) {
    error = e.what();
  }
  size_t done = 0;
  while (done < error.size()) {
    ssize_t n = write(pipeOut, error.data() + done, error.size() - done);
    if (n <= 0)
      break;
    done += n;
  }
  _exit(error.empty() ? 0 : kLoadThrew);
}

/// Why `path` does not load, found in a child process; empty when it loads.
std::string loadFailure(const std::string &path) {
  int fds[2];
  if (pipe(fds) != 0)
    return ""; // no child to be had: load in this process, as libtorch does
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return "";
  }
  if (pid == 0) {
    close(fds[0]);
    loadInChild(path, fds[1]);
  }
  close(fds[1]);
  std::string message;
  char chunk[4096];
  ssize_t n;
  while ((n = read(fds[0], chunk, sizeof(chunk))) != 0)
    if (n > 0)
      message.append(chunk, n);
    else if (errno != EINTR)
      break;
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    return std::string("libtorch's TorchScript reader crashed on it (signal ") +
           std::to_string(WTERMSIG(status)) + ", " +
           strsignal(WTERMSIG(status)) +
           "): the archive is malformed or truncated";
  if (WIFEXITED(status) && WEXITSTATUS(status) == kLoadThrew)
    return message;
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    return "libtorch's TorchScript reader exited with status " +
           std::to_string(WEXITSTATUS(status)) +
           ": the archive is malformed or truncated";
  return "";
}

/// The bytes `t` spans in its storage (0 for no elements); nullopt when
/// its strides are negative or the extent overflows.
std::optional<uint64_t> bytesSpanned(const at::Tensor &t) {
  if (t.numel() == 0)
    return 0;
  int64_t last = t.storage_offset(), step;
  if (last < 0)
    return std::nullopt;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) < 0 ||
        __builtin_mul_overflow(t.size(d) - 1, t.stride(d), &step) ||
        __builtin_add_overflow(last, step, &last))
      return std::nullopt;
  uint64_t bytes;
  if (__builtin_mul_overflow(static_cast<uint64_t>(last) + 1,
                             static_cast<uint64_t>(t.element_size()), &bytes))
    return std::nullopt;
  return bytes;
}

/// Why `t` (named `what`) reads past its data; empty when it does not.
std::string outsideItsData(const at::Tensor &t, const std::string &what) {
  if (t.layout() != at::kStrided || !t.has_storage())
    return "";
  std::optional<uint64_t> needed = bytesSpanned(t);
  // The reader allocates each record's block at the record's size, and
  // gives the storage the size the pickle claims.
  uint64_t held =
      rt::liveBlockBytes(t.storage().data()).value_or(t.storage().nbytes());
  if (needed && *needed <= held)
    return "";
  std::string sizes;
  for (int64_t s : t.sizes())
    sizes += (sizes.empty() ? "" : ", ") + std::to_string(s);
  return what + " (sizes [" + sizes + "], " +
         std::string(c10::toString(t.scalar_type())) + ") needs " +
         (needed ? std::to_string(*needed) : "more") +
         " bytes but its data in the archive holds " + std::to_string(held) +
         ": the archive is malformed or truncated";
}

/// The first tensor of `module` (attributes, and constants of its
/// methods' graphs) that reads past its data, described; empty when none.
std::string tensorOutsideItsData(const jit::Module &module) {
  for (const auto &attr : module.named_attributes(/*recurse=*/true))
    if (attr.value.isTensor())
      if (std::string why = outsideItsData(attr.value.toTensor(),
                                           "tensor '" + attr.name + "'");
          !why.empty())
        return why;
  std::function<std::string(jit::Block *)> inBlock = [&](jit::Block *block) {
    for (jit::Node *node : block->nodes()) {
      if (node->kind() == c10::prim::Constant &&
          node->output()->type()->cast<c10::TensorType>())
        if (std::optional<c10::IValue> value = jit::toIValue(node->output());
            value && value->isTensor())
          if (std::string why =
                  outsideItsData(value->toTensor(), "a tensor constant");
              !why.empty())
            return why;
      for (jit::Block *inner : node->blocks())
        if (std::string why = inBlock(inner); !why.empty())
          return why;
    }
    return std::string();
  };
  for (const jit::Module &sub : module.modules())
    for (const jit::Method &method : sub.get_methods())
      if (std::string why = inBlock(method.graph()->block()); !why.empty())
        return why;
  return "";
}

} // namespace

jit::Module Importer::loadModule() {
  if (!llvm::sys::fs::exists(options.modulePath))
    fail("no such file");
  // A module saved by PyTorch 2.x may call ATen operators 1.13 lacks.
  rt::registerMissingAtenOperators();
  if (std::string error = loadFailure(options.modulePath); !error.empty())
    fail("cannot load TorchScript module '" + options.modulePath +
         "': " + error);
  jit::Module module;
  rt::installMemoryMeter();
  try {
    module = jit::load(options.modulePath);
  } catch (const c10::Error &e) {
    fail("cannot load TorchScript module '" + options.modulePath +
         "': " + e.what_without_backtrace());
  }
  if (std::string why = tensorOutsideItsData(module); !why.empty())
    fail("cannot load TorchScript module '" + options.modulePath + "': " + why);
  return module;
}

} // namespace pippy::torchscript
