//===- Format.h - reading and printing stage executables --------*- C++ -*-===//
//
// The stage executable's schema is include/pippy/Executable/Executable.fbs;
// this header adds what its readers share: the format version, the file
// names in an executables folder, a verifier that checks a buffer before any
// field is used (FlatBuffers' own checks, then every index, enum and size
// against the rest of the file), the action text form (`1F2`, `0SEND_B3`),
// and the text form `pippy-opt --print-executable` prints.
//
// No LLVM, MLIR or libtorch: the runtime-only build uses it too.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_EXECUTABLE_FORMAT_H
#define PIPPY_EXECUTABLE_FORMAT_H

#include "pippy/Executable/Executable_generated.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pippy::exe {

/// The version this build writes and reads.
inline constexpr uint32_t kFormatVersion = 3;

/// The file name of rank `rank`'s executable in a folder: `rank0.pipx`.
std::string rankFileName(int rank);
/// The schedule in torch.distributed.pipelining's CSV form, beside the
/// executables of a folder.
inline constexpr const char *kScheduleFileName = "schedule.csv";
/// Writes each rank's executable into `dir` (created if needed) as
/// rank<R>.pipx, and the schedule as schedule.csv, each atomically, and
/// removes the executables of a larger world written there before; an
/// error message, or empty on success.
std::string writeFolder(const std::vector<std::string> &ranks,
                        const std::string &scheduleCsv, const std::string &dir);

/// Checks that `data` holds a stage executable of kFormatVersion whose every
/// index, enum and size is in range, so that a reader can follow them
/// without further checks. `data` must be 8-byte aligned, as allocated
/// memory is. Returns the root, or null with `error` set to
/// one line ("not a pippy stage executable", "truncated or corrupt", ...).
const Executable *verify(const uint8_t *data, size_t size, std::string &error);

/// Bytes per element of `dtype`.
size_t dtypeSize(DType dtype);
/// `f32`, `si64`, `complex<f32>`: the IR's spelling.
std::string dtypeText(DType dtype);
/// `f32[2, 8]`.
std::string specText(const TensorSpec &spec);

/// The action text form: `1F2` (stage 1, forward of micro-batch 2),
/// `0SEND_B3`, `2I0`, `2W0`, `0W`, `0ALLREDUCE_TIED`, `0STEP`.
std::string actionText(ActionKind kind, int stage, int microbatch);
inline std::string actionText(const Action &action) {
  return actionText(action.kind(), action.stage(), action.microbatch());
}
/// The action `text` spells (`1F2`, `0SEND_B3`, `2I0`, `2W0`, `0W`,
/// `0STEP`), if it is one.
std::optional<Action> parseAction(const std::string &text);
/// `gpipe`, `1f1b`, `interleaved-1f1b`, ..., `custom`: the spelling of
/// --schedule and of lib/Schedule.
const char *scheduleKindText(ScheduleKind kind);
/// The kind spelt `text`, if it is one.
std::optional<ScheduleKind> parseScheduleKind(const std::string &text);

/// Whether actions of this kind name a micro-batch.
bool hasMicrobatch(ActionKind kind);

/// The executable as readable text, for debugging (a verified one).
std::string toText(const Executable &exe);

} // namespace pippy::exe

#endif // PIPPY_EXECUTABLE_FORMAT_H
